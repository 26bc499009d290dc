package algo

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// Algorithm names one of the five algorithms a Policy can use.
type Algorithm uint8

// The algorithms. Their exact semantics are in the package documentation.
const (
	TokenBucket   Algorithm = iota + 1 // GCRA: LIMIT per PERIOD, bursts of up to burst
	LeakyBucket                        // a meter draining LIMIT per PERIOD, holding up to capacity
	SlidingLog                         // exact log of the last PERIOD's admitted units
	SlidingWindow                      // two fixed windows, the previous one weighted
	FixedWindow                        // windows [k*PERIOD, (k+1)*PERIOD)
)

var algorithmNames = [...]string{
	TokenBucket:   "token-bucket",
	LeakyBucket:   "leaky-bucket",
	SlidingLog:    "sliding-log",
	SlidingWindow: "sliding-window",
	FixedWindow:   "fixed-window",
}

// String returns the algorithm's name in the policy syntax, such as
// "token-bucket".
func (a Algorithm) String() string {
	if a == 0 || int(a) >= len(algorithmNames) {
		return "Algorithm(" + strconv.Itoa(int(a)) + ")"
	}
	return algorithmNames[a]
}

func (a Algorithm) valid() bool { return a != 0 && int(a) < len(algorithmNames) }

// isBucket reports whether a keeps its state as a theoretical arrival time
// (token-bucket and leaky-bucket, which decide identically).
func (a Algorithm) isBucket() bool { return a == TokenBucket || a == LeakyBucket }

// Bounds on policies and times. Within them no computation in this package
// overflows, and every decision is exact.
const (
	// MaxLimit is the largest LIMIT, burst and capacity: 10^15, enough
	// for a byte rate of a terabit link (1.25*10^11 bytes per second)
	// with bursts of hours of it.
	MaxLimit = 1_000_000_000_000_000
	// MaxPeriod is the longest PERIOD: 366 days.
	MaxPeriod = 366 * 24 * time.Hour
	// MaxDrain is the longest time a full token or leaky bucket may take
	// to drain (burst*PERIOD/LIMIT): 100 years of 365.25 days.
	MaxDrain = 100 * 8766 * time.Hour
	// MaxTime is the latest instant Decide accepts, in nanoseconds since
	// the caller's origin: about 146 years (from the Unix epoch, the year
	// 2116).
	MaxTime = 1 << 62
)

// Policy is a validated rate-limiting policy: an algorithm, LIMIT units per
// PERIOD, and for the bucket algorithms the burst (token-bucket) or capacity
// (leaky-bucket). Build one with New or ParsePolicy; the zero Policy is not
// valid and Decide rejects it.
//
// A Policy is a small value: copy it freely, compare it with ==, use it as a
// map key. Its String method gives the canonical policy string, which
// ParsePolicy reads back to an equal Policy.
type Policy struct {
	alg    Algorithm
	limit  int64
	period int64 // nanoseconds
	burst  int64 // burst, capacity, or limit for the window algorithms
	tick   int64 // buckets: the emission interval PERIOD/LIMIT when a whole ns, else 0
}

// bp returns burst*period: the buckets' tau in units of 1/limit ns, and
// the sliding window's limit times PERIOD. It is computed, not stored, to
// keep a Policy (and every Decision that carries one) small.
func (p *Policy) bp() u128 { return mul64(uint64(p.burst), uint64(p.period)) }

// New returns the policy alg with limit units per period. burst is the
// token-bucket's burst or the leaky-bucket's capacity, and 0 means limit; the
// other algorithms take no burst and need 0. It fails, with an error wrapping
// ErrInvalidPolicy, when a number is out of the bounds above.
func New(alg Algorithm, limit int64, period time.Duration, burst int64) (Policy, error) {
	p, problem := newPolicy(alg, limit, period, burst)
	if problem != "" {
		return Policy{}, fmt.Errorf("%w: %s", ErrInvalidPolicy, problem)
	}
	return p, nil
}

// newPolicy validates and precomputes; it returns the problem as a phrase
// so that ParsePolicy can say which part of the string is at fault.
func newPolicy(alg Algorithm, limit int64, period time.Duration, burst int64) (Policy, string) {
	switch {
	case !alg.valid():
		return Policy{}, fmt.Sprintf("unknown algorithm %v", alg)
	case limit < 1:
		return Policy{}, fmt.Sprintf("limit %d is less than 1", limit)
	case limit > MaxLimit:
		return Policy{}, fmt.Sprintf("limit %d is more than %d", limit, MaxLimit)
	case period <= 0:
		return Policy{}, fmt.Sprintf("period %v is not positive", period)
	case period > MaxPeriod:
		return Policy{}, fmt.Sprintf("period %v is longer than %v (366 days)", period, MaxPeriod)
	case burst < 0:
		return Policy{}, fmt.Sprintf("%s %d is negative", burstName(alg), burst)
	case burst > MaxLimit:
		return Policy{}, fmt.Sprintf("%s %d is more than %d", burstName(alg), burst, MaxLimit)
	case burst != 0 && !alg.isBucket():
		return Policy{}, fmt.Sprintf("%v takes no burst or capacity", alg)
	}
	if burst == 0 {
		burst = limit
	}
	p := Policy{alg: alg, limit: limit, period: int64(period), burst: burst}
	if alg.isBucket() && int64(period)%limit == 0 {
		p.tick = int64(period) / limit
	}
	if alg.isBucket() && mul64(uint64(MaxDrain), uint64(limit)).less(p.bp()) {
		years, _ := p.bp().div64(uint64(limit) * uint64(8766*time.Hour))
		return Policy{}, fmt.Sprintf("%s %d at %d/%s takes %d years to drain; the most is 100",
			burstName(alg), burst, limit, formatPeriod(period), years)
	}
	return p, ""
}

// maxCell is the largest count a Cell holds, and so the largest LIMIT of
// a compact policy.
const maxCell = math.MaxUint32

// Compact reports whether every State of p fits in a Cell: true for
// token-bucket, leaky-bucket, sliding-window and fixed-window when LIMIT
// is at most 2^32-1, false for sliding-log and larger limits. A store that
// keeps Cells keeps the States of other policies another way.
func (p *Policy) Compact() bool { return p.alg != SlidingLog && p.limit <= maxCell }

func burstName(alg Algorithm) string {
	if alg == LeakyBucket {
		return "capacity"
	}
	return "burst"
}

// Algorithm returns the policy's algorithm.
func (p Policy) Algorithm() Algorithm { return p.alg }

// Limit returns LIMIT, the number of units admitted per Period.
func (p Policy) Limit() int64 { return p.limit }

// Period returns PERIOD.
func (p Policy) Period() time.Duration { return time.Duration(p.period) }

// Burst returns the largest cost a single event can have: the burst of a
// token-bucket, the capacity of a leaky-bucket, and LIMIT for the window
// algorithms. An event costing more is never admitted.
func (p Policy) Burst() int64 { return p.burst }

// IsZero reports whether p is the zero Policy, which is not valid.
func (p Policy) IsZero() bool { return p.alg == 0 }

// String returns the canonical policy string, such as
// "token-bucket 3/1s burst=5". The burst or capacity is left out when it
// equals LIMIT.
func (p Policy) String() string {
	if p.IsZero() {
		return ""
	}
	s := p.alg.String() + " " + strconv.FormatInt(p.limit, 10) + "/" + formatPeriod(time.Duration(p.period))
	if p.alg.isBucket() && p.burst != p.limit {
		s += " " + burstName(p.alg) + "=" + strconv.FormatInt(p.burst, 10)
	}
	return s
}

// MarshalText implements encoding.TextMarshaler with the canonical string,
// so a Policy can be a field of a JSON, YAML or TOML configuration.
func (p Policy) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler with ParsePolicy.
func (p *Policy) UnmarshalText(text []byte) error {
	q, err := ParsePolicy(string(text))
	if err != nil {
		return err
	}
	*p = q
	return nil
}

// formatPeriod writes d as a Go duration in its largest whole unit, so
// that 60s reads "1m" and 1500ms stays "1500ms" rather than "1.5s".
func formatPeriod(d time.Duration) string {
	units := []struct {
		name string
		d    time.Duration
	}{{"h", time.Hour}, {"m", time.Minute}, {"s", time.Second}, {"ms", time.Millisecond}, {"us", time.Microsecond}}
	for _, u := range units {
		if d%u.d == 0 {
			return strconv.FormatInt(int64(d/u.d), 10) + u.name
		}
	}
	return strconv.FormatInt(int64(d), 10) + "ns"
}
