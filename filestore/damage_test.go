package filestore_test

import (
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate/filestore"
	"github.com/floodgate/floodgate/store"
	bolt "go.etcd.io/bbolt"
)

// corruptPages writes garbage over the pages of the file at path whose
// bbolt type is one of kinds ("leaf", "branch", "freelist"), in place, as
// a stray write or a failing disk would, and returns how many it wrote.
// It reads the page headers itself: the file may be locked, or damaged.
func corruptPages(t *testing.T, path string, kinds ...string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	flags := map[string]uint16{"branch": 0x01, "leaf": 0x02, "freelist": 0x10}
	size := int(binary.LittleEndian.Uint32(b[16+8:])) // page 0: header, magic, version, page size
	var ids []int
	for id := 2; (id+1)*size <= len(b); id++ {
		off := id * size
		for _, k := range kinds {
			if binary.LittleEndian.Uint16(b[off+8:]) == flags[k] {
				ids = append(ids, id)
			}
		}
		id += int(binary.LittleEndian.Uint32(b[off+12:])) // overflow pages
	}
	if len(ids) == 0 {
		t.Fatalf("no page of the kinds %v in %s", kinds, path)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := rand.New(rand.NewPCG(1, 2))
	junk := make([]byte, size)
	for _, id := range ids {
		for i := range junk {
			junk[i] = byte(r.Uint32())
		}
		if _, err := f.WriteAt(junk, int64(id*size)); err != nil {
			t.Fatal(err)
		}
	}
	return len(ids)
}

// A page of the file overwritten with garbage, the freelist or the pages
// of the keys, under a Store that holds the file or opens it for each
// call: each call fails at once with an error naming the file, wrapping
// ErrCorrupt, and nothing hangs; the lock is released, so another Store
// gets the same error rather than ErrLocked; and once a copy of the file
// is put back, calls use it again within a second, with the state it
// held, and no goroutine is left behind.
func TestChaosCorruptPage(t *testing.T) {
	for _, hold := range []bool{false, true} {
		for _, kinds := range [][]string{{"leaf", "branch"}, {"freelist"}, {"leaf", "branch", "freelist"}} {
			name := strings.Join(kinds, "+")
			if hold {
				name += "/hold"
			}
			t.Run(name, func(t *testing.T) { testCorruptPage(t, hold, kinds) })
		}
	}
}

func testCorruptPage(t *testing.T, hold bool, kinds []string) {
	path := filepath.Join(t.TempDir(), "state.db")
	var opts []filestore.Option
	if hold {
		opts = append(opts, filestore.WithHold())
	}
	s := openStore(t, path, opts...)
	tb := table(t, s, "n", "fixed-window 5/1h")
	other := table(t, s, "m", "token-bucket 100/1h")
	var ops []store.Op
	for i := range 200 { // enough keys for branch pages
		ops = append(ops, store.Op{Kind: store.OpDecide, Table: other, Key: strings.Repeat("x", 40) + string(rune('a'+i%26)) + strings.Repeat("y", i), Now: t0, N: 1})
	}
	if err := s.ApplyEach(ctx, ops); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if d, err := tb.Decide(ctx, "k", t0, 1); err != nil || !d.Allowed {
			t.Fatalf("%+v %v", d, err)
		}
	}
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	goroutines := runtime.NumGoroutine()
	n := corruptPages(t, path, kinds...)
	for i := range 3 {
		start := time.Now()
		c, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := tb.Decide(c, "k", t0, 1)
		cancel()
		took := time.Since(start)
		t.Logf("%d pages corrupt: call %d failed in %v: %v", n, i, took, err)
		if !errors.Is(err, filestore.ErrCorrupt) || !strings.Contains(err.Error(), path) {
			t.Fatalf("a call on a corrupt file: %v, want ErrCorrupt naming %s", err, path)
		}
		if took > time.Second {
			t.Fatalf("a call on a corrupt file took %v", took)
		}
	}
	// The lock is free: another Store that will not wait finds the damage.
	if _, err := filestore.Open(path, filestore.WithLockTimeout(0)); !errors.Is(err, filestore.ErrCorrupt) {
		t.Fatalf("another Store on the corrupt file: %v, want ErrCorrupt (not ErrLocked)", err)
	}
	if err := os.WriteFile(path, good, 0o666); err != nil { // cp good.db state.db
		t.Fatal(err)
	}
	restored := time.Now()
	for {
		d, err := tb.Decide(ctx, "k", t0, 1)
		if err == nil {
			if !d.Allowed || d.Remaining != 1 {
				t.Fatalf("after the restore: %+v, want the 4th of 5 admitted", d)
			}
			t.Logf("used again %v after the restore", time.Since(restored))
			break
		}
		if time.Since(restored) > time.Second {
			t.Fatalf("still failing 1s after the restore: %v", err)
		}
		time.Sleep(10 * time.Millisecond) // the restore is a real event
	}
	if g := runtime.NumGoroutine(); g > goroutines+2 {
		t.Fatalf("%d goroutines after the damage and the restore, %d before", g, goroutines)
	}
	s.Close()
	view(t, path, func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			t.Errorf("the restored file fails bbolt's check: %v", err)
		}
		return nil
	})
}

// An existing file that is not a floodgate store is refused, by Open and
// by a Store whose file it became, and left as it is: an empty file (it
// used to be made a new store, the units it had counted lost), bytes that
// are not a database, another program's bbolt database. A bbolt database
// that no one has written to is taken up.
func TestNotAStoreRefused(t *testing.T) {
	dir := t.TempDir()
	foreign := filepath.Join(dir, "foreign.db")
	update(t, foreign, func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket([]byte("users"))
		if err == nil {
			err = b.Put([]byte("alice"), []byte("admin"))
		}
		return err
	})
	empty := filepath.Join(dir, "empty.db")
	junk := filepath.Join(dir, "junk.db")
	write := func(path string, b []byte) {
		if err := os.WriteFile(path, b, 0o666); err != nil {
			t.Fatal(err)
		}
	}
	write(empty, nil)
	write(junk, []byte(strings.Repeat("not a database ", 1000)))
	for _, path := range []string{empty, junk, foreign} {
		before, _ := os.ReadFile(path)
		if _, err := filestore.Open(path); !errors.Is(err, filestore.ErrNotStore) || !strings.Contains(err.Error(), path) {
			t.Errorf("Open(%s): %v, want ErrNotStore naming the file", filepath.Base(path), err)
		}
		if after, _ := os.ReadFile(path); string(after) != string(before) {
			t.Errorf("Open(%s) changed the file", filepath.Base(path))
		}
	}

	// A store's file emptied, or replaced, under a Store.
	path := filepath.Join(dir, "state.db")
	s := openStore(t, path)
	tb := table(t, s, "n", "fixed-window 500/1h")
	if d, err := tb.Decide(ctx, "k", t0, 490); err != nil || !d.Allowed {
		t.Fatalf("%+v %v", d, err)
	}
	for _, b := range [][]byte{nil, before(t, foreign)} {
		write(path, b)
		if d, err := tb.Decide(ctx, "k", t0, 1); !errors.Is(err, filestore.ErrNotStore) || !strings.Contains(err.Error(), path) {
			t.Fatalf("a call on a file of %d bytes that is no store: %+v %v, want ErrNotStore", len(b), d, err)
		}
		if after, _ := os.ReadFile(path); string(after) != string(b) {
			t.Fatalf("a call changed a file of %d bytes that is no store", len(b))
		}
	}

	// A bbolt database with no bucket becomes a store.
	fresh := filepath.Join(dir, "fresh.db")
	update(t, fresh, func(*bolt.Tx) error { return nil })
	if d, err := table(t, openStore(t, fresh), "n", "fixed-window 5/1h").Decide(ctx, "k", t0, 1); err != nil || !d.Allowed {
		t.Fatalf("a bbolt database with no bucket: %+v %v", d, err)
	}
}

func before(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Processes racing to open a missing file all find a store there: the
// file appears whole, never empty.
func TestCreateRace(t *testing.T) {
	dir := t.TempDir()
	for i := range 20 {
		path := filepath.Join(dir, string(rune('a'+i))+".db")
		errs := make(chan error, 8)
		for range 8 {
			go func() {
				s, err := filestore.Open(path)
				if err == nil {
					s.Close()
				}
				errs <- err
			}()
		}
		for range 8 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 20 {
		t.Fatalf("%d files left in the directory, want the 20 stores", len(entries))
	}
}
