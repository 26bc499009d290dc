package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/redisstore"
	"github.com/floodgate/floodgate/store"
	"github.com/redis/go-redis/v9"
)

// loadBudget is the deadline of each call of TestChaosClusterLoad to the
// masters that serve, and loadBound the latency they must stay within:
// half the budget, which a call that waits out the budget for a load on
// a master down misses by far. The calls to the master down have
// downBudget, shorter, so that the test ends sooner.
const (
	loadBudget = 800 * time.Millisecond
	loadBound  = loadBudget / 2
	downBudget = 200 * time.Millisecond
	loadLimit  = 1_000_000
)

// TestChaosClusterLoad: on a Redis Cluster of three masters, master 0 is
// paused (SIGSTOP), or killed (SIGKILL), and master 1 loses the store's
// function library (FUNCTION FLUSH), under a load of single-key calls and
// ApplyEach batches. The calls on master 1's keys load it there again and
// succeed, each within loadBound, however many at once; master 2's calls
// succeed within loadBound as well: no master's calls wait for the one
// that is down, whose calls alone fail. Each call is carried out once (the
// keys' counts at the end); once master 0 serves again, its keys are back
// within 1s, after a restart that left it empty too; no goroutine outlives
// the load.
func TestChaosClusterLoad(t *testing.T) {
	cl := redistest.NewCluster(t) // one for both faults: each ends with the cluster whole
	for _, f := range []struct {
		name       string
		start, end func(i int)
	}{
		{"pause", cl.Pause, cl.Resume},
		{"kill", cl.Kill, func(i int) { cl.Restart(t, i) }},
	} {
		t.Run(f.name, func(t *testing.T) { runLoadFault(t, cl, f.start, f.end) })
	}
}

// loadKeys are the keys of TestChaosClusterLoad, by the master that
// serves them: 0 is down, 1 flushed, 2 keeps its library.
type loadKeys [3][]string

// runLoadFault runs TestChaosClusterLoad's load on cl through the fault
// that start begins on master 0 and end ends.
func runLoadFault(t *testing.T, cl *redistest.Cluster, start, end func(i int)) {
	c := cl.Client(t)
	s := newStore(t, c, redisstore.WithCallerTime())
	p := algo.MustParsePolicy(fmt.Sprintf("fixed-window %d/1h", loadLimit))
	tb, err := s.Table("api", p)
	if err != nil {
		t.Fatal(err)
	}
	var keys loadKeys
	keys[1], keys[0] = clusterKeys(t, c, cl, s, p, 0, 8)
	keys[2], keys[1] = splitKeys(t, c, cl.Addrs()[1], tb, keys[1])
	for _, k := range [][]string{keys[0], keys[1], keys[2]} {
		for _, key := range k {
			if _, err := tb.Decide(ctx, key, 1e9, 1); err != nil { // the library on every master, the clients' goroutines there
				t.Fatal(err)
			}
		}
	}
	goroutines := runtime.NumGoroutine()
	flushed := redis.NewClient(&redis.Options{Addr: cl.Addrs()[1]})
	defer flushed.Close()

	start(0)
	if err := flushed.FunctionFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	lr := &loadRun{tb: tb, s: s, done: map[string]int64{}}
	lr.run(keys, 300*time.Millisecond)
	end(0)
	lr.check(t, lr.back(t, keys[0][0]))
	lr.checkOnce(t, slices.Concat(keys[1], keys[2]))
	noGoroutineGrowth(t, goroutines)
}

// check fails t unless every call on masters 1 and 2 succeeded within
// loadBound, every call on master 0 failed within it, and master 0's
// keys were back within 1s of the fault's end, which was back ago.
func (lr *loadRun) check(t *testing.T, back time.Duration) {
	t.Helper()
	lr.mu.Lock()
	defer lr.mu.Unlock()
	t.Logf("calls on the flushed master: %d ok, %d failed, slowest %v; on the other: %d ok, %d failed, slowest %v; on the master down: %d failed, slowest %v; back %v after the fault",
		lr.ok[1], lr.failed[1], lr.slowest[1], lr.ok[2], lr.failed[2], lr.slowest[2], lr.failed[0], lr.slowest[0], back)
	for m := 1; m <= 2; m++ {
		if lr.failed[m] != 0 || lr.ok[m] == 0 || lr.slowest[m] > loadBound {
			t.Errorf("master %d's calls: %d ok, %d failed (first: %v), slowest %v; want all ok within %v",
				m, lr.ok[m], lr.failed[m], lr.firstErr[m], lr.slowest[m], loadBound)
		}
	}
	if lr.ok[0] != 0 || lr.failed[0] == 0 || lr.slowest[0] > loadBound {
		t.Errorf("the master down: %d calls ok, %d failed, slowest %v; want all failed within %v", lr.ok[0], lr.failed[0], lr.slowest[0], loadBound)
	}
	if back > time.Second {
		t.Errorf("master 0's keys back %v after the fault ended, want within 1s", back)
	}
}

// splitKeys returns those of keys whose master is at addr, and the others.
func splitKeys(t *testing.T, c *redis.ClusterClient, addr string, tb store.Table, keys []string) (other, at []string) {
	t.Helper()
	for _, key := range keys {
		m, err := c.MasterForKey(ctx, redisstore.KeyOf(tb, key))
		if err != nil {
			t.Fatal(err)
		}
		if m.Options().Addr == addr {
			at = append(at, key)
		} else {
			other = append(other, key)
		}
	}
	if len(at) == 0 || len(other) == 0 {
		t.Fatalf("keys %v: %d on %s, %d on the other healthy master; want some on each", keys, len(at), addr, len(other))
	}
	return other, at
}

// loadRun is what TestChaosClusterLoad's load saw, by master.
type loadRun struct {
	tb store.Table
	s  *redisstore.Store

	mu       sync.Mutex
	ok       [3]int
	failed   [3]int
	firstErr [3]error
	slowest  [3]time.Duration
	done     map[string]int64 // ops carried out, by key
}

// run calls, until d has passed: each key of keys alone, in a goroutine of
// its own, and each master's keys in ApplyEach batches, in two more.
func (lr *loadRun) run(keys loadKeys, d time.Duration) {
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for m, ks := range keys {
		for _, key := range ks {
			wg.Go(func() {
				for time.Now().Before(deadline) {
					lr.call(m, []string{key})
				}
			})
		}
		for range 2 {
			wg.Go(func() {
				for time.Now().Before(deadline) {
					lr.call(m, ks)
				}
			})
		}
	}
	wg.Wait()
}

// call decides keys, all on master m, in one ApplyEach, within
// loadBudget, or downBudget on master 0.
func (lr *loadRun) call(m int, keys []string) {
	ops := make([]store.Op, len(keys))
	for i, key := range keys {
		ops[i] = store.Op{Kind: store.OpDecide, Table: lr.tb, Key: key, Now: 1e9, N: 1}
	}
	budget := loadBudget
	if m == 0 {
		budget = downBudget
	}
	cctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	begin := time.Now()
	err := lr.s.ApplyEach(cctx, ops)
	took := time.Since(begin)
	lr.mu.Lock()
	defer lr.mu.Unlock()
	lr.slowest[m] = max(lr.slowest[m], took)
	if err != nil && !errors.Is(err, store.ErrPartialFailure) {
		lr.failed[m] += len(ops)
		lr.firstErr[m] = cmpErr(lr.firstErr[m], err)
		return
	}
	for i := range ops {
		if err := ops[i].Result.Err; err != nil {
			lr.failed[m]++
			lr.firstErr[m] = cmpErr(lr.firstErr[m], err)
			continue
		}
		lr.ok[m]++
		lr.done[keys[i]]++
	}
}

// cmpErr returns first, or err when first is nil.
func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// back returns how long after now a call on key, of the master whose
// fault just ended, first succeeds, polling for up to 3s.
func (lr *loadRun) back(t *testing.T, key string) time.Duration {
	t.Helper()
	begin := time.Now()
	for time.Since(begin) < 3*time.Second {
		cctx, cancel := context.WithTimeout(ctx, loadBudget)
		_, err := lr.tb.Decide(cctx, key, 1e9, 1)
		cancel()
		if err == nil {
			return time.Since(begin)
		}
		time.Sleep(5 * time.Millisecond) // polling a real process
	}
	return time.Since(begin)
}

// checkOnce fails t unless each of keys counted exactly the warm-up call
// and the load's successful ones, and this one: no op carried out twice, none lost.
func (lr *loadRun) checkOnce(t *testing.T, keys []string) {
	t.Helper()
	for _, key := range keys {
		d, err := lr.tb.Decide(ctx, key, 1e9, 1)
		if want := loadLimit - 2 - lr.done[key]; err != nil || d.Remaining != want {
			t.Errorf("key %s: %d remaining (%v), want %d: %d ops done", key, d.Remaining, err, want, lr.done[key])
		}
	}
}
