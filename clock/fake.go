package clock

import (
	"sync"
	"time"
)

// Fake is a clock that moves only when told to. Its timers fire, in order
// of their deadlines, when Advance or Set reaches them. A Fake is safe for
// concurrent use; its zero value is not ready, use NewFake.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	timers  []*fakeTimer
	changed chan struct{} // closed and replaced when timers are added
}

// NewFake returns a Fake reading t.
func NewFake(t time.Time) *Fake {
	return &Fake{now: t, changed: make(chan struct{})}
}

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Advance moves the clock forward by d and fires the timers it reaches.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	t := f.now.Add(d)
	f.mu.Unlock()
	f.Set(t)
}

// Set moves the clock to t, which may be earlier (a clock stepping back),
// and fires the timers whose deadline is at or before t.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	f.now = t
	var due []*fakeTimer
	kept := f.timers[:0]
	for _, ft := range f.timers {
		if !ft.when.After(t) {
			due = append(due, ft)
		} else {
			kept = append(kept, ft)
		}
	}
	clear(f.timers[len(kept):])
	f.timers = kept
	f.mu.Unlock()
	for _, ft := range due {
		ft.c <- t // buffered: never blocks
	}
}

// Timers returns the number of timers that have not fired or been stopped.
func (f *Fake) Timers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.timers)
}

// WaitTimers blocks until at least n timers are pending, so that a test can
// know that goroutines have gone to sleep before it advances the clock.
func (f *Fake) WaitTimers(n int) {
	for {
		f.mu.Lock()
		if len(f.timers) >= n {
			f.mu.Unlock()
			return
		}
		ch := f.changed
		f.mu.Unlock()
		<-ch
	}
}

// NewTimer returns a timer that fires when the clock reaches Now()+d; at
// once if d <= 0.
func (f *Fake) NewTimer(d time.Duration) Timer {
	ft := &fakeTimer{f: f, c: make(chan time.Time, 1)}
	f.mu.Lock()
	ft.when = f.now.Add(d)
	if d <= 0 {
		now := f.now
		f.mu.Unlock()
		ft.c <- now
		return ft
	}
	f.timers = append(f.timers, ft)
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
	return ft
}

type fakeTimer struct {
	f    *Fake
	when time.Time
	c    chan time.Time
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

func (t *fakeTimer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	for i, ft := range t.f.timers {
		if ft == t {
			t.f.timers = append(t.f.timers[:i], t.f.timers[i+1:]...)
			return true
		}
	}
	return false
}
