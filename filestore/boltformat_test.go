package filestore

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// The bbolt that go.mod requires is the one whose layout boltformat.go
// reads: a new release fails here until its offsets are checked. (A test
// binary's build information lists no modules; the path of bbolt's
// source, in the module cache or trimmed, names its version.)
func TestBoltVersion(t *testing.T) {
	file, _ := runtime.FuncForPC(reflect.ValueOf(bolt.Open).Pointer()).FileLine(0)
	if !strings.Contains(file, "go.etcd.io/bbolt@") {
		t.Skipf("bbolt's source is not in a module cache: %s", file)
	}
	if !strings.Contains(file, "go.etcd.io/bbolt@"+boltVersion+"/") {
		t.Fatalf("bbolt is not %s (its source is %s): filestore/boltformat.go reads the meta pages of bbolt %s: "+
			"check them (TestBoltMetaLayout), then set boltVersion", boltVersion, file, boltVersion)
	}
}

// Every offset boltformat.go reads, checked against a real bbolt
// database after each of a few commits: the meta page bbolt wrote last
// holds, where filestore reads them, bbolt's magic and version, a valid
// checksum, the page size bbolt reports, the transaction id it reports,
// its size in pages, and the id of a page bbolt calls the freelist,
// whose header filestore's guard accepts.
func TestBoltMetaLayout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bolt.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i := range 4 {
		if err := db.Update(func(tx *bolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("b"))
			if err == nil {
				err = b.Put(fmt.Appendf(nil, "k%d", i), make([]byte, 100*i))
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if err := db.View(func(tx *bolt.Tx) error { checkLayout(t, path, db, tx); return nil }); err != nil {
			t.Fatal(err)
		}
	}
}

// checkLayout checks the meta pages of the file at path, read raw, against
// what bbolt's API says of db as tx sees it, the last commit.
func checkLayout(t *testing.T, path string, db *bolt.DB, tx *bolt.Tx) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	size := int64(db.Info().PageSize)
	txid := uint64(tx.ID())
	if int64(len(b)) < 2*size {
		t.Fatalf("bbolt's file is %d bytes, less than two pages of %d", len(b), size)
	}
	var m metaPage // the meta of the last commit: bbolt writes page txid%2
	copy(m[:], b[int64(txid%2)*size:])
	le := binary.LittleEndian
	h := fnv.New64a()
	h.Write(m[metaMagicOff:metaChecksumOff])
	for _, c := range []struct {
		name      string
		off       int
		got, want uint64
	}{
		{"magic", metaMagicOff, uint64(le.Uint32(m[metaMagicOff:])), metaMagic},
		{"version", metaVersionOff, uint64(le.Uint32(m[metaVersionOff:])), metaVersion},
		{"checksum (FNV-1a 64 of the meta before it)", metaChecksumOff, le.Uint64(m[metaChecksumOff:]), h.Sum64()},
		{"page size (DB.Info)", metaPageSizeOff, uint64(m.pageSize()), uint64(size)},
		{"transaction id (Tx.ID), in page txid%2", metaTxidOff, m.txid(), txid},
		{"pages in use (Tx.Size / page size)", metaPgidOff, m.pgid(), uint64(tx.Size() / size)},
	} {
		if c.got != c.want {
			t.Errorf("bbolt %s's meta page layout: the %s at offset %d reads %#x, bbolt's is %#x: update filestore/boltformat.go",
				boltVersion, c.name, c.off, c.got, c.want)
		}
	}
	checkFreelistLayout(t, path, tx, &m)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got, _, ok := lastTxid(f); !ok || got != txid {
		t.Errorf("bbolt %s's meta pages: filestore reads the last transaction as %d (valid: %v), bbolt's is %d: update filestore/boltformat.go",
			boltVersion, got, ok, txid)
	}
}

// checkFreelistLayout checks that the meta m names, at metaFreelistOff, a
// page that bbolt calls the freelist, and that its header is one that
// freelistHeaderOK accepts.
func checkFreelistLayout(t *testing.T, path string, tx *bolt.Tx, m *metaPage) {
	t.Helper()
	id := m.freelist()
	p, err := tx.Page(int(id))
	if err != nil || p == nil || p.Type != "freelist" {
		t.Errorf("bbolt %s's meta page layout: the freelist id at offset %d reads %d, a page bbolt calls %+v (%v), not the freelist: update filestore/boltformat.go",
			boltVersion, metaFreelistOff, id, p, err)
		return
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var hdr [pageHeaderLen]byte
	if _, err := f.ReadAt(hdr[:], int64(id)*m.pageSize()); err != nil {
		t.Fatal(err)
	}
	if !freelistHeaderOK(&hdr, id, m.pgid()) {
		t.Errorf("bbolt %s's page header layout: the freelist page %d's header %x (id at %d, flags at %d, overflow at %d) is not one filestore accepts (bbolt says: %+v): update filestore/boltformat.go",
			boltVersion, id, hdr, pageIDOff, pageFlagsOff, pageOverflowOff, p)
	}
}
