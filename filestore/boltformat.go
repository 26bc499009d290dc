package filestore

import (
	"encoding/binary"
	"errors"
	"hash/fnv"
	"io"
	"os"
)

// bbolt's file format, read below bbolt's API by the freelist guard
// (checkFreelist) and the deny cache (fileView). Every offset read is in
// this file. boltformat_test.go opens a real bbolt database, commits,
// and checks each offset against what bbolt reports; a bbolt that lays
// its pages out otherwise fails that test with a message naming bbolt
// and the offset.

// boltVersion is the bbolt release whose layout this file reads. A test
// fails when go.mod requires another, until the offsets are checked.
const boltVersion = "v1.5.0"

// A page starts with a header: id u64, flags u16, count u16, overflow
// u32 (the pages that follow it as one).
const (
	pageIDOff        = 0
	pageFlagsOff     = 8
	pageOverflowOff  = 12
	pageHeaderLen    = 16
	freelistPageFlag = 0x10
)

// Pages 0 and 1 are meta pages. bbolt writes the meta of transaction
// txid to page txid%2, last in its commit; the valid one with the higher
// txid is the file's state.
const (
	metaMagicOff    = 16 // u32, metaMagic
	metaVersionOff  = 20 // u32, metaVersion
	metaPageSizeOff = 24 // u32, bytes
	metaFreelistOff = 48 // u64, the freelist's page id, or freelistNone
	metaPgidOff     = 56 // u64, the pages in use (the high-water mark)
	metaTxidOff     = 64 // u64, the id of the meta's transaction
	metaChecksumOff = 72 // u64, FNV-1a 64 of [metaMagicOff, metaChecksumOff)
	metaLen         = 80
	metaMagic       = 0xED0CDAED
	metaVersion     = 2
	// freelistNone is the freelist id of a file whose freelist is not
	// kept (bolt.Options.NoFreelistSync).
	freelistNone = 0xffffffffffffffff
)

// errBoltLayout marks a file whose meta pages bbolt accepts and filestore
// cannot read as it expects: bbolt's format is not boltVersion's.
var errBoltLayout = errors.New("the file's meta pages are not as filestore reads bbolt " + boltVersion + "'s (filestore/boltformat.go)")

// A metaPage is the first metaLen bytes of a meta page.
type metaPage [metaLen]byte

var le = binary.LittleEndian

// valid reports whether m is a meta that bbolt accepts: its magic,
// version and checksum.
func (m *metaPage) valid() bool {
	h := fnv.New64a()
	h.Write(m[metaMagicOff:metaChecksumOff])
	return le.Uint32(m[metaMagicOff:]) == metaMagic && le.Uint32(m[metaVersionOff:]) == metaVersion &&
		le.Uint64(m[metaChecksumOff:]) == h.Sum64()
}

func (m *metaPage) pageSize() int64  { return int64(le.Uint32(m[metaPageSizeOff:])) }
func (m *metaPage) freelist() uint64 { return le.Uint64(m[metaFreelistOff:]) }
func (m *metaPage) pgid() uint64     { return le.Uint64(m[metaPgidOff:]) }
func (m *metaPage) txid() uint64     { return le.Uint64(m[metaTxidOff:]) }

// readMetas reads both meta pages of f: page 1 one page size (page 0's,
// or the system's when page 0 is invalid, where bbolt looks) in.
func readMetas(f io.ReaderAt) (m [2]metaPage, err error) {
	if _, err := f.ReadAt(m[0][:], 0); err != nil {
		return m, err
	}
	size := int64(os.Getpagesize())
	if m[0].valid() {
		size = m[0].pageSize()
	}
	_, err = f.ReadAt(m[1][:], size)
	return m, err
}

// currentMeta returns the meta page that bbolt goes by: of the two, the
// valid one with the higher transaction id. A process killed while
// writing one leaves the other, which names the freelist of the last
// commit.
func currentMeta(f io.ReaderAt) (meta *metaPage, ok bool) {
	m, err := readMetas(f)
	if err != nil || !m[1].valid() {
		return &m[0], m[0].valid()
	}
	if !m[0].valid() || m[1].txid() > m[0].txid() {
		return &m[1], true
	}
	return &m[0], true
}

// lastTxid returns the id of the last transaction committed to f and its
// page size, read from both meta pages (see txidOf).
func lastTxid(f io.ReaderAt) (txid uint64, pageSize int64, ok bool) {
	m, err := readMetas(f)
	if err != nil {
		return 0, 0, false
	}
	return txidOf(&m[0], &m[1])
}

// txidOf returns the id of the last transaction committed to a file whose
// meta pages are m0 and m1, and its page size, when both are valid and
// agree on the page size.
func txidOf(m0, m1 *metaPage) (txid uint64, pageSize int64, ok bool) {
	if !m0.valid() || !m1.valid() || m0.pageSize() != m1.pageSize() {
		return 0, 0, false
	}
	return max(m0.txid(), m1.txid()), m0.pageSize(), true
}

// freelistHeaderOK reports whether hdr is the header of a freelist page
// id in a file of pages pages: its own id, the freelist flag, and an
// overflow within the file.
func freelistHeaderOK(hdr *[pageHeaderLen]byte, id, pages uint64) bool {
	return id < pages && le.Uint64(hdr[pageIDOff:]) == id && le.Uint16(hdr[pageFlagsOff:]) == freelistPageFlag &&
		id+uint64(le.Uint32(hdr[pageOverflowOff:])) < pages
}
