package storetest

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/clock"
	"github.com/floodgate/floodgate/store"
)

// Sizes of testLeavingEarly: goroutines, calls each, and the limit of its
// limiters, far above what the calls can spend.
const (
	leavers     = 64
	leaverCalls = 40
	leaverLimit = 1_000_000
)

// testLeavingEarly has many goroutines call Apply, Limiter.Reserve (and
// Cancel) and floodgate.AllowAll with deadlines from a few µs to a few
// ms, and read what each call returned as soon as it returns. A store that
// touches a caller's ops after the call has returned fails here under the
// race detector. Every admission a caller saw must be spent, and nothing
// beyond what the calls asked for: a call that failed (only by its
// deadline, here) may have taken effect, or not, and so may a cancelled
// reservation (a bucket gives nothing back once others were admitted
// after it, algo.Policy.Refund).
func testLeavingEarly(t *testing.T, s store.Store) {
	clk := clock.NewFake(time.Unix(0, t0))
	p := algo.MustParsePolicy("token-bucket 1000000/1h")
	newLimiter := func(name string) *floodgate.Limiter {
		return floodgate.Must(floodgate.NewLimiter(p, floodgate.WithStore(s), floodgate.WithName(name), floodgate.WithClock(clk)))
	}
	e := &early{s: s, a: newLimiter("early-a"), b: newLimiter("early-b"),
		ta: table(t, s, "early-a", p.String()), tb: table(t, s, "early-b", p.String())}
	keys := []string{"k0", "k1", "k2", "k3"}
	var wg sync.WaitGroup
	for g := range leavers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 11))
			for range leaverCalls {
				d := 2*time.Microsecond + time.Duration(r.Int64N(int64(3*time.Millisecond)))
				ctx, cancel := context.WithTimeout(context.Background(), d)
				e.call(t, ctx, r, keys[r.IntN(len(keys))])
				cancel()
			}
		})
	}
	wg.Wait()
	var spent int64
	for _, tab := range []store.Table{e.ta, e.tb} {
		for _, k := range keys {
			spent += leaverLimit - peek(t, tab, k, t0).Remaining
		}
	}
	seen, failed, cancelled := e.seen.Load(), e.failed.Load(), e.cancelled.Load()
	if spent < seen || spent > seen+failed+cancelled {
		t.Fatalf("%d units spent; callers saw %d admitted, calls of %d units failed and %d were cancelled: want between %d and %d",
			spent, seen, failed, cancelled, seen, seen+failed+cancelled)
	}
	t.Logf("%d units admitted as the callers saw, %d spent, calls of %d units failed, %d cancelled", seen, spent, failed, cancelled)
}

// early is testLeavingEarly's store, its two limiters and their tables,
// and the units of its calls.
type early struct {
	s         store.Store
	a, b      *floodgate.Limiter
	ta, tb    store.Table
	seen      atomic.Int64 // units that callers saw admitted and kept
	failed    atomic.Int64 // units of calls that failed
	cancelled atomic.Int64 // units of reservations cancelled
}

// call makes one of testLeavingEarly's calls on key, picked by r, and
// counts it.
func (e *early) call(t *testing.T, ctx context.Context, r *rand.Rand, key string) {
	switch r.IntN(3) {
	case 0:
		ops := []store.Op{{Kind: store.OpDecide, Table: e.ta, Key: key, Now: t0, N: 1},
			{Kind: store.OpDecide, Table: e.tb, Key: key, Now: t0, N: 2}}
		err := e.s.Apply(ctx, ops)
		e.count(t, ctx, err, ops[0].Result.Decision.Allowed && ops[1].Result.Decision.Allowed, 3)
	case 1:
		res, err := e.a.Reserve(ctx, key, 1)
		ok := err == nil && res.OK()
		if ok && r.IntN(2) == 0 {
			if cerr := res.Cancel(context.Background()); cerr != nil {
				t.Errorf("Cancel: %v", cerr)
			}
			e.cancelled.Add(1)
			ok = false
		}
		e.count(t, ctx, err, ok, 1)
	default:
		md, err := floodgate.AllowAll(ctx, floodgate.Check{Limiter: e.a, Key: key, N: 1}, floodgate.Check{Limiter: e.b, Key: key, N: 2})
		e.count(t, ctx, err, md.Allowed && md.Decisions[0].Allowed && md.Decisions[1].Allowed, 3)
	}
}

// count counts a call of n units on ctx that returned err, and admitted
// if so. A call may fail only by its deadline: with an error once the
// deadline has passed, which the store's client may report before ctx
// does.
func (e *early) count(t *testing.T, ctx context.Context, err error, admitted bool, n int64) {
	switch {
	case err != nil && pastDeadline(ctx, err):
		e.failed.Add(n)
	case err != nil:
		t.Errorf("a call failed before its deadline: %v", err)
	case admitted:
		e.seen.Add(n)
	}
}

func pastDeadline(ctx context.Context, err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
		return true
	}
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}
