package prommetrics_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/failsafe"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/prommetrics"
	"github.com/floodgate/floodgate/redisstore"
)

// Redis killed under a failsafe store failing closed, then started again:
// the metrics tell it as it happens. While Redis is dead, decisions fail
// fast and count as errors and store errors, the store goes down (1) and
// its failures and closed fallbacks count; within a second of the restart
// it is up again (0), with one trip and one recovery; the limit holds in
// each of Redis's lives, and no goroutine is left over.
func TestChaosStoreMetrics(t *testing.T) {
	srv := redistest.NewServer(t)
	rs, err := redisstore.New(srv.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	fs, err := failsafe.New(rs, failsafe.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := prommetrics.New()
	if err := m.AddStore("main", fs); err != nil {
		t.Fatal(err)
	}
	const limit = 50
	l := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("fixed-window 50/1h"), floodgate.WithStore(fs), floodgate.WithObserver(m.Observer("api"))))
	goroutines := runtime.NumGoroutine()
	for range 2 * limit {
		l.Allow(ctx, "k")
	}
	check(t, "Redis up", scrape(t, m), merge(decisions("api", limit, limit, 0, 0, 0), map[string]float64{`floodgate_store_down{store="main"}`: 0}))

	srv.Kill()
	slowest := until(t, "the store down", 5*time.Second, func() bool {
		l.Allow(ctx, "k")
		return scrape(t, m)[`floodgate_store_down{store="main"}`] == 1
	})
	t.Logf("slowest decision while Redis was dead: %v", slowest)
	if slowest > time.Second { // the failsafe's timeout is 100ms
		t.Errorf("a decision took %v while Redis was dead", slowest)
	}
	got := scrape(t, m)
	errs := got[`floodgate_decisions_total{policy="api",result="error"}`]
	check(t, "Redis dead", got, merge(decisions("api", limit, limit, 0, errs, errs), map[string]float64{`floodgate_store_trips_total{store="main"}`: 1}))
	if errs == 0 || got[`floodgate_store_failures_total{store="main"}`] == 0 || got[`floodgate_store_fallbacks_total{mode="closed",store="main"}`] == 0 {
		t.Errorf("Redis dead: %v errors, %v failures, %v closed fallbacks; want some of each", errs,
			got[`floodgate_store_failures_total{store="main"}`], got[`floodgate_store_fallbacks_total{mode="closed",store="main"}`])
	}

	srv.Restart(t) // empty: a new life
	restarted := time.Now()
	admitted := 0
	until(t, "an admission after the restart", 5*time.Second, func() bool {
		d, err := l.Allow(ctx, "k")
		if err == nil && d.Allowed {
			admitted++
		}
		return admitted > 0
	})
	t.Logf("first admission %v after the restart", time.Since(restarted))
	if d := time.Since(restarted); d > time.Second {
		t.Errorf("first admission %v after the restart, want within 1s", d)
	}
	for range 2 * limit {
		if d, err := l.Allow(ctx, "k"); err == nil && d.Allowed {
			admitted++
		}
	}
	if admitted != limit {
		t.Errorf("%d admitted after the restart, want the limit, %d", admitted, limit)
	}
	check(t, "Redis back", scrape(t, m), map[string]float64{`floodgate_store_down{store="main"}`: 0,
		`floodgate_store_recoveries_total{store="main"}`: 1, `floodgate_store_trips_total{store="main"}`: 1,
		`floodgate_decisions_total{policy="api",result="allowed"}`: 2 * limit})
	until(t, "no goroutine growth", 2*time.Second, func() bool { return runtime.NumGoroutine() <= goroutines+2 })
}

// until calls f until it returns true, every 5ms, and returns the longest
// call; it fails t when within has passed first.
func until(t *testing.T, what string, within time.Duration, f func() bool) (slowest time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		start := time.Now()
		ok := f()
		slowest = max(slowest, time.Since(start))
		if ok {
			return slowest
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(5 * time.Millisecond) // the fault is real-time
	}
}

func merge(ms ...map[string]float64) map[string]float64 {
	all := map[string]float64{}
	for _, m := range ms {
		for k, v := range m {
			all[k] = v
		}
	}
	return all
}
