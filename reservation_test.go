package floodgate_test

import (
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
