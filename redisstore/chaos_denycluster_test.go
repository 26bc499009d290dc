package redisstore_test

import (
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/redisstore"
	"github.com/floodgate/floodgate/store"
)

// TestChaosDenyCacheClusterMaster: on a Redis Cluster of three masters,
// with denied keys cached on each, one master is killed (SIGKILL, then
// restarted empty) or paused (SIGSTOP, then resumed). The keys of its
// slots stop being answered from the cache (at once when killed, within
// the 500 ms horizon when paused) and go to Redis, which fails them by
// the store's timeout; the keys of the other masters keep being answered
// from the cache throughout, without Redis. Within 1 s of the master
// serving again the cache is live on every master, and a key of the
// restarted, empty master is admitted: no stale denial survives it.
func TestChaosDenyCacheClusterMaster(t *testing.T) {
	cl := redistest.NewCluster(t) // one for both faults: each ends with the cluster whole
	for _, f := range []struct {
		name  string
		start func(victim int)
		end   func(t *testing.T, victim int)
		empty bool // the master comes back without its keys
	}{
		{"kill", cl.Kill, func(t *testing.T, victim int) { cl.Restart(t, victim) }, true},
		{"pause", cl.Pause, func(_ *testing.T, victim int) { cl.Resume(victim) }, false},
	} {
		t.Run(f.name, func(t *testing.T) {
			c := cl.Client(t)
			const timeout = 200 * time.Millisecond
			s := cachedStore(t, c, "dcchaos-"+f.name+":", redisstore.WithTimeout(timeout))
			p := algo.MustParsePolicy("fixed-window 2/1h")
			const victim = 0
			healthy, dead := clusterKeys(t, c, cl, s, p, victim, 4)
			tb, _ := s.Table("api", p)
			for _, key := range append(healthy, dead...) {
				overLimitOn(t, s, tb, key)
			}
			goroutines := runtime.NumGoroutine()

			f.start(victim)
			start := time.Now()
			if f.empty {
				took := waitFor(t, time.Second, "the dead master's entries dropped", func() bool {
					return !redisstore.Cached(s, tb, dead[0])
				})
				t.Logf("the dead master's entries dropped %v after the kill", took)
			} else {
				time.Sleep(600 * time.Millisecond) // the fault is real time: past the horizon
			}
			hits := s.CacheStats().Hits
			for range 100 {
				for _, key := range healthy {
					if d, err := tb.Decide(ctx, key, cacheT0, 1); err != nil || d.Allowed {
						t.Fatalf("%s, on a healthy master: %+v %v, want denied", key, d, err)
					}
				}
			}
			if got := s.CacheStats().Hits - hits; got != uint64(100*len(healthy)) {
				t.Errorf("%d of %d decisions on the healthy masters answered by the cache during the fault", got, 100*len(healthy))
			}
			for _, key := range dead[:2] { // two timeouts: the pause stays within the node timeout (2 s)
				began := time.Now()
				_, err := tb.Decide(ctx, key, cacheT0, 1)
				took := time.Since(began)
				if !errors.Is(err, redisstore.ErrUnavailable) {
					t.Fatalf("%s, on the faulty master: %v, want ErrUnavailable, not a cached answer", key, err)
				}
				if took > timeout+500*time.Millisecond {
					t.Errorf("%s, on the faulty master: failed after %v, want within the timeout %v", key, took, timeout)
				}
			}
			t.Logf("fault of %v", time.Since(start))

			f.end(t, victim)
			back := waitFor(t, 2*time.Second, "live again", func() bool { return s.CacheStats().Live })
			t.Logf("the cache live on every master %v after the master serves again", back)
			if back > time.Second {
				t.Errorf("the cache live again %v after the master serves, want within 1 s", back)
			}
			for _, key := range dead {
				d, err := tb.Decide(ctx, key, cacheT0, 1)
				if err != nil || d.Allowed != f.empty {
					t.Fatalf("%s, after the master is back: %+v %v, want allowed %v", key, d, err, f.empty)
				}
			}
			noGoroutineGrowth(t, goroutines)
		})
	}
}

// overLimitOn spends the burst of key in tb, a fixed window of 2, then is
// denied once, and waits for s's cache to hold the key.
func overLimitOn(t *testing.T, s *redisstore.Store, tb store.Table, key string) {
	t.Helper()
	for i := range 3 {
		if i == 2 {
			if err := s.Sync(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if d, err := tb.Decide(ctx, key, cacheT0, 1); err != nil || d.Allowed != (i < 2) {
			t.Fatalf("%s, decision %d: %+v %v", key, i, d, err)
		}
	}
	redisstore.WaitFills(s)
	if !redisstore.Cached(s, tb, key) {
		t.Fatalf("the cache does not hold the denied key %s: %+v", key, s.CacheStats())
	}
}
