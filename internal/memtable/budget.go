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
	for i := range t.shards {
		t.shards[i].mu.Lock()
	}
	defer func() {
		for i := range t.shards {
			t.shards[i].mu.Unlock()
		}
	}()
	if t.closed {
		return true
	}
	var last int64
	for i := range t.shards {
		last = max(last, t.shards[i].last)
	}
	for i := range t.shards {
		if !t.drained(&t.shards[i], last) {
			return false
		}
	}
	for i := range t.shards {
		sh := &t.shards[i]
		if t.log {
			t.sweepLogs(sh, last) // drops every key, and its bytes
		} else {
			t.sweep(sh, last)
		}
		t.b.add(-int64(len(sh.tags))*slotBytes - int64(len(sh.shadow))*shadowSlotBytes)
		sh.tags, sh.slots, sh.shadow, sh.logs = nil, nil, nil, nil
	}
	t.b.add(-(tableBytes + int64(len(t.shards))*shardBytes))
	t.closed = true
	return true
}

// Closed reports whether Close freed t, for a caller holding one of its
// shard locks.
func (t *Table) Closed() bool { return t.closed }

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
