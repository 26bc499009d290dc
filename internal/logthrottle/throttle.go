package logthrottle

import (
	"sync/atomic"
	"time"

	"github.com/floodgate/floodgate/clock"
)

// Interval is the least time between two lines that a Throttle lets
// through.
const Interval = time.Second

// Throttle lets through at most one log line per Interval, and counts the
// lines it holds back. Its zero value is ready, and lets the first line
// through.
//
// A Throttle is safe for concurrent use and takes no lock: a line held
// back costs an atomic load and an atomic add, a line let through a
// compare-and-swap and a swap more. It must not be copied after first use.
type Throttle struct {
	last    atomic.Int64  // when a line was last let through, Unix ns; 0: never
	dropped atomic.Uint64 // lines held back since
}

// Allow is AllowAt(clock.UnixNano()), the time on floodgate's real clock,
// which never steps back while the process runs.
func (t *Throttle) Allow() (dropped uint64, ok bool) {
	return t.AllowAt(clock.UnixNano())
}

// AllowAt reports whether a line at now, in nanoseconds since the Unix
// epoch, may be logged. It may when it is the first, when Interval or more
// has passed since the last line let through, or when now is before that
// line (a clock stepped back, which should not silence the log until it
// catches up). Then ok is true, and dropped is the number of lines held
// back since the last line let through, for the line to report; the count
// starts again from 0. Otherwise the line is held back and counted, and
// dropped is 0. Of callers racing at the same instant, one is let through.
func (t *Throttle) AllowAt(now int64) (dropped uint64, ok bool) {
	last := t.last.Load()
	if since := now - last; last != 0 && 0 <= since && since < int64(Interval) ||
		!t.last.CompareAndSwap(last, now) {
		t.dropped.Add(1)
		return 0, false
	}
	return t.dropped.Swap(0), true
}
