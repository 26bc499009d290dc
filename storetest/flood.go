package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/memstore"
	"github.com/floodgate/floodgate/store"
)

// FloodPolicies are the policies a Flood draws from: every algorithm, at
// limits small enough that most decisions are denied; and byte rates
// whose counts, and states, pass 2^32 (a 10 Gbit/s link and faster),
// decided in units of a quarter of their bursts.
var FloodPolicies = []string{"token-bucket 5/1s", "token-bucket 3/1s burst=4", "leaky-bucket 3/1s capacity=4",
	"fixed-window 4/1s", "sliding-window 4/1s", "sliding-log 3/1s",
	"token-bucket 1250000000/1s burst=5000000000", "leaky-bucket 8000000000/1s capacity=32000000000",
	"fixed-window 5000000000/1s", "sliding-window 5000000000/1s"}

// A Flood is a random trace, for testing a store's deny cache, of mostly
// denied decisions on two keys, the time stepping by a few milliseconds
// and now and then past a window, with admissions, reservations (a
// schedule, then its refund), refunds, resets, ApplyEach and reloads
// (the limiter's table swapped for one of another policy): each Step
// carries out one op on the store under test and on a memory store, and
// fails the test unless every decision, instant, stamp and error agree.
type Flood struct {
	t       testing.TB
	ctx     context.Context
	rng     *rand.Rand
	st      store.Store
	mem     store.Store
	pols    []string // the policies drawn from
	pol     algo.Policy
	unit    int64       // the cost of one unit of the trace: 1, or a quarter of a burst above 2^32
	ts, tm  store.Table // the store's table, memory's
	now     int64
	stampsS map[string]algo.Stamp // each key's last admission, in the store
	stampsM map[string]algo.Stamp // and in memory
	// Hits, when set, counts the decisions the store under test answered
	// from its cache so far; BigHits then counts those made while the
	// unit was above 1 (counts above 2^32).
	Hits    func() uint64
	BigHits uint64
}

// NewFlood returns the Flood of seed on st, starting at t0 plus seed
// milliseconds, drawing its policies from FloodPolicies.
func NewFlood(t testing.TB, st store.Store, seed uint64, t0 int64) *Flood {
	return NewFloodOf(t, st, seed, t0, FloodPolicies)
}

// NewFloodOf is NewFlood drawing its policies from pols.
func NewFloodOf(t testing.TB, st store.Store, seed uint64, t0 int64, pols []string) *Flood {
	f := &Flood{t: t, ctx: context.Background(), rng: rand.New(rand.NewPCG(seed, 7)), st: st, mem: memstore.New(0), pols: pols,
		now: t0 + int64(seed)*1e6, stampsS: map[string]algo.Stamp{}, stampsM: map[string]algo.Stamp{}}
	f.reload()
	return f
}

// reload swaps the limiter's tables for a policy drawn anew.
func (f *Flood) reload() {
	f.pol = algo.MustParsePolicy(f.pols[f.rng.IntN(len(f.pols))])
	f.unit = 1
	if f.pol.Burst() > 1<<32 {
		f.unit = f.pol.Burst() / 4
	}
	var err error
	name := "flood " + f.pol.String() // apart: a policy change under one name is PolicyChange's
	if f.ts, err = f.st.Table(name, f.pol); err != nil {
		f.t.Fatal(err)
	}
	if f.tm, err = f.mem.Table(name, f.pol); err != nil {
		f.t.Fatal(err)
	}
	clear(f.stampsS)
	clear(f.stampsM)
}

// Step draws the time and one op, carries it out in both, and compares.
func (f *Flood) Step() {
	f.t.Helper()
	if f.unit > 1 && f.Hits != nil {
		before := f.Hits()
		defer func() { f.BigHits += f.Hits() - before }()
	}
	switch r := f.rng.IntN(100); {
	case r < 3:
		f.now += int64(f.pol.Period()) + f.rng.Int64N(int64(time.Second))
	case r < 60:
		f.now += f.rng.Int64N(int64(5 * time.Millisecond))
	}
	key := fmt.Sprint("k", f.rng.IntN(2))
	op := store.Op{Kind: store.OpDecide, Key: key, Now: f.now, N: (1 + f.rng.Int64N(2)) * f.unit}
	switch r := f.rng.IntN(100); {
	case r < 55:
		f.decide(key, op.N)
		return
	case r < 75: // an Apply of one decision
	case r < 82:
		op.Kind, op.MaxWait = store.OpSchedule, time.Duration(f.rng.Int64N(int64(time.Second)))
	case r < 88:
		op.Kind, op.N = store.OpRefund, f.unit
	case r < 92:
		op.Kind = store.OpReset
	case r < 97:
		f.each()
		return
	default:
		f.reload()
		return
	}
	f.run([]store.Op{op}, false)
}

// decide decides n units on key through Table.Decide.
func (f *Flood) decide(key string, n int64) {
	f.t.Helper()
	ds, errS := f.ts.Decide(f.ctx, key, f.now, n)
	dm, errM := f.tm.Decide(f.ctx, key, f.now, n)
	if ds != dm || !SameErrors(errS, errM) {
		f.t.Fatalf("%v, %s, %d at %d: store %+v %v, memory %+v %v", f.pol, key, n, f.now, ds, errS, dm, errM)
	}
}

// each carries out one to four decisions, now and then a reset, of
// drawn keys in one ApplyEach.
func (f *Flood) each() {
	ops := make([]store.Op, 1+f.rng.IntN(4))
	for i := range ops {
		ops[i] = store.Op{Kind: store.OpDecide, Key: fmt.Sprint("k", f.rng.IntN(2)), Now: f.now, N: f.unit}
		if f.rng.IntN(5) == 0 {
			ops[i].Kind = store.OpReset
		}
	}
	f.run(ops, true)
}

// run carries out ops by Apply, or by ApplyEach when each is true.
func (f *Flood) run(ops []store.Op, each bool) {
	f.t.Helper()
	os, om := slices.Clone(ops), slices.Clone(ops)
	for i := range ops {
		os[i].Table, om[i].Table = f.ts, f.tm
		if ops[i].Kind == store.OpRefund {
			os[i].Stamp, om[i].Stamp = f.stampsS[ops[i].Key], f.stampsM[ops[i].Key]
		}
	}
	var errS, errM error
	if each {
		errS, errM = f.st.ApplyEach(f.ctx, os), f.mem.ApplyEach(f.ctx, om)
	} else {
		errS, errM = f.st.Apply(f.ctx, os), f.mem.Apply(f.ctx, om)
	}
	if !SameErrors(errS, errM) {
		f.t.Fatalf("%v at %d: store %v, memory %v", f.pol, f.now, errS, errM)
	}
	for i := range ops {
		rs, rm := os[i].Result, om[i].Result
		if rs.Decision != rm.Decision || rs.At != rm.At || rs.Stamp != rm.Stamp || !SameErrors(rs.Err, rm.Err) {
			f.t.Fatalf("%v, op %+v at %d: store %+v, memory %+v", f.pol, ops[i], f.now, rs, rm)
		}
		if rm.Decision.Allowed && ops[i].N > 0 && ops[i].Kind != store.OpRefund {
			f.stampsS[ops[i].Key], f.stampsM[ops[i].Key] = rs.Stamp, rm.Stamp
		}
	}
}
