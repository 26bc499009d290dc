package redisstore_test

import (
	"context"
	"errors"
	"fmt"
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

// clusterLoad is what a load on a cluster saw, key by key.
type clusterLoad struct {
	mu          sync.Mutex
	admitted    map[string]int // by the store
	modeAnswers map[string]int // failsafe.ErrUnavailable
	modeAtOnce  map[string]int // of which, answered sooner than the Timeout: the store not called, or failing fast
	otherErrs   map[string]int
	maxLatency  time.Duration
	firstBack   time.Time // the first call on a dead key decided by the store after the restart began
}

// TestChaosClusterMasterDown: on a Redis Cluster of three masters, one is
// killed (SIGKILL) under load for 1s, through a failsafe.Store failing
// closed. Keys on the healthy masters keep being decided by the store,
// exactly (each admitted its limit, no call answered by the mode but for
// one now and then that outlasts the Timeout on a loaded machine); keys
// on the dead master get the mode's answer within the budget; once the
// master serves its keys again, they are back on the store within 1s.
// (Killed for longer than its node timeout, 2s, the master would be
// marked failed, and then the cluster stops serving every slot until it
// is back, as Redis Cluster does without replicas.)
func TestChaosClusterMasterDown(t *testing.T) {
	cl := redistest.NewCluster(t)
	c := cl.Client(t)
	s := newStore(t, c, redisstore.WithPrefix("chaos:"))
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
	healthy, dead := clusterKeys(t, c, cl, s, p, victim, 8)

	load := &clusterLoad{admitted: map[string]int{}, modeAnswers: map[string]int{}, modeAtOnce: map[string]int{}, otherErrs: map[string]int{}}
	var restarted atomic.Bool
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				for _, key := range slices.Concat(healthy, dead) {
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
					load.record(key, d, err, took, took >= timeout, restarted.Load() && slices.Contains(dead, key))
				}
			}
		})
	}
	time.Sleep(300 * time.Millisecond) // the load runs on the whole cluster
	cl.Kill(victim)
	answered := make(chan time.Time, 1)
	tb, err := s.Table("api", p)
	if err != nil {
		t.Fatal(err)
	}
	go waitAnswer(cl.Addrs()[victim], redisstore.KeyOf(tb, dead[0]), answered)
	time.Sleep(time.Second) // well below the cluster's node timeout (2s), so the others never mark it failed
	restarted.Store(true)
	cl.Restart(t, victim)
	time.Sleep(1500 * time.Millisecond)
	close(stop)
	wg.Wait()
	answer := <-answered

	load.mu.Lock()
	defer load.mu.Unlock()
	t.Logf("admitted %v, mode answers %v (at once %v), other errors %v", load.admitted, load.modeAnswers, load.modeAtOnce, load.otherErrs)
	t.Logf("failsafe %+v; slowest call %v; dead keys back %v after their master answered", fs.Stats(), load.maxLatency, load.firstBack.Sub(answer))
	// A call to a healthy master may now and then outlast the Timeout on
	// this loaded machine, and be decided by the mode: a slow call, not a
	// failure of isolation, which shows as calls answered by the mode
	// without waiting for the store (before, about 11,000 a key).
	for _, key := range healthy {
		if load.admitted[key] != limit || load.modeAtOnce[key] != 0 || load.modeAnswers[key] > 2 || load.otherErrs[key] != 0 {
			t.Errorf("healthy key %s: %d admitted, %d by the mode (%d at once), %d errors; want %d by the store, none by the mode at once",
				key, load.admitted[key], load.modeAnswers[key], load.modeAtOnce[key], load.otherErrs[key], limit)
		}
	}
	for _, key := range dead {
		if load.modeAnswers[key] == 0 || load.admitted[key] > 2*limit { // the restarted master starts empty
			t.Errorf("dead key %s: %d admitted, %d by the mode", key, load.admitted[key], load.modeAnswers[key])
		}
	}
	if budget := 2 * timeout; load.maxLatency > budget { // the Timeout and a margin
		t.Errorf("slowest call %v, want within %v", load.maxLatency, budget)
	}
	if back := load.firstBack.Sub(answer); load.firstBack.IsZero() || back > time.Second {
		t.Errorf("the dead master's keys back on the store %v after it answered, want within 1s", back)
	}
	if st := fs.Stats(); st.Down {
		t.Errorf("failsafe %+v, want up at the end", st)
	}
}

// record counts one call on key, slow if it took the Timeout or longer.
func (l *clusterLoad) record(key string, d floodgate.Decision, err error, took time.Duration, slow, afterRestart bool) {
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
