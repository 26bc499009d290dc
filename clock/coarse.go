package clock

import (
	"sync"
	"sync/atomic"
	"time"
)

// Coarse is a clock for the hottest paths: a goroutine reads the real clock
// every resolution and stores the time, so that reading a Coarse costs one
// atomic load instead of a clock read (docs/guide.md, "In Go", has the
// figures).
//
// The price is exactness. A Coarse reads up to resolution behind the real
// clock (more if its goroutine is not scheduled in time), so intervals
// measured with it can be off by up to resolution either way: a limiter on
// a Coarse clock may admit, in a real PERIOD, what the policy admits in
// PERIOD plus resolution (for a token bucket of rate r, up to r*resolution
// more units), and a RetryAfter may be up to resolution too short. It never
// goes backwards. Use it when a decision a millisecond off is acceptable;
// the default clock is precise.
//
// Stop the goroutine with Stop when done; after Stop the clock keeps the
// last time it read.
type Coarse struct {
	now  atomic.Int64
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// NewCoarse starts a Coarse clock updated every resolution (at least 50µs).
func NewCoarse(resolution time.Duration) *Coarse {
	resolution = max(resolution, 50*time.Microsecond)
	c := &Coarse{stop: make(chan struct{}), done: make(chan struct{})}
	c.now.Store(UnixNano())
	go func() {
		defer close(c.done)
		t := time.NewTicker(resolution)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				c.now.Store(UnixNano())
			case <-c.stop:
				return
			}
		}
	}()
	return c
}

// UnixNano returns the clock's time in nanoseconds since the Unix epoch.
func (c *Coarse) UnixNano() int64 { return c.now.Load() }

// Now returns the clock's time.
func (c *Coarse) Now() time.Time { return time.Unix(0, c.now.Load()) }

// NewTimer returns a real timer: waiting is not coarse.
func (c *Coarse) NewTimer(d time.Duration) Timer { return Real{}.NewTimer(d) }

// Stop stops the clock's goroutine and returns once it has stopped. It is
// safe to call more than once.
func (c *Coarse) Stop() {
	c.once.Do(func() { close(c.stop) })
	<-c.done
}
