package redisstore

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/memstore"
	"github.com/floodgate/floodgate/store"
)

// The buckets of LIMIT and burst up to 2^32, and the fixed windows of
// whole seconds, decide on a fast path, never on big integers, whatever
// their period (up to 366 days) and state (a clock a century behind it),
// and exactly as memory does. The test loads, under the library's own
// name, a library whose big-integer bucket and fixed window fail: a
// decision that reaches them fails the test. A bucket past 2^32 and a
// window of 30 days and half a second must still reach them,
// which shows the probe works.
func TestWideFastPath(t *testing.T) {
	ctx := context.Background()
	c := redistest.NewServer(t).Client(t)
	probe := library
	for _, exact := range []string{"local function bucketExact(p, s, nh, nl, n)\n", "local function fixedExact(p, s, now, n)\n"} {
		if !strings.Contains(probe, exact) {
			t.Fatalf("lua/ has no %q to probe", exact)
		}
		probe = strings.Replace(probe, exact, exact+"  error('floodgate: the exact path')\n", 1)
	}
	if err := c.FunctionLoad(ctx, probe).Err(); err != nil {
		t.Fatal(err)
	}
	s, err := New(c, WithCallerTime(), WithMinTTL(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"token-bucket 1000000000000000/1s", "fixed-window 10/720h0m0.5s"} {
		big, _ := s.Table("big", algo.MustParsePolicy(p))
		if _, err := big.Decide(ctx, "k", 1e9, 1); err == nil || !strings.Contains(err.Error(), "the exact path") {
			t.Fatalf("%s decided without big integers (%v): the probe is not loaded", p, err)
		}
	}
	for _, p := range []string{
		"token-bucket 13/24h", "token-bucket 14/24h", "token-bucket 1000/24h", "token-bucket 10000/1h",
		"leaky-bucket 1000/720h", "token-bucket 1000000000/1s", "leaky-bucket 3/1s capacity=1000000000",
		"token-bucket 4294967295/8784h", "token-bucket 4294967295/8784h burst=4294967296",
		"token-bucket 7/8784h burst=1", "token-bucket 100/1h", "leaky-bucket 10/1s capacity=20",
		"fixed-window 1000/720h", "fixed-window 4294967295/8784h", "fixed-window 10/1h",
	} {
		t.Run(p, func(t *testing.T) {
			pol := algo.MustParsePolicy(p)
			stores := [2]store.Store{s, memstore.New(0)}
			now := 1_764_000_000 * int64(time.Second)
			// Then near MaxTime, and back at the start on those keys: a
			// clock a century behind their states.
			for i, start := range []int64{now, algo.MaxTime - 3*int64(pol.Period()), now} {
				name := []string{"wide", "late", "late"}[i]
				tr, _ := s.Table(name, pol)
				tm, _ := stores[1].Table(name, pol)
				wideTrace(t, ctx, pol, start, stores, [2]store.Table{tr, tm})
			}
		})
	}
}

// wideTrace runs the same ops on the store's table ts[0] and memory's
// ts[1] (of stores ss) and fails t unless their results agree: lone
// decisions of every cost up to past the burst, schedules, ApplyEach
// calls of several ops, at times that step forward and back.
func wideTrace(t *testing.T, ctx context.Context, p algo.Policy, now int64, ss [2]store.Store, ts [2]store.Table) {
	t.Helper()
	b := p.Burst()
	step := int64(p.Period()) / p.Limit()
	costs := []int64{1, 1, b / 2, 1, 0, b, b + 1, 1, b - 1, 2, 1}
	for i, n := range costs {
		now = min(now+step*int64(i%3)-int64(i%2), algo.MaxTime)
		var res [2][]store.Op
		for j, tb := range ts {
			ops := []store.Op{{Kind: store.OpDecide, Table: tb, Key: "a", Now: now, N: n}}
			if i%4 == 3 {
				ops = append(ops, store.Op{Kind: store.OpSchedule, Table: tb, Key: "b", Now: now, N: n, MaxWait: time.Duration(step * 3)},
					store.Op{Kind: store.OpDecide, Table: tb, Key: "a", Now: now, N: 1})
			}
			var err error
			if len(ops) > 1 {
				err = ss[j].ApplyEach(ctx, ops)
			} else {
				ops[0].Result.Decision, ops[0].Result.Err = tb.Decide(ctx, "a", now, n)
			}
			if err != nil && len(ops) > 1 {
				t.Fatalf("op %d at %d: %v", i, now, err)
			}
			res[j] = ops
		}
		for k := range res[0] {
			got, want := res[0][k].Result, res[1][k].Result
			if got.Decision != want.Decision || got.At != want.At || (got.Err == nil) != (want.Err == nil) {
				t.Fatalf("op %d.%d (n=%d at %d): Redis %+v, memory %+v", i, k, n, now, got, want)
			}
		}
	}
}
