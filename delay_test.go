package floodgate_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/algo"
)

// TestDelayDecisions: Delay's decisions say where the key stands when it
// returns: at once, after a wait, refused past the bound (retry when the
// wait would fit), refused on a full queue, and cancelled with a refund.
func TestDelayDecisions(t *testing.T) {
	fc := newFake()
	l := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("leaky-bucket 1/1s capacity=2"),
		floodgate.WithClock(fc), floodgate.WithMaxQueue(2)))
	d, err := l.Delay(ctx, "k", 1, 2*time.Second)
	if err != nil || !d.Allowed || d.Remaining != 1 || d.ResetAfter != time.Second {
		t.Fatalf("first: %+v, %v; want admitted at once, 1 remaining, reset in 1s", d, err)
	}
	mustAllow(t, l, "k", 1) // full
	got := make(chan floodgate.Decision, 1)
	go func() {
		d, err := l.Delay(ctx, "k", 1, 2*time.Second)
		if err != nil {
			t.Error(err)
		}
		got <- d
	}()
	fc.WaitTimers(1)
	// The waiter holds its unit: the next waits 2s, the one after 3s (past
	// the bound of 2s: refused, retry in 1s).
	second := make(chan error, 1)
	go func() { _, err := l.Delay(ctx, "k", 1, 2*time.Second); second <- err }()
	fc.WaitTimers(2)
	if d, err := l.Delay(ctx, "k", 1, 2*time.Second); err != nil || d.Allowed || d.RetryAfter != 4*time.Second {
		t.Fatalf("third waiter on a queue of 2: %+v, %v; want refused, retry when the bucket is empty (4s)", d, err)
	}
	if d, err := l.Delay(ctx, "other", 1, time.Second); err != nil || !d.Allowed {
		t.Fatalf("the queue is per key: %+v, %v", d, err)
	}
	fc.Advance(time.Second)
	if d := <-got; !d.Allowed || d.Remaining != 0 || d.ResetAfter != 3*time.Second || d.RetryAfter != 0 {
		t.Fatalf("after its wait of 1s: %+v; want admitted, 0 remaining, reset in 3s (itself and the waiter behind)", d)
	}
	fc.Advance(time.Second)
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	mustAllow(t, l, "k", 1) // full again, each slot held till +1s, +2s
	if d, err := l.Delay(ctx, "k", 1, 500*time.Millisecond); err != nil || d.Allowed || d.RetryAfter != 500*time.Millisecond {
		t.Fatalf("a wait of 1s with a bound of 0.5s: %+v, %v; want refused, retry in 0.5s", d, err)
	}
	if d, err := l.Delay(ctx, "k", 3, time.Hour); !errors.Is(err, algo.ErrCostExceedsBurst) || d.Allowed || d.RetryAfter != algo.Never {
		t.Fatalf("over the burst: %+v, %v", d, err)
	}
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { _, err := l.Delay(cctx, "k", 1, time.Hour); done <- err }()
	fc.WaitTimers(1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
	if d := mustAllow(t, l, "k", 0); d.ResetAfter != 2*time.Second {
		t.Fatalf("after the cancelled waiter gave its unit back: %+v; want reset in 2s", d)
	}
}

// TestDelayDryRun: in dry-run mode Delay decides at once, like AllowN.
func TestDelayDryRun(t *testing.T) {
	l := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("token-bucket 1/1m"), floodgate.WithClock(newFake()), floodgate.WithDryRun(true)))
	mustAllow(t, l, "k", 1)
	d, err := l.Delay(ctx, "k", 1, time.Hour)
	if err != nil || !d.Allowed || !d.DryRun {
		t.Fatalf("dry run: %+v, %v", d, err)
	}
}

// TestDelayNoWait: without a maximum wait of its own, Delay waits for
// nothing: it is AllowN.
func TestDelayNoWait(t *testing.T) {
	l := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("token-bucket 1/1m"), floodgate.WithClock(newFake())))
	mustAllow(t, l, "k", 1)
	if d, err := l.Delay(ctx, "k", 1, 0); err != nil || d.Allowed || d.RetryAfter != time.Minute {
		t.Fatalf("Delay with maxWait 0 on a full bucket: %+v, %v; want denied at once", d, err)
	}
}

// TestDelayWindowLineBounded: with a window policy the waiters queue in
// the limiter; the time in line counts against the maximum wait, so a
// waiter whose turn has not come when it has passed is refused then, not
// later.
func TestDelayWindowLineBounded(t *testing.T) {
	fc := newFake()
	l := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("fixed-window 1/1m"), floodgate.WithClock(fc), floodgate.WithMaxQueue(2)))
	mustAllow(t, l, "k", 1)
	first, second := make(chan floodgate.Decision, 1), make(chan floodgate.Decision, 1)
	go func() { d, _ := l.Delay(ctx, "k", 1, 90*time.Second); first <- d }()
	fc.WaitTimers(1) // the first sleeps till the next window
	go func() { d, _ := l.Delay(ctx, "k", 1, 30*time.Second); second <- d }()
	fc.WaitTimers(2) // the second waits in line, at most 30s
	fc.Advance(30 * time.Second)
	if d := <-second; d.Allowed || d.RetryAfter != 30*time.Second {
		t.Fatalf("the second, 30s in line: %+v; want refused, retry when the window ends", d)
	}
	fc.Advance(30 * time.Second)
	if d := <-first; !d.Allowed {
		t.Fatalf("the first, at the next window: %+v", d)
	}
}

// TestDelayDefaultQueue: without WithMaxQueue, Delay on a window or log
// policy bounds a key's waiters at what the policy admits within the
// maximum wait (LIMIT for each PERIOD begun); one more is refused at
// once, a denial.
func TestDelayDefaultQueue(t *testing.T) {
	for _, tc := range []struct {
		policy  string
		maxWait time.Duration
		bound   int
	}{
		{"fixed-window 10/1m", time.Minute, 10},
		{"fixed-window 10/1m", 61 * time.Second, 20},
		{"sliding-log 3/1m", 61 * time.Second, 6},
	} {
		t.Run(fmt.Sprintf("%s/%v", tc.policy, tc.maxWait), func(t *testing.T) {
			fc := newFake()
			p := algo.MustParsePolicy(tc.policy)
			l := floodgate.Must(floodgate.NewLimiter(p, floodgate.WithClock(fc)))
			mustAllow(t, l, "k", p.Burst())
			cctx, cancel := context.WithCancel(ctx)
			done := make(chan error, tc.bound)
			for range tc.bound {
				go func() { _, err := l.Delay(cctx, "k", 1, tc.maxWait); done <- err }()
			}
			for l.Waiting("k") < tc.bound {
				runtime.Gosched()
			}
			one := make(chan floodgate.Decision, 1)
			go func() { d, _ := l.Delay(ctx, "k", 1, tc.maxWait); one <- d }()
			select {
			case d := <-one:
				if d.Allowed {
					t.Fatalf("one past the bound of %d: %+v; want refused", tc.bound, d)
				}
			case <-time.After(10 * time.Second): // a guard, not a wait for the fake clock
				t.Fatalf("one past the bound of %d waits: the queue is unbounded", tc.bound)
			}
			cancel()
			for range tc.bound {
				<-done
			}
		})
	}
}
