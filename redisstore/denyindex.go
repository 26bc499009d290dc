package redisstore

import (
	"errors"
	"fmt"
	"hash/maphash"
	"sync/atomic"
)

// An index maps Redis keys to the deny cache's entries: an array of
// atomic pointers to entries, a power of two long, in which a key's entry
// is in the first slot from its hash's slot on (linearly, wrapping) that
// holds it or is empty. Lookups (get) take no lock and write nothing;
// the writers' methods are called with the cache's mutex held. It keeps
// invariants 5 to 7 of denyCache; check verifies them.
type index struct {
	seed  maphash.Seed
	slots atomic.Pointer[slots]
	n     int    // entries held
	next  uint64 // eviction's cursor
}

// slots is an index's array; mask is its length less one.
type slots struct {
	mask uint64
	s    []atomic.Pointer[entry]
}

// minSlots is the shortest array; an array holds at most half as many
// entries as it has slots, and is rebuilt to hold a quarter when it would
// hold more than half or fewer than an eighth.
const minSlots = 16

func newIndex() *index {
	x := &index{seed: maphash.MakeSeed()}
	x.slots.Store(newSlots(minSlots))
	return x
}

func newSlots(n int) *slots { return &slots{mask: uint64(n - 1), s: make([]atomic.Pointer[entry], n)} }

// get returns the entry of the Redis key k, or nil, without a lock
// (invariant 6): under writers it may miss an entry, never find one
// removed before it began.
func (x *index) get(k []byte) *entry {
	sl := x.slots.Load()
	i := maphash.Bytes(x.seed, k) & sl.mask
	for range sl.s {
		e := sl.s[i].Load()
		if e == nil || e.key == string(k) {
			return e
		}
		i = (i + 1) & sl.mask
	}
	return nil
}

// home returns the slot of sl where key's probe starts.
func (x *index) home(sl *slots, key string) uint64 { return maphash.String(x.seed, key) & sl.mask }

// find returns the entry of key, or nil; writers only.
func (x *index) find(key string) *entry {
	sl := x.slots.Load()
	for i := x.home(sl, key); ; i = (i + 1) & sl.mask {
		if e := sl.s[i].Load(); e == nil || e.key == key {
			return e
		}
	}
}

// insert adds e, whose key has no entry; writers only.
func (x *index) insert(e *entry) {
	sl := x.slots.Load()
	if 2*(x.n+1) > len(sl.s) {
		sl = x.rebuild(nil)
	}
	i := x.home(sl, e.key)
	for sl.s[i].Load() != nil {
		i = (i + 1) & sl.mask
	}
	sl.s[i].Store(e)
	x.n++
}

// remove deletes e, an entry of the index; writers only.
func (x *index) remove(e *entry) {
	sl := x.slots.Load()
	i := x.home(sl, e.key)
	for sl.s[i].Load() != e {
		i = (i + 1) & sl.mask
	}
	x.removeAt(sl, i)
}

// removeAt deletes the entry in slot i of sl, the index's array, moving
// each later entry of its run whose probe passes the hole into it, the
// new slot written before the old (invariant 6), and shrinks the array
// when it holds fewer than an eighth of its slots.
func (x *index) removeAt(sl *slots, i uint64) {
	for j := (i + 1) & sl.mask; ; j = (j + 1) & sl.mask {
		f := sl.s[j].Load()
		if f == nil {
			break
		}
		// f may move to i when its probe, from its home to j, passes i.
		if h := x.home(sl, f.key); (j-h)&sl.mask >= (j-i)&sl.mask {
			sl.s[i].Store(f)
			i = j
		}
	}
	sl.s[i].Store(nil)
	if x.n--; 8*x.n < len(sl.s) && len(sl.s) > minSlots {
		x.rebuild(nil)
	}
}

// evict deletes an entry, the first at or after the cursor, and returns
// it: nil when there is none; writers only.
func (x *index) evict() *entry {
	if x.n == 0 {
		return nil
	}
	sl := x.slots.Load()
	for ; ; x.next++ {
		i := x.next & sl.mask
		if e := sl.s[i].Load(); e != nil {
			x.removeAt(sl, i)
			return e
		}
	}
}

// rebuild moves the entries for which drop, when not nil, is false to a
// new array that they fill a quarter of (at most: minSlots at least),
// publishes it, then empties the old one (invariant 6), and returns the
// new one; writers only.
func (x *index) rebuild(drop func(*entry) bool) *slots {
	old := x.slots.Load()
	kept := make([]*entry, 0, x.n)
	for i := range old.s {
		if e := old.s[i].Load(); e != nil && (drop == nil || !drop(e)) {
			kept = append(kept, e)
		}
	}
	n := minSlots
	for n < 4*len(kept) {
		n *= 2
	}
	sl := newSlots(n)
	for _, e := range kept {
		i := x.home(sl, e.key)
		for sl.s[i].Load() != nil {
			i = (i + 1) & sl.mask
		}
		sl.s[i].Store(e)
	}
	x.slots.Store(sl)
	x.n = len(kept)
	for i := range old.s {
		old.s[i].Store(nil)
	}
	return sl
}

// errIndex is the error of a check that failed.
var errIndex = errors.New("redisstore: the deny cache's index is inconsistent")

// check verifies invariant 7: the array is at most half full, holds n
// entries, and each where its probe finds it, with no key twice. Writers
// only (tests call it between operations).
func (x *index) check() error {
	sl := x.slots.Load()
	n := 0
	for i := range sl.s {
		e := sl.s[i].Load()
		if e == nil {
			continue
		}
		n++
		if f := x.find(e.key); f != e {
			return fmt.Errorf("%w: the entry of %q in slot %d is not the one its probe finds", errIndex, e.key, i)
		}
	}
	if n != x.n || 2*n > len(sl.s) {
		return fmt.Errorf("%w: %d entries in %d slots, %d counted", errIndex, n, len(sl.s), x.n)
	}
	return nil
}
