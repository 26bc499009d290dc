package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/failsafe"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/redisstore"
	"github.com/floodgate/floodgate/store"
	"github.com/redis/go-redis/v9"
)

// clusterKeys returns keys of table "api" with policy p on s whose hash
// slots a node other than node victim serves, and keys whose slots node
// victim serves: n of each.
func clusterKeys(t *testing.T, c *redis.ClusterClient, cl *redistest.Cluster, s *redisstore.Store, p algo.Policy, victim, n int) (healthy, dead []string) {
	t.Helper()
	tb, err := s.Table("api", p)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; len(healthy) < n || len(dead) < n; i++ {
		key := fmt.Sprintf("user%d", i)
		master, err := c.MasterForKey(ctx, redisstore.KeyOf(tb, key))
		if err != nil {
			t.Fatal(err)
		}
		if master.Options().Addr == cl.Addrs()[victim] {
			if len(dead) < n {
				dead = append(dead, key)
			}
		} else if len(healthy) < n {
			healthy = append(healthy, key)
		}
	}
	return healthy, dead
}

// TestChaosClusterMasterDown: on a Redis Cluster of three masters, one is
// killed (SIGKILL), or paused (SIGSTOP), under load for 1s, through a
// failsafe.Store failing closed. The load is single-key calls (Allow) and
// batches (AllowEachAt of 16 keys over every master, as an Envoy request
// of many descriptors). Keys on the healthy masters keep being decided by
// the store, exactly (each admitted its limit; no single-key call
// answered by the mode but for one now and then that outlasts the Timeout
// on a loaded machine; no op of a batch answered by the mode at all);
// keys on the faulty master get the mode's answer within the budget;
// once the master serves its keys again, they are back on the store
// within 1s; no goroutine outlives the load. (Killed or paused for longer
// than its node timeout, 2s, the master would be marked failed, and then
// the cluster stops serving every slot until it is back, as Redis Cluster
// does without replicas.)
func TestChaosClusterMasterDown(t *testing.T) {
	cl := redistest.NewCluster(t) // one for both faults: each ends with the cluster whole
	for _, f := range []clusterFault{
		{"kill", 2, (*redistest.Cluster).Kill, func(t *testing.T, cl *redistest.Cluster, victim int, key string) time.Time {
			answered := make(chan time.Time, 1)
			go waitAnswer(cl.Addrs()[victim], key, answered)
			cl.Restart(t, victim)
			return <-answered
		}},
		{"pause", 1, (*redistest.Cluster).Pause, func(_ *testing.T, cl *redistest.Cluster, victim int, _ string) time.Time {
			cl.Resume(victim)
			return time.Now()
		}},
	} {
		t.Run(f.name, func(t *testing.T) { runClusterFault(t, cl, f) })
	}
}

// clusterFault is a real fault of a Cluster's master: start begins it,
// end ends it and returns when the master serves key, one of its own,
// again. The master keeps up to deadLimits limits of its keys' admissions
// across it: 1 when it keeps its data, 2 when it restarts empty.
type clusterFault struct {
	name       string
	deadLimits int
	start      func(cl *redistest.Cluster, victim int)
	end        func(t *testing.T, cl *redistest.Cluster, victim int, key string) time.Time
}

// runClusterFault runs TestChaosClusterMasterDown's load on cl through
// fault f.
func runClusterFault(t *testing.T, cl *redistest.Cluster, f clusterFault) {
	c := cl.Client(t)
	s := newStore(t, c, redisstore.WithPrefix("chaos-"+f.name+":"))
	// The default options but for the Timeout: on a loaded machine, with
	// the race detector, a call to a healthy master now and then takes
	// over 100ms, which would be a failure (decided by the mode) though no
	// master is down.
	const timeout = 500 * time.Millisecond
	fs := newFailsafe(s, failsafe.Options{Timeout: timeout})
	const limit = 20
	p := algo.MustParsePolicy(fmt.Sprintf("fixed-window %d/1h", limit))
	l := floodgate.Must(floodgate.NewLimiter(p, floodgate.WithStore(fs), floodgate.WithName("api")))
	const victim = 0
	healthy, dead := clusterKeys(t, c, cl, s, p, victim, 17) // the 17th of each for applyBlame
	single, batch := newClusterLoad(healthy[:8], dead[:8]), newClusterLoad(healthy[8:], dead[8:])
	// Every master served once (peeks, which spend nothing), so that the
	// clients' goroutines are there before the count.
	peeks := batch.checks(l)
	for i := range peeks {
		peeks[i].Peek = true
	}
	if _, errs := floodgate.AllowEachAt(ctx, time.Now(), peeks...); errs != nil {
		t.Fatal(errs)
	}
	goroutines := runtime.NumGoroutine()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { single.runSingle(l, timeout, stop) })
	}
	for range 2 {
		wg.Go(func() { batch.runBatches(l, timeout, stop) })
	}
	time.Sleep(300 * time.Millisecond) // the load runs on the whole cluster
	f.start(cl, victim)
	start := time.Now()
	tb, err := s.Table("api", p)
	if err != nil {
		t.Fatal(err)
	}
	applyBlame(t, s, tb, healthy[16], dead[16])
	time.Sleep(time.Second - time.Since(start)) // well below the cluster's node timeout (2s), so the others never mark it failed
	single.restarted.Store(true)
	batch.restarted.Store(true)
	answer := f.end(t, cl, victim, redisstore.KeyOf(tb, dead[0]))
	time.Sleep(1200 * time.Millisecond) // recovery within 1s, and a margin
	close(stop)
	wg.Wait()

	t.Logf("failsafe %+v", fs.Stats())
	// A single-key call to a healthy master may now and then outlast the
	// Timeout on this loaded machine, and be decided by the mode: a slow
	// call, not a failure of isolation, which shows as calls answered by
	// the mode without waiting for the store (before, about 11,000 a
	// key).
	single.check(t, "single-key", limit, f.deadLimits*limit, 2, 2*timeout, answer)
	batch.check(t, "batched", limit, f.deadLimits*limit, 0, 2*timeout, answer)
	noGoroutineGrowth(t, goroutines)
}

// applyBlame fails t unless an Apply of a key on a healthy master and one
// on the faulty master, all or nothing, fails, within 300ms, naming the
// op of the faulty master alone (store.Result.Failure), for a
// failsafe.Store to blame its slot alone.
func applyBlame(t *testing.T, s *redisstore.Store, tb store.Table, healthy, dead string) {
	t.Helper()
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	now := time.Now().UnixNano()
	ops := []store.Op{{Kind: store.OpDecide, Table: tb, Key: healthy, Now: now}, {Kind: store.OpDecide, Table: tb, Key: dead, Now: now}}
	err := s.Apply(cctx, ops)
	if err == nil || errors.Is(err, store.ErrPartialFailure) || ops[0].Result.Failure() != nil || ops[1].Result.Failure() == nil {
		t.Errorf("an Apply across the healthy and the faulty master: %v, failures %v and %v; want it failed, naming the faulty master's op",
			err, ops[0].Result.Failure(), ops[1].Result.Failure())
	}
}

// clusterLoad is what a load on a cluster saw, key by key.
type clusterLoad struct {
	healthy, dead []string
	restarted     atomic.Bool // the fault is ending

	mu          sync.Mutex
	admitted    map[string]int // by the store
	modeAnswers map[string]int // failsafe.ErrUnavailable
	modeAtOnce  map[string]int // of which, answered sooner than the Timeout: the store not called, or failing fast
	otherErrs   map[string]int
	maxLatency  time.Duration
	firstBack   time.Time // the first call on a dead key decided by the store after the restart began
}

func newClusterLoad(healthy, dead []string) *clusterLoad {
	return &clusterLoad{healthy: healthy, dead: dead,
		admitted: map[string]int{}, modeAnswers: map[string]int{}, modeAtOnce: map[string]int{}, otherErrs: map[string]int{}}
}

// runSingle calls l.Allow on each key in turn until stop.
func (cl *clusterLoad) runSingle(l *floodgate.Limiter, timeout time.Duration, stop <-chan struct{}) {
	for {
		for _, key := range slices.Concat(cl.healthy, cl.dead) {
			select {
			case <-stop:
				return
			default:
			}
			cctx, cancel := context.WithTimeout(ctx, 4*timeout)
			start := time.Now()
			d, err := l.Allow(cctx, key)
			took := time.Since(start)
			cancel()
			cl.record(key, d, err, took, took >= timeout)
		}
	}
}

// checks returns a check of l on each key.
func (cl *clusterLoad) checks(l *floodgate.Limiter) []floodgate.Check {
	var checks []floodgate.Check
	for _, key := range slices.Concat(cl.healthy, cl.dead) {
		checks = append(checks, floodgate.Check{Limiter: l, Key: key, N: 1})
	}
	return checks
}

// runBatches decides every key at once, with floodgate.AllowEachAt, until
// stop.
func (cl *clusterLoad) runBatches(l *floodgate.Limiter, timeout time.Duration, stop <-chan struct{}) {
	checks := cl.checks(l)
	for {
		select {
		case <-stop:
			return
		default:
		}
		cctx, cancel := context.WithTimeout(ctx, 4*timeout)
		start := time.Now()
		ds, errs := floodgate.AllowEachAt(cctx, start, checks...)
		took := time.Since(start)
		cancel()
		for i, c := range checks {
			var err error
			if errs != nil {
				err = errs[i]
			}
			cl.record(c.Key, ds[i], err, took, took >= timeout)
		}
	}
}

// check fails t unless each healthy key was admitted limit times by the
// store, with no answer of the mode at once and at most slowMode in all;
// the dead keys were answered by the mode (some: a paused master holds
// each call for the Timeout), each admitted at most deadLimit times; no call took longer than budget; and the dead keys were back on
// the store within 1s of answer, when their master served them again.
func (cl *clusterLoad) check(t *testing.T, what string, limit, deadLimit, slowMode int, budget time.Duration, answer time.Time) {
	t.Helper()
	cl.mu.Lock()
	defer cl.mu.Unlock()
	t.Logf("%s: admitted %v, mode answers %v (at once %v), other errors %v", what, cl.admitted, cl.modeAnswers, cl.modeAtOnce, cl.otherErrs)
	t.Logf("%s: slowest call %v; dead keys back %v after their master answered", what, cl.maxLatency, cl.firstBack.Sub(answer))
	for _, key := range cl.healthy {
		if cl.admitted[key] != limit || cl.modeAtOnce[key] != 0 || cl.modeAnswers[key] > slowMode || cl.otherErrs[key] != 0 {
			t.Errorf("%s: healthy key %s: %d admitted, %d by the mode (%d at once), %d errors; want %d by the store, at most %d by the mode, none at once",
				what, key, cl.admitted[key], cl.modeAnswers[key], cl.modeAtOnce[key], cl.otherErrs[key], limit, slowMode)
		}
	}
	byMode := 0
	for _, key := range cl.dead {
		byMode += cl.modeAnswers[key]
		if cl.admitted[key] > deadLimit {
			t.Errorf("%s: dead key %s: %d admitted, want at most %d", what, key, cl.admitted[key], deadLimit)
		}
	}
	if byMode == 0 {
		t.Errorf("%s: no call on the dead keys answered by the mode", what)
	}
	if cl.maxLatency > budget { // the Timeout and a margin
		t.Errorf("%s: slowest call %v, want within %v", what, cl.maxLatency, budget)
	}
	if back := cl.firstBack.Sub(answer); cl.firstBack.IsZero() || back > time.Second {
		t.Errorf("%s: the dead master's keys back on the store %v after it answered, want within 1s", what, back)
	}
}

// noGoroutineGrowth fails t when more than 2 goroutines beyond before
// outlive the load for 5s: those of calls that a stalled master held end
// when it answers.
func noGoroutineGrowth(t *testing.T, before int) {
	t.Helper()
	var n int
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if n = runtime.NumGoroutine(); n <= before+2 {
			t.Logf("%d goroutines after the load, %d before", n, before)
			return
		}
	}
	t.Errorf("%d goroutines after the load, %d before", n, before)
}

// record counts one call on key, slow if it took the Timeout or longer.
func (l *clusterLoad) record(key string, d floodgate.Decision, err error, took time.Duration, slow bool) {
	afterRestart := l.restarted.Load() && slices.Contains(l.dead, key)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.maxLatency = max(l.maxLatency, took)
	switch {
	case errors.Is(err, failsafe.ErrUnavailable):
		l.modeAnswers[key]++
		if !slow {
			l.modeAtOnce[key]++
		}
	case err != nil:
		l.otherErrs[key]++
	default:
		if d.Allowed {
			l.admitted[key]++
		}
		if afterRestart && l.firstBack.IsZero() {
			l.firstBack = time.Now()
		}
	}
}

// waitAnswer sends on ch when the Redis at addr, killed, first serves
// key, in one of its slots.
func waitAnswer(addr, key string, ch chan<- time.Time) {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 50 * time.Millisecond})
	defer c.Close()
	for {
		if err := c.Get(ctx, key).Err(); err == nil || errors.Is(err, redis.Nil) {
			ch <- time.Now()
			return
		}
		time.Sleep(5 * time.Millisecond) // polling a real process
	}
}
