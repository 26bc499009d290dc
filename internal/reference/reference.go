// Package reference is the executable specification of floodgate's five
// rate-limiting algorithms: token-bucket, leaky-bucket, sliding-log,
// sliding-window and fixed-window.
//
// It is slow and obvious on purpose: written to be read next to the
// definitions, independently of the core, not to be fast. Every
// quantity is an exact rational (math/big.Rat) or an integer; nothing is
// rounded until the very end, when a test converts a duration to the whole
// nanoseconds the core reports (CeilNanos). Each algorithm keeps the most
// obvious state its definition suggests, which is deliberately not the
// state the core keeps:
//
//   - token-bucket keeps the theoretical arrival time TAT as a rational
//     (GCRA with T = PERIOD/LIMIT unrounded);
//   - leaky-bucket is a meter: a rational level and the time it was last
//     updated, drained continuously at LIMIT per PERIOD;
//   - sliding-log keeps every admitted event (time, units);
//   - sliding-window and fixed-window keep the units admitted in every
//     window they have seen, indexed by window number.
//
// The package is used only by tests, to compare the core (package algo)
// against the definitions.
//
// Times and durations are integer nanoseconds; times are >= 0 and the
// events of one trace come in non-decreasing time order. A primed value in
// the comments is the value after the event; for a denied event it is the
// current value, because a denial changes nothing. A cost of 0 is a peek:
// always admitted, changing nothing, reporting the current headroom. A cost
// greater than the policy's burst (B, C or LIMIT) is never admissible.
package reference

import (
	"fmt"
	"math/big"
)

// The algorithm names, as in the policy syntax.
const (
	TokenBucket   = "token-bucket"
	LeakyBucket   = "leaky-bucket"
	SlidingLog    = "sliding-log"
	SlidingWindow = "sliding-window"
	FixedWindow   = "fixed-window"
)

// Event is one event: at time T (ns), for key Key, of cost N units.
type Event struct {
	T   int64
	Key string
	N   int64
}

// Result is the exact outcome of one event.
type Result struct {
	Allowed bool
	// Remaining is the headroom after the event, in whole units.
	Remaining int64
	// RetryAfter is the exact wait (ns) after which a denied event would be
	// admitted; 0 when allowed, nil when Never.
	RetryAfter *big.Rat
	// ResetAfter is the exact time (ns) until the key is back in its
	// initial state if nothing else happens; 0 when it is there already.
	ResetAfter *big.Rat
	// Never reports a cost greater than the burst: never admissible.
	Never bool
}

func (r Result) String() string {
	retry := "never"
	if !r.Never {
		retry = r.RetryAfter.RatString()
	}
	return fmt.Sprintf("{allowed=%v remaining=%d retry=%s reset=%s}",
		r.Allowed, r.Remaining, retry, r.ResetAfter.RatString())
}

// Model decides a trace of events under one policy, keeping one state per
// key. The zero Model is not usable; make one with New.
type Model struct {
	alg                  string
	limit, period, burst int64
	keys                 map[string]algorithm
}

// algorithm is one key's state under one algorithm. decide is only called
// with 0 <= n <= burst.
type algorithm interface {
	decide(t, n int64) Result
}

// New returns a Model of the policy alg LIMIT/PERIOD (period in ns) with
// the given burst (token-bucket) or capacity (leaky-bucket); burst <= 0
// means LIMIT, and the window algorithms ignore it. It panics on an unknown
// algorithm or a non-positive limit or period: it is a test helper.
func New(alg string, limit, period, burst int64) *Model {
	switch alg {
	case TokenBucket, LeakyBucket:
		if burst <= 0 {
			burst = limit
		}
	case SlidingLog, SlidingWindow, FixedWindow:
		burst = limit
	default:
		panic("reference: unknown algorithm " + alg)
	}
	if limit <= 0 || period <= 0 {
		panic(fmt.Sprintf("reference: bad policy %d/%dns", limit, period))
	}
	return &Model{alg: alg, limit: limit, period: period, burst: burst, keys: map[string]algorithm{}}
}

// Decide decides one event. Events must come in non-decreasing time order
// (over all keys) with T >= 0 and N >= 0; Decide panics otherwise.
func (m *Model) Decide(e Event) Result {
	if e.T < 0 || e.N < 0 {
		panic(fmt.Sprintf("reference: bad event %+v", e))
	}
	k, ok := m.keys[e.Key]
	if !ok {
		k = m.fresh()
		m.keys[e.Key] = k
	}
	if e.N > m.burst {
		// Never admissible: denied, and otherwise reported as a peek.
		r := k.decide(e.T, 0)
		r.Allowed, r.RetryAfter, r.Never = false, nil, true
		return r
	}
	return k.decide(e.T, e.N)
}

func (m *Model) fresh() algorithm {
	switch m.alg {
	case TokenBucket:
		T := frac(m.period, m.limit) // emission interval, not rounded
		return &tokenBucket{T: T, tau: mul(integer(m.burst), T)}
	case LeakyBucket:
		return &leakyBucket{capacity: integer(m.burst), rate: frac(m.limit, m.period), level: integer(0)}
	case SlidingLog:
		return &slidingLog{limit: m.limit, period: m.period}
	case SlidingWindow:
		return &slidingWindow{limit: m.limit, period: m.period, units: map[int64]int64{}}
	default:
		return &fixedWindow{limit: m.limit, period: m.period, units: map[int64]int64{}}
	}
}

// Run decides events (non-decreasing in time) under a fresh Model and
// returns one Result per event.
func Run(alg string, limit, period, burst int64, events []Event) []Result {
	m := New(alg, limit, period, burst)
	out := make([]Result, len(events))
	for i, e := range events {
		if i > 0 && e.T < events[i-1].T {
			panic(fmt.Sprintf("reference: event %d goes back in time", i))
		}
		out[i] = m.Decide(e)
	}
	return out
}

// CeilNanos returns the duration d (ns, exact, >= 0) rounded up to a whole
// nanosecond, as the core reports it.
func CeilNanos(d *big.Rat) int64 {
	q := floorInt(new(big.Rat).Neg(d))
	q.Neg(q)
	if !q.IsInt64() {
		panic("reference: duration out of range: " + d.RatString())
	}
	return q.Int64()
}

// ---- token-bucket -------------------------------------------------------

// tokenBucket is GCRA. T = PERIOD/LIMIT, tau = B*T; tat is the theoretical
// arrival time, nil for "no state" (which behaves as TAT <= t).
type tokenBucket struct {
	T, tau *big.Rat
	tat    *big.Rat
}

func (b *tokenBucket) decide(t, n int64) Result {
	now := integer(t)
	base := now // max(TAT, t)
	if b.tat != nil && b.tat.Cmp(now) > 0 {
		base = b.tat
	}
	candidate := add(base, mul(integer(n), b.T)) // max(TAT, t) + n*T
	// Admitted iff max(TAT, t) + n*T - t <= tau.
	allowed := sub(candidate, now).Cmp(b.tau) <= 0
	var r Result
	tatPrime := base // a denial (or a peek) leaves TAT; use max(TAT, t)
	if allowed {
		tatPrime = candidate
		if n > 0 {
			b.tat = candidate
		}
		r.Allowed, r.RetryAfter = true, integer(0)
	} else {
		// retry_after = max(TAT, t) + n*T - tau - t
		r.RetryAfter = sub(sub(candidate, b.tau), now)
	}
	// remaining = floor((tau - (TAT' - t)) / T)
	r.Remaining = floor(quo(sub(b.tau, sub(tatPrime, now)), b.T))
	// reset_after = TAT' - t, or 0 if TAT' <= t
	r.ResetAfter = atLeastZero(sub(tatPrime, now))
	return r
}

// ---- leaky-bucket -------------------------------------------------------

// leakyBucket is a meter: level units at time last, draining continuously
// at rate = LIMIT/PERIOD units per ns, never below 0, holding up to
// capacity.
type leakyBucket struct {
	capacity *big.Rat
	rate     *big.Rat
	level    *big.Rat
	last     int64
}

// levelAt returns the level drained to time t >= last.
func (b *leakyBucket) levelAt(t int64) *big.Rat {
	drained := mul(b.rate, integer(t-b.last))
	return atLeastZero(sub(b.level, drained))
}

func (b *leakyBucket) decide(t, n int64) Result {
	level := b.levelAt(t)
	filled := add(level, integer(n))
	// Admitted iff level + n <= C.
	allowed := filled.Cmp(b.capacity) <= 0
	var r Result
	levelPrime := level
	if allowed {
		levelPrime = filled
		if n > 0 {
			b.level, b.last = filled, t
		}
		r.Allowed, r.RetryAfter = true, integer(0)
	} else {
		// retry_after = (level + n - C) / rate
		r.RetryAfter = quo(sub(filled, b.capacity), b.rate)
	}
	// remaining = floor(C - level'); reset_after = level' / rate
	r.Remaining = floor(sub(b.capacity, levelPrime))
	r.ResetAfter = quo(levelPrime, b.rate)
	return r
}

// ---- sliding-log --------------------------------------------------------

// slidingLog is the exact log of admitted events, oldest first. An entry
// counts at time t while its time > t - PERIOD.
type slidingLog struct {
	limit, period int64
	log           []logEntry
}

type logEntry struct{ t, n int64 }

// counting returns the entries that count at time t, oldest first.
func (l *slidingLog) counting(t int64) []logEntry {
	var live []logEntry
	for _, e := range l.log {
		if e.t > t-l.period {
			live = append(live, e)
		}
	}
	return live
}

func sumUnits(entries []logEntry) int64 {
	var s int64
	for _, e := range entries {
		s += e.n
	}
	return s
}

func (l *slidingLog) decide(t, n int64) Result {
	live := l.counting(t)
	count := sumUnits(live)
	// Admitted iff count + n <= LIMIT.
	allowed := count+n <= l.limit
	var r Result
	if allowed {
		if n > 0 {
			l.log = append(l.log, logEntry{t, n})
			live = append(live, logEntry{t, n})
		}
		r.Allowed, r.RetryAfter = true, integer(0)
	} else {
		// retry_after: the time until enough of the oldest units expire
		// for count + n <= LIMIT. An entry stops counting PERIOD after it.
		excess := count + n - l.limit
		var expired int64
		for _, e := range live {
			expired += e.n
			if expired >= excess {
				r.RetryAfter = integer(e.t + l.period - t)
				break
			}
		}
	}
	// remaining = LIMIT - count'
	r.Remaining = l.limit - sumUnits(live)
	// reset_after = (newest counted entry + PERIOD) - t, or 0
	r.ResetAfter = integer(0)
	if len(live) > 0 {
		r.ResetAfter = integer(live[len(live)-1].t + l.period - t)
	}
	return r
}

// ---- sliding-window -----------------------------------------------------

// slidingWindow keeps the units admitted in each window k, which is
// [k*PERIOD, (k+1)*PERIOD).
type slidingWindow struct {
	limit, period int64
	units         map[int64]int64
}

// est returns the estimate at time x (exact rational, x may be any time
// >= 0 given as a rational) from the counts in units, which stay as they
// are (no other event): prev*(PERIOD - elapsed)/PERIOD + cur.
func (w *slidingWindow) estIn(k int64, x *big.Rat) *big.Rat {
	start := integer(k * w.period)
	elapsed := sub(x, start)
	weight := quo(sub(integer(w.period), elapsed), integer(w.period))
	return add(mul(integer(w.units[k-1]), weight), integer(w.units[k]))
}

func (w *slidingWindow) decide(t, n int64) Result {
	k := t / w.period // the window holding t
	now := integer(t)
	est := w.estIn(k, now)
	// Admitted iff est + n <= LIMIT.
	allowed := add(est, integer(n)).Cmp(integer(w.limit)) <= 0
	var r Result
	estPrime := est
	if allowed {
		if n > 0 {
			w.units[k] += n
		}
		estPrime = add(est, integer(n))
		r.Allowed, r.RetryAfter = true, integer(0)
	} else {
		r.RetryAfter = w.retryAfter(k, t, n)
	}
	// remaining = floor(LIMIT - est')
	r.Remaining = floor(sub(integer(w.limit), estPrime))
	// reset_after = end of the next window - t if cur' > 0, else end of
	// the current window - t if prev > 0, else 0.
	switch {
	case w.units[k] > 0:
		r.ResetAfter = integer((k+2)*w.period - t)
	case w.units[k-1] > 0:
		r.ResetAfter = integer((k+1)*w.period - t)
	default:
		r.ResetAfter = integer(0)
	}
	return r
}

// retryAfter returns the smallest d >= 0 such that, with no other event,
// est(t+d) + n <= LIMIT. Within window j, est is linear in the time x:
// prev_j*((j+1)*PERIOD - x)/PERIOD + cur_j, with cur_j and prev_j the
// units of windows j and j-1 (0 for the windows after k). Look in the
// current window, then the next, then the one after, where est is 0.
func (w *slidingWindow) retryAfter(k, t, n int64) *big.Rat {
	now := integer(t)
	P := integer(w.period)
	for j := k; j <= k+2; j++ {
		cur, prev := w.units[j], w.units[j-1]
		start := integer(j * w.period)
		end := integer((j + 1) * w.period)
		from := maxRat(now, start) // the earliest time in window j we may wait for
		room := w.limit - n - cur  // est + n <= LIMIT  <=>  prev*(end - x)/P <= room
		if room < 0 {
			continue // never within window j
		}
		x := from
		if prev > 0 {
			// prev*(end - x)/P <= room  <=>  x >= end - room*P/prev
			x = maxRat(from, sub(end, quo(mul(integer(room), P), integer(prev))))
		}
		if x.Cmp(end) < 0 {
			return sub(x, now)
		}
	}
	panic("reference: sliding-window: no retry time found")
}

// ---- fixed-window -------------------------------------------------------

// fixedWindow keeps the units admitted in each window k, which is
// [k*PERIOD, (k+1)*PERIOD).
type fixedWindow struct {
	limit, period int64
	units         map[int64]int64
}

func (w *fixedWindow) decide(t, n int64) Result {
	k := t / w.period
	end := (k + 1) * w.period
	// Admitted iff count + n <= LIMIT.
	allowed := w.units[k]+n <= w.limit
	var r Result
	if allowed {
		w.units[k] += n
		r.Allowed, r.RetryAfter = true, integer(0)
	} else {
		// retry_after = window end - t
		r.RetryAfter = integer(end - t)
	}
	// remaining = LIMIT - count'; reset_after = window end - t when
	// count' > 0, else 0.
	r.Remaining = w.limit - w.units[k]
	r.ResetAfter = integer(0)
	if w.units[k] > 0 {
		r.ResetAfter = integer(end - t)
	}
	return r
}

// ---- exact arithmetic ---------------------------------------------------

func integer(a int64) *big.Rat        { return new(big.Rat).SetInt64(a) }
func frac(a, b int64) *big.Rat        { return new(big.Rat).SetFrac64(a, b) }
func add(a, b *big.Rat) *big.Rat      { return new(big.Rat).Add(a, b) }
func sub(a, b *big.Rat) *big.Rat      { return new(big.Rat).Sub(a, b) }
func mul(a, b *big.Rat) *big.Rat      { return new(big.Rat).Mul(a, b) }
func quo(a, b *big.Rat) *big.Rat      { return new(big.Rat).Quo(a, b) }
func atLeastZero(a *big.Rat) *big.Rat { return maxRat(a, integer(0)) }

func maxRat(a, b *big.Rat) *big.Rat {
	if a.Cmp(b) >= 0 {
		return a
	}
	return b
}

// floorInt returns floor(a) as a big.Int (the denominator of a Rat is
// positive, so Euclidean division is floor division).
func floorInt(a *big.Rat) *big.Int {
	return new(big.Int).Div(a.Num(), a.Denom())
}

// floor returns floor(a); it panics if that does not fit in an int64.
func floor(a *big.Rat) int64 {
	q := floorInt(a)
	if !q.IsInt64() {
		panic("reference: value out of range: " + a.RatString())
	}
	return q.Int64()
}
