package floodgate

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
// when NewMemoryStore is given 0: about 45 MB of token-bucket state (43
// bytes a key, measured by the bench module).
const DefaultMaxKeys = 1 << 20

// memoryShards is the number of shards per table: enough that goroutines
// on different keys rarely wait for each other.
const memoryShards = 64

// MemoryStore keeps state in this process's memory: the default Store.
//
// Deciding on a key it holds allocates nothing and takes one mutex, that
// of the key's shard. Its memory is bounded: a key whose state has drained
// is dropped (which changes no decision), and each table (limiter) holds at
// most maxKeys keys; to make room for a new one a shard evicts, from a
// sample of its keys, the one whose state drains first, and counts it
// (MemoryStats.Evictions). Since each of a table's shards holds at most
// its share of maxKeys, evictions can begin slightly before the table as a
// whole reaches maxKeys.
//
// A MemoryStore is safe for concurrent use. Its state lives as long as the
// process.
type MemoryStore struct {
	maxKeys int
	mu      sync.Mutex
	tables  map[memKey]*memTable
}

type memKey struct {
	name string
	p    Policy
}

// NewMemoryStore returns an empty memory store holding at most maxKeys
// keys per table; 0 means DefaultMaxKeys.
func NewMemoryStore(maxKeys int) *MemoryStore {
	if maxKeys <= 0 {
		maxKeys = DefaultMaxKeys
	}
	return &MemoryStore{maxKeys: maxKeys, tables: make(map[memKey]*memTable)}
}

// Table implements Store.
func (m *MemoryStore) Table(name string, p Policy) (store.Table, error) {
	if p.IsZero() {
		return nil, fmt.Errorf("floodgate: %w: the zero Policy", ErrInvalidPolicy)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	k := memKey{name, p}
	t := m.tables[k]
	if t == nil {
		t = &memTable{store: m, id: len(m.tables), name: name, t: memtable.New(p, m.maxKeys, memoryShards)}
		m.tables[k] = t
	}
	return t, nil
}

// MemoryStats counts what a memory store holds and dropped.
type MemoryStats struct {
	Keys      int    // keys held, over all tables
	Drained   uint64 // keys dropped because their state had drained
	Evictions uint64 // keys evicted to stay within maxKeys
}

// Stats returns the store's counts.
func (m *MemoryStore) Stats() MemoryStats {
	m.mu.Lock()
	tables := make([]*memTable, 0, len(m.tables))
	for _, t := range m.tables {
		tables = append(tables, t)
	}
	m.mu.Unlock()
	var st MemoryStats
	for _, t := range tables {
		s := t.t.Stats()
		st.Keys += s.Keys
		st.Drained += s.Drained
		st.Evictions += s.Evictions
	}
	return st
}

type memTable struct {
	store *MemoryStore
	id    int
	name  string
	t     *memtable.Table
}

// policy returns the policy of t, a table of m (store.Check's question).
func (m *MemoryStore) policy(t store.Table) (*algo.Policy, bool) {
	mt, ok := t.(*memTable)
	if !ok || mt.store != m {
		return nil, false
	}
	return mt.t.Policy(), true
}

func (t *memTable) Decide(_ context.Context, key string, now, n int64) (algo.Decision, error) {
	return t.t.Decide(key, now, n)
}

// ApplyEach implements store.Store: it carries out the ops one after
// another, each an Apply of its own.
func (m *MemoryStore) ApplyEach(ctx context.Context, ops []store.Op) error {
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
func (m *MemoryStore) Apply(ctx context.Context, ops []store.Op) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := store.Check(ops, m.policy); err != nil {
		return fmt.Errorf("floodgate: %w", err)
	}
	type lock struct {
		t     *memTable
		shard int
	}
	type undo struct {
		t   *memTable
		h   uint64
		key string
		s   algo.State
	}
	tables := make([]*memTable, len(ops))
	hashes := make([]uint64, len(ops))
	locks := make([]lock, 0, len(ops))
	for i := range ops {
		t := ops[i].Table.(*memTable)
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

	undos := make([]undo, 0, len(ops))
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
		s, _ := t.t.Load(h, op.Key)
		undos = append(undos, undo{t, h, op.Key, s.Clone()})
		ok, err := op.Carry(p, &s)
		if err != nil {
			rollback()
			return fmt.Errorf("floodgate: op %d on %q: %w", i, op.Key, err)
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
