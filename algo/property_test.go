package algo_test

// Invariant tests that need no reference model: bounds on what any
// algorithm may admit, the exactness of RetryAfter and ResetAfter, what
// must leave a State untouched, ResetAt, and bad input. Traces come from
// refGenTrace (reference_test.go) with fixed seeds. A failure names the
// rule it broke.

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/internal/reference"
)

// propStep is one decided event with its key's encoded state before and
// after.
type propStep struct {
	ev            reference.Event
	d             algo.Decision
	err           error
	before, after []byte
}

func propCounts() (traces, events int) {
	if testing.Short() {
		return 30, 150
	}
	return 120, 250
}

// propEncode returns s's encoding.
func propEncode(t testing.TB, s *algo.State) []byte {
	t.Helper()
	b, err := s.MarshalBinary()
	if err != nil {
		t.Fatalf("MarshalBinary: %v", err)
	}
	return b
}

// propDecode returns a new State decoded from b: a deep copy of the State
// b was encoded from (State has unexported fields and, for sliding-log, a
// pointer, so it cannot be copied by assignment).
func propDecode(t testing.TB, b []byte) *algo.State {
	t.Helper()
	s := new(algo.State)
	if err := s.UnmarshalBinary(b); err != nil {
		t.Fatalf("UnmarshalBinary(%x): %v", b, err)
	}
	return s
}

// propRun decides events with the core, one State per key, recording each
// step.
func propRun(t testing.TB, p algo.Policy, events []reference.Event) []propStep {
	states := map[string]*algo.State{}
	steps := make([]propStep, len(events))
	for i, e := range events {
		s := states[e.Key]
		if s == nil {
			s = new(algo.State)
			states[e.Key] = s
		}
		st := propStep{ev: e, before: propEncode(t, s)}
		st.d, st.err = p.Decide(s, e.T, e.N)
		st.after = propEncode(t, s)
		steps[i] = st
	}
	return steps
}

// propTrace is one generated trace, decided by the core.
type propTrace struct {
	p     algo.Policy
	seed  uint64
	steps []propStep
}

// propCache holds the traces of each algorithm, generated once and shared
// (read-only) by the property tests.
var propCache struct {
	sync.Mutex
	m map[algo.Algorithm][]propTrace
}

func propTracesOf(t testing.TB, alg algo.Algorithm) []propTrace {
	propCache.Lock()
	defer propCache.Unlock()
	if tr, ok := propCache.m[alg]; ok {
		return tr
	}
	nTraces, nEvents := propCounts()
	var out []propTrace
	for i, p := range refPolicies(t, alg, nTraces, 2) {
		seed := uint64(7000*int(alg) + i)
		rng := rand.New(rand.NewPCG(seed, 0xbeef))
		events := refGenTrace(rng, p, nEvents, 1+rng.IntN(3))
		out = append(out, propTrace{p, seed, propRun(t, p, events)})
	}
	if propCache.m == nil {
		propCache.m = map[algo.Algorithm][]propTrace{}
	}
	propCache.m[alg] = out
	return out
}

// propTraces calls f for every trace of every algorithm, one parallel
// subtest per algorithm; f returns how many checks it made, which the
// subtest logs so that a property that checks nothing shows.
func propTraces(t *testing.T, f func(t *testing.T, p algo.Policy, seed uint64, steps []propStep) int) {
	for _, alg := range refAlgorithms {
		t.Run(alg.String(), func(t *testing.T) {
			t.Parallel()
			checks := 0
			for _, tr := range propTracesOf(t, alg) {
				checks += f(t, tr.p, tr.seed, tr.steps)
				if t.Failed() {
					return // one failing trace is enough to read
				}
			}
			t.Logf("%d checks", checks)
		})
	}
}

// propWhere names a step for a failure message.
func propWhere(p algo.Policy, seed uint64, i int, st propStep) string {
	return fmt.Sprintf("policy %q, trace seed %d, event %d {T: %d, Key: %q, N: %d} -> %+v (err %v)",
		p.String(), seed, i, st.ev.T, st.ev.Key, st.ev.N, st.d, st.err)
}

// admittedByKey returns the admitted events (with n > 0) of each key.
func admittedByKey(steps []propStep) map[string][]reference.Event {
	out := map[string][]reference.Event{}
	for _, st := range steps {
		if st.d.Allowed && st.ev.N > 0 {
			out[st.ev.Key] = append(out[st.ev.Key], st.ev)
		}
	}
	return out
}

// TestPropertyWindowLimit: sliding-log admits at most LIMIT units in every
// half-open interval of length PERIOD; fixed-window and sliding-window at
// most LIMIT in every window [k*PERIOD, (k+1)*PERIOD).
func TestPropertyWindowLimit(t *testing.T) {
	propTraces(t, func(t *testing.T, p algo.Policy, seed uint64, steps []propStep) int {
		checks := 0
		P, L := int64(p.Period()), p.Limit()
		for key, adm := range admittedByKey(steps) {
			switch p.Algorithm() {
			case algo.SlidingLog:
				// The fullest interval [a, a+P) starts at an admitted event.
				var sum int64
				j := 0
				for i := range adm {
					for ; j < len(adm) && adm[j].T < adm[i].T+P; j++ {
						sum += adm[j].N
					}
					checks++
					if sum > L {
						t.Errorf("rule log-interval-limit: policy %q, seed %d, key %q: %d units admitted in [%d, %d+PERIOD)",
							p.String(), seed, key, sum, adm[i].T, adm[i].T)
						return checks
					}
					sum -= adm[i].N
				}
			case algo.FixedWindow, algo.SlidingWindow:
				perWindow := map[int64]int64{}
				for _, e := range adm {
					perWindow[e.T/P] += e.N
					checks++
					if perWindow[e.T/P] > L {
						t.Errorf("rule %v-window-limit: policy %q, seed %d, key %q: %d units admitted in window %d",
							p.Algorithm(), p.String(), seed, key, perWindow[e.T/P], e.T/P)
						return checks
					}
				}
			}
		}
		return checks
	})
}

// TestPropertyBucketBound: token-bucket and leaky-bucket admit at most
// B + floor((b-a)*LIMIT/PERIOD) units in any interval [a, b] of event
// times.
func TestPropertyBucketBound(t *testing.T) {
	propTraces(t, func(t *testing.T, p algo.Policy, seed uint64, steps []propStep) int {
		checks := 0
		if p.Algorithm() != algo.TokenBucket && p.Algorithm() != algo.LeakyBucket {
			return checks
		}
		P, L, B := uint64(p.Period()), uint64(p.Limit()), p.Burst()
		for key, adm := range admittedByKey(steps) {
			for i := range adm {
				var sum int64
				for j := i; j < len(adm); j++ {
					sum += adm[j].N
					hi, lo := bits.Mul64(uint64(adm[j].T-adm[i].T), L)
					if hi >= P {
						break // the bound exceeds 2^64 units
					}
					q, _ := bits.Div64(hi, lo, P)
					if q > math.MaxInt64/2 {
						break
					}
					checks++
					if bound := B + int64(q); sum > bound {
						t.Errorf("rule bucket-interval-bound: policy %q, seed %d, key %q: %d units admitted in [%d, %d], bound %d",
							p.String(), seed, key, sum, adm[i].T, adm[j].T, bound)
						return checks
					}
				}
			}
		}
		return checks
	})
}

// TestPropertyRetryAfterExact: the same event, decided on a copy of the
// state at t + RetryAfter, is admitted, and at t + RetryAfter - 1ns is not.
func TestPropertyRetryAfterExact(t *testing.T) {
	propTraces(t, func(t *testing.T, p algo.Policy, seed uint64, steps []propStep) int {
		checks := 0
		for i, st := range steps {
			if st.d.Allowed || st.d.RetryAfter == algo.Never {
				continue
			}
			at := st.ev.T + int64(st.d.RetryAfter)
			if st.d.RetryAfter <= 0 || at < st.ev.T || at > algo.MaxTime {
				if st.d.RetryAfter <= 0 {
					t.Errorf("rule retry_after-positive: %s", propWhere(p, seed, i, st))
				}
				continue
			}
			checks++
			if d, err := p.Decide(propDecode(t, st.before), at, st.ev.N); err != nil || !d.Allowed {
				t.Errorf("rule retry_after-enough: %s; at t+RetryAfter = %d: %+v (err %v)", propWhere(p, seed, i, st), at, d, err)
			}
			if d, err := p.Decide(propDecode(t, st.before), at-1, st.ev.N); err != nil || d.Allowed {
				t.Errorf("rule retry_after-shortest: %s; at t+RetryAfter-1 = %d: %+v (err %v)", propWhere(p, seed, i, st), at-1, d, err)
			}
			if t.Failed() {
				return checks
			}
		}
		return checks
	})
}

// TestPropertyResetAfterExact: a peek at t + ResetAfter finds the initial
// state (full Remaining, ResetAfter 0), and a peek 1ns earlier does not.
func TestPropertyResetAfterExact(t *testing.T) {
	propTraces(t, func(t *testing.T, p algo.Policy, seed uint64, steps []propStep) int {
		checks := 0
		full := p.Burst()
		for i, st := range steps {
			if st.d.ResetAfter < 0 {
				t.Errorf("rule reset_after-non-negative: %s", propWhere(p, seed, i, st))
				return checks
			}
			at := st.ev.T + int64(st.d.ResetAfter)
			if at > algo.MaxTime {
				continue
			}
			checks++
			if d, err := p.Decide(propDecode(t, st.after), at, 0); err != nil || !d.Allowed || d.Remaining != full || d.ResetAfter != 0 {
				t.Errorf("rule reset_after-enough: %s; peek at t+ResetAfter = %d: %+v (err %v), want Remaining %d and ResetAfter 0",
					propWhere(p, seed, i, st), at, d, err, full)
			}
			if st.d.ResetAfter > 0 {
				if d, err := p.Decide(propDecode(t, st.after), at-1, 0); err != nil || d.Remaining == full && d.ResetAfter == 0 {
					t.Errorf("rule reset_after-shortest: %s; peek at t+ResetAfter-1 = %d is already reset: %+v (err %v)",
						propWhere(p, seed, i, st), at-1, d, err)
				}
			}
			if t.Failed() {
				return checks
			}
		}
		return checks
	})
}

// TestPropertyDecisionShape: a denial and a peek leave the state
// byte-identical; a cost above Burst is denied with Never and
// ErrCostExceedsBurst; an admitted event has RetryAfter 0; no other error;
// every state survives an encoding round trip.
func TestPropertyDecisionShape(t *testing.T) {
	propTraces(t, func(t *testing.T, p algo.Policy, seed uint64, steps []propStep) int {
		checks := 0
		for i, st := range steps {
			where := propWhere(p, seed, i, st)
			checks++
			switch {
			case st.ev.N > p.Burst():
				if st.d.Allowed || st.d.RetryAfter != algo.Never || !errors.Is(st.err, algo.ErrCostExceedsBurst) {
					t.Errorf("rule never: %s, want a denial with RetryAfter Never and ErrCostExceedsBurst", where)
				}
			case st.err != nil:
				t.Errorf("rule no-error: %s", where)
			case st.ev.N == 0 && !st.d.Allowed:
				t.Errorf("rule peek-admitted: %s", where)
			case st.d.Allowed && st.d.RetryAfter != 0:
				t.Errorf("rule admitted-retry-zero: %s", where)
			case !st.d.Allowed && st.d.RetryAfter <= 0:
				t.Errorf("rule denied-retry-positive: %s", where)
			}
			if st.d.Remaining < 0 || st.d.Remaining > p.Burst() {
				t.Errorf("rule remaining-in-range: %s", where)
			}
			if (!st.d.Allowed || st.ev.N == 0) && !slices.Equal(st.before, st.after) {
				rule := "denial-leaves-state"
				if st.ev.N == 0 {
					rule = "peek-leaves-state"
				}
				t.Errorf("rule %s: %s: state %x became %x", rule, where, st.before, st.after)
			}
			if b := propEncode(t, propDecode(t, st.after)); !slices.Equal(b, st.after) {
				t.Errorf("rule encoding-round-trip: %s: %x decodes and encodes to %x", where, st.after, b)
			}
			if t.Failed() {
				return checks
			}
		}
		return checks
	})
}

// TestPropertyResetAt: ResetAt agrees with ResetAfter (t + ResetAfter, or
// at most t when ResetAfter is 0), and from any time at or after
// ResetAt(s) the state s decides exactly as a fresh State: the rest of the
// key's trace is decided identically on both.
func TestPropertyResetAt(t *testing.T) {
	propTraces(t, func(t *testing.T, p algo.Policy, seed uint64, steps []propStep) int {
		checks := 0
		for i, st := range steps {
			after := propDecode(t, st.after)
			resetAt := p.ResetAt(after)
			switch {
			case st.d.ResetAfter > 0 && resetAt != st.ev.T+int64(st.d.ResetAfter):
				t.Errorf("rule reset_at-matches-reset_after: %s: ResetAt %d, want t+ResetAfter = %d",
					propWhere(p, seed, i, st), resetAt, st.ev.T+int64(st.d.ResetAfter))
			case st.d.ResetAfter == 0 && resetAt > st.ev.T:
				t.Errorf("rule reset_at-matches-reset_after: %s: ResetAt %d, want <= t since ResetAfter is 0",
					propWhere(p, seed, i, st), resetAt)
			}
			// Find the key's next event; if the state has reset by then,
			// replay the rest of the key's events on it and on a fresh
			// State (a few times per trace, it is quadratic).
			if checks >= 6 || resetAt == 0 {
				continue
			}
			var rest []reference.Event
			for _, later := range steps[i+1:] {
				if later.ev.Key == st.ev.Key {
					rest = append(rest, later.ev)
				}
			}
			if len(rest) == 0 || resetAt > rest[0].T {
				continue
			}
			checks++
			fresh := new(algo.State)
			for j, e := range rest {
				d1, err1 := p.Decide(after, e.T, e.N)
				d2, err2 := p.Decide(fresh, e.T, e.N)
				if d1 != d2 || (err1 == nil) != (err2 == nil) {
					t.Errorf("rule reset_at-is-reset: %s: ResetAt %d <= next time %d, but the %d-th later event %+v decides %+v on the state and %+v on a fresh one",
						propWhere(p, seed, i, st), resetAt, rest[0].T, j, e, d1, d2)
					break
				}
			}
			if t.Failed() {
				return checks
			}
		}
		return checks
	})
}

// TestPropertyForeignState: a State written under another algorithm counts
// as the initial state.
func TestPropertyForeignState(t *testing.T) {
	for _, from := range refAlgorithms {
		for _, to := range refAlgorithms {
			if from == to {
				continue
			}
			t.Run(from.String()+"-to-"+to.String(), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(from), uint64(to)))
				pf := refPolicies(t, from, 1, 3)[0]
				pt := refPolicies(t, to, 1, 3)[0]
				steps := propRun(t, pf, refGenTrace(rng, pf, 40, 1))
				events := refGenTrace(rng, pt, 40, 1)
				shift := steps[len(steps)-1].ev.T - events[0].T
				for i := range events {
					events[i].T = min(events[i].T+max(shift, 0), algo.MaxTime)
				}
				foreign := propDecode(t, steps[len(steps)-1].after)
				fresh := new(algo.State)
				for i, e := range events {
					d1, err1 := pt.Decide(foreign, e.T, e.N)
					d2, err2 := pt.Decide(fresh, e.T, e.N)
					if d1 != d2 || (err1 == nil) != (err2 == nil) {
						t.Fatalf("rule foreign-state-is-initial: %q state used with %q: event %d %+v decides %+v, a fresh State %+v",
							pf.String(), pt.String(), i, e, d1, d2)
					}
				}
			})
		}
	}
}

// TestPropertyInvalidInput: Decide never panics; a time outside
// [0, MaxTime], a negative cost and the zero Policy are errors with a zero
// Decision and the state unchanged; the extreme valid inputs work.
func TestPropertyInvalidInput(t *testing.T) {
	type call struct {
		now, n int64
		want   error // nil: valid
	}
	calls := []call{
		{-1, 1, algo.ErrInvalidTime},
		{math.MinInt64, 0, algo.ErrInvalidTime},
		{algo.MaxTime + 1, 1, algo.ErrInvalidTime},
		{math.MaxInt64, 0, algo.ErrInvalidTime},
		{0, -1, algo.ErrInvalidCost},
		{algo.MaxTime, math.MinInt64, algo.ErrInvalidCost},
		{-1, -1, nil}, // either error will do
		{0, math.MaxInt64, algo.ErrCostExceedsBurst},
		{algo.MaxTime, math.MaxInt64, algo.ErrCostExceedsBurst},
		{algo.MaxTime, 0, nil},
		{algo.MaxTime, 1, nil},
		{0, 0, nil},
	}
	for _, alg := range refAlgorithms {
		t.Run(alg.String(), func(t *testing.T) {
			for i, p := range refPolicies(t, alg, 12, 4) {
				rng := rand.New(rand.NewPCG(uint64(i), 11))
				steps := propRun(t, p, refGenTrace(rng, p, 60, 1))
				for _, st := range []propStep{{}, steps[len(steps)/2], steps[len(steps)-1]} {
					for _, c := range calls {
						s := new(algo.State)
						if st.after != nil {
							s = propDecode(t, st.after)
						}
						before := propEncode(t, s)
						d, err := propSafeDecide(p, s, c.now, c.n)
						where := fmt.Sprintf("policy %q, state %x, Decide(now=%d, n=%d) = %+v, %v", p.String(), before, c.now, c.n, d, err)
						var pe propPanic
						if errors.As(err, &pe) {
							t.Fatalf("rule no-panic: %s", where)
						}
						invalid := c.now < 0 || c.now > algo.MaxTime || c.n < 0
						switch {
						case invalid && (err == nil || d != algo.Decision{}):
							t.Errorf("rule invalid-input-error: %s, want an error and a zero Decision", where)
						case invalid && c.want != nil && !errors.Is(err, c.want):
							t.Errorf("rule invalid-input-error: %s, want %v", where, c.want)
						case !invalid && c.want == nil && err != nil:
							t.Errorf("rule valid-input: %s", where)
						case !invalid && c.want != nil && !errors.Is(err, c.want):
							t.Errorf("rule valid-input: %s, want %v", where, c.want)
						}
						if (invalid || c.n == 0 || !d.Allowed) && !slices.Equal(before, propEncode(t, s)) {
							t.Errorf("rule invalid-input-leaves-state: %s: state %x became %x", where, before, propEncode(t, s))
						}
					}
				}
			}
		})
	}
	t.Run("zero-policy", func(t *testing.T) {
		var zero algo.Policy
		var s algo.State
		if d, err := propSafeDecide(zero, &s, 0, 1); !errors.Is(err, algo.ErrInvalidPolicy) || d != (algo.Decision{}) {
			t.Errorf("rule zero-policy: Decide = %+v, %v; want ErrInvalidPolicy", d, err)
		}
		if s != (algo.State{}) {
			t.Errorf("rule zero-policy-leaves-state: the state changed")
		}
	})
}

// propPanic is the error propSafeDecide returns for a panic.
type propPanic struct{ v any }

func (e propPanic) Error() string { return fmt.Sprintf("panic: %v", e.v) }

// propSafeDecide calls Decide, turning a panic into a propPanic error.
func propSafeDecide(p algo.Policy, s *algo.State, now, n int64) (d algo.Decision, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = propPanic{v}
		}
	}()
	return p.Decide(s, now, n)
}
