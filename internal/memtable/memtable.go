// Package memtable is the data structure under floodgate's memory store:
// one policy's keys in a sharded hash table, each shard behind its own
// mutex, with bounded memory.
//
// A token-bucket, leaky-bucket, fixed-window or sliding-window key takes one
// 24-byte slot without pointers (its algo.Cell's t and x, and its key: in
// the slot up to 11 bytes, else in an arena of the shard's long keys; a
// sliding-window key 4 bytes more, the Cell's y) in an open-addressing
// table with linear probing; deciding on an existing key hashes the key
// once, probes, comparing 12 bytes a slot, and allocates nothing. A
// sliding-log key keeps its log, in a Go map, and so does a key of a
// policy whose counts do not fit in a Cell (algo.Policy.Compact: a LIMIT
// above 2^32-1), its State.
//
// A token-bucket or leaky-bucket key of a policy whose T is a whole number
// of nanoseconds (100 per second, 1000 per day) is decided without the
// shard's lock when the key is held in its slot and the event is one that
// algo.Policy.DecideTAT decides (a cost from 1 to the burst): its state is
// then one word, its TAT, which a compare-and-swap advances and a denial
// only reads. Every path that changes a slot otherwise, under the lock,
// first sets the word's held bit, which sends such a decision to the lock;
// removed keys leave tombstones rather than moving other keys, and a
// resized array is a new one, so that the slot a decision found holds its
// key until the word is held (fast.go lists the invariants).
//
// Memory stays bounded three ways. A key whose state has drained (algo's
// ResetAt has passed) decides exactly like a missing key, so a shard drops
// drained keys whenever it would otherwise grow, and shrinks when mostly
// empty. A shard never holds more than its share of the table's maximum
// number of keys: to make room it evicts, from a sample of its keys, the one
// that would drain soonest, which changes the fewest future decisions. And
// the Tables sharing a Budget take their bytes from it before they
// allocate them: a new key, or its shard's growth, that the Budget has no
// room for evicts keys of the shard first (see Budget). Close and Fold
// free a whole Table.
//
// Eviction never admits more than the policy. A shard joins the state of
// each key it evicts before it drained into its shadow, a table of
// algo.Shadow values allocated on its first eviction: into each of the
// key's four slots there, picked by its hash. A key the shard does not
// hold starts from the loosest of its four slots (and the Table's floor,
// see SetFloor) rather than from the initial state. A slot is at least as
// strict as every state joined into it (for each algorithm, algo.Shadow
// says how: the latest TAT of a bucket, the fullest window, a log's units
// as one entry at its newest time), so a key that returns is no better off
// than when it was evicted, and keys that share slots can only be denied
// more, never admitted more; a new key is denied for others' states only
// when all four of its slots are strict. A slot clears itself once
// everything joined into it has drained. A Table's shadows hold at most a
// slot per key it may hold and take at most 1/64 of the Budget, all
// Tables' at most 1/16 (see shadow.go for the invariants).
package memtable

import (
	"errors"
	"hash/maphash"
	"maps"
	"math/bits"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/floodgate/floodgate/algo"
)

// Table holds the states of one policy's keys. It is safe for concurrent
// use.
type Table struct {
	b       *Budget
	p       algo.Policy
	log     bool // not algo's Compact (sliding-log, counts past 32 bits): states in shard.logs
	sw      bool // sliding-window: shards keep ys
	fast    bool // a bucket whose events DecideTAT decides: see decideFast
	seed    maphash.Seed
	shift   uint // shard index = hash >> shift
	shards  []shard
	closed  atomic.Bool // set by Close under every shard's lock
	shadowN int         // slots of a shard's shadow
	floor   algo.State  // with floored, what a missing key starts from at least
	floored bool
	sourced atomic.Bool // Decide leaves missing keys to its caller (SetSourced)
}

// ErrClosed is returned by Decide on a Table that Close freed.
var ErrClosed = errors.New("memtable: table closed")

// ErrMissing is returned by Decide, which changes nothing then, for a key
// that a Table marked by SetSourced does not hold.
var ErrMissing = errors.New("memtable: key missing from a sourced table")

// Stats counts a Table's keys and what it dropped.
type Stats struct {
	Keys      int    // keys held now
	Drained   uint64 // keys dropped because their state had drained: lossless
	Evictions uint64 // keys dropped to stay within the bound, state and all
}

// minShardKeys is the fewest keys a shard may be bounded to: with fewer, a
// shard that happens to receive more than its share of keys would evict
// while the table as a whole has room.
const minShardKeys = 1024

// New returns a Table for policy p holding at most maxKeys keys (at least
// 1) in up to shards shards (a power of two, reduced so that each shard may
// hold at least minShardKeys keys), counting its bytes in b.
func New(p algo.Policy, maxKeys, shards int, b *Budget) *Table {
	maxKeys = max(maxKeys, 1)
	n := 1
	for n*2 <= shards && n*2*minShardKeys <= maxKeys {
		n *= 2
	}
	_, _, fast := p.DecideTAT(0, 0, 1)
	t := &Table{b: b, p: p, log: !p.Compact(), sw: p.Algorithm() == algo.SlidingWindow, fast: fast,
		seed: maphash.MakeSeed(), shift: uint(64 - bits.TrailingZeros(uint(n))), shards: make([]shard, n)}
	for i := range t.shards {
		sh := &t.shards[i]
		sh.fast = fast
		sh.bits = uint(bits.TrailingZeros(uint(n)))
		sh.max = maxKeys / n
		if i < maxKeys%n {
			sh.max++
		}
		if t.log {
			sh.logs = make(map[string]*algo.State)
		}
	}
	t.shadowN = shadowSize(b, maxKeys, n)
	b.add(fixedBytes(n))
	return t
}

// Cost returns the bytes New(p, maxKeys, shards, b) counts in b, and the
// room that its first key's shard takes besides the key's bytes, so that a
// caller can make room first.
func Cost(p algo.Policy, maxKeys, shards int) int64 {
	n := 1
	for n*2 <= shards && n*2*minShardKeys <= max(maxKeys, 1) {
		n *= 2
	}
	return fixedBytes(n) + slotsBytes(minSlots, p.Algorithm() == algo.SlidingWindow)
}

// Policy returns the table's policy.
func (t *Table) Policy() *algo.Policy { return &t.p }

// Hash returns key's hash, which picks its shard and slot.
func (t *Table) Hash(key string) uint64 { return maphash.String(t.seed, key) }

// Shard returns the index of the shard holding a key of hash h.
func (t *Table) Shard(h uint64) int {
	if t.shift == 64 {
		return 0
	}
	return int(h >> t.shift)
}

// Lock and Unlock lock the shard of index i, for callers that apply several
// operations as one atomic step. Callers that lock several shards, of one
// table or several, must lock them in one global order.
func (t *Table) Lock(i int)   { t.shards[i].mu.Lock() }
func (t *Table) Unlock(i int) { t.shards[i].mu.Unlock() }

// Decide decides an event of cost n at now for key, atomically.
func (t *Table) Decide(key string, now, n int64) (algo.Decision, error) {
	h := t.Hash(key)
	sh := &t.shards[t.Shard(h)]
	if t.fast {
		if d, ok := t.decideFast(sh, h, key, now, n); ok {
			return d, nil
		}
	}
	sh.mu.Lock()
	if t.closed.Load() {
		sh.mu.Unlock()
		return algo.Decision{}, ErrClosed
	}
	sh.last = max(sh.last, now) // only under the lock: fast.go invariant 8
	if t.log {
		d, err := t.decideLog(sh, h, key, now, n)
		sh.mu.Unlock()
		return d, err
	}
	i, found := sh.find(h, key)
	if found {
		c := sh.hold(i)
		d, err := t.p.DecideCell(&c, now, n)
		sh.setCell(i, c)
		if d.ResetAfter == 0 && n == 0 && err == nil {
			t.dropDrained(sh, i, now) // a peek found it drained
		}
		sh.mu.Unlock()
		return d, err
	}
	if t.sourced.Load() {
		sh.mu.Unlock()
		return algo.Decision{}, ErrMissing
	}
	var s algo.State
	if sh.shadow != nil || t.floored {
		s = t.recall(sh, h, now)
	}
	d, err := t.p.Decide(&s, now, n)
	if d.Allowed && n > 0 {
		c, _ := s.Cell()
		t.insert(sh, h, key, c, now)
	}
	sh.mu.Unlock()
	return d, err
}

func (t *Table) decideLog(sh *shard, h uint64, key string, now, n int64) (algo.Decision, error) {
	s := sh.logs[key]
	if s == nil && t.sourced.Load() {
		return algo.Decision{}, ErrMissing
	}
	if s == nil {
		fresh := t.recall(sh, h, now)
		d, err := t.p.Decide(&fresh, now, n)
		if d.Allowed && n > 0 {
			t.insertLog(sh, key, &fresh, now)
		}
		return d, err
	}
	before := s.LogSize()
	d, err := t.p.Decide(s, now, n)
	if s.LogSize() != before {
		t.relog(sh, h, key, s, logBytes(key, &algo.State{})+allocBytes(int64(before)), now)
	}
	return d, err
}

// Load returns key's state at now, and whether the table holds it, for a
// caller that holds the key's shard lock, and keeps Decide to that lock
// for the key until Store puts its state back. A key the table does not hold has
// the state it would start from (see the package doc on eviction). A
// sliding-log state shares its log with the table: Clone it before
// changing it if it must be put back.
func (t *Table) Load(h uint64, key string, now int64) (algo.State, bool) {
	sh := &t.shards[t.Shard(h)]
	if t.log {
		if s := sh.logs[key]; s != nil {
			return *s, true
		}
	} else if i, ok := sh.find(h, key); ok {
		return sh.hold(i).State(t.p.Algorithm()), true
	}
	return t.recall(sh, h, now), false
}

// Store puts key's state, for a caller that holds the key's shard lock; a
// state drained at now is dropped instead.
func (t *Table) Store(h uint64, key string, s algo.State, now int64) {
	sh := &t.shards[t.Shard(h)]
	sh.last = max(sh.last, now)
	drained := t.p.ResetAt(&s) <= now
	if t.log {
		if old := sh.logs[key]; old != nil && drained {
			t.deleteLog(sh, key, old)
			return
		} else if old != nil {
			before := logBytes(key, old)
			*old = s
			t.relog(sh, h, key, old, before, now)
			return
		} else if drained {
			return
		}
		ls := s // on the heap here only: s stays on the caller's stack
		t.insertLog(sh, key, &ls, now)
		return
	}
	i, found := sh.find(h, key)
	switch {
	case found && drained:
		sh.hold(i)
		sh.remove(i, t)
	case found:
		c, _ := s.Cell()
		sh.setCell(i, c)
	case !drained:
		c, _ := s.Cell()
		t.insert(sh, h, key, c, now)
	}
}

// Stats returns the table's counts.
func (t *Table) Stats() Stats {
	var st Stats
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		st.Keys += sh.n + len(sh.logs)
		st.Drained += sh.drained
		st.Evictions += sh.evictions
		sh.mu.Unlock()
	}
	return st
}

// Last returns the latest time of an op on t that took a shard's lock
// (see decideFast).
func (t *Table) Last() int64 {
	var last int64
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		last = max(last, sh.last)
		sh.mu.Unlock()
	}
	return last
}

// shard is one part of a Table: an open-addressing table of slots with
// linear probing, whose removed keys leave tombstones until the array is
// rebuilt, so that a slot holds one key for the array's life (see slot).
type shard struct {
	mu        sync.Mutex
	slots     []slot
	tab       atomic.Pointer[[]slot] // slots, for decideFast; nil when it must lock
	tombs     int                    // slots of removed keys
	fast      bool                   // Table.fast
	ys        []uint32               // sliding-window: each slot's y (see slot); nil otherwise
	n         int                    // keys in slots
	max       int                    // most keys this shard may hold
	logs      map[string]*algo.State
	shadow    []algo.Shadow // states of evicted keys, by hash; nil until one is
	logSweep  int           // sweep logs when they reach this many keys
	drained   uint64
	evictions uint64
	rnd       uint64 // eviction sampling
	last      int64  // the latest time of a locked op on the shard
	bits      uint   // log2 of the number of shards
	arena     []byte // the bytes of keys longer than inlineMax
	dead      int    // bytes of arena whose keys were removed
	_         [64]byte
}

const minSlots = 8

// home returns the slot where a key of (shard-local) hash h belongs in a
// table of size slots: the top bits of h scaled to size (Lemire's
// multiply-shift), so that a table may have any size and grow by half.
func home(h uint64, size int) int {
	hi, _ := bits.Mul64(h, uint64(size))
	return int(hi)
}

func next(i, size int) int {
	if i++; i == size {
		return 0
	}
	return i
}

// local drops the hash bits that chose the shard, which all of its keys
// share, so that home spreads them over the whole shard.
func (sh *shard) local(h uint64) uint64 { return h << sh.bits }

// find returns the slot index holding key, or the empty slot where it would
// go (never a tombstone: fast.go invariant 4), and whether it was found.
func (sh *shard) find(h uint64, key string) (int, bool) {
	size := len(sh.slots)
	if size == 0 {
		return -1, false
	}
	w0, w1 := keyWords(h, key)
	long := len(key) > inlineMax
	for i := home(sh.local(h), size); ; i = next(i, size) {
		s := &sh.slots[i]
		switch {
		case s.k1 == w1 && !long && s.k0 == w0:
			return i, true
		case s.k1 == w1 && long && string(sh.keyOf(s, nil)) == key:
			return i, true
		case s.k1 == 0:
			return i, false
		}
	}
}

// insert adds a key known to be missing, first making room: dropping
// drained keys, evicting when the shard is at its bound, and, while the
// Budget cannot give the bytes of the key and of the shard's growth,
// evicting more.
func (t *Table) insert(sh *shard, h uint64, key string, c algo.Cell, now int64) {
	if sh.n >= sh.max {
		t.evict(sh, now)
	}
	// Past 7/8 full, tombstones included, drop drained keys; if that
	// leaves more than 13/16 of the slots full, grow by a quarter, else
	// rebuild the slots, which drops the tombstones. Tables stay 70% to 87%
	// full.
	if sh.full() {
		t.sweep(sh, now)
	}
	for {
		size := len(sh.slots)
		if sh.full() && (sh.n+1)*16 > size*13 {
			size = max(size*5/4, minSlots)
		}
		if t.b.Take(sh.arenaGrowth(len(key)) + slotsBytes(size, t.sw) - slotsBytes(len(sh.slots), t.sw)) {
			if sh.full() {
				t.resize(sh, size)
			}
			break
		}
		if sh.n == 0 {
			s := c.State(t.p.Algorithm())
			t.forget(sh, h, &s, now) // the shard is empty: keep the state in the shadow
			return
		}
		t.evict(sh, now)
		t.shrink(sh)
	}
	i, _ := sh.find(h, key)
	sh.setCell(i, c)
	sh.setKey(&sh.slots[i], h, key) // a copy of key's bytes, not a buffer it is part of
	sh.n++
}

// full reports whether one more key would fill more than 7/8 of sh's
// slots, tombstones included.
func (sh *shard) full() bool { return (sh.n+sh.tombs+1)*8 > len(sh.slots)*7 }

// sweep drops every key drained at now, and shrinks a shard left less
// than a quarter full.
func (t *Table) sweep(sh *shard, now int64) {
	for i := range sh.slots {
		if sh.slots[i].live() {
			t.dropDrained(sh, i, now)
		}
	}
	t.shrink(sh)
}

// dropDrained removes the key of sh's slot i if its state has drained at
// now, as no decideFast changed it meanwhile (fast.go invariant 2).
func (t *Table) dropDrained(sh *shard, i int, now int64) {
	s := &sh.slots[i]
	w := atomic.LoadInt64(&s.word)
	st := sh.cellOf(i, w).State(t.p.Algorithm())
	if t.p.ResetAt(&st) <= now && atomic.CompareAndSwapInt64(&s.word, w, w|held) {
		sh.remove(i, t)
		sh.drained++
	}
}

// shrink resizes a shard left less than a quarter full to half full, and
// returns the bytes it freed.
func (t *Table) shrink(sh *shard) int64 {
	old := len(sh.slots)
	if old <= minSlots || sh.n*4 >= old {
		return 0
	}
	t.resize(sh, max(sh.n*2, minSlots))
	freed := slotsBytes(old, t.sw) - slotsBytes(len(sh.slots), t.sw)
	t.b.add(-freed)
	return freed
}

// Shed evicts keys of t, shard by shard (each at the latest time of its own
// ops), until it has freed need bytes or holds no key, and returns the
// bytes it freed. Evicted keys go to the shadows as always, so shedding
// never admits more than the policy.
func (t *Table) Shed(need int64) int64 {
	var freed int64
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		if !t.closed.Load() && t.log {
			for freed < need && len(sh.logs) > 0 {
				freed += t.evictLog(sh, sh.last)
			}
		} else if !t.closed.Load() {
			freed += t.shedSlots(sh, need-freed)
		}
		sh.mu.Unlock()
		if freed >= need {
			break
		}
	}
	return freed
}

// shedSlots evicts keys of sh until resizing its slots to fit the keys
// left frees, with what the evictions freed, need bytes, or it holds no
// key; then resizes them, and returns the bytes freed. Evicting a key held
// in its slot frees nothing until the slots shrink.
func (t *Table) shedSlots(sh *shard, need int64) int64 {
	var freed int64
	fit := func() int { return max(sh.n*8/7+1, minSlots) }
	for sh.n > 0 && freed+slotsBytes(len(sh.slots), t.sw)-slotsBytes(fit(), t.sw) < need {
		freed += t.evict(sh, sh.last)
	}
	if old := len(sh.slots); old > fit() {
		t.resize(sh, fit())
		d := slotsBytes(old, t.sw) - slotsBytes(len(sh.slots), t.sw)
		t.b.add(-d)
		freed += d
	}
	return freed
}

// evict drops, of a sample of keys, the one whose state drains first (a
// drained one if the sample has one, which costs nothing), and returns the
// bytes that freed (see remove).
func (t *Table) evict(sh *shard, now int64) int64 {
	const sample = 8
	alg := t.p.Algorithm()
	size := len(sh.slots)
	sh.rnd = sh.rnd*6364136223846793005 + 1442695040888963407
	best, bestAt := -1, int64(0)
	seen := 0
	for j, i := 0, home(sh.rnd, size); j < size && seen < sample; j, i = j+1, next(i, size) {
		if !sh.slots[i].live() {
			continue
		}
		seen++
		s := sh.cell(i).State(alg)
		if at := t.p.ResetAt(&s); best < 0 || at < bestAt {
			best, bestAt = i, at
		}
	}
	if best < 0 {
		return 0
	}
	s := sh.hold(best).State(alg) // as decideFast left it
	if t.p.ResetAt(&s) <= now {
		sh.drained++
	} else {
		t.forget(sh, t.hashOf(sh, &sh.slots[best]), &s, now)
	}
	return sh.remove(best, t)
}

// remove leaves a tombstone in slot i (fast.go invariant 4), whose word
// the caller holds, and returns the bytes that freed: a long key's, when its arena is compacted.
func (sh *shard) remove(i int, t *Table) int64 {
	freed := sh.dropKey(&sh.slots[i])
	t.b.add(-freed)
	sh.n--
	sh.tombs++
	return freed
}

// resize moves the keys of sh to a new array of size slots (which the
// caller counts), without tombstones, and publishes it for decideFast.
// It holds the words of the old one as it moves them (fast.go invariant
// 6), so that a decideFast on the old array either changed a word before
// it moved or fails.
func (t *Table) resize(sh *shard, size int) {
	old, oldYs := sh.slots, sh.ys
	slots := make([]slot, size)
	var ys []uint32
	if t.sw {
		ys = make([]uint32, size)
	}
	for i := range old {
		s := &old[i]
		if !s.live() {
			continue
		}
		j := home(sh.local(t.hashOf(sh, s)), size)
		for slots[j].k1 != 0 {
			j = next(j, size)
		}
		slots[j] = slot{word: atomic.SwapInt64(&s.word, held), k0: s.k0, k1: s.k1, x: s.x}
		if t.sw {
			ys[j] = oldYs[i]
		}
	}
	sh.slots, sh.ys, sh.tombs = slots, ys, 0
	if t.fast {
		sh.tab.Store(&slots)
	}
}

// insertLog adds a sliding-log key, making room as insert does.
func (t *Table) insertLog(sh *shard, key string, s *algo.State, now int64) {
	if len(sh.logs) >= sh.logSweep && sh.logSweep < sh.max {
		t.sweepLogs(sh, now)
	}
	if len(sh.logs) >= sh.max {
		t.evictLog(sh, now)
	}
	for !t.b.Take(logBytes(key, s)) {
		if len(sh.logs) == 0 {
			t.forget(sh, t.Hash(key), s, now) // keep the state in the shadow
			return
		}
		t.evictLog(sh, now)
	}
	sh.logs[strings.Clone(key)] = s
}

// relog counts the bytes of sliding-log key, whose state s changed and
// held before bytes, making room first if it grew: it evicts other keys of
// the shard, or, when the shard holds none, moves s to the shadow.
func (t *Table) relog(sh *shard, h uint64, key string, s *algo.State, before, now int64) {
	grow := logBytes(key, s) - before
	if t.b.Take(grow) {
		return
	}
	delete(sh.logs, key) // out of evictLog's reach; still counted as before
	for !t.b.Take(grow) {
		if len(sh.logs) == 0 {
			t.forget(sh, h, s, now)
			t.b.add(-before)
			return
		}
		t.evictLog(sh, now)
	}
	sh.logs[strings.Clone(key)] = s
}

// evictLog evicts, of a sample of sliding-log keys, the one whose state
// drains first, and returns the bytes it held.
func (t *Table) evictLog(sh *shard, now int64) int64 {
	const sample = 8
	var bestKey string
	bestAt, seen := int64(0), 0
	for k, v := range sh.logs { // map order is random: a random sample
		if at := t.p.ResetAt(v); seen == 0 || at < bestAt {
			bestKey, bestAt = k, at
		}
		if seen++; seen == sample {
			break
		}
	}
	s := sh.logs[bestKey]
	if bestAt <= now {
		sh.drained++
	} else {
		t.forget(sh, t.Hash(bestKey), s, now)
	}
	return t.deleteLog(sh, bestKey, s)
}

// deleteLog removes sliding-log key, whose state is s, and returns the
// bytes it held.
func (t *Table) deleteLog(sh *shard, key string, s *algo.State) int64 {
	delete(sh.logs, key)
	size := logBytes(key, s)
	t.b.add(-size)
	return size
}

// sweepLogs drops every drained log, rebuilds a mostly empty map (Go maps
// do not shrink), and sets the size of the next sweep to twice the live
// keys, so sweeps cost O(1) per insert.
func (t *Table) sweepLogs(sh *shard, now int64) {
	before := len(sh.logs)
	for k, v := range sh.logs {
		if t.p.ResetAt(v) <= now {
			t.deleteLog(sh, k, v)
			sh.drained++
		}
	}
	if len(sh.logs)*4 < before {
		sh.logs = maps.Clone(sh.logs)
	}
	sh.logSweep = max(2*len(sh.logs), minSlots)
}
