package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/clock"
	"github.com/floodgate/floodgate/store"
)

// SharedQueue checks that two stores on one backend, as two processes
// would open it (two Redis clients of one server, two handles of one
// file), keep one queue for floodgate.Limiter.Delay on a leaky bucket:
// the waiters of a limiter on a and of one on b are served in the order
// they came, each at its exact turn, because the store holds their units
// (store.OpSchedule); a wait past the maximum is refused with the exact
// RetryAfter; and a cancelled waiter's units come back, for the other
// limiter's next request. The stores must decide at the caller's time,
// which is a fake clock here.
func SharedQueue(t *testing.T, a, b store.Store) {
	clk := clock.NewFake(time.Unix(0, t0))
	p := algo.MustParsePolicy("leaky-bucket 1/1s capacity=1")
	la := floodgate.Must(floodgate.NewLimiter(p, floodgate.WithStore(a), floodgate.WithName("shared-queue"), floodgate.WithClock(clk)))
	lb := floodgate.Must(floodgate.NewLimiter(p, floodgate.WithStore(b), floodgate.WithName("shared-queue"), floodgate.WithClock(clk)))
	const key, maxWait = "k", 10 * time.Second
	if d, err := la.Delay(ctx, key, 1, maxWait); err != nil || !d.Allowed {
		t.Fatalf("first request: %+v, %v; want admitted at once", d, err)
	}
	// One unit a second, held from now: b's waits 1s, a's 2s, b's 3s.
	b1 := delayed(ctx, clk, lb, key, maxWait)
	queued(t, clk, 1)
	a2 := delayed(ctx, clk, la, key, maxWait)
	queued(t, clk, 2)
	gone, cancel := context.WithCancel(ctx)
	b3 := delayed(gone, clk, lb, key, maxWait)
	queued(t, clk, 3)
	cancel()
	if r := <-b3; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("shared queue: the cancelled waiter returned %+v, %v; want context.Canceled", r.d, r.err)
	}
	// b's units given back, a's next request takes its turn, 3s.
	a4 := delayed(ctx, clk, la, key, maxWait)
	queued(t, clk, 3)
	// The next turn is 4s away: past a maximum of 3s, whichever limiter.
	if d, err := lb.Delay(ctx, key, 1, 3*time.Second); err != nil || d.Allowed || d.RetryAfter != time.Second {
		t.Fatalf("shared queue: a request 4s from its turn, maximum 3s: %+v, %v; want refused, RetryAfter 1s", d, err)
	}
	for k, w := range []chan delayResult{b1, a2, a4} {
		clk.Advance(time.Second - time.Nanosecond)
		if n := clk.Timers(); n != 3-k {
			t.Fatalf("shared queue: %d waiters left 1ns before turn %d, want %d: one went early", n, k+1, 3-k)
		}
		clk.Advance(time.Nanosecond)
		r := <-w
		if want := time.Unix(0, t0).Add(time.Duration(k+1) * time.Second); r.err != nil || !r.d.Allowed || !r.at.Equal(want) {
			t.Fatalf("shared queue: waiter %d: %+v, %v at %v; want admitted at %v", k+1, r.d, r.err, r.at, want)
		}
	}
}

// delayResult is what a Delay returned, and the fake time when it did.
type delayResult struct {
	d   floodgate.Decision
	err error
	at  time.Time
}

// delayed calls l.Delay for one unit of key in a goroutine and sends what
// it returned on the channel it returns.
func delayed(ctx context.Context, clk *clock.Fake, l *floodgate.Limiter, key string, maxWait time.Duration) chan delayResult {
	done := make(chan delayResult, 1)
	go func() {
		d, err := l.Delay(ctx, key, 1, maxWait)
		done <- delayResult{d, err, clk.Now()}
	}()
	return done
}

// queued waits, for up to 5 s of real time, until n waiters sleep on clk,
// and fails the test if they do not: a store that does not share the
// queue admits them at once.
func queued(t *testing.T, clk *clock.Fake, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for clk.Timers() < n {
		if time.Now().After(deadline) {
			t.Fatalf("shared queue: %d waiters, want %d: the stores do not share one queue", clk.Timers(), n)
		}
		time.Sleep(time.Millisecond) // the waiters' goroutines, in real time
	}
}
