// Package storetest is the conformance suite of the store contract
// (package store), like testing/slogtest for slog handlers: every store
// (memory, file, Redis, and the failsafe wrapper) runs it and so proves
// that it decides exactly as package algo does, for every operation,
// under concurrency, and that a caller who leaves early never races with
// the store. Each failure names the rule it broke.
//
// A store's test calls Run with a function that makes a new, empty store:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store { return mystore.New(...) })
//	}
//
// The golden vectors (Vectors) are shared with differential tests that
// need a fixed, checked trace; Differential and Traces compare a store
// with the memory store on random traces; Flaky is a store that fails on
// demand, for the tests of what stands in front of a store. SharedQueue
// checks that two stores on one backend keep one Limiter.Delay queue.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate/floodgate/memstore"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/store"
)

// Run runs every rule of the contract against stores made by newStore,
// each rule as a subtest on a fresh store.
func Run(t *testing.T, newStore func(t *testing.T) store.Store) {
	for _, r := range rules {
		t.Run(r.name, func(t *testing.T) {
			r.run(t, newStore(t))
		})
	}
}

type rule struct {
	name string
	run  func(t *testing.T, s store.Store)
}

var rules = []rule{
	{"vectors", testVectors},
	{"vectors-through-apply", testVectorsApply},
	{"keys-and-tables-independent", testIndependence},
	{"denial-and-peek-change-nothing", testDenialChangesNothing},
	{"cost-above-burst", testCostAboveBurst},
	{"bad-input-is-an-error-and-changes-nothing", testBadInput},
	{"all-or-nothing", testAllOrNothing},
	{"all-or-nothing-same-key", testAllOrNothingSameKey},
	{"refund", testRefund},
	{"cancel-never-over-admits", testCancel},
	{"schedule", testSchedule},
	{"reset", testReset},
	{"foreign-table", testForeignTable},
	{"one-key-concurrent-exact", testConcurrentExact},
	{"apply-concurrent-no-deadlock", testApplyConcurrent},
	{"apply-each", testApplyEach},
	{"callers-leaving-early", testLeavingEarly},
}

var ctx = context.Background()

// t0 is a realistic time: 2026-11-22 in nanoseconds since the Unix epoch.
const t0 = int64(1795305600) * int64(time.Second)

func table(t *testing.T, s store.Store, name, policy string) store.Table {
	t.Helper()
	tb, err := s.Table(name, algo.MustParsePolicy(policy))
	if err != nil {
		t.Fatalf("Table(%q, %q): %v", name, policy, err)
	}
	return tb
}

func decide(t *testing.T, tb store.Table, key string, now, n int64) algo.Decision {
	t.Helper()
	d, err := tb.Decide(ctx, key, now, n)
	if err != nil {
		t.Fatalf("Decide(%q, %d, %d): %v", key, now, n, err)
	}
	return d
}

func apply(t *testing.T, s store.Store, ops []store.Op) {
	t.Helper()
	if err := s.Apply(ctx, ops); err != nil {
		t.Fatalf("Apply: %v", err)
	}
}

// peek returns a key's headroom without changing it.
func peek(t *testing.T, tb store.Table, key string, now int64) algo.Decision {
	t.Helper()
	return decide(t, tb, key, now, 0)
}

func testVectors(t *testing.T, s store.Store) {
	vs, err := Vectors()
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range vs {
		tb, err := s.Table(fmt.Sprintf("vector-%d", i), v.Policy)
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range v.Steps {
			got, err := tb.Decide(ctx, st.Key, st.T, st.N)
			if st.WantErr != errors.Is(err, algo.ErrCostExceedsBurst) || (err != nil && !st.WantErr) {
				t.Fatalf("vectors line %d (%v): %s: error %v", st.Line, v.Policy, formatStep(st), err)
			}
			if got != st.Want {
				t.Fatalf("vectors line %d (%v): %s: got %+v", st.Line, v.Policy, formatStep(st), got)
			}
		}
	}
}

// testVectorsApply sends every third vector's events through Apply.
func testVectorsApply(t *testing.T, s store.Store) {
	vs, err := Vectors()
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(vs); i += 3 {
		v := vs[i]
		tb, err := s.Table(fmt.Sprintf("apply-%d", i), v.Policy)
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range v.Steps {
			ops := []store.Op{{Kind: store.OpDecide, Table: tb, Key: st.Key, Now: st.T, N: st.N}}
			apply(t, s, ops)
			if st.WantErr != errors.Is(ops[0].Result.Err, algo.ErrCostExceedsBurst) {
				t.Fatalf("vectors line %d (%v) via Apply: %s: Op.Err %v", st.Line, v.Policy, formatStep(st), ops[0].Result.Err)
			}
			if ops[0].Result.Decision != st.Want {
				t.Fatalf("vectors line %d (%v) via Apply: %s: got %+v", st.Line, v.Policy, formatStep(st), ops[0].Result.Decision)
			}
		}
	}
}

func testIndependence(t *testing.T, s store.Store) {
	a := table(t, s, "a", "fixed-window 2/1m")
	b := table(t, s, "b", "fixed-window 2/1m")
	c := table(t, s, "c", "fixed-window 3/1m") // a policy change under one name is PolicyChange's
	for range 2 {
		decide(t, a, "k", t0, 1)
	}
	if d := decide(t, a, "k", t0, 1); d.Allowed {
		t.Fatalf("a third unit on a 2/1m key was admitted: %+v", d)
	}
	for _, x := range []struct {
		tb   store.Table
		key  string
		want int64
	}{{a, "other", 1}, {b, "k", 1}, {c, "k", 2}} {
		if d := decide(t, x.tb, x.key, t0, 1); !d.Allowed || d.Remaining != x.want {
			t.Errorf("state leaked between keys or tables: key %q got %+v, want admitted with %d remaining", x.key, d, x.want)
		}
	}
	// Keys that differ only in bytes a careless store might mangle.
	keys := []string{"", " ", "k ", "K", "k\x00", "k\n", "ключ", "{k}", "k:1", "k:1:"}
	for _, k := range keys {
		if d := decide(t, b, k, t0, 2); !d.Allowed {
			t.Fatalf("key %q: a fresh key denied: %+v (keys collide?)", k, d)
		}
	}
}

func testDenialChangesNothing(t *testing.T, s store.Store) {
	for _, pol := range []string{"token-bucket 3/1s burst=5", "leaky-bucket 3/1s", "sliding-log 3/1s", "sliding-window 3/1s", "fixed-window 3/1s"} {
		tb := table(t, s, "deny "+pol, pol)
		decide(t, tb, "k", t0, 3)
		before := peek(t, tb, "k", t0+1)
		for n := int64(1); n <= 3; n++ {
			if d := decide(t, tb, "k", t0+1, n); d.Allowed && n > before.Remaining {
				t.Fatalf("%s: admitted %d units with %d remaining", pol, n, before.Remaining)
			} else if d.Allowed {
				before = peek(t, tb, "k", t0+1)
				continue
			}
			if after := peek(t, tb, "k", t0+1); after != before {
				t.Fatalf("%s: a denial changed the state: peek %+v, then %+v", pol, before, after)
			}
		}
	}
}

func testCostAboveBurst(t *testing.T, s store.Store) {
	tb := table(t, s, "burst", "token-bucket 10/1s burst=4")
	d, err := tb.Decide(ctx, "k", t0, 5)
	if !errors.Is(err, algo.ErrCostExceedsBurst) || d.Allowed || d.RetryAfter != algo.Never {
		t.Fatalf("cost 5, burst 4: got %+v, %v; want a denial with RetryAfter Never and ErrCostExceedsBurst", d, err)
	}
	if d := peek(t, tb, "k", t0); d.Remaining != 4 {
		t.Fatalf("a never-admissible request changed the state: %+v", d)
	}
}

func testBadInput(t *testing.T, s store.Store) {
	tb := table(t, s, "bad", "sliding-log 2/1s")
	decide(t, tb, "k", t0, 1)
	for _, c := range []struct {
		now, n int64
		want   error
	}{
		{t0, -1, algo.ErrInvalidCost},
		{-1, 1, algo.ErrInvalidTime},
		{algo.MaxTime + 1, 1, algo.ErrInvalidTime},
	} {
		if _, err := tb.Decide(ctx, "k", c.now, c.n); !errors.Is(err, c.want) {
			t.Errorf("Decide(now %d, n %d): error %v, want %v", c.now, c.n, err, c.want)
		}
		ops := []store.Op{{Kind: store.OpDecide, Table: tb, Key: "other", Now: t0, N: 1},
			{Kind: store.OpDecide, Table: tb, Key: "k", Now: c.now, N: c.n}}
		if err := s.Apply(ctx, ops); !errors.Is(err, c.want) {
			t.Errorf("Apply(now %d, n %d): error %v, want %v", c.now, c.n, err, c.want)
		}
	}
	if d := peek(t, tb, "k", t0); d.Remaining != 1 {
		t.Fatalf("bad input changed the state: %+v", d)
	}
	if d := peek(t, tb, "other", t0); d.Remaining != 2 {
		t.Fatalf("a failed Apply left an earlier op's effect: %+v", d)
	}
}

func testAllOrNothing(t *testing.T, s store.Store) {
	user := table(t, s, "user", "token-bucket 5/1m")
	global := table(t, s, "global", "sliding-log 3/1m")
	decide(t, global, "all", t0, 3) // global exhausted
	ops := []store.Op{
		{Kind: store.OpDecide, Table: user, Key: "alice", Now: t0 + 1, N: 2},
		{Kind: store.OpDecide, Table: global, Key: "all", Now: t0 + 1, N: 1},
	}
	apply(t, s, ops)
	if !ops[0].Result.Decision.Allowed || ops[1].Result.Decision.Allowed {
		t.Fatalf("want the user limit to admit and the global one to deny, got %+v and %+v", ops[0].Result.Decision, ops[1].Result.Decision)
	}
	if d := peek(t, user, "alice", t0+1); d.Remaining != 5 {
		t.Fatalf("a denied combined check spent units on another limit: %+v", d)
	}
	ops = []store.Op{
		{Kind: store.OpDecide, Table: user, Key: "alice", Now: t0 + time.Minute.Nanoseconds(), N: 2},
		{Kind: store.OpDecide, Table: global, Key: "all", Now: t0 + time.Minute.Nanoseconds(), N: 1},
	}
	apply(t, s, ops)
	if !ops[0].Result.Decision.Allowed || !ops[1].Result.Decision.Allowed {
		t.Fatalf("want both limits to admit a minute later, got %+v and %+v", ops[0].Result.Decision, ops[1].Result.Decision)
	}
	if d := peek(t, user, "alice", t0+time.Minute.Nanoseconds()); d.Remaining != 3 {
		t.Fatalf("an admitted combined check did not spend: %+v", d)
	}
}

func testAllOrNothingSameKey(t *testing.T, s store.Store) {
	tb := table(t, s, "same", "fixed-window 3/1m")
	ops := []store.Op{
		{Kind: store.OpDecide, Table: tb, Key: "k", Now: t0, N: 2},
		{Kind: store.OpDecide, Table: tb, Key: "k", Now: t0, N: 2},
	}
	apply(t, s, ops)
	if !ops[0].Result.Decision.Allowed || ops[1].Result.Decision.Allowed {
		t.Fatalf("two ops of 2 on one 3/1m key: the second must see the first; got %+v, %+v", ops[0].Result.Decision, ops[1].Result.Decision)
	}
	if d := peek(t, tb, "k", t0); d.Remaining != 3 {
		t.Fatalf("a denied batch spent units: %+v", d)
	}
}

// testRefund checks OpRefund against algo.Policy.Refund on a local State.
func testRefund(t *testing.T, s store.Store) {
	for _, pol := range []string{"token-bucket 3/1s burst=5", "leaky-bucket 7/2s", "sliding-log 4/1s", "sliding-window 4/1s", "fixed-window 4/1s"} {
		p := algo.MustParsePolicy(pol)
		tb := table(t, s, "refund "+pol, pol)
		var local algo.State
		for i, step := range []struct {
			dt, n   int64
			refund  bool
			refundN int64
		}{{0, 2, false, 0}, {1e8, 2, true, 2}, {2e8, 1, false, 0}, {3e8, 2, true, 1}, {9e8, 1, true, 1}} {
			now := t0 + step.dt
			ops := []store.Op{{Kind: store.OpDecide, Table: tb, Key: "k", Now: now, N: step.n}}
			apply(t, s, ops)
			want, _ := p.Decide(&local, now, step.n)
			if ops[0].Result.Decision != want {
				t.Fatalf("%s step %d: got %+v, want %+v", pol, i, ops[0].Result.Decision, want)
			}
			if !want.Allowed {
				continue
			}
			stamp := p.StampOf(&local, now)
			if ops[0].Result.Stamp != stamp {
				t.Fatalf("%s step %d: Stamp %+v, want %+v", pol, i, ops[0].Result.Stamp, stamp)
			}
			if step.refund {
				later := now + 5e7
				apply(t, s, []store.Op{{Kind: store.OpRefund, Table: tb, Key: "k", Now: later, N: step.refundN, Stamp: ops[0].Result.Stamp}})
				if err := p.Refund(&local, stamp, later, step.refundN); err != nil {
					t.Fatal(err)
				}
				wantPeek, _ := p.Decide(&local, later, 0)
				if got := peek(t, tb, "k", later); got != wantPeek {
					t.Fatalf("%s step %d: after a refund of %d, peek %+v, want %+v", pol, i, step.refundN, got, wantPeek)
				}
			}
		}
	}
}

// testSchedule checks OpSchedule against algo.Policy.Schedule.
func testSchedule(t *testing.T, s store.Store) {
	for _, pol := range []string{"token-bucket 2/1s burst=2", "leaky-bucket 1/1h capacity=3", "fixed-window 2/1s"} {
		p := algo.MustParsePolicy(pol)
		tb := table(t, s, "schedule "+pol, pol)
		var local algo.State
		maxWait := 3 * p.Period() / time.Duration(p.Limit())
		for i := range 8 {
			now := t0 + int64(i)*1e6
			ops := []store.Op{{Kind: store.OpSchedule, Table: tb, Key: "k", Now: now, N: 1, MaxWait: maxWait}}
			apply(t, s, ops)
			want, at, err := p.Schedule(&local, now, 1, int64(maxWait))
			if err != nil {
				t.Fatal(err)
			}
			if ops[0].Result.Decision != want || ops[0].Result.At != at {
				t.Fatalf("%s call %d: got %+v at %d, want %+v at %d", pol, i, ops[0].Result.Decision, ops[0].Result.At, want, at)
			}
		}
	}
}

func testReset(t *testing.T, s store.Store) {
	tb := table(t, s, "reset", "leaky-bucket 1/1h capacity=2")
	decide(t, tb, "k", t0, 2)
	decide(t, tb, "j", t0, 2)
	apply(t, s, []store.Op{{Kind: store.OpReset, Table: tb, Key: "k", Now: t0}})
	if d := peek(t, tb, "k", t0); d.Remaining != 2 || d.ResetAfter != 0 {
		t.Fatalf("after a reset the key is not fresh: %+v", d)
	}
	if d := peek(t, tb, "j", t0); d.Remaining != 0 {
		t.Fatalf("a reset touched another key: %+v", d)
	}
}

func testForeignTable(t *testing.T, s store.Store) {
	other := memstore.New(0)
	tb, err := other.Table("x", algo.MustParsePolicy("fixed-window 1/1s"))
	if err != nil {
		t.Fatal(err)
	}
	err = s.Apply(ctx, []store.Op{{Kind: store.OpDecide, Table: tb, Key: "k", Now: t0, N: 1}})
	if !errors.Is(err, store.ErrForeignTable) {
		t.Fatalf("Apply with another store's table: error %v, want ErrForeignTable", err)
	}
}

// testConcurrentExact has 1,000 goroutines decide on one key at one
// instant; exactly LIMIT must be admitted, for every algorithm.
func testConcurrentExact(t *testing.T, s store.Store) {
	const goroutines = 1000
	for _, pol := range []string{"token-bucket 100/1m", "leaky-bucket 100/1h", "sliding-log 100/1m", "sliding-window 100/1m", "fixed-window 100/1m"} {
		tb := table(t, s, "concurrent "+pol, pol)
		var admitted atomic.Int64
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make(chan error, goroutines)
		for i := range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				var d algo.Decision
				var err error
				if i%4 == 0 { // some through Apply
					ops := []store.Op{{Kind: store.OpDecide, Table: tb, Key: "hot", Now: t0, N: 1}}
					err = s.Apply(ctx, ops)
					d = ops[0].Result.Decision
				} else {
					d, err = tb.Decide(ctx, "hot", t0, 1)
				}
				if err != nil {
					errs <- err
				}
				if d.Allowed {
					admitted.Add(1)
				}
			}()
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("%s: %v", pol, err)
		}
		if got := admitted.Load(); got != 100 {
			t.Fatalf("%s: %d goroutines at one instant admitted %d, want exactly 100", pol, goroutines, got)
		}
	}
}

// testApplyConcurrent runs overlapping multi-key batches in opposite
// orders; a store that locks keys in call order deadlocks here.
func testApplyConcurrent(t *testing.T, s store.Store) {
	a := table(t, s, "multi-a", "token-bucket 1000/1s")
	b := table(t, s, "multi-b", "sliding-window 1000/1s")
	var wg sync.WaitGroup
	var admitted atomic.Int64
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				k1, k2 := fmt.Sprint("k", i%7), fmt.Sprint("k", (i+3)%7)
				ops := []store.Op{
					{Kind: store.OpDecide, Table: a, Key: k1, Now: t0, N: 1},
					{Kind: store.OpDecide, Table: b, Key: k2, Now: t0, N: 1},
				}
				if g%2 == 1 {
					ops[0], ops[1] = ops[1], ops[0]
				}
				if err := s.Apply(ctx, ops); err != nil {
					t.Error(err)
					return
				}
				if ops[0].Result.Decision.Allowed != ops[1].Result.Decision.Allowed {
					t.Errorf("all-or-nothing broken: %+v vs %+v", ops[0].Result.Decision, ops[1].Result.Decision)
					return
				}
				if ops[0].Result.Decision.Allowed {
					admitted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	var spent int64
	for i := range 7 {
		spent += 1000 - peek(t, a, fmt.Sprint("k", i), t0).Remaining
	}
	if spent != admitted.Load() {
		t.Fatalf("%d batches admitted but %d units spent on the first limit", admitted.Load(), spent)
	}
}

// randomEachOps returns 1 to 12 random ops at now on keys, each on a
// table of ts, and the same ops on the matching tables of rs.
func randomEachOps(r *rand.Rand, now int64, keys []string, ts, rs []store.Table) (ops, want []store.Op) {
	n := 1 + r.IntN(12)
	ops, want = make([]store.Op, n), make([]store.Op, n)
	for i := range ops {
		ti := r.IntN(len(ts))
		op := store.Op{Kind: store.OpDecide, Key: keys[r.IntN(len(keys))], Now: now, N: r.Int64N(5)}
		switch r.IntN(8) {
		case 0:
			op.Kind, op.MaxWait = store.OpSchedule, time.Duration(r.Int64N(int64(time.Second)))
		case 1:
			op.Kind = store.OpReset
		}
		ops[i], want[i] = op, op
		ops[i].Table, want[i].Table = ts[ti], rs[ti]
	}
	return ops, want
}

// testApplyEach: the store's ApplyEach gives each op the outcome that an Apply of that op
// alone, in order, gives on a memory store: ops on one key add up, a
// denial in the middle leaves the others be, keys in many hash slots
// (a Redis Cluster) included. Bad input is an error.
func testApplyEach(t *testing.T, s store.Store) {
	ref := memstore.New(0)
	pols := []string{"token-bucket 3/1s", "fixed-window 2/1s", "sliding-log 2/1s"}
	var ts, rs []store.Table
	for _, p := range pols {
		ts = append(ts, table(t, s, "each "+p, p))
		rs = append(rs, table(t, ref, "each "+p, p))
	}
	keys := []string{"a", "b", "{a}b", "k1", "k2", "k3", "k4", "k5"}
	r := rand.New(rand.NewPCG(3, 5))
	now := t0
	for round := range 40 {
		now += r.Int64N(int64(400 * time.Millisecond))
		ops, want := randomEachOps(r, now, keys, ts, rs)
		for i := range want {
			if err := ref.Apply(ctx, want[i:i+1]); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.ApplyEach(ctx, ops); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		for i := range ops {
			g, w := ops[i], want[i]
			if g.Result.Decision != w.Result.Decision || g.Result.At != w.Result.At || g.Result.Stamp != w.Result.Stamp || !SameErrors(g.Result.Err, w.Result.Err) {
				t.Fatalf("round %d op %d (kind %d, %q n=%d): got %+v at %d stamp %+v err %v; want %+v at %d stamp %+v err %v",
					round, i, g.Kind, g.Key, g.N, g.Result.Decision, g.Result.At, g.Result.Stamp, g.Result.Err, w.Result.Decision, w.Result.At, w.Result.Stamp, w.Result.Err)
			}
		}
	}
	bad := []store.Op{
		{Kind: store.OpDecide, Table: ts[0], Key: "a", Now: now, N: 1},
		{Kind: store.OpDecide, Table: ts[0], Key: "b", Now: now, N: -1},
	}
	if err := s.ApplyEach(ctx, bad); !errors.Is(err, algo.ErrInvalidCost) {
		t.Fatalf("ApplyEach with a negative cost: %v, want ErrInvalidCost", err)
	}
	if err := s.ApplyEach(ctx, nil); err != nil {
		t.Fatalf("ApplyEach of no ops: %v", err)
	}
}
