package clock_test

import (
	"testing"
	"time"

	"github.com/floodgate/floodgate/clock"
)

func TestFakeTimers(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	f := clock.NewFake(t0)
	a := f.NewTimer(2 * time.Second)
	b := f.NewTimer(time.Second)
	c := f.NewTimer(3 * time.Second)
	if f.Timers() != 3 {
		t.Fatalf("%d timers", f.Timers())
	}
	if !c.Stop() || c.Stop() {
		t.Fatal("Stop of a pending timer must report true once")
	}
	f.Advance(time.Second)
	select {
	case got := <-b.C():
		if !got.Equal(t0.Add(time.Second)) {
			t.Fatalf("fired with %v", got)
		}
	default:
		t.Fatal("a timer due at the new time did not fire")
	}
	select {
	case <-a.C():
		t.Fatal("a timer fired early")
	default:
	}
	f.Set(t0) // back: nothing fires
	if f.Timers() != 1 || !f.Now().Equal(t0) {
		t.Fatal("Set back")
	}
	f.Advance(5 * time.Second)
	<-a.C()
	if a.Stop() {
		t.Fatal("Stop of a fired timer reported true")
	}
	now := f.NewTimer(0)
	<-now.C() // fires at once
	done := make(chan struct{})
	go func() { f.WaitTimers(1); close(done) }()
	f.NewTimer(time.Hour)
	<-done
}

func TestReal(t *testing.T) {
	var c clock.Clock = clock.Real{}
	a := clock.UnixNano()
	b := c.Now().UnixNano()
	if b < a || b-a > int64(time.Minute) {
		t.Fatalf("Real: %d then %d", a, b)
	}
	if d := time.Since(c.Now()); d > time.Second || d < -time.Second {
		t.Fatalf("Real is %v from time.Now", d)
	}
	tm := c.NewTimer(time.Hour)
	if !tm.Stop() {
		t.Fatal("Stop")
	}
}

func TestCoarse(t *testing.T) {
	c := clock.NewCoarse(time.Millisecond)
	defer c.Stop()
	a := c.UnixNano()
	if d := clock.UnixNano() - a; d < 0 || d > int64(time.Minute) {
		t.Fatalf("Coarse is %v behind", time.Duration(d))
	}
	if c.Now().UnixNano() < a {
		t.Fatal("Coarse went backwards")
	}
	c.Stop()
	c.Stop() // twice is fine
	last := c.UnixNano()
	if c.UnixNano() != last {
		t.Fatal("a stopped Coarse moved")
	}
	if !c.NewTimer(time.Hour).Stop() {
		t.Fatal("timer")
	}
}
