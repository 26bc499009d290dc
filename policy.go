package floodgate

import (
	"time"

	"github.com/floodgate/floodgate/algo"
)

// Policy is a validated rate-limiting policy: an algorithm, LIMIT units
// per PERIOD, and a burst or capacity. It is a small comparable value; its
// String form is the policy syntax, which ParsePolicy reads back. The exact
// semantics of each algorithm are in the documentation of package algo.
// The zero Policy is not valid.
type Policy = algo.Policy

// Algorithm names one of the five algorithms.
type Algorithm = algo.Algorithm

// The algorithms; see package algo for their exact semantics.
const (
	AlgTokenBucket   = algo.TokenBucket   // GCRA: LIMIT per PERIOD with bursts of up to burst
	AlgLeakyBucket   = algo.LeakyBucket   // a meter draining LIMIT per PERIOD, holding up to capacity
	AlgSlidingLog    = algo.SlidingLog    // an exact log of the last PERIOD's admitted units
	AlgSlidingWindow = algo.SlidingWindow // two fixed windows, the previous one weighted
	AlgFixedWindow   = algo.FixedWindow   // windows [k*PERIOD, (k+1)*PERIOD)
)

// Never is the RetryAfter of a request that can never be admitted because
// its cost exceeds the policy's burst.
const Never = algo.Never

// ParsePolicy parses the policy syntax:
//
//	ALGORITHM LIMIT/PERIOD [burst=B] [capacity=C]
//
// such as "token-bucket 100/1m burst=20", "leaky-bucket 1/1h capacity=20" or
// "sliding-log 5/10s". See algo.ParsePolicy for the whole grammar. An error
// wraps ErrInvalidPolicy and names the part at fault.
func ParsePolicy(s string) (Policy, error) { return algo.ParsePolicy(s) }

// MustParsePolicy is ParsePolicy for policies written in the program: it
// panics on an error. Parse policies from input with ParsePolicy.
func MustParsePolicy(s string) Policy {
	p, err := algo.ParsePolicy(s)
	if err != nil {
		panic("floodgate: " + err.Error())
	}
	return p
}

// NewPolicy returns the policy alg with limit units per period; burst is a
// token bucket's burst or a leaky bucket's capacity (0 means limit) and
// must be 0 for the other algorithms. An error wraps ErrInvalidPolicy.
func NewPolicy(alg Algorithm, limit int64, period time.Duration, burst int64) (Policy, error) {
	return algo.New(alg, limit, period, burst)
}

func mustPolicy(alg Algorithm, limit int64, period time.Duration, burst int64) Policy {
	p, err := algo.New(alg, limit, period, burst)
	if err != nil {
		panic("floodgate: " + err.Error())
	}
	return p
}

// TokenBucket returns a token-bucket policy: limit units per period,
// admitting bursts of up to burst (0 means limit). Like the other Go
// constructors it is meant for values written in the program and panics
// when they are out of bounds; NewPolicy returns an error instead.
func TokenBucket(limit int64, period time.Duration, burst int64) Policy {
	return mustPolicy(algo.TokenBucket, limit, period, burst)
}

// LeakyBucket returns a leaky-bucket policy: a meter draining limit units
// per period that holds up to capacity (0 means limit).
func LeakyBucket(limit int64, period time.Duration, capacity int64) Policy {
	return mustPolicy(algo.LeakyBucket, limit, period, capacity)
}

// SlidingLog returns a sliding-log policy: at most limit units in any
// period, counted exactly.
func SlidingLog(limit int64, period time.Duration) Policy {
	return mustPolicy(algo.SlidingLog, limit, period, 0)
}

// SlidingWindow returns a sliding-window policy: about limit units per
// period, estimated from two fixed windows.
func SlidingWindow(limit int64, period time.Duration) Policy {
	return mustPolicy(algo.SlidingWindow, limit, period, 0)
}

// FixedWindow returns a fixed-window policy: at most limit units in each
// window [k*period, (k+1)*period).
func FixedWindow(limit int64, period time.Duration) Policy {
	return mustPolicy(algo.FixedWindow, limit, period, 0)
}
