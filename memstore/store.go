package memstore

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/internal/memtable"
	"github.com/floodgate/floodgate/store"
)

// DefaultMaxKeys is the number of keys a memory store holds per limiter
// when New is given 0: tens of megabytes of token-bucket state
// (docs/benchmarks.md has the size of a key, measured by the bench module).
const DefaultMaxKeys = 1 << 20

// DefaultMaxBytes is the memory a store holds at most when New is given
// no MaxBytes option: 256 MiB.
const DefaultMaxBytes = 256 << 20

// shards is the number of shards per table: enough that goroutines
// on different keys rarely wait for each other. A table made while the
// store's memory is spent has one shard.
const shards = 64

// Store is a memory store: a store.Store whose tables live in this
// process, each bounded to maxKeys keys and all together to a number of
// bytes (see the package documentation). Make one with New. A Store is safe
// for concurrent use.
type Store struct {
	maxKeys int
	budget  *memtable.Budget
	mu      sync.Mutex
	tables  map[tableKey]*table
	folded  map[tableKey]algo.Shadow // tables freed with live state, folded
	newest  map[string]tableKey      // the key of the table made last for each name
	nextID  int
	sweepAt int   // the number of tables from which freeDrained runs again
	made    int64 // bytes of the tables made since freeDrained ran
}

// An Option configures a Store made by New.
type Option interface{ apply(*Store) }

type maxBytes int64

func (n maxBytes) apply(m *Store) { m.budget = memtable.NewBudget(int64(n)) }

// MaxBytes bounds the memory the store holds, over all its tables, to about
// n bytes (see the package documentation); 0 or less means
// DefaultMaxBytes.
func MaxBytes(n int64) Option {
	if n <= 0 {
		n = DefaultMaxBytes
	}
	return maxBytes(n)
}

type tableKey struct {
	name string
	p    algo.Policy
}

// live is the memtable a table handle uses now, with the id that orders
// the locking of its shards.
type live struct {
	id     int
	t      *memtable.Table
	source atomic.Pointer[live] // nil, or the table of its name under a former policy (see load)
}

// New returns an empty memory store holding at most maxKeys keys per
// table (0 or less means DefaultMaxKeys) and DefaultMaxBytes in all, unless
// an option says otherwise.
func New(maxKeys int, opts ...Option) *Store {
	if maxKeys <= 0 {
		maxKeys = DefaultMaxKeys
	}
	m := &Store{maxKeys: maxKeys, tables: make(map[tableKey]*table), folded: make(map[tableKey]algo.Shadow),
		newest: make(map[string]tableKey)}
	MaxBytes(0).apply(m)
	for _, o := range opts {
		o.apply(m)
	}
	return m
}

// Table implements store.Store. A sliding-log policy whose log could take
// more than a sixteenth of the store's memory (32 bytes per unit of its
// LIMIT) is refused with an error wrapping algo.ErrInvalidPolicy.
func (m *Store) Table(name string, p algo.Policy) (store.Table, error) {
	if p.IsZero() {
		return nil, fmt.Errorf("memstore: %w: the zero Policy", algo.ErrInvalidPolicy)
	}
	if most := m.MaxLogLimit(); p.Algorithm() == algo.SlidingLog && p.Limit() > most {
		return nil, fmt.Errorf("memstore: %w: %s: a sliding log of LIMIT %d could take more than a sixteenth of the store's %d bytes (the most is %d)",
			algo.ErrInvalidPolicy, p, p.Limit(), m.budget.Max(), most)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	k := tableKey{name, p}
	t := m.tables[k]
	if t == nil {
		t = &table{store: m, key: k}
		m.revive(t)
	}
	return t, nil
}

// MaxLogLimit returns the largest LIMIT of a sliding-log policy the store
// accepts: its log's entries (16 bytes each, in a ring of at most twice
// their number) take at most a sixteenth of the store's memory.
func (m *Store) MaxLogLimit() int64 { return m.budget.Max() / 16 / 32 }

// revive gives t, a table missing from m's map or whose memtable was freed,
// a live memtable: the one of the table now in the map under its key, or
// a new one. It frees the tables holding nothing undrained first when the
// store's memory is spent. The caller holds m.mu.
func (m *Store) revive(t *table) {
	if cur := m.tables[t.key]; cur != nil && cur != t {
		t.cur.Store(cur.cur.Load())
		return
	}
	// A table gets its shards while they leave a sixteenth of the memory
	// free, one shard otherwise; sweeps make room for an eighth.
	n, slack := shards, m.budget.Max()/16
	if !m.budget.Fits(memtable.Cost(t.key.p, m.maxKeys, n)+slack) && (len(m.tables) >= m.sweepAt || m.made >= m.budget.Held()/2) {
		m.freeDrained(memtable.Cost(t.key.p, m.maxKeys, n) + 2*slack)
	}
	if !m.budget.Fits(memtable.Cost(t.key.p, m.maxKeys, n) + slack) {
		n = 1
	}
	need := memtable.Cost(t.key.p, m.maxKeys, n) + entryBytes(t.key)
	if !m.makeRoom(need) {
		m.freeDrained(need + 2*slack) // tables of no keys: fold them
	}
	m.made += need
	mt := memtable.New(t.key.p, m.maxKeys, n, m.budget)
	if m.tables[t.key] == nil {
		m.budget.Charge(entryBytes(t.key))
	}
	if f, ok := m.folded[t.key]; ok {
		mt.SetFloor(f)
		delete(m.folded, t.key)
		m.budget.Charge(-foldedBytes(t.key))
	}
	l := &live{id: m.nextID, t: mt}
	if source := m.sourceOf(t); source != nil {
		mt.SetSourced(true)
		l.source.Store(source)
	}
	t.cur.Store(l)
	m.nextID++
	m.tables[t.key] = t
}

// freeDrained frees every table that holds nothing undrained at the latest
// time of its own ops, then, while the memory has no room for need more
// bytes, folds the tables of at most foldKeys keys. revive runs it again
// once the tables left have grown by half, or tables whose fixed parts
// take half the memory held have been made since, so that it costs O(1)
// per table made (and per shard). The caller holds m.mu.
func (m *Store) freeDrained(need int64) {
	before := len(m.tables)
	last := make(map[string]int64) // by the name of a folded table
	for k := range m.folded {
		last[k.name] = 0
	}
	for k, t := range m.tables {
		mt := t.cur.Load().t
		if l, ok := last[k.name]; ok {
			last[k.name] = max(l, mt.Last())
		}
		if mt.Close() {
			m.forgetTable(k)
			m.budget.Charge(-entryBytes(k))
		}
	}
	if len(m.tables)*4 < before {
		m.tables = maps.Clone(m.tables) // Go maps do not shrink
	}
	m.dropFreedSources()
	m.dropFolded(last)
	for k, t := range m.tables {
		if m.budget.Fits(need) {
			break
		}
		if f, ok := t.cur.Load().t.Fold(foldKeys); ok {
			m.forgetTable(k)
			m.budget.Charge(-entryBytes(k))
			m.folded[k] = f
			m.budget.Charge(foldedBytes(k))
		}
	}
	m.sweepAt = len(m.tables) + max(len(m.tables)/2, 16)
	m.made = 0
}

// dropFolded drops the record of every folded table whose state has
// drained at last[name], the latest time of an op on the tables of its
// name (the same limiter, so the same clock). The caller holds m.mu.
func (m *Store) dropFolded(last map[string]int64) {
	before := len(m.folded)
	defer func() {
		if len(m.folded)*4 < before {
			m.folded = maps.Clone(m.folded) // Go maps do not shrink
		}
	}()
	for k, f := range m.folded {
		now, p := last[k.name], k.p
		if s := p.Recall(f, now); p.ResetAt(&s) <= now {
			delete(m.folded, k)
			m.budget.Charge(-foldedBytes(k))
		}
	}
}

// makeRoom sheds keys of up to 64 tables, in no particular order, until
// the store's memory has room for need more bytes (a table's fixed parts),
// and reports whether it has. The caller holds m.mu.
func (m *Store) makeRoom(need int64) bool {
	tried := 0
	for _, t := range m.tables {
		if m.budget.Fits(need) || tried == 64 {
			break
		}
		t.cur.Load().t.Shed(m.budget.Held() + need - m.budget.Max())
		tried++
	}
	return m.budget.Fits(need)
}

// foldKeys is the most keys of a table that freeDrained folds: a table of
// few keys (such as an Envoy limit override's) costs far more than its
// keys, and folding them all into one state denies little.
const foldKeys = 4

// entryBytes is what a table costs the store besides its memtable, as
// the budget counts it: its map entry (with the map's slack), its handle
// and its name.
func entryBytes(k tableKey) int64 { return 160 + int64(len(k.name)) }

// foldedBytes is what a folded table holds, as the budget counts it: its
// map entry (with the map's slack), its name and its Shadow.
func foldedBytes(k tableKey) int64 { return 160 + int64(len(k.name)) }

// Local implements store.Local: the state is in this process, and
// floodgate.AllowEach decides on it check by check.
func (m *Store) Local() {}

// Stats counts what a memory store holds and dropped.
type Stats struct {
	Keys      int    // keys held, over all tables
	Tables    int    // tables held
	Bytes     int64  // bytes held, as the bound on memory counts them
	MaxBytes  int64  // the bound on memory
	Drained   uint64 // keys dropped because their state had drained
	Evictions uint64 // keys evicted to stay within maxKeys or MaxBytes
}

// Stats returns the store's counts.
func (m *Store) Stats() Stats {
	m.mu.Lock()
	tables := make([]*table, 0, len(m.tables))
	for _, t := range m.tables {
		tables = append(tables, t)
	}
	m.mu.Unlock()
	st := Stats{Tables: len(tables), Bytes: m.budget.Held(), MaxBytes: m.budget.Max()}
	for _, t := range tables {
		s := t.cur.Load().t.Stats()
		st.Keys += s.Keys
		st.Drained += s.Drained
		st.Evictions += s.Evictions
	}
	return st
}

// table is a handle on a limiter's table. The store may free the memtable
// of a table that holds nothing undrained; the handle then gets a new one
// (or the one another handle of its key got) when next used.
type table struct {
	store *Store
	key   tableKey
	cur   atomic.Pointer[live]
}

// policy returns the policy of t, a table of m (store.Check's question).
func (m *Store) policy(t store.Table) (*algo.Policy, bool) {
	mt, ok := t.(*table)
	if !ok || mt.store != m {
		return nil, false
	}
	return &mt.key.p, true
}

func (t *table) Decide(ctx context.Context, key string, now, n int64) (algo.Decision, error) {
	for {
		d, err := t.cur.Load().t.Decide(key, now, n)
		switch err {
		case memtable.ErrMissing:
			return t.decideMissing(ctx, key, now, n)
		case memtable.ErrClosed:
			t.renew()
			continue
		}
		return d, err
	}
}

// put puts key's state s, as of now.
func (t *table) put(key string, s algo.State, now int64) {
	for {
		mt := t.cur.Load().t
		h := mt.Hash(key)
		sh := mt.Shard(h)
		mt.Lock(sh)
		if !mt.Closed() {
			mt.Store(h, key, s, now)
			mt.Unlock(sh)
			return
		}
		mt.Unlock(sh)
		t.renew()
	}
}

// renew revives t after its memtable was freed.
func (t *table) renew() {
	m := t.store
	m.mu.Lock()
	defer m.mu.Unlock()
	if t.cur.Load().t.Closed() {
		m.revive(t)
	}
}

// ApplyEach implements store.Store: it carries out the ops one after
// another, each an Apply of its own. Its one partition never fails apart
// (store.ErrPartialFailure): it stops at the first op whose Apply fails,
// for a context that ended.
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
	for {
		tables, unlock := m.lockAll(ops)
		if tables == nil {
			continue // a table was freed meanwhile, and is renewed
		}
		err := apply(ops, tables)
		unlock()
		return err
	}
}

// lockAll locks the shards of every op's key, and of the tables it may be
// converted from (live.source), in one global order (table, then shard),
// and returns each op's memtable and the function that
// unlocks them; or nil, after renewing any table freed since the ops named
// it.
func (m *Store) lockAll(ops []store.Op) ([]*live, func()) {
	type lock struct {
		l     *live
		shard int
	}
	tables := make([]*live, len(ops))
	locks := make([]lock, 0, len(ops))
	for i := range ops {
		l := ops[i].Table.(*table).cur.Load()
		tables[i] = l
		locks = append(locks, lock{l, l.t.Shard(l.t.Hash(ops[i].Key))})
		if x := l.source.Load(); x != nil {
			locks = append(locks, lock{x, x.t.Shard(x.t.Hash(ops[i].Key))})
		}
	}
	slices.SortFunc(locks, func(a, b lock) int {
		return cmp.Or(cmp.Compare(a.l.id, b.l.id), cmp.Compare(a.shard, b.shard))
	})
	locks = slices.Compact(locks)
	for _, l := range locks {
		l.l.t.Lock(l.shard)
	}
	unlock := func() {
		for _, l := range locks {
			l.l.t.Unlock(l.shard)
		}
	}
	for i := range ops {
		if tables[i].t.Closed() {
			unlock()
			for j := range ops {
				ops[j].Table.(*table).renew()
			}
			return nil, nil
		}
	}
	return tables, unlock
}

// apply carries out ops, whose memtables are tables, with their shards
// locked, and undoes everything when an OpDecide or OpSchedule is denied
// or an op fails.
func apply(ops []store.Op, tables []*live) error {
	type undo struct {
		t   *memtable.Table
		h   uint64
		key string
		s   algo.State
	}
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
			u.t.Store(u.h, u.key, u.s, 0)
		}
	}
	denied := false
	for i := range ops {
		op := &ops[i]
		t := tables[i].t
		h := t.Hash(op.Key)
		p := t.Policy()
		s, held := tables[i].load(h, op.Key, op.Now)
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
		t.Store(h, op.Key, s, op.Now)
	}
	if denied {
		rollback()
	}
	return nil
}
