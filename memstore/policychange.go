package memstore

import (
	"context"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/store"
)

// sourceOf returns the live table that t, whose memtable is being made,
// converts missing keys from: the table made last under t's name, when its
// policy is another, or else the one t had before its memtable was freed.
// It records t as its name's newest. The caller holds m.mu.
func (m *Store) sourceOf(t *table) *live {
	defer func() { m.newest[t.key.name] = t.key }()
	if k, ok := m.newest[t.key.name]; ok && k != t.key && m.tables[k] != nil {
		return m.tables[k].cur.Load()
	}
	if old := t.cur.Load(); old != nil {
		if src := old.source.Load(); src != nil && !src.t.Closed() {
			return src
		}
	}
	return nil
}

// dropFreedSources lets go of the sources that were freed, which held
// nothing undrained, so that the memory of a freed table is not held by
// the table made after it. The caller holds m.mu.
func (m *Store) dropFreedSources() {
	for _, t := range m.tables {
		l := t.cur.Load()
		if src := l.source.Load(); src != nil && src.t.Closed() {
			l.source.Store(nil)
			l.t.SetSourced(false)
		}
	}
}

// forgetTable removes the table of k from m's map, and as its name's
// newest. The caller holds m.mu.
func (m *Store) forgetTable(k tableKey) {
	delete(m.tables, k)
	if m.newest[k.name] == k {
		delete(m.newest, k.name)
	}
}

// load returns key's state in l at now, and whether l holds it, as
// memtable.Table.Load does; for a key l does not hold, the state of the
// its state in l's source, if that holds it, converted to l's policy
// (algo.Policy.Convert), joined with the state the key would start from
// in l (its shadow). The source keeps its state, so that a limiter still
// using the former policy keeps deciding on it. The caller holds the
// key's shard in l and in its source (lockAll).
func (l *live) load(h uint64, key string, now int64) (algo.State, bool) {
	s, held := l.t.Load(h, key, now)
	src := l.source.Load()
	if held || src == nil || src.t.Closed() { // a freed source held nothing undrained
		return s, held
	}
	old, ok := src.t.Load(src.t.Hash(key), key, now)
	if !ok {
		return s, false
	}
	p := l.t.Policy()
	c, err := p.Convert(src.t.Policy(), &old, now)
	if err != nil || p.ResetAt(&s) <= now {
		return c, false // an error is the zero State: now was checked by the op
	}
	var sh algo.Shadow
	p.Forget(&sh, &c, now)
	p.Forget(&sh, &s, now)
	return p.Recall(sh, now), false
}

// decideMissing decides for a key that t's sourced memtable does not hold
// (memtable.ErrMissing): an Apply of one op, which locks the key's shards
// in t and its sources and converts the key's state from them (load).
func (t *table) decideMissing(ctx context.Context, key string, now, n int64) (algo.Decision, error) {
	ops := []store.Op{{Kind: store.OpDecide, Table: t, Key: key, Now: now, N: n}}
	if err := t.store.Apply(ctx, ops); err != nil {
		return algo.Decision{}, err
	}
	return ops[0].Result.Decision, ops[0].Result.Err
}
