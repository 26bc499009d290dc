package floodgate_test

import (
	"errors"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"

	"github.com/floodgate/floodgate"
)

// TestReservation follows BDE's reserve / submitReserved / cancelReserved.
func TestReservation(t *testing.T) {
	fc := newFake()
	l := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("leaky-bucket 1/1s capacity=5"), floodgate.WithClock(fc)))
	r, err := l.Reserve(ctx, "k", 3)
	if err != nil || !r.OK() || r.Decision().Remaining != 2 {
		t.Fatalf("Reserve 3 of 5: %+v, %v", r.Decision(), err)
	}
	if d := mustAllow(t, l, "k", 3); d.Allowed {
		t.Fatal("reserved units were spent twice")
	}
	if err := r.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	if d := mustAllow(t, l, "k", 0); d.Remaining != 5 {
		t.Fatalf("after Cancel: %+v, want all 5 back", d)
	}
	if err := r.Cancel(ctx); err != nil { // a second Cancel does nothing
		t.Fatal(err)
	}
	if d := mustAllow(t, l, "k", 0); d.Remaining != 5 {
		t.Fatalf("a second Cancel gave back more: %+v", d)
	}

	// Committed units stay spent.
	r, _ = l.Reserve(ctx, "k", 2)
	r.Commit()
	if err := r.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	if d := mustAllow(t, l, "k", 0); d.Remaining != 3 {
		t.Fatalf("Cancel after Commit gave back: %+v", d)
	}

	// A cancel after part of the reservation drained gives back only the
	// rest: reserve 3 on a bucket at 2, wait 4s (drains to 1), cancel: the
	// level is what it would have been with 0, 1 or 2 of the 3 drained
	// first -- never lower than without the reservation.
	fc.Advance(10 * time.Second) // empty
	mustAllow(t, l, "k", 2)
	r, _ = l.Reserve(ctx, "k", 3) // level 5
	fc.Advance(4 * time.Second)   // level 1
	if err := r.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	// The reservation sat on top: [2s, 5s) of the queue, 1s of it ahead.
	if d := mustAllow(t, l, "k", 0); d.Remaining != 5 || d.ResetAfter != 0 {
		t.Fatalf("after a late Cancel: %+v, want the 1 unit ahead refunded (empty bucket)", d)
	}

	// A denied reservation holds nothing, and Cancel is a no-op.
	mustAllow(t, l, "k", 5)
	r, err = l.Reserve(ctx, "k", 1)
	if err != nil || r.OK() || r.Decision().RetryAfter != time.Second {
		t.Fatalf("Reserve on a full bucket: %+v, %v", r.Decision(), err)
	}
	if err := r.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	if d := mustAllow(t, l, "k", 0); d.Remaining != 0 {
		t.Fatalf("cancelling a denied reservation gave back: %+v", d)
	}
}

func TestReservationWindows(t *testing.T) {
	for _, p := range []algo.Policy{algo.MustParsePolicy("fixed-window 4/1m"), algo.MustParsePolicy("sliding-window 4/1m"), algo.MustParsePolicy("sliding-log 4/1m")} {
		fc := newFake()
		l := floodgate.Must(floodgate.NewLimiter(p, floodgate.WithClock(fc)))
		mustAllow(t, l, "k", 1)
		fc.Advance(time.Second)
		r, _ := l.Reserve(ctx, "k", 3)
		fc.Advance(time.Second)
		if d := mustAllow(t, l, "k", 1); d.Allowed {
			t.Fatalf("%v: the reservation's units are not held", p)
		}
		if err := r.Cancel(ctx); err != nil {
			t.Fatal(err)
		}
		if d := mustAllow(t, l, "k", 3); !d.Allowed || d.Remaining != 0 {
			t.Fatalf("%v: after Cancel: %+v", p, d)
		}
	}
}

// Schedule on a bucket of 1 a second holds each request's unit for the
// next free second: five requests at one instant with a maximum wait of
// 3s are admitted after 0, 1, 2 and 3s exactly, and the fifth, which
// would wait 4s, is denied and holds nothing.
func TestSchedule(t *testing.T) {
	for _, p := range []string{"token-bucket 1/1s", "leaky-bucket 1/1s"} {
		fc := newFake()
		l := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy(p), floodgate.WithClock(fc)))
		var rs []*floodgate.Reservation
		for i := range 4 {
			r, err := l.Schedule(ctx, "k", 1, 3*time.Second)
			if err != nil || !r.OK() || r.Delay() != time.Duration(i)*time.Second || r.Decision().RetryAfter != 0 {
				t.Fatalf("%s: request %d: %+v delay %v, %v; want admitted after %ds", p, i+1, r.Decision(), r.Delay(), err, i)
			}
			rs = append(rs, r)
		}
		r, err := l.Schedule(ctx, "k", 1, 3*time.Second)
		if err != nil || r.OK() || r.Delay() != 0 || r.Decision().RetryAfter != 4*time.Second {
			t.Fatalf("%s: fifth: %+v delay %v, %v; want denied, retry after 4s", p, r.Decision(), r.Delay(), err)
		}
		// Cancelling the last gives its second back: the next is admitted
		// after 3s again.
		if err := rs[3].Cancel(ctx); err != nil {
			t.Fatal(err)
		}
		if r, _ := l.Schedule(ctx, "k", 1, 3*time.Second); !r.OK() || r.Delay() != 3*time.Second {
			t.Fatalf("%s: after a Cancel: %+v delay %v", p, r.Decision(), r.Delay())
		}
		// Time passing drains the queue: 1.5s later the next waits 2.5s.
		fc.Advance(1500 * time.Millisecond)
		if r, _ := l.Schedule(ctx, "k", 1, 3*time.Second); !r.OK() || r.Delay() != 2500*time.Millisecond {
			t.Fatalf("%s: 1.5s later: %+v delay %v", p, r.Decision(), r.Delay())
		}
		// No maximum wait: admitted only at once.
		if r, _ := l.Schedule(ctx, "other", 1, 0); !r.OK() || r.Delay() != 0 {
			t.Fatalf("%s: maxWait 0 on a full bucket: %+v", p, r.Decision())
		}
		if r, _ := l.Schedule(ctx, "other", 1, -time.Second); r.OK() || r.Decision().RetryAfter != time.Second {
			t.Fatalf("%s: negative maxWait: %+v", p, r.Decision())
		}
		if r, err := l.Schedule(ctx, "k", 2, time.Hour); r.OK() || !errors.Is(err, algo.ErrCostExceedsBurst) {
			t.Fatalf("%s: over the burst: %+v, %v", p, r.Decision(), err)
		}
	}
}

// The window and log algorithms cannot hold units for later: Schedule
// admits at once or denies, with RetryAfter the wait after which it would
// admit at once, as Limiter.WaitN documents.
func TestScheduleWindows(t *testing.T) {
	for _, p := range []string{"fixed-window 2/10s", "sliding-log 2/10s"} {
		fc := newFake()
		l := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy(p), floodgate.WithClock(fc)))
		for range 2 {
			if r, _ := l.Schedule(ctx, "k", 1, time.Minute); !r.OK() || r.Delay() != 0 {
				t.Fatalf("%s: %+v delay %v", p, r.Decision(), r.Delay())
			}
		}
		if r, _ := l.Schedule(ctx, "k", 1, time.Minute); r.OK() || r.Decision().RetryAfter != 10*time.Second {
			t.Fatalf("%s: third: %+v; want denied, retry after 10s", p, r.Decision())
		}
	}
}

// The limiter's WithMaxWait bounds Schedule's, and dry-run mode admits at
// once, holding nothing.
func TestScheduleOptions(t *testing.T) {
	p := algo.MustParsePolicy("token-bucket 1/1s")
	l := floodgate.Must(floodgate.NewLimiter(p, floodgate.WithClock(newFake()), floodgate.WithMaxWait(time.Second)))
	l.Schedule(ctx, "k", 1, time.Minute)
	l.Schedule(ctx, "k", 1, time.Minute)
	if r, _ := l.Schedule(ctx, "k", 1, time.Minute); r.OK() {
		t.Fatalf("WithMaxWait(1s): a wait of 2s admitted: delay %v", r.Delay())
	}
	dry := floodgate.Must(floodgate.NewLimiter(p, floodgate.WithClock(newFake()), floodgate.WithDryRun(true)))
	dry.Schedule(ctx, "k", 1, time.Minute)
	if r, _ := dry.Schedule(ctx, "k", 1, time.Minute); !r.OK() || !r.Decision().DryRun || r.Delay() != 0 {
		t.Fatalf("dry run: %+v delay %v", r.Decision(), r.Delay())
	}
}

// Cancelling a reservation with others queued behind it gives back
// nothing they rely on (issue 28): on a leaky bucket of capacity 1
// draining every 200ms, requests at 0, 30, 60 and 90ms act at 0, 200,
// 400 and 600ms; cancelling the second at 100ms must not let a request
// at 300ms act at 600ms beside the fourth. The slot at 200ms is lost, as
// with x/time/rate's Reservation.CancelAt: the fourth cannot move up.
func TestCancelQueued(t *testing.T) {
	fc := newFake()
	l := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("leaky-bucket 5/1s capacity=1"), floodgate.WithClock(fc)))
	var rs []*floodgate.Reservation
	for i := range 4 {
		r, err := l.Schedule(ctx, "k", 1, time.Second)
		if want := time.Duration(200*i-30*i) * time.Millisecond; err != nil || !r.OK() || r.Delay() != want {
			t.Fatalf("request %d: %+v delay %v, %v; want admitted after %v", i+1, r.Decision(), r.Delay(), err, want)
		}
		rs = append(rs, r)
		if i < 3 {
			fc.Advance(30 * time.Millisecond)
		}
	}
	fc.Advance(10 * time.Millisecond) // 100ms
	if err := rs[1].Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	fc.Advance(200 * time.Millisecond) // 300ms
	r, err := l.Schedule(ctx, "k", 1, time.Second)
	if err != nil || !r.OK() {
		t.Fatalf("request at 300ms: %+v, %v", r.Decision(), err)
	}
	if got := 300*time.Millisecond + r.Delay(); got != 800*time.Millisecond {
		t.Fatalf("request at 300ms acts at %v, want 800ms, after the one queued at 90ms acts at 600ms", got)
	}
}
