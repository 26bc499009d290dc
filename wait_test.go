package floodgate_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"

	"github.com/floodgate/floodgate"
)

// waitResult is what one waiter's WaitN returned.
type waitResult struct {
	name string
	err  error
}

// TestWaitFIFOBucket: the queue-based leaky bucket of seed 004. Waiters on
// a full bucket are admitted one per emission interval, in call order.
func TestWaitFIFOBucket(t *testing.T) {
	fc := newFake()
	l := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("leaky-bucket 1/1s capacity=2"), floodgate.WithClock(fc)))
	mustAllow(t, l, "k", 2) // full
	var wg sync.WaitGroup
	results := make(chan waitResult, 5)
	for i := range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results <- waitResult{fmt.Sprint(i), l.Wait(ctx, "k")}
		}()
		fc.WaitTimers(i + 1) // waiter i holds its slot before i+1 calls
	}
	// Every waiter holds its slot; nothing else fits.
	if d := mustAllow(t, l, "k", 1); d.Allowed || d.RetryAfter != 6*time.Second {
		t.Fatalf("with 5 waiters queued, Allow got %+v; want denied until the queue drains (6s)", d)
	}
	for i := range 5 {
		fc.Advance(time.Second)
		r := <-results
		if r.err != nil || r.name != fmt.Sprint(i) {
			t.Fatalf("second %d: waiter %s returned (%v), want waiter %d", i+1, r.name, r.err, i)
		}
	}
	wg.Wait()
}

// TestWaitCancelRefunds: a waiter whose context is cancelled gives back
// its slot, and the waiters behind it move up.
func TestWaitCancelRefunds(t *testing.T) {
	fc := newFake()
	l := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("token-bucket 1/1s"), floodgate.WithClock(fc)))
	mustAllow(t, l, "k", 1)
	cctx, cancel := context.WithCancel(ctx)
	first := make(chan error, 1)
	go func() { first <- l.Wait(cctx, "k") }()
	fc.WaitTimers(1)
	before := mustAllow(t, l, "k", 0)
	cancel()
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Wait: %v", err)
	}
	after := mustAllow(t, l, "k", 0)
	if before.ResetAfter != 2*time.Second || after.ResetAfter != time.Second {
		t.Fatalf("reset after %v with the waiter, %v after its cancel; want 2s then 1s", before.ResetAfter, after.ResetAfter)
	}
	second := make(chan error, 1)
	go func() { second <- l.Wait(ctx, "k") }()
	fc.WaitTimers(1)
	fc.Advance(time.Second)
	if err := <-second; err != nil {
		t.Fatal(err)
	}
}

func TestWaitRefusals(t *testing.T) {
	fc := newFake()
	l := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("token-bucket 1/1m burst=2"), floodgate.WithClock(fc), floodgate.WithMaxWait(90*time.Second)))
	if err := l.WaitN(ctx, "k", 3); !errors.Is(err, algo.ErrCostExceedsBurst) {
		t.Fatalf("WaitN above the burst: %v", err)
	}
	mustAllow(t, l, "k", 2)
	// 1 minute needed: fine. Then 2 minutes: more than the 90s maximum.
	done := make(chan error, 1)
	go func() { done <- l.Wait(ctx, "k") }()
	fc.WaitTimers(1)
	if err := l.Wait(ctx, "k"); !errors.Is(err, floodgate.ErrWaitTooLong) {
		t.Fatalf("a wait of 2m with a 90s maximum: %v", err)
	}
	// A deadline sooner than the wait fails at once too, consuming nothing.
	dctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := l.Wait(dctx, "other-full-key"); err != nil {
		t.Fatal(err) // a fresh key is admitted at once
	}
	mustAllow(t, l, "other-full-key", 1)
	if err := l.Wait(dctx, "other-full-key"); !errors.Is(err, floodgate.ErrWaitTooLong) {
		t.Fatalf("a deadline of 1s for a wait of 1m: %v", err)
	}
	if d := mustAllow(t, l, "other-full-key", 0); d.Remaining != 0 || d.ResetAfter != 2*time.Minute {
		t.Fatalf("a refused Wait consumed: %+v", d)
	}
	fc.Advance(time.Minute)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := l.Wait(ctx, "never"); err != nil { // one unit of 2
		t.Fatal(err)
	}
	cctx, cancel2 := context.WithCancel(ctx)
	cancel2()
	if err := l.Wait(cctx, "never"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait with a done context: %v", err)
	}
}

func TestWaitMaxQueue(t *testing.T) {
	fc := newFake()
	l := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("token-bucket 1/1s"), floodgate.WithClock(fc), floodgate.WithMaxQueue(2)))
	mustAllow(t, l, "k", 1)
	results := make(chan error, 2)
	for i := range 2 {
		go func() { results <- l.Wait(ctx, "k") }()
		fc.WaitTimers(i + 1)
	}
	if err := l.Wait(ctx, "k"); !errors.Is(err, floodgate.ErrQueueFull) {
		t.Fatalf("a third waiter with a queue of 2: %v", err)
	}
	if err := l.Wait(ctx, "other"); err != nil {
		t.Fatalf("the queue bound is per key: %v", err)
	}
	fc.Advance(2 * time.Second)
	for range 2 {
		if err := <-results; err != nil {
			t.Fatal(err)
		}
	}
}

// TestWaitFIFOWindow: the window and log algorithms queue waiters in the
// limiter and admit them in call order as the window allows.
func TestWaitFIFOWindow(t *testing.T) {
	for _, p := range []algo.Policy{algo.MustParsePolicy("fixed-window 2/1m"), algo.MustParsePolicy("sliding-log 2/1m"), algo.MustParsePolicy("sliding-window 2/1m")} {
		fc := newFake()
		l := floodgate.Must(floodgate.NewLimiter(p, floodgate.WithClock(fc)))
		mustAllow(t, l, "k", 2)
		results := make(chan waitResult, 4)
		for i := range 4 {
			go func() { results <- waitResult{fmt.Sprint(i), l.Wait(ctx, "k")} }()
			// Only the first waiter sleeps on a timer; the others wait for
			// their turn in the limiter's queue.
			for l.Waiting("k") < i+1 {
				runtime.Gosched()
			}
		}
		fc.WaitTimers(1)
		var order []string
		for step := 0; len(order) < 4; step++ {
			if step > 64 {
				t.Fatalf("%v: only %v admitted after %d steps", p, order, step)
			}
			fc.Advance(p.Period() / 8)
			// Wait until the head waiter is asleep again or all are done.
			for len(order) < 4 {
				select {
				case r := <-results:
					if r.err != nil {
						t.Fatalf("%v: %v", p, r.err)
					}
					order = append(order, r.name)
					continue
				default:
				}
				if fc.Timers() == 1 && l.Waiting("k") == 4-len(order) {
					break
				}
				runtime.Gosched()
			}
		}
		if fmt.Sprint(order) != "[0 1 2 3]" {
			t.Fatalf("%v: waiters admitted in order %v", p, order)
		}
		if d := mustAllow(t, l, "k", 0); d.Remaining != 0 {
			t.Fatalf("%v: after 4 waits %+v", p, d)
		}
	}
}
