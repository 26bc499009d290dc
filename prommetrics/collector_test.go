package prommetrics_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/clock"
	"github.com/floodgate/floodgate/failsafe"
	"github.com/floodgate/floodgate/filestore"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/memstore"
	"github.com/floodgate/floodgate/prommetrics"
	"github.com/floodgate/floodgate/redisstore"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

var ctx = context.Background()

// epoch is the fake clocks' start.
var epoch = time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)

// scrape gathers c from a pedantic registry, which checks every metric
// against its description, and returns the values by series, such as
// `floodgate_decisions_total{policy="api",result="allowed"}`.
func scrape(t *testing.T, c *prommetrics.Collector) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			got[series(mf.GetName(), m)] = value(m)
		}
	}
	return got
}

func series(name string, m *dto.Metric) string {
	s := name + "{"
	for i, l := range m.GetLabel() {
		if i > 0 {
			s += ","
		}
		s += fmt.Sprintf("%s=%q", l.GetName(), l.GetValue())
	}
	return s + "}"
}

func value(m *dto.Metric) float64 {
	if m.GetCounter() != nil {
		return m.GetCounter().GetValue()
	}
	return m.GetGauge().GetValue()
}

// check fails t for each series of want whose value is not got's.
func check(t *testing.T, when string, got, want map[string]float64) {
	t.Helper()
	for s, v := range want {
		if g, ok := got[s]; !ok || g != v {
			t.Errorf("%s: %s = %v (present %v), want %v", when, s, g, ok, v)
		}
	}
}

func decisions(policy string, allowed, denied, dryRun, errs, storeErrs float64) map[string]float64 {
	d := func(result string) string {
		return fmt.Sprintf("floodgate_decisions_total{policy=%q,result=%q}", policy, result)
	}
	return map[string]float64{d("allowed"): allowed, d("denied"): denied, d("dry_run_denied"): dryRun, d("error"): errs,
		fmt.Sprintf("floodgate_store_errors_total{policy=%q}", policy): storeErrs}
}

// Each decision moves its series, and only it.
func TestDecisions(t *testing.T) {
	fc := clock.NewFake(epoch)
	m := prommetrics.New()
	p := algo.MustParsePolicy("token-bucket 1/1m burst=2")
	api := floodgate.Must(floodgate.NewLimiter(p, floodgate.WithClock(fc), floodgate.WithObserver(m.Observer("api")), floodgate.WithMaxWait(time.Second)))
	shadow := floodgate.Must(floodgate.NewLimiter(p, floodgate.WithClock(fc), floodgate.WithObserver(m.Observer("shadow")), floodgate.WithDryRun(true)))
	fs, err := filestore.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	file := floodgate.Must(floodgate.NewLimiter(p, floodgate.WithStore(fs), floodgate.WithClock(fc), floodgate.WithObserver(m.Observer("file"))))
	check(t, "at first", scrape(t, m), decisions("api", 0, 0, 0, 0, 0))
	for _, step := range []struct {
		name string
		do   func()
		want map[string]float64
	}{
		{"two admitted, one denied", func() { api.Allow(ctx, "k"); api.Allow(ctx, "k"); api.Allow(ctx, "k") }, decisions("api", 2, 1, 0, 0, 0)},
		{"over the burst", func() { api.AllowN(ctx, "k", 3) }, decisions("api", 2, 2, 0, 0, 0)},
		{"a refused wait", func() { api.Wait(ctx, "k") }, decisions("api", 2, 3, 0, 0, 0)},
		{"a negative cost", func() { api.AllowN(ctx, "k", -1) }, decisions("api", 2, 3, 0, 1, 0)},
		{"a minute later, a wait", func() { fc.Advance(time.Minute); api.Wait(ctx, "k") }, decisions("api", 3, 3, 0, 1, 0)},
		{"dry run", func() { shadow.AllowN(ctx, "k", 2); shadow.Allow(ctx, "k") }, decisions("shadow", 1, 0, 1, 0, 0)},
		{"a file store", func() { file.Allow(ctx, "k") }, decisions("file", 1, 0, 0, 0, 0)},
		{"the file store closed", func() { fs.Close(); file.Allow(ctx, "k") }, decisions("file", 1, 0, 0, 1, 1)},
	} {
		step.do()
		check(t, step.name, scrape(t, m), step.want)
	}
}

// A memory store's keys, bytes, bound, drained keys and evictions.
func TestMemoryStore(t *testing.T) {
	fc := clock.NewFake(epoch)
	m := prommetrics.New()
	const maxKeys = 64
	ms := memstore.New(maxKeys, memstore.MaxBytes(1<<20))
	if err := m.AddStore("main", ms); err != nil {
		t.Fatal(err)
	}
	l := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("token-bucket 1/1s"), floodgate.WithStore(ms), floodgate.WithClock(fc)))
	got := scrape(t, m)
	check(t, "at first", got, map[string]float64{`floodgate_memory_keys{store="main"}`: 0, `floodgate_memory_max_bytes{store="main"}`: 1 << 20,
		`floodgate_memory_drained_total{store="main"}`: 0, `floodgate_memory_evictions_total{store="main"}`: 0})
	before := got[`floodgate_memory_bytes{store="main"}`]
	l.Allow(ctx, "a")
	got = scrape(t, m)
	check(t, "one key", got, map[string]float64{`floodgate_memory_keys{store="main"}`: 1})
	if b := got[`floodgate_memory_bytes{store="main"}`]; b <= before {
		t.Errorf("a key held: floodgate_memory_bytes %v, before it %v", b, before)
	}
	fc.Advance(time.Minute) // a's state drains: a peek drops it
	l.AllowN(ctx, "a", 0)
	check(t, "a key drained", scrape(t, m), map[string]float64{`floodgate_memory_drained_total{store="main"}`: 1, `floodgate_memory_keys{store="main"}`: 0})
	for i := range 4 * maxKeys {
		l.Allow(ctx, fmt.Sprint("flood", i))
	}
	got = scrape(t, m)
	if e := got[`floodgate_memory_evictions_total{store="main"}`]; e == 0 {
		t.Error("a flood of keys evicted none")
	}
	if k := got[`floodgate_memory_keys{store="main"}`]; k > maxKeys {
		t.Errorf("floodgate_memory_keys %v, above the %d bound", k, maxKeys)
	}
}

func TestAddStoreErrors(t *testing.T) {
	m := prommetrics.New()
	ms := memstore.New(0)
	if err := m.AddStore("", ms); !errors.Is(err, prommetrics.ErrInvalidName) {
		t.Errorf("empty name: %v", err)
	}
	if err := m.AddStore("main", ms); err != nil {
		t.Fatal(err)
	}
	if err := m.AddStore("main", memstore.New(0)); !errors.Is(err, prommetrics.ErrInvalidName) {
		t.Errorf("a name twice: %v", err)
	}
	first, again := m.Observer("api"), m.Observer("api")
	if first != again {
		t.Error("two Observers for one label")
	}
}

// Goroutines deciding at once are all counted, exactly.
func TestConcurrentDecisions(t *testing.T) {
	m := prommetrics.New()
	l := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("fixed-window 1000/1h"), floodgate.WithClock(clock.NewFake(epoch)), floodgate.WithObserver(m.Observer("api"))))
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				l.Allow(ctx, fmt.Sprint("k", (g+i)%3))
			}
		})
	}
	wg.Wait()
	check(t, "8 goroutines of 500 calls on 3 keys", scrape(t, m), decisions("api", 3000, 1000, 0, 0, 0))
}

// A Redis store's deny cache, behind a failsafe store, is counted under
// the failsafe store's name.
func TestDenyCache(t *testing.T) {
	c := redistest.SharedServer(t).Client(t)
	rs, err := redisstore.New(c, redisstore.WithPrefix("prommetrics-denycache:"), redisstore.WithDenyCache(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Close() })
	fs, err := failsafe.New(rs, failsafe.Options{Mode: failsafe.FailClosed, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	l := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("fixed-window 1/1h"), floodgate.WithStore(fs)))
	if err := l.Reset(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	m := prommetrics.New()
	if err := m.AddStore("main", fs); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); rs.CacheStats().Hits < 10; {
		if time.Now().After(deadline) {
			t.Fatalf("no hits in 5 s: %+v", rs.CacheStats())
		}
		l.Allow(ctx, "k")
		time.Sleep(time.Millisecond)
	}
	got := scrape(t, m)
	for _, name := range []string{"entries", "bytes", "live", "fills_total", "invalidations_total", "flushes_total", "evictions_total"} {
		if _, ok := got[`floodgate_deny_cache_`+name+`{store="main"}`]; !ok {
			t.Errorf("no floodgate_deny_cache_%s{store=\"main\"}", name)
		}
	}
	if e := got[`floodgate_deny_cache_entries{store="main"}`]; e > 1 {
		t.Errorf("%v entries, want at most 1", e)
	}
	if got[`floodgate_deny_cache_hits_total{store="main"}`] < 10 {
		t.Errorf("hits %v, want at least 10", got[`floodgate_deny_cache_hits_total{store="main"}`])
	}
}
