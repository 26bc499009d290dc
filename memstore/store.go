package memstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/internal/memtable"
	"github.com/floodgate/floodgate/store"
)

// DefaultMaxKeys is the number of keys a memory store holds per limiter
// when New is given 0: tens of megabytes of token-bucket state (the
// README has the size of a key, measured by the bench module).
const DefaultMaxKeys = 1 << 20

// shards is the number of shards per table: enough that goroutines
// on different keys rarely wait for each other.
const shards = 64

// Store is a memory store: a store.Store whose tables live in this
// process, each bounded to maxKeys keys (see the package documentation).
// Make one with New. A Store is safe for concurrent use.
type Store struct {
	maxKeys int
	mu      sync.Mutex
	tables  map[tableKey]*table
}

type tableKey struct {
	name string
	p    algo.Policy
}

// New returns an empty memory store holding at most maxKeys keys per
// table; 0 (or less) means DefaultMaxKeys.
func New(maxKeys int) *Store {
	if maxKeys <= 0 {
		maxKeys = DefaultMaxKeys
	}
	return &Store{maxKeys: maxKeys, tables: make(map[tableKey]*table)}
}

// Table implements store.Store.
func (m *Store) Table(name string, p algo.Policy) (store.Table, error) {
	if p.IsZero() {
		return nil, fmt.Errorf("memstore: %w: the zero Policy", algo.ErrInvalidPolicy)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	k := tableKey{name, p}
	t := m.tables[k]
	if t == nil {
		t = &table{store: m, id: len(m.tables), name: name, t: memtable.New(p, m.maxKeys, shards)}
		m.tables[k] = t
	}
	return t, nil
}

// Local implements store.Local: the state is in this process, and
// floodgate.AllowEach decides on it check by check.
func (m *Store) Local() {}

// Stats counts what a memory store holds and dropped.
type Stats struct {
	Keys      int    // keys held, over all tables
	Drained   uint64 // keys dropped because their state had drained
	Evictions uint64 // keys evicted to stay within maxKeys
}

// Stats returns the store's counts.
func (m *Store) Stats() Stats {
	m.mu.Lock()
	tables := make([]*table, 0, len(m.tables))
	for _, t := range m.tables {
		tables = append(tables, t)
	}
	m.mu.Unlock()
	var st Stats
	for _, t := range tables {
		s := t.t.Stats()
		st.Keys += s.Keys
		st.Drained += s.Drained
		st.Evictions += s.Evictions
	}
	return st
}

type table struct {
	store *Store
	id    int
	name  string
	t     *memtable.Table
}

// policy returns the policy of t, a table of m (store.Check's question).
func (m *Store) policy(t store.Table) (*algo.Policy, bool) {
	mt, ok := t.(*table)
	if !ok || mt.store != m {
		return nil, false
	}
	return mt.t.Policy(), true
}

func (t *table) Decide(_ context.Context, key string, now, n int64) (algo.Decision, error) {
	return t.t.Decide(key, now, n)
}

// ApplyEach implements store.Store: it carries out the ops one after
// another, each an Apply of its own.
func (m *Store) ApplyEach(ctx context.Context, ops []store.Op) error {
	for i := range ops {
		if err := m.Apply(ctx, ops[i:i+1]); err != nil {
			return err
		}
	}
	return nil
}

// Apply implements store.Store: it locks the shards of every op's key, in one
// global order (table, then shard), decides, and undoes everything when
// an OpDecide or OpSchedule is denied or an op fails.
func (m *Store) Apply(ctx context.Context, ops []store.Op) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := store.Check(ops, m.policy); err != nil {
		return fmt.Errorf("memstore: %w", err)
	}
	type lock struct {
		t     *table
		shard int
	}
	type undo struct {
		t   *table
		h   uint64
		key string
		s   algo.State
	}
	tables := make([]*table, len(ops))
	hashes := make([]uint64, len(ops))
	locks := make([]lock, 0, len(ops))
	for i := range ops {
		t := ops[i].Table.(*table)
		tables[i], hashes[i] = t, t.t.Hash(ops[i].Key)
		locks = append(locks, lock{t, t.t.Shard(hashes[i])})
	}
	slices.SortFunc(locks, func(a, b lock) int {
		return cmp.Or(cmp.Compare(a.t.id, b.t.id), cmp.Compare(a.shard, b.shard))
	})
	locks = slices.Compact(locks)
	for _, l := range locks {
		l.t.t.Lock(l.shard)
	}
	defer func() {
		for _, l := range locks {
			l.t.t.Unlock(l.shard)
		}
	}()

	// A few ops, the usual batch, keep their undos on the stack.
	var few [4]undo
	undos := few[:0]
	if len(ops) > len(few) {
		undos = make([]undo, 0, len(ops))
	}
	// Storing each key's state as it was puts it back; a key that was
	// missing had the zero State, which Store drops.
	rollback := func() {
		for _, u := range slices.Backward(undos) {
			u.t.t.Store(u.h, u.key, u.s, 0)
		}
	}
	denied := false
	for i := range ops {
		op := &ops[i]
		t, h := tables[i], hashes[i]
		p := t.t.Policy()
		s, held := t.t.Load(h, op.Key, op.Now)
		u := undo{t, h, op.Key, algo.State{}} // a missing key is dropped again
		if held {
			u.s = s.Clone()
		}
		undos = append(undos, u)
		ok, err := op.Carry(p, &s)
		if err != nil {
			rollback()
			return fmt.Errorf("memstore: op %d on %q: %w", i, op.Key, err)
		}
		if !ok {
			denied = true
			continue
		}
		t.t.Store(h, op.Key, s, op.Now)
	}
	if denied {
		rollback()
	}
	return nil
}
