package bench

import (
	"cmp"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate/floodgate/internal/redistest"
)

// BenchmarkFloodRedis: the Redis peers (FloodRedisPeers) on one
// redis-server on loopback TCP, started for the benchmark (skipped when
// redis-server is not installed), through one go-redis client, each
// deciding FloodLimit per FloodPeriod. keys=N: every one of N keys is
// driven over its limit before the timer starts, then FloodCallers
// goroutines share b.N calls, on the one key or each on a key picked at
// random among N, so that every timed call is denied (admit/op about 0).
// decisions/s and the Redis and CPU figures per decision are as in
// BenchmarkRedis; redis-cmds/s counts the commands Redis processed in the
// timed part, per second, and cmds/key/retry the same per key per
// FloodRetry, the longest a denial holds. Redis is flushed before each
// run, every peer is new and its keys are new to the process.
func BenchmarkFloodRedis(b *testing.B) {
	srv := redistest.NewServer(b)
	c := benchClient(b, srv)
	for _, n := range FloodKeys {
		for _, p := range FloodRedisPeers {
			b.Run(fmt.Sprintf("denied/keys=%d/callers=%d/%s", n, FloodCallers, p.Name), func(b *testing.B) {
				srv.Flush(b)
				l, err := p.New(c, fmt.Sprintf("bench%d:", prefixes.Add(1)))
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
				runFlood(b, l, floodKeys(n), srv, FloodRetry)
			})
		}
	}
}

// BenchmarkFloodService: as BenchmarkFloodRedis, through the Envoy
// rate-limit service over gRPC (one connection, as BenchmarkServiceRedis
// asks it) of each service peer (FloodServicePeers), which keeps its
// counters in one redis-server on loopback TCP and decides
// floodServiceConfig: FloodLimit checks per key per day, a fixed window.
// Each request is one check. cmds/key/retry counts Redis's commands per
// key per FloodServiceWindow. floodgate starts anew for each run;
// envoyproxy/ratelimit runs once per redis-server and local cache size
// (see envoyRL), and its local cache outlives a run, so each run's keys
// are new to the process.
func BenchmarkFloodService(b *testing.B) {
	srv := redistest.NewServer(b)
	for _, p := range FloodServicePeers {
		if p.Done != nil {
			b.Cleanup(p.Done) // before the redis-server stops: cleanups run last first
		}
	}
	for _, n := range FloodKeys {
		for _, p := range FloodServicePeers {
			b.Run(fmt.Sprintf("denied/keys=%d/callers=%d/%s", n, FloodCallers, p.Name), func(b *testing.B) {
				srv.Flush(b)
				keys := floodKeys(n)
				c, stop, err := p.Start(srv.Network(), srv.Addr())
				if err != nil {
					b.Fatal(err)
				}
				l := rlsLimiter{c: c, reqs: floodRequests(keys), stop: stop}
				defer l.Close()
				runFlood(b, l, keys, srv, FloodServiceWindow)
			})
		}
	}
}

// floods numbers the flood runs, so that each has keys of its own.
var floods atomic.Int64

// floodKeys returns n keys that no earlier run of this process used.
func floodKeys(n int) []string {
	run := floods.Add(1)
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("flood%d:user:%d", run, i)
	}
	return keys
}

// runFlood drives every key over its limit, then has FloodCallers callers
// call l on keys (callConcurrently), measuring srv (commandMeter). Errors
// do not fail b: a peer that fails calls under the flood (floodgate
// serve's store timeout) reports them in err/op, which cmd/ratios warns
// of, and they are logged.
func runFlood(b *testing.B, l Limiter, keys []string, srv *redistest.Server, retry time.Duration) {
	driveOver(b, l, keys)
	r := callConcurrently(b, l, FloodCallers, keys, commandMeter{usageMeter: redisMeter(srv), keys: len(keys), retry: retry})
	if r.warmErr != nil {
		b.Logf("warming up: %v", r.warmErr)
	}
}

// driveOver calls l.Allow on each key until it is denied, from up to
// FloodCallers goroutines that share the keys. It fails b when a key is
// still admitted after FloodLimit+1 calls, or when a key's calls fail
// floodErrors times.
func driveOver(b testing.TB, l Limiter, keys []string) {
	if err := eachKey(keys, func(k string) error { return deny(l, k) }); err != nil {
		b.Fatalf("driving the keys over their limit: %v", err)
	}
}

// eachKey calls f on each key, from up to FloodCallers goroutines that
// share the keys, and returns the first error; a goroutine stops at its
// first.
func eachKey(keys []string, f func(string) error) error {
	var next atomic.Int64
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	for range min(FloodCallers, len(keys)) {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(len(keys)); i = next.Add(1) - 1 {
				if err := f(keys[i]); err != nil {
					mu.Lock()
					firstErr = cmp.Or(firstErr, err)
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	return firstErr
}

// floodErrors is how many failed calls driveOver tolerates on one key.
const floodErrors = 3

// deny calls l.Allow on key until it is denied, at most FloodLimit+1
// answers and floodErrors errors.
func deny(l Limiter, key string) error {
	answers, errs := 0, 0
	for answers <= FloodLimit {
		ok, err := l.Allow(key)
		switch {
		case err != nil:
			if errs++; errs == floodErrors {
				return fmt.Errorf("%s: %w", key, err)
			}
		case !ok:
			return nil
		default:
			answers++
		}
	}
	return fmt.Errorf("%s: admitted %d times in a row, limit %d", key, answers, FloodLimit)
}

// A commandMeter is a usageMeter that also reports the commands per
// second (redis-cmds/s) and per key per retry window (cmds/key/retry). A
// store with the deny cache keeps a tracking connection that pings Redis
// and reads denied keys in the background: its commands count as the
// peer's.
type commandMeter struct {
	usageMeter
	keys  int
	retry time.Duration
}

func (m commandMeter) stop(b *testing.B) {
	u := m.m.Stop(b)
	u.Report(b, b.N)
	perSec := float64(u.Commands) / b.Elapsed().Seconds()
	b.ReportMetric(perSec, "redis-cmds/s")
	b.ReportMetric(perSec*m.retry.Seconds()/float64(m.keys), "cmds/key/retry")
}

// TestFloodHarness checks that driveOver leaves every key denied, on a
// real redis-server.
func TestFloodHarness(t *testing.T) {
	srv := redistest.NewServer(t)
	c := srv.Client(t)
	for _, p := range FloodRedisPeers {
		l, err := p.New(c, "harness-"+p.Name+":")
		if err != nil {
			t.Fatal(err)
		}
		keys := floodKeys(3)
		driveOver(t, l, keys)
		for _, k := range keys {
			if ok, err := l.Allow(k); ok || err != nil {
				t.Errorf("%s: after driveOver, Allow(%q) = %v, %v; want denied", p.Name, k, ok, err)
			}
		}
		l.Close()
	}
}

// keyError is an error of a type of its own, for TestEachKeyErrors.
type keyError string

func (e keyError) Error() string { return string(e) }

// TestEachKeyErrors checks that eachKey returns one of the errors f
// returns, whatever their types.
func TestEachKeyErrors(t *testing.T) {
	keys := floodKeys(2 * FloodCallers)
	err := eachKey(keys, func(k string) error {
		if len(k)%2 == 0 {
			return keyError(k)
		}
		return fmt.Errorf("%s: %w", k, errors.ErrUnsupported)
	})
	if err == nil {
		t.Fatal("eachKey returned no error, though every call failed")
	}
}
