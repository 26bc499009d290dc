package filestore

import (
	"bytes"
	"fmt"
	"time"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/internal/tablename"
	"github.com/floodgate/floodgate/store"
	bolt "go.etcd.io/bbolt"
)

// txn is the work of one read-write transaction: the calls' ops carried
// out on the keys' states in memory, then the changed states written.
type txn struct {
	store *Store
	tx    *bolt.Tx
	slots map[slotKey]*slot
	// latest maps the bucket of each table an op used to the latest time
	// of its ops (other than resets): the time its sweep goes by.
	latest map[string]int64
	// begun is the id of the last transaction committed before this one;
	// committed says whether this one was.
	begun     uint64
	committed bool
	denied    []slotKey  // the keys of the decisions it denied (deny cache)
	swept     []sweptKey // the keys its sweep deleted
}

type slotKey struct {
	t   *table
	key string
}

// slot is one key's state in a transaction.
type slot struct {
	t       *table
	key     string
	stored  []byte     // the value in the file (a copy), nil when absent
	s       algo.State // the state after the calls carried out so far
	err     error      // the stored value is not a state of t's policy
	changed bool       // a call went through on the key
	horizon int64      // when absent: its table's horizon (keepHorizons)
}

// slot returns key's slot in t, reading its state from the file the first
// time.
func (x *txn) slot(t *table, key string) *slot {
	k := slotKey{t, key}
	if sl := x.slots[k]; sl != nil {
		return sl
	}
	sl := &slot{t: t, key: key}
	x.slots[k] = sl
	b := x.tx.Bucket(t.bucket)
	if b == nil {
		return sl
	}
	v := b.Get(storedKey(key))
	if v == nil {
		sl.horizon = x.horizon(t.bucket, storedKey(key))
		return sl
	}
	sl.stored = bytes.Clone(v)
	err := sl.s.UnmarshalBinary(sl.stored)
	// The encoding's second byte is the algorithm (algo.State.AppendBinary).
	if err == nil && sl.stored[1] != byte(t.policy.Algorithm()) {
		err = fmt.Errorf("a state of algorithm %d", sl.stored[1])
	}
	if err != nil {
		sl.s = algo.State{}
		sl.err = fmt.Errorf("filestore: key %q of table %q: %w: %w", key, t.bucket, ErrCorrupt, err)
	}
	return sl
}

// carry carries out a call's ops as Store.Apply describes, on the states
// the earlier calls of the transaction left, and keeps the new states when
// the call went through: no op failed and none was denied. A state that has
// drained as of its op's time is dropped, as the memory store drops it.
// A key whose stored value is corrupt fails the call, unless the call's
// first op on it is a reset.
func (x *txn) carry(ops []store.Op) error {
	var buf [4]work
	ws := buf[:0]
	denied := false
	for i := range ops {
		op := &ops[i]
		t := op.Table.(*table)
		w := indexOf(ws, t, op.Key)
		if w < 0 {
			wk, err := x.workOf(t, op)
			if err != nil {
				return err
			}
			ws, w = append(ws, wk), len(ws)
		}
		s := &ws[w].s
		if beyondHorizon(op, &t.policy, ws[w].sl, s) {
			denied = true
			continue
		}
		ok, err := op.Carry(&t.policy, s)
		if err != nil {
			return fmt.Errorf("filestore: op %d on %q: %w", i, op.Key, err)
		}
		if op.Kind != store.OpReset { // a reset's time goes unchecked and unused
			x.note(t, op.Now)
		}
		if !ok {
			denied = true
			continue
		}
		if t.policy.ResetAt(s) <= op.Now {
			*s = algo.State{}
		}
	}
	if denied {
		return nil
	}
	for _, w := range ws {
		w.sl.s, w.sl.changed, w.sl.err = w.s, true, nil
	}
	return nil
}

// work is a key's state while a call's ops are carried out on it.
type work struct {
	sl *slot
	s  algo.State
}

// indexOf returns the index in ws of key of table t, or -1.
func indexOf(ws []work, t *table, key string) int {
	for j, w := range ws {
		if w.sl.t == t && w.sl.key == key {
			return j
		}
	}
	return -1
}

// workOf returns the state of op's key as the call starts on it: its
// slot's state, a former policy's converted (see formerState) when the
// file holds none, or the initial state for a reset of a corrupt value;
// a corrupt value fails any other op.
func (x *txn) workOf(t *table, op *store.Op) (work, error) {
	sl := x.slot(t, op.Key)
	s := sl.s.Clone()
	switch {
	case sl.err != nil && op.Kind != store.OpReset:
		return work{}, sl.err
	case sl.err != nil:
		s = algo.State{} // a reset needs no state: it is the way to recover
	case sl.stored == nil && !sl.changed && op.Kind != store.OpReset:
		s = x.formerState(t, op.Key, op.Now)
	}
	return work{sl, s}, nil
}

// beyondHorizon reports whether op spends units of a key that the sweep
// may have deleted before it had drained at op's time (its slot's horizon
// is later), and if so refuses it until then: a key missing from the file,
// that no call of the transaction has yet spent.
func beyondHorizon(op *store.Op, p *algo.Policy, sl *slot, s *algo.State) bool {
	if sl.horizon <= op.Now || sl.stored != nil || sl.changed || *s != (algo.State{}) ||
		(op.Kind != store.OpDecide && op.Kind != store.OpSchedule) || op.N <= 0 || op.N > p.Burst() {
		return false
	}
	wait := time.Duration(sl.horizon - op.Now)
	op.Result = store.Result{Decision: algo.Decision{RetryAfter: wait, ResetAfter: wait}, At: op.Now}
	return true
}

// noteDenied records the keys of ops, a call carried out without error,
// whose decisions were denied.
func (x *txn) noteDenied(ops []store.Op) {
	for i := range ops {
		if op := &ops[i]; op.Kind == store.OpDecide && !op.Result.Decision.Allowed {
			x.denied = append(x.denied, slotKey{op.Table.(*table), op.Key})
		}
	}
}

// note records that an op on t used the time now.
func (x *txn) note(t *table, now int64) {
	if x.latest == nil {
		x.latest = make(map[string]int64)
	}
	if at, ok := x.latest[string(t.bucket)]; !ok || now > at {
		x.latest[string(t.bucket)] = now
	}
}

// write puts the changed states in the file, deletes the dropped ones, and
// reports whether the file changed.
func (x *txn) write() (dirty bool, err error) {
	var emptied [][]byte
	for _, sl := range x.slots {
		if !sl.changed {
			continue
		}
		k := storedKey(sl.key)
		if sl.s == (algo.State{}) {
			if sl.stored == nil {
				continue
			}
			b := x.tx.Bucket(sl.t.bucket)
			if err := b.Delete(k); err != nil {
				return false, fmt.Errorf("deleting key %q of table %q: %w", sl.key, sl.t.bucket, err)
			}
			dirty = true
			emptied = append(emptied, sl.t.bucket)
			continue
		}
		v, err := sl.s.MarshalBinary()
		if err != nil {
			return false, fmt.Errorf("encoding key %q of table %q: %w", sl.key, sl.t.bucket, err)
		}
		if bytes.Equal(v, sl.stored) {
			continue
		}
		b, err := x.tx.CreateBucketIfNotExists(sl.t.bucket)
		if err == nil {
			err = b.Put(k, v)
		}
		if err != nil {
			return false, fmt.Errorf("writing key %q of table %q: %w", sl.key, sl.t.bucket, err)
		}
		dirty = true
	}
	return dirty, x.dropEmpty(emptied)
}

// has reports whether key of the bucket named bucket is one of the
// transaction's.
func (x *txn) has(bucket, key []byte) bool {
	for k := range x.slots {
		if bytes.Equal(k.t.bucket, bucket) && isStored(key, k.key) {
			return true
		}
	}
	return false
}

// isStored reports whether stored is storedKey(key).
func isStored(stored []byte, key string) bool {
	if key == "" || key[0] == 0 {
		return len(stored) == len(key)+1 && stored[0] == 0 && string(stored[1:]) == key
	}
	return string(stored) == key
}

// policyOf returns the policy of the table whose bucket is named name, or
// nil for a bucket of no table (the store's own, or another program's).
// The caller holds s.mu.
func (s *Store) policyOf(name []byte) *algo.Policy {
	if p, ok := s.policies[string(name)]; ok {
		return p
	}
	var pp *algo.Policy
	if !bytes.Equal(name, metaBucket) {
		if p, ok := tablename.PolicyOf(string(name)); ok {
			pp = &p
		}
	}
	if len(s.policies) >= maxPolicies {
		clear(s.policies)
	}
	s.policies[string(name)] = pp
	return pp
}

// maxPolicies bounds the bucket names whose policies a Store remembers.
const maxPolicies = 1024

// dropEmpty deletes those of buckets that hold no key.
func (x *txn) dropEmpty(buckets [][]byte) error {
	for _, name := range buckets {
		b := x.tx.Bucket(name)
		if b == nil {
			continue
		}
		if k, _ := b.Cursor().First(); k != nil {
			continue
		}
		if err := x.tx.DeleteBucket(name); err != nil {
			return fmt.Errorf("deleting the empty table %q: %w", name, err)
		}
		if err := x.forgetClock(name); err != nil {
			return err
		}
	}
	return nil
}
