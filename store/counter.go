package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/floodgate/floodgate/algo"
)

// MaxCount is the largest count a counter reports: a counter of more hits
// reads MaxCount. It is one more than the largest requests_per_unit of
// Envoy's protocol (a uint32), so that a count of MaxCount is over every
// such limit.
const MaxCount = math.MaxUint32 + 1

// Counting is implemented by a Store that keeps fixed-window counters of
// hits in a form cheaper than its tables: a counter that counts every hit,
// with no limit, is on Redis an INCRBY and an expiry. CountersOf gives the
// counters of any store, through this interface or else through a table.
type Counting interface {
	Store
	// Counters returns the counters named name of the fixed windows of
	// length period (at least a millisecond, at most algo.MaxPeriod),
	// windows aligned to the Unix epoch. Equal names and periods give
	// the same counters, in this process and, for a shared store, in
	// every process using it. A store may refuse a name it cannot hold
	// (an error wrapping ErrInvalidKey). A wrapper whose store lacks the
	// capability returns an error wrapping errors.ErrUnsupported.
	Counters(name string, period time.Duration) (Counters, error)
}

// Counters are the counters of one name and window length: each key has
// a count of hits in each window, 0 at the window's start.
//
// Implementations must:
//   - add every hit, however many the window holds: nothing is denied;
//   - place a hit in the window that holds its Now, the caller's time, so
//     that every process and every store agrees on the window;
//   - report the count after the addition, at most MaxCount;
//   - keep a window's count at least until the window has ended;
//   - be safe for concurrent use, each addition atomic.
type Counters interface {
	// AddEach adds, for each h of hs, h.N hits to the counter of h.Key in
	// the window that holds h.Now, each as if alone, and sets h.Count.
	// Bad input (a negative N, a Now outside [0, algo.MaxTime]) fails
	// the whole call before anything is done. Other errors are a Store's
	// ApplyEach's: unknown outcomes, unless the error wraps
	// ErrPartialFailure, when each hit the store failed on has an Err
	// wrapping it and the others their Count.
	AddEach(ctx context.Context, hs []Hits) error
	// Partition returns the partition (see Partitioned) of key's counter
	// in the window that holds now: 0 on a store of one partition. It
	// calls out to nothing.
	Partition(key string, now int64) int
}

// Hits is one addition of Counters.AddEach: what to add, then what the
// store answered.
type Hits struct {
	Key string
	Now int64 // nanoseconds since the Unix epoch
	N   int64 // at least 0; 0 reads the count

	// Count is set by the store: the counter's hits in the window, N
	// included, at most MaxCount.
	Count int64
	// Unknown is set by a store that counted nothing and knows no count
	// (a failsafe.Store failing open): the caller admits the hits.
	Unknown bool
	// Err is set when the store failed on this addition alone (it wraps
	// ErrPartialFailure); its outcome is unknown.
	Err error
}

// CheckHits returns the error a Counters' AddEach returns for hs before it
// does anything: the first addition with a negative N or a Now outside
// [0, algo.MaxTime].
func CheckHits(hs []Hits) error {
	for i := range hs {
		h := &hs[i]
		switch {
		case h.N < 0:
			return fmt.Errorf("hits %d on %q: %w: %d", i, h.Key, algo.ErrInvalidCost, h.N)
		case h.Now < 0 || h.Now > algo.MaxTime:
			return fmt.Errorf("hits %d on %q: %w: %d ns is outside [0, %d]", i, h.Key, algo.ErrInvalidTime, h.Now, int64(algo.MaxTime))
		}
	}
	return nil
}

// CountersOf returns the counters named name of the windows of length
// period in s: its own when s is Counting (and does not answer
// errors.ErrUnsupported), else TableCounters.
func CountersOf(s Store, name string, period time.Duration) (Counters, error) {
	if c, ok := s.(Counting); ok {
		cs, err := c.Counters(name, period)
		if !errors.Is(err, errors.ErrUnsupported) {
			return cs, err
		}
	}
	return TableCounters(s, name, period)
}
