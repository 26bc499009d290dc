package envoyrls

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/floodgate/floodgate/filestore"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/memstore"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/clock"
	"github.com/floodgate/floodgate/store"
)

const (
	configA = `
domain: d
descriptors:
  - key: kept
    rate_limit: {unit: minute, requests_per_unit: 100000}
  - key: changed
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: onlyA
    rate_limit: {unit: minute, requests_per_unit: 7}
`
	configB = `
domain: d
descriptors:
  - key: kept                      # unchanged: keeps its state
    rate_limit: {unit: minute, requests_per_unit: 100000}
  - key: changed                   # changed: keeps its count
    rate_limit: {unit: minute, requests_per_unit: 6}
  - key: onlyB
    rate_limit: {unit: minute, requests_per_unit: 7}
`
)

// SetConfig under concurrent requests: no race, no lost count on the
// rules that did not change, a fresh start for the ones that did.
func TestSetConfigUnderLoad(t *testing.T) {
	a, b := mustParse(t, configA), mustParse(t, configB)
	s := NewService(a, memstore.New(0), WithClock(clock.NewFake(t0)))

	const workers, perWorker, swaps = 4, 300, 200
	var wg sync.WaitGroup
	var failures atomic.Int64
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				// Two descriptors: one rule both configurations have, one
				// only one of them has (OK with or without a limit).
				other := "onlyA"
				if (w+i)%2 == 0 {
					other = "onlyB"
				}
				resp, err := s.ShouldRateLimit(context.Background(), request("d", descriptor("kept", "x"), descriptor(other, fmt.Sprint(w, i))))
				if err != nil || len(resp.Statuses) != 2 || resp.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 100000 {
					failures.Add(1)
				}
			}
		})
	}
	wg.Go(func() {
		for i := range swaps {
			if i%2 == 0 {
				s.SetConfig(b)
			} else {
				s.SetConfig(a)
			}
		}
	})
	wg.Wait()
	if n := failures.Load(); n > 0 {
		t.Fatalf("%d requests failed", n)
	}
	want := fmt.Sprintf("OK: OK 100000/MINUTE r=%d t=1m0s", 100000-workers*perWorker-1)
	if got := call(t, s, request("d", descriptor("kept", "x"))); got != want {
		t.Errorf("after the swaps: %s, want %s: every request counted once", got, want)
	}
	if st := s.Stats(); st.OK != workers*perWorker+1 || st.Errors != 0 {
		t.Errorf("Stats() = %+v", st)
	}

	// A rule whose requests_per_unit changed keeps its count, as
	// upstream's, whose counter key names no limit.
	s.SetConfig(a)
	for range 5 {
		call(t, s, request("d", descriptor("changed", "x")))
	}
	if got, want := call(t, s, request("d", descriptor("changed", "x"))), "OVER_LIMIT: OVER_LIMIT 5/MINUTE t=1m0s"; got != want {
		t.Errorf("under A: %s, want %s", got, want)
	}
	s.SetConfig(b)
	if got, want := call(t, s, request("d", descriptor("changed", "x"))), "OVER_LIMIT: OVER_LIMIT 6/MINUTE t=1m0s"; got != want {
		t.Errorf("under B: %s, want %s", got, want)
	}
	s.SetConfig(a)
	if got, want := call(t, s, request("d", descriptor("changed", "x"))), "OVER_LIMIT: OVER_LIMIT 5/MINUTE t=1m0s"; got != want {
		t.Errorf("under A again: %s, want %s", got, want)
	}
	s.SetConfig(nil)
	if got, want := call(t, s, request("d", descriptor("kept", "x"))), "OK: OK"; got != want {
		t.Errorf("no configuration: %s, want %s", got, want)
	}
}

// A request under way when the configuration changes finishes under the
// configuration it began with.
func TestSetConfigInFlight(t *testing.T) {
	g := &gateStore{Store: memstore.New(0), entered: make(chan struct{})}
	g.hold()
	s := NewService(mustParse(t, configA), g, WithClock(clock.NewFake(t0)))
	done := make(chan string)
	go func() {
		resp, err := s.ShouldRateLimit(context.Background(), request("d", descriptor("kept", "x"), descriptor("onlyA", "x")))
		if err != nil {
			done <- err.Error()
			return
		}
		done <- summary(resp)
	}()
	<-g.entered // the request is deciding its first descriptor
	s.SetConfig(mustParse(t, configB))
	if got, want := call(t, s, request("d", descriptor("onlyA", "x"))), "OK: OK"; got != want {
		t.Errorf("a new request: %s, want %s (B has no onlyA)", got, want)
	}
	g.release()
	if got, want := <-done, "OK: OK 100000/MINUTE r=99999 t=1m0s | OK 7/MINUTE r=6 t=1m0s"; got != want {
		t.Errorf("the request under way: %s, want %s (decided under A)", got, want)
	}
}

// gateStore holds the first decision (a Decide or an Apply) made after
// hold until release, and reports each later one on arrived (if not
// nil) without waiting.
type gateStore struct {
	store.Store
	entered chan struct{} // receives when the held decision has come
	arrived chan struct{}

	mu      sync.Mutex
	holding bool          // the next decision is held
	held    chan struct{} // closed by release; nil before hold
}

func (g *gateStore) hold() {
	g.mu.Lock()
	g.holding, g.held = true, make(chan struct{})
	g.mu.Unlock()
}

func (g *gateStore) release() { close(g.held) }

// pass holds the first decision after hold, and reports the later ones.
func (g *gateStore) pass() {
	g.mu.Lock()
	first, held := g.holding, g.held
	g.holding = false
	g.mu.Unlock()
	switch {
	case first:
		g.entered <- struct{}{}
		<-held
	case held != nil && g.arrived != nil:
		select {
		case g.arrived <- struct{}{}:
		default:
		}
	}
}

func (g *gateStore) Table(name string, p algo.Policy) (store.Table, error) {
	t, err := g.Store.Table(name, p)
	return gateTable{t, g}, err
}

type gateTable struct {
	store.Table
	g *gateStore
}

func (t gateTable) Decide(ctx context.Context, key string, now, n int64) (algo.Decision, error) {
	t.g.pass()
	return t.Table.Decide(ctx, key, now, n)
}

// ApplyEach is Apply op by op.
func (g *gateStore) ApplyEach(ctx context.Context, ops []store.Op) error {
	for i := range ops {
		if err := g.Apply(ctx, ops[i:i+1]); err != nil {
			return err
		}
	}
	return nil
}

// Apply passes the ops on to the inner store's tables.
func (g *gateStore) Apply(ctx context.Context, ops []store.Op) error {
	g.pass()
	inner := make([]store.Op, len(ops))
	for i, op := range ops {
		if t, ok := op.Table.(gateTable); ok {
			op.Table = t.Table
		}
		inner[i] = op
	}
	err := g.Store.Apply(ctx, inner)
	for i := range ops {
		ops[i].Result = inner[i].Result
	}
	return err
}

// A rule of any algorithm whose descriptor stays and whose policy changes
// keeps its keys' spent units across SetConfig, converted as the store
// converts a policy change (algo.Policy.Convert), on the memory store, a
// file and Redis: here 8 of 10 spent leave 12 of 20, then 11. The domain's
// other rule, of another policy, changes nothing of it.
func TestSetConfigKeepsSpentUnits(t *testing.T) {
	config := func(alg string, perUnit int) *Config {
		return mustParse(t, fmt.Sprintf(`
domain: d
descriptors:
  - key: changed
    rate_limit: {unit: minute, requests_per_unit: %d, algorithm: %s}
  - key: other
    rate_limit: {unit: hour, requests_per_unit: 3, algorithm: sliding-log}
`, perUnit, alg))
	}
	srv := redistest.NewServer(t)
	stores := map[string]func(prefix string) store.Store{
		"memory": func(string) store.Store { return memstore.New(0) },
		"redis":  func(prefix string) store.Store { return newRedisStore(t, srv, prefix) },
		"file": func(string) store.Store {
			fs, err := filestore.Open(filepath.Join(t.TempDir(), "state.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { fs.Close() })
			return fs
		},
	}
	for name, open := range stores {
		for _, alg := range []string{"token-bucket", "leaky-bucket", "sliding-log", "sliding-window", "fixed-window"} {
			t.Run(name+"/"+alg, func(t *testing.T) {
				s := NewService(config(alg, 10), open(alg+":"), WithClock(clock.NewFake(t0)))
				for range 8 {
					call(t, s, request("d", descriptor("changed", "x"), descriptor("other", "x")))
				}
				s.SetConfig(config(alg, 20))
				got := call(t, s, request("d", descriptor("changed", "x")))
				if want := "OK: OK 20/MINUTE r=11 "; !strings.HasPrefix(got, want) {
					t.Errorf("after raising 10/minute to 20: %s, want %s...", got, want)
				}
			})
		}
	}
}
