package filestore

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"sync"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/store"
)

// CacheStats returns the counts of the store's deny cache (WithDenyCache):
// the zero CacheStats when it has none. Live reports whether the cache
// holds a view of the file that a decision may be answered from; when it
// does not, after a transaction, Err says why.
func (s *Store) CacheStats() store.CacheStats {
	c := s.cache
	if c == nil {
		return store.CacheStats{}
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	st := c.Stats(int64(len(c.m)), c.bytes, c.max, c.file != nil)
	st.Err = c.err
	return st
}

// entryBytes is what the bound counts for a key besides its name's bytes
// and its state's encoding: the map's slot, the entry and the key's
// string header.
const entryBytes = 144

// denyCache is a Store's cache of keys' states read in transactions that
// denied them, with which it answers, exactly, the decisions that the
// states deny while no transaction has committed to the file since (see
// the package documentation, "Cached denials").
//
// Invariants, cited by number where they are relied on:
//
//  1. Each entry is its key's state in the file as of transaction
//     file.txid: a transaction that did not begin at file.txid drops
//     them all, and one that did drops the keys it wrote or swept
//     (TestDenyCacheSurvivesOwnCommits, TestDenyCacheSweptKey).
//  2. file is nil, and no entry is held, unless the last transaction's
//     settle read both meta pages naming the transaction bbolt
//     committed, with one page size; err then says why
//     (TestDenyCacheReportsWhyOff, TestBoltMetaLayout).
//  3. An answer is given only while the file at the path is file's: the
//     same inode, size and modification time, both meta pages valid,
//     with file's page size, the higher naming file.txid; a fault while
//     reading them is a miss (TestChaosDenyCache,
//     TestChaosDenyCacheFaultingMapping, TestDenyCacheWindow).
//  4. Only a decision that the cached state denies is answered, decided
//     by package algo on a copy; an admission or a peek goes to the file
//     (TestDenyCacheAnswersDenialsOnly).
//  5. bytes is the sum of the entries' sizes, and at most max
//     (check; TestDenyCacheBound).
type denyCache struct {
	max int64

	mu    sync.RWMutex
	m     map[slotKey]*entry
	bytes int64
	// file is the file the entries were read from, as it was then; nil
	// when the cache may answer nothing.
	file *fileView
	// err is why file is nil, once a transaction ran (CacheStats.Err).
	err error

	store.CacheCounts
}

// entry is a key's state in the file, as of the cache's fileView.
type entry struct {
	state algo.State
	size  int64 // what the bound counts
}

// fileView is the file as the cache's entries were read from it: a
// descriptor of its own, and its two meta pages mapped through it (mem),
// the file's identity, size and modification time, and the id of its
// last committed transaction.
type fileView struct {
	f        *os.File
	mem      []byte
	fi       os.FileInfo
	pageSize int64
	txid     uint64
}

func newDenyCache(maxBytes int64) *denyCache {
	return &denyCache{max: maxBytes, m: make(map[slotKey]*entry)}
}

// current reports whether the file at path is still the one v saw, with no
// transaction committed since: the same file (device and inode), of the
// same size and modification time, whose two meta pages are both valid,
// with v's page size, the higher naming v's transaction. Any doubt (a
// meta page being written, which fails its checksum) is a no; so is a
// fault reading the mapping (a file truncated under it).
func (v *fileView) current(path string) (ok bool) {
	fi, err := os.Stat(path)
	if err != nil || !os.SameFile(fi, v.fi) || fi.Size() != v.fi.Size() || !fi.ModTime().Equal(v.fi.ModTime()) {
		return false
	}
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	var m0, m1 metaPage // copies: what is checked is what is used
	copy(m0[:], v.mem)
	copy(m1[:], v.mem[v.pageSize:])
	txid, size, ok := txidOf(&m0, &m1)
	return ok && size == v.pageSize && txid == v.txid
}

// answer sets op's Result from the cache when op is a decision that the
// cached state of its key denies, as of the file now; path is the file's.
func (c *denyCache) answer(path string, op *store.Op) bool {
	if op.Kind != store.OpDecide {
		return false
	}
	t := op.Table.(*table) // checked by Store.check
	c.mu.RLock()
	defer c.mu.RUnlock()
	e := c.m[slotKey{t, op.Key}]
	if e == nil || c.file == nil || !c.file.current(path) { // invariants 2, 3
		return false
	}
	st := e.state.Clone() // invariant 4
	if ok, err := op.Carry(&t.policy, &st); ok || err != nil {
		op.Result = store.Result{}
		return false
	}
	c.Hits.Add(1)
	return true
}

// answerEach answers from the cache each of ops, an ApplyEach's, that it
// can (store.AnswerEach), and returns the others, and their indices in
// ops.
func (c *denyCache) answerEach(path string, ops []store.Op) (rest []store.Op, index []int) {
	return store.AnswerEach(ops, func(op *store.Op) bool { return c.answer(path, op) },
		func(op *store.Op) slotKey { return slotKey{op.Table.(*table), op.Key} })
}

// settle brings the cache up to date after a transaction x on the file h
// (nil, with err, when none could run): x's own writes drop their keys,
// the keys x denied are filled with their states, and a file that is
// not the one the entries were read from, or that another transaction
// committed to since, drops them all. After a failure, or on a file
// whose meta pages the cache cannot read, it answers nothing until the
// next transaction, and CacheStats.Err says why.
func (c *denyCache) settle(path string, h *handle, x *txn, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err = c.update(path, h, x, err); c.err != nil {
		c.drop()
	}
}

// update is settle's with c.mu held; it returns why the cache may answer
// nothing, for settle to drop it.
func (c *denyCache) update(path string, h *handle, x *txn, err error) error {
	if err != nil {
		return fmt.Errorf("filestore: deny cache off after a failed transaction: %w", err)
	}
	if x == nil || h == nil || h.file == nil {
		return errNoDescriptor
	}
	fi, err := h.file.Stat()
	if err != nil {
		return fmt.Errorf("filestore: deny cache: %w", err)
	}
	if c.file != nil && !os.SameFile(c.file.fi, fi) {
		c.drop() // entries of another file
	}
	if c.file == nil || c.file.txid != x.begun {
		c.flush() // another transaction committed since (invariant 1)
	}
	if c.file == nil {
		if c.file, err = openView(path, fi); err != nil {
			return err
		}
	}
	txid := x.begun
	if x.committed {
		txid++
		c.written(x)
	}
	if err := c.file.advance(fi, txid); err != nil { // invariant 2
		return err
	}
	c.fill(x)
	return nil
}

// errNoDescriptor is why the cache is off after a call that ran no
// transaction on an open file.
var errNoDescriptor = errors.New("filestore: deny cache: no transaction ran on an open file")

// openView opens a view of the file at path, which must be the file of
// status fi, that advance then maps.
func openView(path string, fi os.FileInfo) (*fileView, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("filestore: deny cache: %w", err)
	}
	if ffi, err := f.Stat(); err != nil || !os.SameFile(ffi, fi) {
		f.Close()
		return nil, fmt.Errorf("filestore: deny cache: %s was replaced during the transaction", path)
	}
	return &fileView{f: f}, nil
}

// advance moves v to the file of status fi after transaction txid, which
// bbolt says is the last: the meta pages, as read here, must name it,
// with v's page size; else the cache does not understand the file's
// layout, and must answer nothing.
func (v *fileView) advance(fi os.FileInfo, txid uint64) error {
	got, size, ok := lastTxid(v.f)
	switch {
	case !ok:
		return fmt.Errorf("filestore: deny cache: the two meta pages are not both valid: %w", errBoltLayout)
	case got != txid:
		return fmt.Errorf("filestore: deny cache: the meta pages name transaction %d, bbolt committed %d: %w", got, txid, errBoltLayout)
	case v.mem != nil && size != v.pageSize:
		return fmt.Errorf("filestore: deny cache: the page size changed from %d to %d: %w", v.pageSize, size, errBoltLayout)
	}
	if v.mem == nil {
		mem, err := mapMetas(v.f, 2*size)
		if err != nil {
			return fmt.Errorf("filestore: deny cache: mapping the meta pages: %w", err)
		}
		v.mem = mem
	}
	v.fi, v.pageSize, v.txid = fi, size, txid
	return nil
}

// written drops the entries of the keys that x, a committed transaction,
// wrote or swept (invariant 1); c.mu is held.
func (c *denyCache) written(x *txn) {
	for k, sl := range x.slots {
		if e := c.m[k]; e != nil && sl.changed {
			c.remove(k, e)
			c.Invalidations.Add(1)
		}
	}
	for _, d := range x.swept {
		t := x.store.tableOf(d.bucket)
		if t == nil {
			continue
		}
		k := slotKey{t, keyOf(d.key)}
		if e := c.m[k]; e != nil {
			c.remove(k, e)
			c.Invalidations.Add(1)
		}
	}
}

// fill keeps the states of the keys that x denied a decision of, each as
// x left it in the file; c.mu is held.
func (c *denyCache) fill(x *txn) {
	for _, k := range x.denied {
		sl := x.slots[k]
		if sl == nil || sl.err != nil || sl.s == (algo.State{}) || c.m[k] != nil {
			continue
		}
		b, err := sl.s.MarshalBinary()
		if err != nil {
			continue
		}
		size := entryBytes + int64(len(k.key)+len(b))
		if size > c.max {
			continue
		}
		c.evictFor(size)
		c.m[k] = &entry{state: sl.s.Clone(), size: size}
		c.bytes += size
		c.Fills.Add(1)
	}
}

// evictFor drops entries, in the map's order, until size more bytes fit
// (invariant 5); c.mu is held.
func (c *denyCache) evictFor(size int64) {
	for k, e := range c.m {
		if c.bytes+size <= c.max {
			return
		}
		c.remove(k, e)
		c.Evictions.Add(1)
	}
}

// remove deletes k's entry e; c.mu is held.
func (c *denyCache) remove(k slotKey, e *entry) {
	delete(c.m, k)
	c.bytes -= e.size
}

// flush drops every entry; c.mu is held.
func (c *denyCache) flush() {
	if len(c.m) > 0 {
		clear(c.m)
		c.bytes = 0
		c.Flushes.Add(1)
	}
}

// drop flushes the cache and forgets the file: nothing is answered until
// the next transaction; c.mu is held.
func (c *denyCache) drop() {
	c.flush()
	if c.file != nil {
		if c.file.mem != nil {
			unmapMetas(c.file.mem)
		}
		c.file.f.Close()
		c.file = nil
	}
}

// check verifies invariants 2 and 5, for tests: no entry without a file,
// and bytes the sum of the entries' sizes, within max.
func (c *denyCache) check() error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var sum int64
	for _, e := range c.m {
		sum += e.size
	}
	switch {
	case c.file == nil && len(c.m) > 0:
		return fmt.Errorf("%d entries held with no view of the file", len(c.m))
	case sum != c.bytes || c.bytes > c.max:
		return fmt.Errorf("bytes is %d, the entries' sizes sum to %d, the bound is %d", c.bytes, sum, c.max)
	}
	return nil
}

// close drops the cache for good, at Store.Close.
func (c *denyCache) close() {
	c.mu.Lock()
	c.drop()
	c.mu.Unlock()
}

// keyOf returns the limiter's key of a stored key (storedKey).
func keyOf(stored []byte) string {
	if len(stored) > 0 && stored[0] == 0 {
		return string(stored[1:])
	}
	return string(stored)
}
