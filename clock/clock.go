// Package clock is floodgate's source of time: the real clock, and a fake
// one for tests whose timers fire only when the test advances it.
//
// floodgate's algorithms never read a clock; a Limiter reads one once per
// call, at the edge, and passes the time down. Tests pass a Fake and walk
// fixed instants instead of sleeping.
package clock

import "time"

// Clock tells the time and makes timers. Implementations must be safe for
// concurrent use.
type Clock interface {
	// Now returns the current time. Successive calls should not go
	// backwards; floodgate tolerates it when they do (see algo.Decide).
	Now() time.Time
	// NewTimer returns a Timer that fires once d has passed.
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot timer, like time.Timer.
type Timer interface {
	// C returns the channel that receives the time when the timer fires.
	C() <-chan time.Time
	// Stop prevents the timer from firing. It reports whether it stopped
	// it, false when it had fired or been stopped already.
	Stop() bool
}

// Real is the system clock: wall-clock time, advanced by the monotonic
// clock so that it never steps back while the process runs.
type Real struct{}

// base anchors Real to the wall clock once, at start-up; after that only
// the monotonic clock is read, which is cheaper and never steps.
var (
	base     = time.Now()
	baseUnix = base.UnixNano()
)

// Now returns the wall-clock time at start-up plus the monotonic time since.
func (Real) Now() time.Time { return time.Unix(0, UnixNano()) }

// UnixNano returns Real's time in nanoseconds since the Unix epoch. It costs
// one monotonic clock read, where time.Now reads the wall clock as well.
func UnixNano() int64 { return baseUnix + int64(time.Since(base)) }

// NewTimer returns a time.Timer.
func (Real) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (t realTimer) C() <-chan time.Time { return t.t.C }
func (t realTimer) Stop() bool          { return t.t.Stop() }
