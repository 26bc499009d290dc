package memtable

import (
	"slices"
	"sync/atomic"
	"unsafe"

	"github.com/floodgate/floodgate/algo"
)

// Budget bounds the bytes held by the Tables that share it. It counts what
// they allocate as the Go allocator rounds it (see allocBytes): slot
// arrays, arenas of long keys, sliding logs, shadows and each Table's own
// shards.
// It is safe for concurrent use.
//
// A Table makes room before it allocates: a new key, a shard's growth or a
// sliding log's growth first takes its bytes from the Budget, and while
// the Budget cannot give them, the Table evicts keys of the shard (into the
// shadow, so nothing is admitted that should not be); when the shard holds
// none, it keeps the new key in the shadow alone. A Table's fixed parts
// (its shards and their shadows) are counted when New makes it: a caller
// that must stay within the Budget makes room for them first (Fits,
// Shed). So the bytes counted never exceed the budget but for the fixed
// parts of Tables made when nothing could be shed.
type Budget struct {
	max     int64
	held    atomic.Int64
	shadows atomic.Int64 // of held, what shadows take beyond their smallest size
}

// NewBudget returns a Budget of max bytes.
func NewBudget(max int64) *Budget { return &Budget{max: max} }

// Held returns the bytes held now.
func (b *Budget) Held() int64 { return b.held.Load() }

// Max returns the budget's bound, in bytes.
func (b *Budget) Max() int64 { return b.max }

// Fits reports whether n more bytes would keep the bytes held within the
// budget.
func (b *Budget) Fits(n int64) bool { return b.held.Load()+n <= b.max }

// Charge counts n more bytes held (fewer, if negative) by something
// other than a Table that shares the budget.
func (b *Budget) Charge(n int64) { b.add(n) }

// Take counts n more bytes held if that keeps the bytes held within the
// budget, and reports whether it did. Taking n <= 0 always succeeds.
func (b *Budget) Take(n int64) bool {
	if n <= 0 {
		if n < 0 {
			b.add(n)
		}
		return true
	}
	for {
		h := b.held.Load()
		if h+n > b.max {
			return false
		}
		if b.held.CompareAndSwap(h, h+n) {
			return true
		}
	}
}

func (b *Budget) add(n int64) { b.held.Add(n) }

// takeShadow takes n bytes, as Take does, for a shadow beyond its smallest
// size, if that also keeps all such bytes within 1/shadowShare of the
// budget, and reports whether it did.
func (b *Budget) takeShadow(n int64) bool {
	if b.shadows.Add(n) > b.max/shadowShare || !b.Take(n) {
		b.shadows.Add(-n)
		return false
	}
	return true
}

// Sizes of what a Table holds, as the Budget counts them: Go's sizes of
// its types, rounded as the allocator rounds them (allocBytes), but for a
// sliding log's map entry, which was measured. The method, which
// TestBudgetTracksHeap repeats: fill a Table of 64 shards with keys of 8,
// 32, 149 and 1,012 bytes and with sliding-log keys, and make thousands
// of Tables of one key; compare the growth of runtime.MemStats.HeapAlloc
// after runtime.GC (live objects, each as its size class rounds it) with
// the growth of Held. Slots and arenas match within 0.2%, sliding logs
// within 3%; a Table counts its shards' smallest shadows (256 bytes each)
// before its first eviction allocates them. HeapInuse, which counts whole
// spans, can be twice as much under a flood of evictions: see memstore.
const (
	shardBytes      = int64(unsafe.Sizeof(shard{}))
	tableBytes      = int64(unsafe.Sizeof(Table{}))
	shadowSlotBytes = int64(unsafe.Sizeof(algo.Shadow{}))
	stateBytes      = int64(unsafe.Sizeof(algo.State{}))
	// logEntryBytes is a sliding-log key's share of its shard's Go map (a
	// slot of a string and a pointer, its control byte, and the slack of
	// a map between growths), as measured.
	logEntryBytes = 40
)

// allocBytes returns the bytes the Go allocator takes for an object of n
// bytes: n rounded up to its size class, 16 bytes apart up to 256 bytes
// but for the class of 24 (8-byte objects take 16 under the race detector,
// and are counted so),
// 32 apart up to 512, then as sizeClasses lists them; past 32 KiB, whole
// 8-KiB pages.
func allocBytes(n int64) int64 {
	switch {
	case n <= 0:
		return 0
	case n > 16 && n <= 24:
		return 24
	case n <= 256:
		return (n + 15) &^ 15
	case n <= 512:
		return (n + 31) &^ 31
	case n > 32<<10:
		return (n + 8191) &^ 8191
	}
	i, _ := slices.BinarySearch(sizeClasses[:], n)
	return sizeClasses[i]
}

// sizeClasses are the Go allocator's size classes from 512 bytes to 32
// KiB, as internal/runtime/gc/sizeclasses.go lists them (Go 1.26).
var sizeClasses = [...]int64{
	512, 576, 640, 704, 768, 896, 1024, 1152, 1280, 1408, 1536, 1792, 2048,
	2304, 2688, 3072, 3200, 3456, 4096, 4864, 5376, 6144, 6528, 6784, 6912,
	8192, 9472, 9728, 10240, 10880, 12288, 13568, 14336, 16384, 18432, 19072,
	20480, 21760, 24576, 27264, 28672, 32768,
}

// allocPtrBytes is allocBytes for an object that holds pointers: past
// 512 bytes, the allocator puts an 8-byte header before it.
func allocPtrBytes(n int64) int64 {
	if n > 512 {
		n += 8
	}
	return allocBytes(n)
}

// keyBytes is what a sliding-log key of n bytes costs: its bytes.
func keyBytes(n int) int64 { return allocBytes(int64(n)) }

// slotsBytes is what a shard's slot array of size slots costs, with its
// ys for sliding-window (sw): allocations without pointers.
func slotsBytes(size int, sw bool) int64 {
	n := allocBytes(int64(size) * int64(unsafe.Sizeof(slot{})))
	if sw {
		n += allocBytes(int64(size) * 4)
	}
	return n
}

// logBytes is what a sliding-log key holds: its map entry, its key's
// bytes, its State and its log.
func logBytes(key string, s *algo.State) int64 {
	return logEntryBytes + keyBytes(len(key)) + allocBytes(stateBytes) + allocBytes(int64(s.LogSize()))
}

// fixedBytes is what a Table of n shards costs whatever it holds: the
// Table, its shards, and their smallest shadows.
func fixedBytes(n int) int64 {
	return allocPtrBytes(tableBytes) + allocPtrBytes(int64(n)*shardBytes) + int64(n)*shadowBytes(minShadowSlots)
}

// shadowBytes is what a shadow of size slots costs. A shard's shadow of
// minShadowSlots is counted when New makes its Table, though it is
// allocated at the shard's first eviction, so that an eviction never lacks
// the bytes for one, even the eviction of a shard's first key, which a
// full Budget keeps in the shadow alone; a larger one is counted when
// allocated.
func shadowBytes(size int) int64 { return allocBytes(int64(size) * shadowSlotBytes) }

// shadowExtra is what a shadow of size slots costs beyond the one of
// minShadowSlots that New counts for each shard.
func shadowExtra(size int) int64 { return shadowBytes(size) - shadowBytes(minShadowSlots) }

// Close frees t if it holds no state that has not drained at the latest
// time of an op on it (its own clock, never another table's), and reports
// whether it did. A closed Table holds nothing and counts nothing in its
// Budget; Decide on it returns ErrClosed, and callers of Lock check Closed.
func (t *Table) Close() bool {
	_, ok := t.free(func(last int64) bool {
		if t.p.ResetAt(&t.floor) > last {
			return false
		}
		for i := range t.shards {
			if !t.drained(&t.shards[i], last) {
				return false
			}
		}
		return true
	})
	return ok
}

// Fold frees t, as Close does, if it holds at most maxKeys keys, and
// returns a Shadow at least as strict as all of its states (its keys' and
// its shadow's): the floor (see SetFloor) of the table that replaces it.
func (t *Table) Fold(maxKeys int) (algo.Shadow, bool) {
	return t.free(func(int64) bool {
		n := 0
		for i := range t.shards {
			n += t.shards[i].n + len(t.shards[i].logs)
		}
		return n <= maxKeys
	})
}

// free locks every shard of t and, if ok says so at t's latest time, frees
// it, returning every state it held joined in a Shadow.
func (t *Table) free(ok func(last int64) bool) (algo.Shadow, bool) {
	for i := range t.shards {
		t.shards[i].mu.Lock()
	}
	defer func() {
		for i := range t.shards {
			t.shards[i].mu.Unlock()
		}
	}()
	var all algo.Shadow
	if t.closed.Load() {
		return all, true
	}
	var last int64
	for i := range t.shards {
		last = max(last, t.shards[i].last)
	}
	t.hold(true) // decideFast changes nothing from here
	if !ok(last) {
		t.hold(false)
		return all, false
	}
	t.p.Forget(&all, &t.floor, last)
	for i := range t.shards {
		t.fold(&t.shards[i], &all, last)
	}
	t.b.add(-fixedBytes(len(t.shards)))
	t.closed.Store(true)
	return all, true
}

// hold sets (on) or clears the held bit of the word of every key of t,
// for a caller that holds every shard's lock: with it set, decideFast
// changes none of them (fast.go invariants 2 and 3). Clearing keeps the bit of a state with a fraction,
// and drops a Load's, which ends with the lock it was taken under (one
// that no Store followed only sends its key to the lock).
func (t *Table) hold(on bool) {
	if !t.fast {
		return
	}
	for i := range t.shards {
		sh := &t.shards[i]
		for j := range sh.slots {
			switch s := &sh.slots[j]; {
			case !s.live():
			case on:
				atomic.OrInt64(&s.word, held)
			case s.x == 0:
				atomic.AndInt64(&s.word, ^held)
			}
		}
	}
}

// fold joins every state of sh into all and frees sh.
func (t *Table) fold(sh *shard, all *algo.Shadow, last int64) {
	alg := t.p.Algorithm()
	for _, s := range sh.logs {
		t.p.Forget(all, s, last)
	}
	for i := range sh.slots {
		if sh.slots[i].live() {
			s := sh.hold(i).State(alg)
			t.p.Forget(all, &s, last)
		}
	}
	for _, v := range sh.shadow {
		s := t.p.Recall(v, last)
		t.p.Forget(all, &s, last)
	}
	t.b.add(-sh.bytes())
	if sh.shadow != nil {
		t.b.shadows.Add(-shadowExtra(len(sh.shadow)))
	}
	sh.slots, sh.ys, sh.shadow, sh.logs, sh.n, sh.tombs = nil, nil, nil, nil, 0, 0
	sh.tab.Store(nil) // fast.go invariant 6
	sh.arena, sh.dead = nil, 0
}

// bytes is what sh holds, as its Table's Budget counts it.
func (sh *shard) bytes() int64 {
	n := slotsBytes(len(sh.slots), sh.ys != nil)
	if sh.shadow != nil {
		n += shadowExtra(len(sh.shadow))
	}
	n += arenaBytes(cap(sh.arena))
	for k, s := range sh.logs {
		n += logBytes(k, s)
	}
	return n
}

// SetFloor makes every key t does not hold start from a state at least as
// strict as f (and as its shadow slot), as Fold returned it for the table t
// replaces. It must be called before t is used.
func (t *Table) SetFloor(f algo.Shadow) {
	t.floor = t.p.Recall(f, 0)
	t.floored = t.p.ResetAt(&t.floor) > 0
}

// SetSourced sets whether Decide returns ErrMissing for a key t does not
// hold, so that its caller can find the key's state elsewhere (a table of
// the same limiter under its former policy) and decide with Load and
// Store.
func (t *Table) SetSourced(on bool) { t.sourced.Store(on) }

// Closed reports whether Close freed t. A caller holding one of its shard
// locks knows that it stays so until the lock is released.
func (t *Table) Closed() bool { return t.closed.Load() }

// drained reports whether every state of sh, its shadow's included, has
// drained at now.
func (t *Table) drained(sh *shard, now int64) bool {
	for _, s := range sh.logs {
		if t.p.ResetAt(s) > now {
			return false
		}
	}
	alg := t.p.Algorithm()
	for i := range sh.slots {
		if s := sh.cell(i).State(alg); sh.slots[i].live() && t.p.ResetAt(&s) > now {
			return false
		}
	}
	for _, v := range sh.shadow {
		if s := t.p.Recall(v, now); t.p.ResetAt(&s) > now {
			return false
		}
	}
	return true
}
