package algo_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"
)

// TestShadowNeverAdmitsMore forgets random keys' states into one Shadow and
// checks that the state Recall returns is at least as strict as each of
// theirs: every event it admits, from its first one at or after
// the last Forget on (later events may go back in time by up to a period),
// each forgotten state admits too, event after event.
func TestShadowNeverAdmitsMore(t *testing.T) {
	policies := []string{
		"token-bucket 5/1s burst=7", "leaky-bucket 4/1s capacity=6",
		"fixed-window 5/1s", "sliding-window 5/1s", "sliding-log 5/1s",
		// Counts past 32 bits, which a Shadow rounds up to fit in 16 bytes,
		// and a sliding window whose twice LIMIT does not fit.
		"token-bucket 1250000000/1s burst=4294967296", "leaky-bucket 1000000000000000/1s",
		"fixed-window 999999999999999/1s", "sliding-window 1000000000000000/1s",
		"sliding-log 1000000000000000/1s", "sliding-window 4294967295/1s",
	}
	for _, text := range policies {
		p := algo.MustParsePolicy(text)
		t.Run(text, func(t *testing.T) {
			for seed := range uint64(400) {
				if msg := shadowTrial(p, rand.New(rand.NewPCG(seed, 17))); msg != "" {
					t.Fatalf("seed %d: %s", seed, msg)
				}
			}
		})
	}
}

// shadowTrial runs one trial, and returns what went wrong, or "".
func shadowTrial(p algo.Policy, r *rand.Rand) string {
	period := int64(p.Period())
	now := int64(10 * time.Second)
	var sh algo.Shadow
	var forgotten []*algo.State
	for range 1 + r.IntN(4) {
		s := new(algo.State)
		for range r.IntN(8) {
			now += r.Int64N(period / 2)
			p.Decide(s, now, 1+r.Int64N(p.Burst()))
		}
		p.Forget(&sh, s, now)
		forgotten = append(forgotten, s)
		now += r.Int64N(period / 3)
	}
	now += r.Int64N(period)
	got := p.Recall(sh, now) // on the key's first event, at now
	for i := range 30 {
		at := now
		if i > 0 {
			at = now - period + r.Int64N(3*period)
		}
		n := 1 + r.Int64N(p.Burst())
		d, _ := p.Decide(&got, at, n)
		if !d.Allowed {
			continue
		}
		for k, s := range forgotten {
			if ds, _ := p.Decide(s, at, n); !ds.Allowed {
				return fmt.Sprintf("event %d (t=%d n=%d): recalled state admits, key %d's denies", i, at, n, k)
			}
		}
	}
	return ""
}

// TestShadowForgetsDrained checks that a drained state adds nothing and a
// drained Shadow recalls the initial state.
func TestShadowForgetsDrained(t *testing.T) {
	p := algo.MustParsePolicy("fixed-window 2/1s")
	var s algo.State
	p.Decide(&s, 0, 2)
	var sh algo.Shadow
	p.Forget(&sh, &s, int64(2*time.Second))
	if got := p.Recall(sh, 0); p.ResetAt(&got) != 0 {
		t.Fatalf("a drained state was kept: ResetAt %d", p.ResetAt(&got))
	}
	p.Forget(&sh, &s, 0)
	got := p.Recall(sh, int64(500*time.Millisecond))
	if d, _ := p.Decide(&got, int64(500*time.Millisecond), 1); d.Allowed {
		t.Fatal("a recalled full window admitted")
	}
	if got := p.Recall(sh, int64(time.Second)); p.ResetAt(&got) != 0 {
		t.Fatal("a drained shadow recalled state")
	}
}

// TestShadowLooser checks the order Looser puts Shadows in: a drained one
// first, then the one that drains first, then the one holding fewer units.
func TestShadowLooser(t *testing.T) {
	p := algo.MustParsePolicy("fixed-window 10/1s")
	sec := int64(time.Second)
	shadow := func(at, n int64) algo.Shadow {
		var s algo.State
		p.Decide(&s, at, n)
		var sh algo.Shadow
		p.Forget(&sh, &s, at)
		return sh
	}
	var empty algo.Shadow
	drained, few, many, later := shadow(0, 9), shadow(sec, 2), shadow(sec, 9), shadow(2*sec, 1)
	now := sec + sec/2
	for _, c := range []struct {
		name string
		a, b algo.Shadow
		want bool
	}{
		{"empty before full", empty, many, true}, {"full before empty", many, empty, false},
		{"drained before full", drained, few, true}, {"drained and empty tie", drained, empty, false},
		{"fewer units first", few, many, true}, {"more units after", many, few, false},
		{"drains first", many, later, true}, {"drains later", later, few, false},
	} {
		if got := p.Looser(c.a, c.b, now); got != c.want {
			t.Errorf("%s: Looser = %v, want %v", c.name, got, c.want)
		}
	}
}
