package redisstore

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/internal/batch"
	"github.com/floodgate/floodgate/internal/tablename"
	"github.com/floodgate/floodgate/store"
	"github.com/redis/go-redis/v9"
)

// A policy change: a limiter that keeps its name and changes its policy
// keeps each key's spent units. Each policy's keys are apart (Store.Table),
// so a key that the new policy's table does not hold starts from its
// state under the name's former policies, converted (algo.Policy.Convert).
//
// Invariants:
//
//  1. A name's record, a Redis hash at recordKey, lists the policies its
//     tables had, each with the time (a process's wall clock, in ns) a
//     table of it last read the record; at most maxFormer other than the
//     reader's are used, the latest.
//  2. A table reads the record once, at its first call to Redis (learn),
//     adding its own policy in the same round trip. Its former tables are
//     those listed then.
//  3. A decision or schedule of a table with former tables is sent with
//     the CONVERT flag (lua/batch.lua): when Redis does not hold its key,
//     the script carries out nothing of the op's group, and the ops reply
//     MISSED (errMissed), with the time the script decided at.
//  4. The store then reads the key under each former policy, converts it
//     at that time, and sends the ops again, SEEDED with the conversion
//     that drains last (redo). A key that Redis holds by then keeps its
//     own state: a key is converted at most once while Redis holds it.
//  5. A key that Redis holds costs nothing more: the flag is a byte, and
//     the script reads no other key.

// The flags of an op's KIND, and the reply's code of an op not carried
// out, for a policy change (lua/batch.lua).
const (
	convertFlag = 16
	seededFlag  = 32
	codeMissed  = 3
)

// flagged returns an op's KIND, kind, with its flag, and its seed: SEEDED
// with seeds[i] when the op goes again after a miss (seeds not nil), else
// CONVERT.
func flagged(kind byte, seeds [][]byte, i int) (byte, []byte) {
	if seeds == nil {
		return kind | convertFlag, nil
	}
	return kind | seededFlag, seeds[i]
}

// maxFormer bounds the former policies a table converts from: a miss reads
// the key under each.
const maxFormer = 8

// errMissed marks an op that the script did not carry out (invariant 3);
// its Result.At holds the time the script decided at. No caller sees it.
var errMissed = errors.New("redisstore: a key to convert from a former policy")

// recordKey returns the Redis key of the record of the policies of the
// limiter named name (invariant 1), or "" for a limiter of a default name
// (its policy's own string), which no other policy shares. Table keys hold
// a ':' after the prefix, and an escaped name none, so no table key is a
// record.
func (s *Store) recordKey(name string, p algo.Policy) string {
	if name == p.String() {
		return ""
	}
	return s.cfg.prefix + tablename.Escape(name) + "@policies"
}

// learn makes t know its former tables (invariant 2): a round trip at
// its first call to Redis, none after, within ctx, the call's bound.
func (t *table) learn(ctx context.Context) error {
	if t.record == "" || t.former.Load() != nil {
		return nil
	}
	t.learning.Lock()
	defer t.learning.Unlock()
	if t.former.Load() != nil {
		return nil
	}
	var all *redis.MapStringStringCmd
	_, err := t.store.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, t.record, t.policy.String(), time.Now().UnixNano())
		all = p.HGetAll(ctx, t.record)
		return nil
	})
	if err != nil {
		return t.store.callErr(fmt.Errorf("reading the policies of %s: %w", t.record, err))
	}
	former, err := t.formerTables(all.Val())
	if err != nil {
		return err
	}
	t.former.Store(&former)
	return nil
}

// formerTables returns the tables of the policies of t's name's record,
// record, other than t's: the latest maxFormer (invariant 1).
func (t *table) formerTables(record map[string]string) ([]*table, error) {
	type listed struct {
		p  algo.Policy
		at int64
	}
	var ps []listed
	for f, v := range record {
		p, err := algo.ParsePolicy(f)
		at, err2 := strconv.ParseInt(v, 10, 64)
		if err != nil || err2 != nil || p == t.policy {
			continue // another version's field is its own to read
		}
		ps = append(ps, listed{p, at})
	}
	slices.SortFunc(ps, func(a, b listed) int { return cmp.Compare(b.at, a.at) })
	var former []*table
	for _, l := range ps[:min(len(ps), maxFormer)] {
		f, err := t.store.Table(t.name, l.p)
		if err != nil {
			return nil, err
		}
		former = append(former, f.(*table))
	}
	return former, nil
}

// converts reports whether op, of t, goes with the CONVERT or SEEDED flag
// (invariant 3).
func (t *table) converts(op *store.Op) bool {
	if op.Kind != store.OpDecide && op.Kind != store.OpSchedule {
		return false
	}
	f := t.former.Load()
	return f != nil && len(*f) > 0
}

// redo carries out again the ops of calls that missed (invariant 4),
// through b, their batcher: it reads their keys under the former
// policies, then sends each call's missed ops, seeded, and copies their
// results to the call's. It returns an error when either fails as a whole.
func (s *Store) redo(ctx, bounded context.Context, b *batch.Batcher[work], calls []*call) error {
	var again []*call
	var from [][]int // for each of again, the indexes of its ops in its call's
	var of []*call
	for _, c := range calls {
		var idx []int
		for i := range c.Work.ops {
			if c.Err == nil && c.Work.ops[i].Result.Err == errMissed {
				idx = append(idx, i)
			}
		}
		if len(idx) == 0 {
			continue
		}
		r := &call{Work: work{slot: c.Work.slot, each: c.Work.each, ops: make([]store.Op, len(idx))}}
		for j, i := range idx {
			r.Work.ops[j] = c.Work.ops[i]
		}
		again, from, of = append(again, r), append(from, idx), append(of, c)
	}
	if len(again) == 0 {
		return nil
	}
	if err := s.seed(bounded, again); err != nil {
		return err
	}
	if err := b.DoAll(bounded, again); err != nil {
		return s.batchErr(ctx, err)
	}
	for k, r := range again {
		c := of[k]
		for j, i := range from[k] {
			c.Work.ops[i].Result = r.Work.ops[j].Result
		}
		c.Err = r.Err
	}
	return nil
}

// missedAny reports whether an op of c missed (invariant 3).
func missedAny(c *call) bool {
	for i := range c.Work.ops {
		if c.Work.ops[i].Result.Err == errMissed {
			return true
		}
	}
	return false
}

// formerRead is a read of an op's key under a former policy.
type formerRead struct {
	op   int // in its call's ops
	from *table
	cmd  redis.Cmder
}

// seed sets the seeds of calls' ops that convert: their keys' states
// under their names' former policies, read in one pipeline, converted at
// the time the script decided at, the one that drains last of each.
func (s *Store) seed(ctx context.Context, calls []*call) error {
	var reads [][]formerRead
	_, _ = s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, c := range calls {
			var rs []formerRead
			for i := range c.Work.ops {
				op := &c.Work.ops[i]
				t := op.Table.(*table)
				if !t.converts(op) {
					continue
				}
				for _, f := range *t.former.Load() {
					k := f.redisKey(op.Key)
					var cmd redis.Cmder
					if f.policy.Algorithm() == algo.SlidingLog {
						cmd = p.HGetAll(ctx, k)
					} else {
						cmd = p.Get(ctx, k)
					}
					rs = append(rs, formerRead{i, f, cmd})
				}
			}
			reads = append(reads, rs)
		}
		return nil
	})
	for _, rs := range reads {
		for _, r := range rs {
			// A reply, an error one too (redis.Nil: no key), is Redis's
			// word; else Redis did not answer, and a state may be unread.
			var reply redis.Error
			if err := r.cmd.Err(); err != nil && !errors.As(err, &reply) {
				return s.callErr(fmt.Errorf("reading keys under former policies: %w", err))
			}
		}
	}
	for k, c := range calls {
		c.Work.seeds = seedsOf(c.Work.ops, reads[k])
	}
	return nil
}

// seedsOf returns the seeds of ops (invariant 4), from reads, for the
// script (lua/batch.lua's SEED): an op that does not convert has none.
func seedsOf(ops []store.Op, reads []formerRead) [][]byte {
	seeds := make([][]byte, len(ops))
	best := make([]algo.State, len(ops))
	for _, r := range reads {
		op := &ops[r.op]
		t := op.Table.(*table)
		old, ok := formerState(r.from, r.cmd)
		if !ok {
			continue // absent, or not a state: its own table's to report
		}
		c, err := t.policy.Convert(&r.from.policy, &old, op.Result.At)
		if err == nil && t.policy.ResetAt(&c) > t.policy.ResetAt(&best[r.op]) {
			best[r.op] = c
		}
	}
	for i := range ops {
		if t := ops[i].Table.(*table); t.converts(&ops[i]) {
			seeds[i] = appendSeed(nil, t.policy.Algorithm(), &best[i])
		}
	}
	return seeds
}

// formerState returns the state that cmd read of a key of f, and whether
// it holds one.
func formerState(f *table, cmd redis.Cmder) (algo.State, bool) {
	var st algo.State
	var err error
	switch cmd := cmd.(type) {
	case *redis.StringCmd:
		v, e := cmd.Result()
		if e != nil {
			return st, false
		}
		st, err = stateOf(f.policy.Algorithm(), v)
	case *redis.MapStringStringCmd:
		h, e := cmd.Result()
		if e != nil || len(h) == 0 {
			return st, false
		}
		st, err = logOf(h)
	}
	return st, err == nil
}

// appendSeed appends st, a state of algorithm a, to b as the script reads
// a SEED (lua/batch.lua): the algorithm, then a log's entries, or T as
// seconds and nanoseconds, X and Y, each a double.
func appendSeed(b []byte, a algo.Algorithm, st *algo.State) []byte {
	enc, _ := st.MarshalBinary() // a version byte, the algorithm, varints
	v := enc[2:]
	next := func() int64 {
		x, n := binary.Uvarint(v)
		v = v[n:]
		return int64(x)
	}
	if a == algo.SlidingLog {
		b = append(b, byte(a))
		n := 0
		if enc[1] == byte(a) {
			n = int(next())
		}
		b = binary.LittleEndian.AppendUint32(b, uint32(n))
		var t int64
		for range n {
			t += next()
			b = appendDoubles(b, t/1e9, t%1e9, next())
		}
		return b
	}
	t, x, y := next(), next(), next()
	return appendDoubles(append(b, enc[1]), t/1e9, t%1e9, x, y)
}
