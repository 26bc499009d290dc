package redisstore

import (
	"context"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/memstore"
	"github.com/floodgate/floodgate/store"
)

// The buckets of LIMIT and burst up to 2^32, the fixed windows of whole
// seconds, the sliding windows of LIMIT up to 2^32 and PERIOD up to 52
// days, and every sliding log decide on a fast path, never on big
// integers, whatever their period (up to 366 days) and state (a clock a
// century behind it), and exactly as memory does. The test loads, under
// the library's own name, a library whose big-integer bucket, fixed
// window and sliding window fail: a decision that reaches them fails the
// test. A bucket past 2^32, a fixed window of 30 days and half a second
// and a sliding window of 366 days must still reach them, which shows the
// probe works.
func TestWideFastPath(t *testing.T) {
	ctx := context.Background()
	c := redistest.NewServer(t).Client(t)
	probe := library
	for _, exact := range []string{"local function bucketExact(p, s, nh, nl, n)\n", "local function fixedExact(p, s, now, n)\n", "local function slidingExact(p, s, now, n)\n"} {
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
	for _, p := range []string{"token-bucket 1000000000000000/1s", "fixed-window 10/720h0m0.5s", "sliding-window 1000/8784h"} {
		big, _ := s.Table("big "+p, algo.MustParsePolicy(p))
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
		"sliding-window 1000/24h", "sliding-window 10000/1h", "sliding-window 1000/720h",
		"sliding-window 4294967295/1248h", "sliding-window 100/1h", "sliding-window 3/500ms",
		"sliding-log 1000/720h", "sliding-log 10/8784h", "sliding-log 100/1h",
	} {
		t.Run(p, func(t *testing.T) {
			pol := algo.MustParsePolicy(p)
			stores := [2]store.Store{s, memstore.New(0)}
			now := 1_764_000_000 * int64(time.Second)
			// Then near MaxTime, and back at the start on those keys: a
			// clock a century behind their states.
			for i, start := range []int64{now, algo.MaxTime - 3*int64(pol.Period()), now} {
				name := []string{"wide", "late", "late"}[i] + " " + p // a name per policy: one name under two is a policy change
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

// A sliding window's wide path decides exactly at the instants where its
// estimate prev*(PERIOD-elapsed)/PERIOD is a whole number, or one ns
// either side: where a double's quotient must be checked exactly. Each
// key fills its first window with prev units, then peeks and decides in
// the next at elapsed = j*PERIOD/prev (rounded) and +-1 ns, as memory
// does.
func TestSlidingWideAtWholeEstimates(t *testing.T) {
	ctx := context.Background()
	s, err := New(redistest.NewServer(t).Client(t), WithCallerTime(), WithMinTTL(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	m := memstore.New(0)
	for _, spec := range []string{"sliding-window 1000/24h", "sliding-window 10000/1h", "sliding-window 4294967295/1248h", "sliding-window 7/720h"} {
		p := algo.MustParsePolicy(spec)
		tr, _ := s.Table("whole "+spec, p)
		tm, _ := m.Table("whole "+spec, p)
		P, L := int64(p.Period()), p.Limit()
		start := (1_764_000_000 * int64(time.Second) / P) * P
		for _, prev := range []int64{L, L - 1, L / 3, 1} {
			key := fmt.Sprintf("%s/%d", spec, prev)
			for _, tb := range []store.Table{tr, tm} {
				if _, err := tb.Decide(ctx, key, start, prev); err != nil {
					t.Fatal(err)
				}
			}
			for j := int64(1); j < 12; j++ {
				e := int64(new(big.Int).Div(new(big.Int).Mul(big.NewInt(j*max(prev/11, 1)), big.NewInt(P)), big.NewInt(prev)).Int64())
				for _, at := range []int64{start + P + e - 1, start + P + e, start + P + e + 1} {
					for _, n := range []int64{0, 1} {
						got, err := tr.Decide(ctx, key, at, n)
						if err != nil {
							t.Fatal(err)
						}
						want, _ := tm.Decide(ctx, key, at, n)
						if got != want {
							t.Fatalf("%s: prev %d, n=%d at start+PERIOD+%d: Redis %+v, memory %+v", spec, prev, n, at-start-P, got, want)
						}
					}
				}
			}
		}
	}
}
