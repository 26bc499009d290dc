package memtable

import "github.com/floodgate/floodgate/algo"

// Entry is one key's state, copied out of a Table by AppendEntries.
type Entry struct {
	Key   string
	State algo.State
}

// Shards returns the number of the table's shards, the indexes that
// AppendEntries takes.
func (t *Table) Shards() int { return len(t.shards) }

// AppendEntries appends to dst a copy of every key of shard i whose state
// has not drained at now (a state that shares nothing with the table), and
// returns the extended slice. It holds the shard's lock while it copies, and
// only then: keys of other shards may change meanwhile.
func (t *Table) AppendEntries(dst []Entry, i int, now int64) []Entry {
	sh := &t.shards[i]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if t.log {
		for k, s := range sh.logs {
			if t.p.ResetAt(s) > now {
				dst = append(dst, Entry{Key: k, State: s.Clone()})
			}
		}
		return dst
	}
	alg := t.p.Algorithm()
	var buf [12]byte
	for j := range sh.slots {
		if !sh.slots[j].live() {
			continue
		}
		s := sh.cell(j).State(alg)
		if t.p.ResetAt(&s) > now {
			dst = append(dst, Entry{Key: string(sh.keyOf(&sh.slots[j], &buf)), State: s})
		}
	}
	return dst
}
