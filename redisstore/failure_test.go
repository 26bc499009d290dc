package redisstore_test

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"

	"github.com/floodgate/floodgate/failsafe"
	"github.com/floodgate/floodgate/store"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/clock"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/redisstore"
	"github.com/redis/go-redis/v9"
)

// probe advances the clock past the cooldown and probes the store with a
// call, again after each cooldown until one comes back from Redis
// admitted: at most 5 times.
func probe(t *testing.T, fake *clock.Fake, l *floodgate.Limiter) {
	t.Helper()
	for range 5 {
		fake.Advance(time.Minute) // past the longest cooldown
		d, err := l.Allow(ctx, "hot")
		if err == nil && d.Allowed && d.Remaining == 99 { // Redis's fresh state, less this call
			return
		}
		t.Logf("a probe that did not reach Redis: %+v, %v", d, err)
	}
	t.Error("five probes, a cooldown apart, did not reach Redis")
}

// Redis is killed in the middle of a load of 16 goroutines and started
// again. Under each failure mode of failsafe.New the limiter does
// what the mode says while Redis is down, never admits more than the
// policy allows unless the mode is FailOpen, and goes back to Redis by
// itself once it answers; no goroutine is left behind.
func TestKillRedisMidLoad(t *testing.T) {
	for _, mode := range []failsafe.Mode{failsafe.FailClosed, failsafe.FailOpen, failsafe.FailLocal} {
		t.Run(mode.String(), func(t *testing.T) {
			srv := redistest.NewServer(t)
			before := runtime.NumGoroutine() // with the server's own, which end with it
			c := redis.NewClient(&redis.Options{Network: srv.Network(), Addr: srv.Addr(),
				DialTimeout: 200 * time.Millisecond, ReadTimeout: 200 * time.Millisecond, PoolSize: 32})
			s, err := redisstore.New(c)
			if err != nil {
				t.Fatal(err)
			}
			fake := clock.NewFake(time.Unix(1795305600, 0))
			// One failure takes the store down: the fake clock, which does
			// not move during the load, would never meet a FailFor.
			fs := newFailsafe(s, failsafe.Options{Mode: mode, Timeout: time.Second, Threshold: 1, FailFor: -1, Cooldown: time.Second, Clock: fake})
			const limit = 100
			l := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("sliding-log 100/1h"), floodgate.WithStore(fs)))

			// phase runs 16 goroutines of 20 calls each on one key.
			type counts struct{ admitted, denied, unavailable, other atomic.Int64 }
			phase := func() *counts {
				var n counts
				var wg sync.WaitGroup
				for range 16 {
					wg.Go(func() {
						for range 20 {
							d, err := l.Allow(ctx, "hot")
							switch {
							case errors.Is(err, failsafe.ErrUnavailable):
								n.unavailable.Add(1)
							case err != nil:
								n.other.Add(1)
								t.Errorf("unexpected error: %v", err)
							case d.Allowed:
								n.admitted.Add(1)
							default:
								n.denied.Add(1)
							}
						}
					})
				}
				wg.Wait()
				return &n
			}

			up := phase()
			if up.admitted.Load() != limit || up.unavailable.Load() != 0 {
				t.Fatalf("before the kill: %d admitted, %d unavailable; want %d and 0", up.admitted.Load(), up.unavailable.Load(), limit)
			}
			srv.Kill()
			down := phase()
			st := fs.Stats()
			if !st.Down || st.Failures == 0 {
				t.Errorf("after the kill: stats %+v, want down with failures", st)
			}
			switch mode {
			case failsafe.FailClosed:
				if down.admitted.Load() != 0 || down.unavailable.Load() != 320 {
					t.Errorf("closed: %d admitted, %d unavailable of 320 while down", down.admitted.Load(), down.unavailable.Load())
				}
			case failsafe.FailOpen:
				if down.admitted.Load() != 320 || st.Open == 0 {
					t.Errorf("open: %d of 320 admitted while down; stats %+v", down.admitted.Load(), st)
				}
			case failsafe.FailLocal:
				// The local store has its own limit: exactly 100 more.
				if down.admitted.Load() != limit || st.Local == 0 {
					t.Errorf("local: %d admitted while down, want %d; stats %+v", down.admitted.Load(), limit, st)
				}
			}

			// Redis comes back (empty: it keeps nothing on disk here). The
			// cooldown has not passed, so nothing reaches it yet: the mode
			// still decides (the local store has spent its limit).
			srv.Restart(t)
			wait := map[failsafe.Mode][2]int64{failsafe.FailClosed: {0, 320}, failsafe.FailOpen: {320, 0}, failsafe.FailLocal: {0, 0}}[mode]
			if n := phase(); n.admitted.Load() != wait[0] || n.unavailable.Load() != wait[1] {
				t.Errorf("within the cooldown: %d admitted, %d unavailable; want %d and %d", n.admitted.Load(), n.unavailable.Load(), wait[0], wait[1])
			}
			// Once the cooldown has passed, the next call probes Redis, which
			// answers: the store is up again. On a busy machine the
			// restarted server may take longer than the Timeout to answer
			// the first probe; the store then stays down for another
			// cooldown, and the next probe goes.
			probe(t, fake, l)
			st = fs.Stats()
			if st.Down || st.Recoveries != 1 {
				t.Errorf("after the cooldown: stats %+v, want up with one recovery", st)
			}
			back := phase()
			if back.admitted.Load() != limit-1 || back.unavailable.Load() != 0 {
				t.Errorf("after recovery: %d admitted, %d unavailable; want %d (Redis's fresh state) and 0", back.admitted.Load(), back.unavailable.Load(), limit-1)
			}
			c.Close()
			srv.Stop()
			// Every goroutine the store or the client started has ended.
			deadline := time.Now().Add(10 * time.Second)
			for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if n := runtime.NumGoroutine(); n > before {
				t.Errorf("%d goroutines after the test, %d before", n, before)
			}
		})
	}
}

// newFailsafe is failsafe.New with options that are right.
func newFailsafe(s store.Store, o failsafe.Options) *failsafe.Store {
	f, err := failsafe.New(s, o)
	if err != nil {
		panic(err)
	}
	return f
}
