package algo

import (
	"math"
	"time"
)

// Never is the RetryAfter of an event that can never be admitted, because
// its cost exceeds the policy's Burst. It is the longest Duration, so code
// that sleeps for RetryAfter without checking waits forever rather than
// spinning.
const Never time.Duration = math.MaxInt64

// Decision is the outcome of one event.
//
// Durations are measured from the event's time and are whole nanoseconds,
// rounded up where the exact value has a fraction of a nanosecond, so that
// waiting exactly RetryAfter is always enough.
type Decision struct {
	// Allowed reports whether the event was admitted.
	Allowed bool
	// Remaining is how many more units the policy would admit at the
	// event's time, after this event.
	Remaining int64
	// RetryAfter is 0 for an admitted event. For a denied one it is the
	// shortest wait after which the same event would be admitted if nothing
	// else happened meanwhile, or Never.
	RetryAfter time.Duration
	// ResetAfter is the time until the key is back to its initial state
	// (a full bucket, an empty window or log) if nothing else happens: 0
	// when it is there already.
	ResetAfter time.Duration
}
