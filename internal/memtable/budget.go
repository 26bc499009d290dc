package memtable

import (
	"sync/atomic"
	"unsafe"

	"github.com/floodgate/floodgate/algo"
)

// Budget bounds the bytes held by the Tables that share it. It counts what
// they allocate: slot arrays, keys' bytes, sliding logs, shadows and each
// Table's own shards. It is safe for concurrent use.
//
// A Table that would grow while its Budget is spent makes room first, from
// its own shard: it evicts keys (into the shadow, so nothing is admitted
// that should not be), and when the shard holds none, it keeps the new key
// in the shadow alone. So the bytes held exceed the budget by at most a
// few keys and the fixed parts: a Table's shards and their shadows.
type Budget struct {
	max  int64
	held atomic.Int64
}

// NewBudget returns a Budget of max bytes.
func NewBudget(max int64) *Budget { return &Budget{max: max} }

// Held returns the bytes held now.
func (b *Budget) Held() int64 { return b.held.Load() }

// Max returns the budget's bound, in bytes.
func (b *Budget) Max() int64 { return b.max }

// Over reports whether more than the budget is held.
func (b *Budget) Over() bool { return b.held.Load() > b.max }

// Charge counts n more bytes held (fewer, if negative) by something
// other than a Table that shares the budget.
func (b *Budget) Charge(n int64) { b.add(n) }

func (b *Budget) add(n int64) { b.held.Add(n) }

// Sizes of what a Table holds, as the Budget counts them.
const (
	slotBytes       = int64(unsafe.Sizeof(slot{})) + 1 // and its tag
	shardBytes      = int64(unsafe.Sizeof(shard{}))
	tableBytes      = int64(unsafe.Sizeof(Table{}))
	shadowSlotBytes = int64(unsafe.Sizeof(algo.Shadow{}))
	// logKeyBytes is a sliding-log key's map entry (with the map's slack)
	// and State, besides its key's bytes and its log.
	logKeyBytes = 96 + 48
)

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
	if !ok(last) {
		return all, false
	}
	t.p.Forget(&all, &t.floor, last)
	for i := range t.shards {
		t.fold(&t.shards[i], &all, last)
	}
	t.b.add(-(tableBytes + int64(len(t.shards))*shardBytes))
	t.closed.Store(true)
	return all, true
}

// fold joins every state of sh into all and frees sh.
func (t *Table) fold(sh *shard, all *algo.Shadow, last int64) {
	alg := t.p.Algorithm()
	for _, s := range sh.logs {
		t.p.Forget(all, s, last)
	}
	for i, tag := range sh.tags {
		if s := sh.slots[i].c.State(alg); tag != 0 {
			t.p.Forget(all, &s, last)
		}
	}
	for _, v := range sh.shadow {
		s := t.p.Recall(v, last)
		t.p.Forget(all, &s, last)
	}
	var keys int64
	for i, tag := range sh.tags {
		if tag != 0 {
			keys += int64(len(sh.slots[i].key))
		}
	}
	for k, s := range sh.logs {
		keys += logKeyBytes + int64(len(k)+s.LogSize())
	}
	t.b.add(-keys - int64(len(sh.tags))*slotBytes - int64(len(sh.shadow))*shadowSlotBytes)
	sh.tags, sh.slots, sh.shadow, sh.logs, sh.n = nil, nil, nil, nil, 0
}

// SetFloor makes every key t does not hold start from a state at least as
// strict as f (and as its shadow slot), as Fold returned it for the table t
// replaces. It must be called before t is used.
func (t *Table) SetFloor(f algo.Shadow) {
	t.floor = t.p.Recall(f, 0)
	t.floored = t.p.ResetAt(&t.floor) > 0
}

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
	for i, tag := range sh.tags {
		if s := sh.slots[i].c.State(alg); tag != 0 && t.p.ResetAt(&s) > now {
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
