package algo_test

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"
)

var stampPolicies = []string{
	"token-bucket 3/1s burst=5", "token-bucket 7/2s", "leaky-bucket 1000/7ms capacity=20",
	"sliding-log 4/1s", "sliding-window 5/1s", "fixed-window 3/500ms",
	"token-bucket 1250000000/1s burst=4294967296", "sliding-log 1000000000000000/1s",
	"sliding-window 999999999999999/1s", "fixed-window 1000000000000000/7ms",
}

// TestRefundProperties admits an event, later refunds it, and compares
// with the same history without the event: the refund must never leave
// more headroom than that, at any later time; refunded at once, it must
// leave exactly as much.
func TestRefundProperties(t *testing.T) {
	for _, ps := range stampPolicies {
		p, _ := algo.ParsePolicy(ps)
		P := int64(p.Period())
		rng := rand.New(rand.NewPCG(7, 8))
		for trial := range 2000 {
			var with, without algo.State
			now := int64(5 * P)
			for range rng.IntN(6) { // a shared history
				now += rng.Int64N(P / 2)
				n := 1 + rng.Int64N(2)
				p.Decide(&with, now, n)
				p.Decide(&without, now, n)
			}
			now += rng.Int64N(P / 2)
			n := 1 + rng.Int64N(p.Burst())
			d, _ := p.Decide(&with, now, n)
			if !d.Allowed {
				continue
			}
			st := p.StampOf(&with, now)
			at := now
			if trial%2 == 1 { // refund later, after more events
				for range rng.IntN(4) {
					at += rng.Int64N(P / 3)
					m := 1 + rng.Int64N(2)
					da, _ := p.Decide(&with, at, m)
					if da.Allowed { // keep the histories alike where possible
						p.Decide(&without, at, m)
					}
				}
				at += rng.Int64N(P)
			}
			if err := p.Refund(&with, st, at, n); err != nil {
				t.Fatal(err)
			}
			for k := int64(0); k < 6; k++ {
				u := at + k*P/4
				a, _ := p.Decide(&with, u, 0)
				b, _ := p.Decide(&without, u, 0)
				if a.Remaining > b.Remaining {
					t.Fatalf("%s trial %d: after a refund at %d, remaining %d at %d, but %d without the event", ps, trial, at, a.Remaining, u, b.Remaining)
				}
				if trial%2 == 0 && k == 0 && a.Remaining != b.Remaining {
					t.Fatalf("%s trial %d: an immediate refund left remaining %d, want %d", ps, trial, a.Remaining, b.Remaining)
				}
			}
		}
	}
}

func TestRefundErrors(t *testing.T) {
	p, _ := algo.ParsePolicy("token-bucket 3/1s burst=5")
	var s algo.State
	p.Decide(&s, 0, 2)
	before := s
	for _, c := range []struct {
		now, n int64
		want   error
	}{{0, -1, algo.ErrInvalidCost}, {0, 6, algo.ErrInvalidCost}, {-1, 1, algo.ErrInvalidTime}} {
		if err := p.Refund(&s, algo.Stamp{}, c.now, c.n); !errors.Is(err, c.want) {
			t.Errorf("Refund(now %d, n %d): %v, want %v", c.now, c.n, err, c.want)
		}
	}
	var zero algo.Policy
	if err := zero.Refund(&s, algo.Stamp{}, 0, 1); !errors.Is(err, algo.ErrInvalidPolicy) {
		t.Errorf("zero Policy: %v", err)
	}
	// A bogus stamp changes nothing rather than corrupting the state.
	if err := p.Refund(&s, algo.Stamp{TAT: -5, Frac: 99}, 0, 1); err != nil || s != before {
		t.Errorf("a bogus stamp: %v, state changed %v", err, s != before)
	}
}

// TestSchedule: scheduled events act in call order, at exactly the time
// Decide would first admit them, and nothing waits longer than maxWait.
func TestSchedule(t *testing.T) {
	for _, ps := range stampPolicies {
		p, _ := algo.ParsePolicy(ps)
		bucket := p.Algorithm() == algo.TokenBucket || p.Algorithm() == algo.LeakyBucket
		var s algo.State
		maxWait := int64(3 * p.Period())
		now, last := int64(0), int64(0)
		for i := range 200 {
			now += int64(p.Period()) / 50
			copyS := s.Clone()
			d, at, err := p.Schedule(&s, now, 1, maxWait)
			if err != nil {
				t.Fatal(err)
			}
			if !d.Allowed {
				if bucket && d.RetryAfter <= time.Duration(maxWait) {
					t.Fatalf("%s call %d: denied a wait of %v within %v", ps, i, d.RetryAfter, time.Duration(maxWait))
				}
				continue
			}
			if at < last || at-now > maxWait || at != now+int64(d.RetryAfter) {
				t.Fatalf("%s call %d: acts at %d (now %d, last %d, wait %v)", ps, i, at, now, last, d.RetryAfter)
			}
			if !bucket && at != now {
				t.Fatalf("%s: a window algorithm scheduled for later", ps)
			}
			// Deciding on the old state at "at" admits: the same event.
			if at > now {
				want, _ := p.Decide(&copyS, at, 1)
				if !want.Allowed {
					t.Fatalf("%s call %d: scheduled at %d, where Decide denies", ps, i, at)
				}
			}
			last = at
		}
	}
}

func TestCellAndClone(t *testing.T) {
	for _, ps := range stampPolicies {
		p, _ := algo.ParsePolicy(ps)
		var s algo.State
		for i := range 50 {
			p.Decide(&s, int64(i)*int64(p.Period())/7, 1)
		}
		c := s.Clone()
		cell, ok := s.Cell()
		if p.Compact() && !ok || p.Algorithm() == algo.SlidingLog && ok {
			t.Fatalf("%s: Cell ok = %v, Compact %v", ps, ok, p.Compact())
		}
		if ok {
			back := cell.State(p.Algorithm())
			if a, b := p.ResetAt(&back), p.ResetAt(&s); a != b {
				t.Fatalf("%s: Cell round trip: ResetAt %d vs %d", ps, a, b)
			}
		}
		// Changing the original must not change the clone.
		before, _ := p.Decide(&c, 100*int64(p.Period()), 0)
		p.Decide(&s, 51*int64(p.Period())/7, 1)
		after, _ := p.Decide(&c, 100*int64(p.Period()), 0)
		if before != after {
			t.Fatalf("%s: the clone shares state", ps)
		}
		b1, _ := s.MarshalBinary()
		c2 := s.Clone()
		b2, _ := c2.MarshalBinary()
		if string(b1) != string(b2) {
			t.Fatalf("%s: clone encodes differently", ps)
		}
	}
}

// TestCompact checks which policies keep their States in a Cell: those
// without a log whose counts fit in 32 bits. A State of a larger policy
// that counts past 2^32-1 has no Cell.
func TestCompact(t *testing.T) {
	for _, c := range []struct {
		policy  string
		compact bool
	}{
		{"token-bucket 1000000000/1s", true},
		{"token-bucket 4294967295/1s burst=1000000000000000", true},
		{"token-bucket 4294967296/1s", false},
		{"leaky-bucket 1250000000/1s capacity=4294967296", true},
		{"sliding-window 4294967295/1s", true},
		{"fixed-window 4294967296/1s", false},
		{"fixed-window 1000000000000000/1s", false},
		{"sliding-log 1/1s", false},
	} {
		p := algo.MustParsePolicy(c.policy)
		if p.Compact() != c.compact {
			t.Errorf("%s: Compact = %v, want %v", c.policy, p.Compact(), c.compact)
		}
	}
	for _, ps := range []string{"fixed-window 1000000000000000/1s", "sliding-window 1000000000000000/1s", "token-bucket 1000000000000000/1s"} {
		p := algo.MustParsePolicy(ps)
		var s algo.State
		p.Decide(&s, int64(time.Second)/3, 1<<32)
		p.Decide(&s, int64(time.Second)*4/3, 1<<32+1)
		if _, ok := s.Cell(); ok {
			t.Errorf("%s: a State counting past 2^32-1 has a Cell", ps)
		}
	}
}

// TestRefundQueued: a bucket refund gives back nothing while units
// admitted after the event are held (they act at instants that counted
// on it), and the undrained rest once the event is the last again. On
// leaky-bucket 5/1s capacity=1, events scheduled at 0, 30, 60 and 90ms
// act at 0, 200, 400 and 600ms (TAT 800ms); at 100ms, refunding the
// second changes nothing; refunding the fourth, then the third, then the
// second, takes TAT back to 600, 400, then 200ms.
func TestRefundQueued(t *testing.T) {
	p := algo.MustParsePolicy("leaky-bucket 5/1s capacity=1")
	const ms = int64(time.Millisecond)
	var s algo.State
	var stamps []algo.Stamp
	for i := range int64(4) {
		d, at, err := p.Schedule(&s, 30*i*ms, 1, int64(time.Second))
		if err != nil || !d.Allowed || at != 200*i*ms {
			t.Fatalf("event %d: %+v at %d, %v", i, d, at, err)
		}
		stamps = append(stamps, p.StampOf(&s, at))
	}
	tat := func() time.Duration {
		d, _ := p.Decide(&s, 100*ms, 0)
		return time.Duration(100*ms) + d.ResetAfter
	}
	for _, c := range []struct {
		event int
		want  time.Duration
	}{{1, 800 * time.Millisecond}, {3, 600 * time.Millisecond}, {2, 400 * time.Millisecond}, {1, 200 * time.Millisecond}} {
		if err := p.Refund(&s, stamps[c.event], 100*ms, 1); err != nil {
			t.Fatal(err)
		}
		if got := tat(); got != c.want {
			t.Fatalf("after refunding event %d at 100ms, TAT %v, want %v", c.event, got, c.want)
		}
	}
}
