package algo_test

// The conservativeness of Policy.Convert, against internal/reference: a
// converted state never admits an event that the new policy's own state,
// after the units the old state still counts, would deny.

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/internal/reference"
)

// convertPolicies are small policies of every algorithm, with periods that
// do and do not divide one another and bursts above and at LIMIT.
var convertPolicies = []string{
	"token-bucket 3/1000ns", "token-bucket 3/1000ns burst=5", "token-bucket 5/3000ns burst=2",
	"token-bucket 2/1500ns", "leaky-bucket 3/1000ns", "leaky-bucket 3/1000ns capacity=6",
	"leaky-bucket 7/3000ns capacity=4",
	"sliding-log 3/1000ns", "sliding-log 5/1000ns", "sliding-log 4/3000ns", "sliding-log 2/1500ns",
	"sliding-window 3/1000ns", "sliding-window 6/1000ns", "sliding-window 4/1500ns", "sliding-window 5/3000ns",
	"fixed-window 3/1000ns", "fixed-window 6/1000ns", "fixed-window 4/1500ns", "fixed-window 5/3000ns",
}

// TestConvertConservative converts the state of a random history under
// one policy to another, then decides random events on it: every event the
// converted state admits, the new policy's reference model, fed the units
// the old state counts (ownHistory), must admit too.
func TestConvertConservative(t *testing.T) {
	trials := 20000
	if testing.Short() {
		trials = 4000
	}
	rng := rand.New(rand.NewPCG(28, 7))
	for trial := range trials {
		from := algo.MustParsePolicy(convertPolicies[rng.IntN(len(convertPolicies))])
		to := algo.MustParsePolicy(convertPolicies[rng.IntN(len(convertPolicies))])
		if err := convertTrial(rng, from, to); err != nil {
			t.Fatalf("trial %d, %v -> %v: %v", trial, from, to, err)
		}
	}
}

// convertTrial runs one trial of TestConvertConservative.
func convertTrial(rng *rand.Rand, from, to algo.Policy) error {
	var s algo.State
	var admitted []reference.Event
	ref := refModel(from)
	events := convertEvents(rng, 0, min(from.Burst(), 6), 1+rng.IntN(12))
	for _, e := range events {
		if d, err := from.Decide(&s, e.T, e.N); err == nil && d.Allowed && e.N > 0 {
			admitted = append(admitted, e)
		}
		ref.Decide(e)
	}
	now := events[len(events)-1].T + rng.Int64N(2*int64(from.Period()))
	held := from.Burst() - ref.Decide(reference.Event{T: now, Key: "k"}).Remaining
	c, err := to.Convert(&from, &s, now)
	if err != nil {
		return fmt.Errorf("Convert: %v", err)
	}
	own := refModel(to)
	for _, e := range ownHistory(from, to, admitted, now, held) {
		own.Decide(e)
	}
	for _, e := range convertEvents(rng, now, to.Burst(), 20) {
		d, err := to.Decide(&c, e.T, e.N)
		if err != nil {
			return fmt.Errorf("Decide(%+v) on the converted state: %v", e, err)
		}
		if !d.Allowed || e.N == 0 {
			continue
		}
		if r := own.Decide(e); !r.Allowed {
			return fmt.Errorf("history %+v, converted at %d (%d units held): admits %+v, which %v's own state denies", admitted, now, held, e, to)
		}
	}
	return nil
}

// ownHistory returns the events that give to its own state after the
// units that the state of from after admitted counts at now: the admitted
// events themselves where the state keeps their times (an equal policy;
// buckets of one rate; windows of one algorithm and period; for logs, the
// entries that still count), else those units spent at now.
func ownHistory(from, to algo.Policy, admitted []reference.Event, now, held int64) []reference.Event {
	bucket := func(p algo.Policy) bool {
		return p.Algorithm() == algo.TokenBucket || p.Algorithm() == algo.LeakyBucket
	}
	switch {
	case from == to,
		bucket(from) && bucket(to) && from.Limit() == to.Limit() && from.Period() == to.Period(),
		from.Algorithm() == to.Algorithm() && !bucket(from) && from.Algorithm() != algo.SlidingLog && from.Period() == to.Period():
		return admitted
	case from.Algorithm() == algo.SlidingLog && to.Algorithm() == algo.SlidingLog:
		var live []reference.Event
		for _, e := range admitted {
			if e.T > now-int64(from.Period()) {
				live = append(live, e)
			}
		}
		return live
	case held > 0:
		return []reference.Event{{T: now, Key: "k", N: min(held, to.Burst())}}
	}
	return nil
}

// convertEvents returns n events of key "k" from start on, in time order,
// of costs up to most.
func convertEvents(rng *rand.Rand, start, most int64, n int) []reference.Event {
	out := make([]reference.Event, n)
	t := start
	for i := range out {
		switch rng.IntN(4) {
		case 0:
		case 1:
			t += rng.Int64N(4)
		default:
			t += rng.Int64N(2000)
		}
		out[i] = reference.Event{T: t, Key: "k", N: rng.Int64N(most + 1)}
	}
	return out
}

// TestConvertKeepsEqualPolicies: converting to an equal policy is the
// identity, and a State of another algorithm converts to the initial one.
func TestConvertKeepsEqualPolicies(t *testing.T) {
	p := algo.MustParsePolicy("fixed-window 10/1s")
	var s algo.State
	p.Decide(&s, 5, 4)
	c, err := p.Convert(&p, &s, 7)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := p.Decide(&c, 7, 0); d.Remaining != 6 {
		t.Errorf("an equal policy: Remaining %d, want 6", d.Remaining)
	}
	q := algo.MustParsePolicy("token-bucket 10/1s")
	c, _ = p.Convert(&q, &s, 7) // s is a fixed window's, not a bucket's
	if d, _ := p.Decide(&c, 7, 0); d.Remaining != 10 {
		t.Errorf("a state of another algorithm: Remaining %d, want 10 (initial)", d.Remaining)
	}
}

// TestConvertRejectsBadInput: a time out of range or a zero Policy is an
// error, as in Decide.
func TestConvertRejectsBadInput(t *testing.T) {
	p := algo.MustParsePolicy("fixed-window 10/1s")
	var s algo.State
	if _, err := p.Convert(&p, &s, -1); !errors.Is(err, algo.ErrInvalidTime) {
		t.Errorf("now -1: %v, want ErrInvalidTime", err)
	}
	var zero algo.Policy
	if _, err := p.Convert(&zero, &s, 1); !errors.Is(err, algo.ErrInvalidPolicy) {
		t.Errorf("from the zero Policy: %v, want ErrInvalidPolicy", err)
	}
}
