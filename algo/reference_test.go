package algo_test

// Differential tests: the core (package algo) against the executable
// specification in internal/reference, on random traces with fixed seeds.
//
// A failure names the rule that differs (allowed, remaining, retry_after,
// reset_after, never), the policy, the seed and the event, prints the whole
// trace prefix as a Go literal, and then a minimised trace (events deleted
// greedily while the core and the reference still disagree) that can be
// pasted into TestReferenceRegressions.

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/internal/reference"
)

// awkwardPolicies are policies whose emission interval or window does not
// divide evenly, or that sit at the bounds; they are always tested.
var awkwardPolicies = []string{
	"token-bucket 3/1s burst=5",
	"token-bucket 7/2 burst=7",
	"token-bucket 1000000000/8784h",
	"token-bucket 1/8784h burst=99",
	"token-bucket 999999937/1ns burst=1000000000",
	"token-bucket 3/7ns burst=1",
	"leaky-bucket 7/2s capacity=3",
	"leaky-bucket 1000000000/8784h capacity=999999999",
	"leaky-bucket 13/1ns capacity=1",
	"leaky-bucket 1/3ns capacity=2",
	"sliding-log 5/60",
	"sliding-log 1000000000/8784h",
	"sliding-log 1/1ns",
	"sliding-log 3/7ns",
	"sliding-window 3/500ms",
	"sliding-window 1000000000/8784h",
	"sliding-window 7/3ns",
	"sliding-window 1/1ns",
	"sliding-window 999999999/1s",
	"fixed-window 7/2",
	"fixed-window 1000000000/8784h",
	"fixed-window 1/1ns",
	"fixed-window 2/3ns",
	// Counts past 32 bits, up to MaxLimit: byte rates.
	"token-bucket 1250000000/1s burst=4294967296",
	"token-bucket 1000000000000000/8784h",
	"token-bucket 999999999999989/1ns burst=1000000000000000",
	"token-bucket 4294967296/1s burst=4294967295",
	"leaky-bucket 1250000000/1s capacity=1000000000000000",
	"leaky-bucket 1000000000000000/8784h capacity=999999999999999",
	"sliding-log 1000000000000000/8784h",
	"sliding-log 4294967297/3ns",
	"sliding-window 1000000000000000/8784h",
	"sliding-window 999999999999999/1s",
	"sliding-window 4294967296/7ns",
	"fixed-window 1000000000000000/8784h",
	"fixed-window 4294967295/1s",
}

var refAlgorithms = []algo.Algorithm{algo.TokenBucket, algo.LeakyBucket, algo.SlidingLog, algo.SlidingWindow, algo.FixedWindow}

// refTraceCounts returns how many traces and events per trace each
// algorithm gets.
func refTraceCounts() (traces, events int) {
	if testing.Short() {
		return 40, 150
	}
	return 200, 250
}

func refParse(t testing.TB, s string) algo.Policy {
	t.Helper()
	p, err := algo.ParsePolicy(s)
	if err != nil {
		t.Fatalf("ParsePolicy(%q): %v", s, err)
	}
	return p
}

// refPolicies returns the awkward policies of alg, then random ones, n in
// all, deterministic in seed.
func refPolicies(t testing.TB, alg algo.Algorithm, n int, seed uint64) []algo.Policy {
	var ps []algo.Policy
	for _, s := range awkwardPolicies {
		if p := refParse(t, s); p.Algorithm() == alg {
			ps = append(ps, p)
		}
	}
	// The awkward ones get a few seeds each.
	var out []algo.Policy
	for len(out) < n/4 && len(ps) > 0 {
		out = append(out, ps[len(out)%len(ps)])
	}
	rng := rand.New(rand.NewPCG(seed, uint64(alg)))
	for len(out) < n {
		out = append(out, refRandomPolicy(rng, alg))
	}
	return out
}

// refRandomPolicy returns a valid random policy of alg: limits from 1 to
// MaxLimit (10^15), around 10^9 and 2^32 too, periods from 1ns to 366 days,
// bursts from 1 to MaxLimit within MaxDrain.
func refRandomPolicy(rng *rand.Rand, alg algo.Algorithm) algo.Policy {
	for {
		var limit int64
		switch x := rng.IntN(20); {
		case x < 8:
			limit = 1 + rng.Int64N(10)
		case x < 13:
			limit = 1 + rng.Int64N(1000)
		case x < 15:
			limit = 1 + rng.Int64N(1_000_000)
		case x < 16:
			limit = 1 + rng.Int64N(1_000_000_000)
		case x < 17:
			limit = 1<<32 + rng.Int64N(5) - 2 // around a Cell's largest count
		case x < 18:
			limit = algo.MaxLimit - rng.Int64N(3)
		default:
			limit = 1 + rng.Int64N(algo.MaxLimit)
		}
		var period int64
		switch x := rng.IntN(10); {
		case x < 2:
			period = 1 + rng.Int64N(1000)
		case x < 5:
			period = (1 + rng.Int64N(5000)) * int64(time.Millisecond)
		case x < 7:
			period = (1 + rng.Int64N(3600)) * int64(time.Second)
		case x < 8:
			period = 1 + rng.Int64N(10_000_000_000)
		case x < 9:
			period = 1 + rng.Int64N(int64(algo.MaxPeriod))
		default:
			period = int64(algo.MaxPeriod)
		}
		var burst int64
		if alg == algo.TokenBucket || alg == algo.LeakyBucket {
			switch x := rng.IntN(10); {
			case x < 4:
				burst = 0
			case x < 7:
				burst = 1 + rng.Int64N(3*limit)
			case x < 9:
				burst = 1 + rng.Int64N(min(limit, 5))
			default:
				burst = 1 + rng.Int64N(algo.MaxLimit)
			}
			burst = min(burst, algo.MaxLimit)
		}
		if p, err := algo.New(alg, limit, time.Duration(period), burst); err == nil {
			return p
		}
	}
}

// refGenTrace returns a random trace of n events over nKeys keys, in
// non-decreasing time. It drives a core limiter as it goes so that the
// next time can land exactly on (or 1ns before) a RetryAfter or
// ResetAfter of the key, a window boundary or a multiple of the emission
// interval: the places where off-by-one and rounding errors live.
func refGenTrace(rng *rand.Rand, p algo.Policy, n, nKeys int) []reference.Event {
	P := int64(p.Period())
	B := p.Burst()
	keys := []string{"a", "b", "c"}[:nKeys]
	states := map[string]*algo.State{}
	type last struct {
		t int64
		d algo.Decision
	}
	lasts := map[string]last{}
	var t int64
	switch x := rng.IntN(10); {
	case x < 6:
		t = 0
	case x < 8:
		t = rng.Int64N(10*P + 1)
	case x < 9:
		t = rng.Int64N(algo.MaxTime / 2)
	default:
		t = max(0, algo.MaxTime-rng.Int64N(5*P+1))
	}
	events := make([]reference.Event, 0, n)
	for i := range n {
		key := keys[rng.IntN(len(keys))]
		if i > 0 {
			l, seen := lasts[key]
			var next int64 // the new time, before clamping; may be < t
			switch x := rng.IntN(100); {
			case x < 12:
				next = t
			case x < 22:
				next = t + 1 + rng.Int64N(3)
			case x < 42:
				next = t + rng.Int64N(2*P+1)
			case x < 54: // k emission intervals, +-1
				k := 1 + rng.Int64N(3)
				next = t + (k*P+p.Limit()-1)/p.Limit() + rng.Int64N(3) - 1
			case x < 66: // the next window boundary, +-1, sometimes a period on
				next = (t/P+1)*P + rng.Int64N(3) - 1 + rng.Int64N(2)*P
			case x < 80: // exactly (or 1ns before) the key's RetryAfter
				if seen && !l.d.Allowed && l.d.RetryAfter != algo.Never {
					next = l.t + int64(l.d.RetryAfter) - rng.Int64N(2)
				} else {
					next = t + rng.Int64N(P/2+1)
				}
			case x < 92: // exactly (or 1ns before) the key's ResetAfter
				if seen {
					next = l.t + int64(l.d.ResetAfter) - rng.Int64N(2)
				} else {
					next = t + rng.Int64N(P+1)
				}
			default:
				next = t + rng.Int64N(P/max(p.Limit(), 1)+2)
			}
			switch {
			case next < t:
				next = t
			case next > algo.MaxTime || next < 0:
				next = algo.MaxTime
			}
			t = next
		}
		var cost int64
		switch x := rng.IntN(100); {
		case x < 15:
			cost = 0
		case x < 20:
			cost = B + 1 + rng.Int64N(2)*rng.Int64N(B+1)
		case x < 30:
			cost = B
		case x < 70:
			cost = 1 + rng.Int64N(min(B, 3))
		default:
			cost = 1 + rng.Int64N(B)
		}
		e := reference.Event{T: t, Key: key, N: cost}
		events = append(events, e)
		s := states[key]
		if s == nil {
			s = new(algo.State)
			states[key] = s
		}
		d, _ := p.Decide(s, e.T, e.N)
		lasts[key] = last{e.T, d}
	}
	return events
}

// refCoreStep is the core's answer to one event.
type refCoreStep struct {
	d   algo.Decision
	err error
}

// refRunCore decides events with the core, one State per key.
func refRunCore(p algo.Policy, events []reference.Event) []refCoreStep {
	states := map[string]*algo.State{}
	out := make([]refCoreStep, len(events))
	for i, e := range events {
		s := states[e.Key]
		if s == nil {
			s = new(algo.State)
			states[e.Key] = s
		}
		d, err := p.Decide(s, e.T, e.N)
		out[i] = refCoreStep{d, err}
	}
	return out
}

func refModel(p algo.Policy) *reference.Model {
	return reference.New(p.Algorithm().String(), p.Limit(), int64(p.Period()), p.Burst())
}

// refCompare returns "" when the core's step agrees with the reference's
// result, else the rules broken and both values.
func refCompare(got refCoreStep, want reference.Result) string {
	var broken []string
	if got.d.Allowed != want.Allowed {
		broken = append(broken, "allowed")
	}
	if got.d.Remaining != want.Remaining {
		broken = append(broken, "remaining")
	}
	if want.Never {
		if got.d.RetryAfter != algo.Never || !errors.Is(got.err, algo.ErrCostExceedsBurst) {
			broken = append(broken, "never")
		}
	} else {
		if got.err != nil {
			broken = append(broken, "unexpected-error")
		}
		if int64(got.d.RetryAfter) != reference.CeilNanos(want.RetryAfter) {
			broken = append(broken, "retry_after")
		}
	}
	if int64(got.d.ResetAfter) != reference.CeilNanos(want.ResetAfter) {
		broken = append(broken, "reset_after")
	}
	if len(broken) == 0 {
		return ""
	}
	return fmt.Sprintf("rule %s: got %+v (err %v), want %v (retry ceil %s, reset ceil %d)",
		strings.Join(broken, "+"), got.d, got.err, want, refCeilString(want), reference.CeilNanos(want.ResetAfter))
}

func refCeilString(r reference.Result) string {
	if r.Never {
		return "never"
	}
	return fmt.Sprint(reference.CeilNanos(r.RetryAfter))
}

// refFirstMismatch returns the index of the first event on which the core and
// the reference disagree, and how, or -1.
func refFirstMismatch(p algo.Policy, events []reference.Event) (int, string) {
	got := refRunCore(p, events)
	m := refModel(p)
	for i, e := range events {
		if msg := refCompare(got[i], m.Decide(e)); msg != "" {
			return i, msg
		}
	}
	return -1, ""
}

// refMinimise deletes events while the core and the reference still disagree
// somewhere, and returns the smallest trace found, ending at the mismatch.
func refMinimise(p algo.Policy, events []reference.Event) []reference.Event {
	i, _ := refFirstMismatch(p, events)
	if i < 0 {
		return events
	}
	cur := append([]reference.Event(nil), events[:i+1]...)
	for changed := true; changed; {
		changed = false
		for chunk := len(cur) / 2; chunk >= 1; chunk /= 2 {
			for j := 0; j+chunk <= len(cur); {
				try := append(append([]reference.Event(nil), cur[:j]...), cur[j+chunk:]...)
				if k, _ := refFirstMismatch(p, try); k >= 0 {
					cur, changed = try[:k+1], true
				} else {
					j++
				}
			}
		}
		// Shift all times down to start at a window boundary-preserving 0
		// where possible (same time mod PERIOD keeps windows aligned).
		if len(cur) > 0 {
			P := int64(p.Period())
			if shift := cur[0].T / P * P; shift > 0 {
				try := append([]reference.Event(nil), cur...)
				for j := range try {
					try[j].T -= shift
				}
				if k, _ := refFirstMismatch(p, try); k >= 0 {
					cur, changed = try[:k+1], true
				}
			}
		}
	}
	return cur
}

// refFormatTrace writes events as a Go literal, each annotated with the core's
// decision and the reference's result.
func refFormatTrace(p algo.Policy, events []reference.Event) string {
	var b strings.Builder
	got := refRunCore(p, events)
	m := refModel(p)
	fmt.Fprintf(&b, "policy %q\n[]reference.Event{\n", p.String())
	for i, e := range events {
		want := m.Decide(e)
		mark := ""
		if refCompare(got[i], want) != "" {
			mark = " <-- MISMATCH"
		}
		fmt.Fprintf(&b, "\t{T: %d, Key: %q, N: %d}, // %d: core %+v err=%v; reference %v%s\n",
			e.T, e.Key, e.N, i, got[i].d, got[i].err, want, mark)
	}
	b.WriteString("}\n")
	return b.String()
}

// TestReferenceDifferential compares the core against the reference on
// random traces: every algorithm, awkward and random policies, 1-3 keys.
func TestReferenceDifferential(t *testing.T) {
	nTraces, nEvents := refTraceCounts()
	for _, alg := range refAlgorithms {
		t.Run(alg.String(), func(t *testing.T) {
			t.Parallel()
			policies := refPolicies(t, alg, nTraces, 1)
			failures := 0
			var admitted, denied, never, peeks, fractional int
			for i, p := range policies {
				seed := uint64(1000*int(alg) + i)
				rng := rand.New(rand.NewPCG(seed, 0x5eed))
				events := refGenTrace(rng, p, nEvents, 1+rng.IntN(3))
				m := refModel(p)
				for _, e := range events {
					r := m.Decide(e)
					switch {
					case r.Never:
						never++
					case e.N == 0:
						peeks++
					case r.Allowed:
						admitted++
					default:
						denied++
						if !r.RetryAfter.IsInt() {
							fractional++
						}
					}
				}
				k, msg := refFirstMismatch(p, events)
				if k < 0 {
					continue
				}
				failures++
				if failures > 3 {
					continue
				}
				t.Errorf("policy %q, trace seed %d, event %d %+v: %s\nprefix:\n%s\nminimised:\n%s",
					p.String(), seed, k, events[k], msg, refFormatTrace(p, events[:k+1]), refFormatTrace(p, refMinimise(p, events)))
			}
			if failures > 0 {
				t.Errorf("%d of %d traces disagree with the reference", failures, len(policies))
			}
			t.Logf("%d traces x %d events: %d admitted, %d denied (%d with a fractional retry_after), %d never, %d peeks",
				len(policies), nEvents, admitted, denied, fractional, never, peeks)
		})
	}
}

// referenceRegressions are fixed traces, checked event by event; add the
// minimised trace of any failure here.
var referenceRegressions = []struct {
	policy string
	events []reference.Event
}{
	{"token-bucket 3/1s burst=5", []reference.Event{
		{T: 0, N: 5}, {T: 0, N: 1}, {T: 333333333, N: 1}, {T: 333333334, N: 1}, {T: 1e9, N: 0}, {T: 1e9, N: 6}, {T: 3e9, N: 0},
	}},
	{"token-bucket 7/2 burst=7", []reference.Event{
		{T: 0, N: 7}, {T: 1, N: 1}, {T: 285714285, N: 1}, {T: 285714286, N: 1}, {T: 285714286, N: 0},
	}},
	{"leaky-bucket 7/2s capacity=3", []reference.Event{
		{T: 0, N: 3}, {T: 0, N: 1}, {T: 285714285, N: 1}, {T: 285714286, N: 1}, {T: 10e9, N: 0}, {T: 10e9, N: 4},
	}},
	{"sliding-log 5/60", []reference.Event{
		{T: 0, N: 3}, {T: 10e9, N: 2}, {T: 20e9, N: 1}, {T: 20e9, N: 4}, {T: 60e9 - 1, N: 3}, {T: 60e9, N: 3}, {T: 60e9, N: 6}, {T: 130e9, N: 0},
	}},
	{"sliding-window 3/500ms", []reference.Event{
		{T: 100e6, N: 3}, {T: 600e6, N: 1}, {T: 666666666, N: 1}, {T: 666666667, N: 1}, {T: 700e6, N: 3}, {T: 999999999, N: 0}, {T: 1e9, N: 3}, {T: 2e9, N: 0},
	}},
	{"fixed-window 7/2", []reference.Event{
		{T: 1500e6, N: 7}, {T: 1900e6, N: 1}, {T: 2e9 - 1, N: 0}, {T: 2e9, N: 7}, {T: 2e9, N: 8}, {T: 4e9, N: 0},
	}},
}

// TestReferenceRegressions checks the fixed traces against the reference.
func TestReferenceRegressions(t *testing.T) {
	for _, tt := range referenceRegressions {
		t.Run(tt.policy, func(t *testing.T) {
			p := refParse(t, tt.policy)
			if k, msg := refFirstMismatch(p, tt.events); k >= 0 {
				t.Errorf("event %d: %s\n%s", k, msg, refFormatTrace(p, tt.events))
			}
		})
	}
}
