package floodgate_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/algo"
)

// tally is an Observer that counts each outcome it is told of, by its
// string: "allowed", "denied", "dry-run" or the error's sentinel.
type tally struct {
	mu sync.Mutex
	n  map[string]int
}

func (t *tally) Observe(d floodgate.Decision, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n == nil {
		t.n = map[string]int{}
	}
	t.n[outcome(d, err)]++
}

func outcome(d floodgate.Decision, err error) string {
	switch {
	case errors.Is(err, algo.ErrCostExceedsBurst):
		return "over-burst"
	case errors.Is(err, algo.ErrInvalidCost):
		return "invalid-cost"
	case errors.Is(err, floodgate.ErrWaitTooLong):
		return "wait-too-long"
	case err != nil:
		return "error: " + err.Error()
	case d.DryRun:
		return "dry-run"
	case d.Allowed:
		return "allowed"
	}
	return "denied"
}

// take returns the counts so far and starts afresh.
func (t *tally) take() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := fmt.Sprint(t.n)
	t.n = nil
	return s
}

// Every way of deciding tells the limiter's Observer once per request, with
// what the caller got.
func TestObserver(t *testing.T) {
	fc := newFake()
	var obs, other, shadow tally
	p := algo.MustParsePolicy("token-bucket 1/1m burst=2")
	l := floodgate.Must(floodgate.NewLimiter(p, floodgate.WithClock(fc), floodgate.WithObserver(&obs), floodgate.WithMaxWait(90*time.Second)))
	g := floodgate.Must(floodgate.NewLimiter(p, floodgate.WithClock(fc), floodgate.WithObserver(&other), floodgate.WithName("global")))
	dry := floodgate.Must(floodgate.NewLimiter(p, floodgate.WithClock(fc), floodgate.WithObserver(&shadow), floodgate.WithDryRun(true)))
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	for _, c := range []struct {
		name string
		do   func()
		want string
	}{
		{"Allow", func() { l.Allow(ctx, "a"); l.Allow(ctx, "a"); l.Allow(ctx, "a") }, "map[allowed:2 denied:1]"},
		{"AllowN", func() { l.AllowN(ctx, "b", 0); l.AllowN(ctx, "b", 3); l.AllowN(ctx, "b", -1) }, "map[allowed:1 invalid-cost:1 over-burst:1]"},
		{"AllowAt", func() { l.AllowAt(ctx, "c", fc.Now(), 2) }, "map[allowed:1]"},
		{"Reserve", func() { l.Reserve(ctx, "a", 1) }, "map[denied:1]"},
		{"Schedule", func() {
			for range 4 {
				l.Schedule(ctx, "f", 1, time.Minute) // 2 at once, 1 after 1m, then past the minute
			}
		}, "map[allowed:3 denied:1]"},
		{"AllowEach", func() {
			floodgate.AllowEach(ctx, floodgate.Check{Limiter: l, Key: "d"}, floodgate.Check{Limiter: l, Key: "a"})
		}, "map[allowed:1 denied:1]"},
		{"Wait", func() { l.Wait(ctx, "e"); l.WaitN(ctx, "e", 3); l.Wait(cancelled, "e") }, "map[allowed:1 over-burst:1]"},
		{"Wait too long", func() { l.WaitN(ctx, "a", 2) }, "map[wait-too-long:1]"},
	} {
		c.do()
		if got := obs.take(); got != c.want {
			t.Errorf("%s observed %s, want %s", c.name, got, c.want)
		}
	}
	// AllowAll: every limiter observes the request's outcome; dry-run ones
	// their own decision.
	floodgate.AllowAll(ctx, floodgate.Check{Limiter: g, Key: "x"}, floodgate.Check{Limiter: l, Key: "a"}, floodgate.Check{Limiter: dry, Key: "x"})
	dry.AllowN(ctx, "x", 2)
	floodgate.AllowAll(ctx, floodgate.Check{Limiter: g, Key: "x"}, floodgate.Check{Limiter: dry, Key: "x"})
	for _, c := range []struct {
		name string
		obs  *tally
		want string
	}{{"AllowAll's denying limiter", &obs, "map[denied:1]"}, {"AllowAll's admitting limiter", &other, "map[allowed:1 denied:1]"}, {"AllowAll's dry-run limiter", &shadow, "map[allowed:1 dry-run:1]"}} {
		if got := c.obs.take(); got != c.want {
			t.Errorf("%s observed %s, want %s", c.name, got, c.want)
		}
	}
}
