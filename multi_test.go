package floodgate_test

import (
	"errors"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"

	"github.com/floodgate/floodgate/memstore"

	"github.com/floodgate/floodgate"
)

// TestAllowAllPerUserAndGlobal is seed 001's wish: a per-user limit and a
// global one checked together, where a denial by either spends nothing.
func TestAllowAllPerUserAndGlobal(t *testing.T) {
	for _, shared := range []bool{true, false} {
		fc := newFake()
		var userOpts, globalOpts []floodgate.Option
		userOpts = append(userOpts, floodgate.WithClock(fc))
		globalOpts = append(globalOpts, floodgate.WithClock(fc))
		if shared {
			store := memstore.New(0)
			userOpts = append(userOpts, floodgate.WithStore(store))
			globalOpts = append(globalOpts, floodgate.WithStore(store))
		}
		user := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("sliding-log 2/1m"), userOpts...))
		global := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("sliding-log 3/1m"), globalOpts...))
		check := func(who string) floodgate.MultiDecision {
			md, err := floodgate.AllowAll(ctx, floodgate.Check{Limiter: user, Key: who, N: 1}, floodgate.Check{Limiter: global, Key: "all", N: 1})
			if err != nil {
				t.Fatal(err)
			}
			return md
		}
		for i, c := range []struct {
			who    string
			want   bool
			denied int
		}{{"alice", true, -1}, {"alice", true, -1}, {"alice", false, 0}, {"bob", true, -1}, {"carol", false, 1}} {
			md := check(c.who)
			if md.Allowed != c.want || md.Denied != c.denied {
				t.Fatalf("shared store %v, call %d (%s): %+v, want allowed=%v denied=%d", shared, i, c.who, md, c.want, c.denied)
			}
			fc.Advance(time.Second)
		}
		// alice's denial spent nothing globally; carol's spent nothing on her.
		if d := mustAllow(t, global, "all", 0); d.Remaining != 0 {
			t.Fatalf("shared %v: global %+v, want exactly 3 spent", shared, d)
		}
		if d := mustAllow(t, user, "carol", 0); d.Remaining != 2 {
			t.Fatalf("shared %v: carol %+v, a denied check spent her units", shared, d)
		}
		md := check("dave")
		if md.RetryAfter != 55*time.Second || md.Decisions[1].RetryAfter != 55*time.Second {
			t.Fatalf("shared %v: RetryAfter %v, want 55s (the global log's oldest entry, at 0s, expires at 60s)", shared, md.RetryAfter)
		}
	}
}

// TestAllowAllSustainedAndPeak: balb::RateLimiter's two rates as two
// token buckets on one key; the longest wait is reported.
func TestAllowAllSustainedAndPeak(t *testing.T) {
	fc := newFake()
	sustained := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("token-bucket 10/1m"), floodgate.WithClock(fc)))
	peak := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("token-bucket 2/1s"), floodgate.WithClock(fc)))
	checks := []floodgate.Check{{Limiter: sustained, Key: "k", N: 1}, {Limiter: peak, Key: "k", N: 1}}
	admitted := 0
	for range 50 {
		md, err := floodgate.AllowAll(ctx, checks...)
		if err != nil {
			t.Fatal(err)
		}
		if md.Allowed {
			admitted++
		}
		fc.Advance(100 * time.Millisecond)
	}
	// In 5s the peak bucket alone would admit 2 at once and then one per
	// 500ms, 11 in all; the sustained one caps them at its burst of 10.
	if admitted != 10 {
		t.Fatalf("admitted %d in 5s, want 10", admitted)
	}
	// At 5s the sustained bucket's next unit is 66s - 60s burst - 5s away.
	md, _ := floodgate.AllowAll(ctx, checks...)
	if md.Allowed || md.Denied != 0 || md.RetryAfter != time.Second {
		t.Fatalf("after the sustained bucket is spent: %+v, want it to deny with the longer wait", md)
	}
}

func TestAllowAllEdges(t *testing.T) {
	fc := newFake()
	a := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("fixed-window 5/1m"), floodgate.WithClock(fc)))
	b := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("fixed-window 2/1m"), floodgate.WithClock(fc)))
	md, err := floodgate.AllowAll(ctx, floodgate.Check{Limiter: a, Key: "k", N: 1}, floodgate.Check{Limiter: b, Key: "k", N: 3})
	if !errors.Is(err, algo.ErrCostExceedsBurst) || md.Allowed || md.RetryAfter != algo.Never || md.Denied != 1 {
		t.Fatalf("a cost above one limit's burst: %+v, %v", md, err)
	}
	if d := mustAllow(t, a, "k", 0); d.Remaining != 5 {
		t.Fatalf("the other limit spent: %+v", d)
	}
	if _, err := floodgate.AllowAll(ctx, floodgate.Check{Key: "k", N: 1}); err == nil {
		t.Fatal("a check without a Limiter was accepted")
	}
	if _, err := floodgate.AllowAll(ctx, floodgate.Check{Limiter: a, Key: "k", N: -1}); !errors.Is(err, algo.ErrInvalidCost) {
		t.Fatalf("a negative cost: %v", err)
	}
	md, err = floodgate.AllowAll(ctx)
	if err != nil || !md.Allowed {
		t.Fatalf("no checks: %+v, %v", md, err)
	}

	// A dry-run limit reports but never denies the request.
	shadow := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("fixed-window 1/1m"), floodgate.WithClock(fc), floodgate.WithDryRun(true)))
	for i := range 3 {
		md, err := floodgate.AllowAll(ctx, floodgate.Check{Limiter: a, Key: "s", N: 1}, floodgate.Check{Limiter: shadow, Key: "s", N: 1})
		if err != nil || !md.Allowed || md.Decisions[1].DryRun != (i > 0) {
			t.Fatalf("call %d with a dry-run limit: %+v, %v", i, md, err)
		}
	}
}

// TestAllowAllRepeatedKey: checks naming one key of one limiter several
// times are one request on that key, at the sum of their costs. Above the
// burst they can never pass together: before the sum, the store answered
// a finite RetryAfter, forever.
func TestAllowAllRepeatedKey(t *testing.T) {
	for _, n := range []int{3, 40} { // pairwise, and through a map
		fc := newFake()
		s := memstore.New(0)
		lim := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("token-bucket 5/1m"), floodgate.WithStore(s), floodgate.WithClock(fc)))
		other := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("fixed-window 100/1m"), floodgate.WithStore(s), floodgate.WithClock(fc)))
		checks := make([]floodgate.Check, n)
		for i := range checks {
			checks[i] = floodgate.Check{Limiter: other, Key: "k" + string(rune('a'+i%26)) + string(rune('a'+i/26)), N: 1}
		}
		checks[n/2] = floodgate.Check{Limiter: lim, Key: "dup", N: 3}
		checks[n-1] = floodgate.Check{Limiter: lim, Key: "dup", N: 3}
		for try := range 3 {
			md, err := floodgate.AllowAll(ctx, checks...)
			if !errors.Is(err, algo.ErrCostExceedsBurst) || md.Allowed || md.Denied != n-1 || md.RetryAfter != algo.Never {
				t.Fatalf("%d checks, try %d: %+v, %v; want denied by check %d, Never, ErrCostExceedsBurst", n, try, md, err, n-1)
			}
			fc.Advance(time.Hour)
		}
		if d := mustAllow(t, lim, "dup", 0); d.Remaining != 5 {
			t.Fatalf("%d checks: dup %+v: the refused request spent", n, d)
		}
		checks[n-1].N = 2 // 3 + 2 = the burst: admitted, spending both
		if md, err := floodgate.AllowAll(ctx, checks...); err != nil || !md.Allowed {
			t.Fatalf("%d checks at the burst: %+v, %v", n, md, err)
		}
		if d := mustAllow(t, lim, "dup", 0); d.Remaining != 0 {
			t.Fatalf("%d checks: dup %+v after spending 3 + 2 of 5", n, d)
		}
	}
}

// TestCheckZeroCostSpendsOne: a Check left without N spends one unit, as
// Allow does; only Peek asks without spending. Before, N 0 was a silent
// peek: 10 of 10 admitted under 2/min.
func TestCheckZeroCostSpendsOne(t *testing.T) {
	lim := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("fixed-window 2/1m"), floodgate.WithClock(newFake())))
	admitted := 0
	for range 10 {
		if md, err := floodgate.AllowAll(ctx, floodgate.Check{Limiter: lim, Key: "k"}); err == nil && md.Allowed {
			admitted++
		}
	}
	if admitted != 2 {
		t.Fatalf("AllowAll admitted %d of 10 Checks without N under 2/min, want 2", admitted)
	}
	ds, errs := floodgate.AllowEach(ctx, floodgate.Check{Limiter: lim, Key: "j"}, floodgate.Check{Limiter: lim, Key: "j", N: 5, Peek: true})
	if errs != nil || !ds[0].Allowed || ds[0].Remaining != 1 || !ds[1].Allowed || ds[1].Remaining != 1 {
		t.Fatalf("AllowEach(no N, Peek) = %+v, %v; want one unit spent, then a peek at 1 remaining", ds, errs)
	}
}
