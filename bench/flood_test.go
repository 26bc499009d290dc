package bench

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// BenchmarkFloodRedis: the Redis peers (FloodRedisPeers) on one
// redis-server on loopback TCP, started for the benchmark (skipped when
// redis-server is not installed), through one go-redis client, each
// deciding FloodLimit per FloodPeriod. keys=N: every one of N keys is
// driven over its limit before the timer starts, then FloodCallers
// goroutines share b.N calls, on the one key or each on a key picked at
// random among N, so that every timed call is denied (admit/op about 0).
// decisions/s is as in BenchmarkRedis; redis-cmds/s counts the commands
// Redis processed in the timed part, per second (INFO's
// total_commands_processed), and cmds/key/retry the same per key per
// FloodRetry, the longest a denial holds. Redis is flushed before each
// run, every peer is new and its keys are new to the process.
func BenchmarkFloodRedis(b *testing.B) {
	srv := redistest.NewServer(b)
	c := redis.NewClient(&redis.Options{Network: srv.Network(), Addr: srv.Addr(), PoolSize: RedisPoolSize, ContextTimeoutEnabled: true})
	b.Cleanup(func() { c.Close() })
	for _, n := range FloodKeys {
		for _, p := range FloodRedisPeers {
			b.Run(fmt.Sprintf("denied/keys=%d/callers=%d/%s", n, FloodCallers, p.Name), func(b *testing.B) {
				srv.Flush(b)
				l, err := p.New(c, fmt.Sprintf("bench%d:", prefixes.Add(1)))
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
				runFlood(b, l, floodKeys(n), c, FloodRetry)
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
	info := srv.Client(b)
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
				runFlood(b, l, keys, info, FloodServiceWindow)
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
// call l on keys (callConcurrently), counting the commands of the Redis
// that info is a client of. Errors do not fail b: a peer that fails calls
// under the flood (floodgate serve's store timeout) reports them in err/op,
// which cmd/ratios warns of, and they are logged.
func runFlood(b *testing.B, l Limiter, keys []string, info *redis.Client, retry time.Duration) {
	driveOver(b, l, keys)
	r := callConcurrently(b, l, FloodCallers, keys, &commandMeter{c: info, keys: len(keys), retry: retry})
	if r.warmErr != nil {
		b.Logf("warming up: %v", r.warmErr)
	}
}

// driveOver calls l.Allow on each key until it is denied, from up to
// FloodCallers goroutines that share the keys. It fails b when a key is
// still admitted after FloodLimit+1 calls, or when a key's calls fail
// floodErrors times.
func driveOver(b testing.TB, l Limiter, keys []string) {
	var next atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for range min(FloodCallers, len(keys)) {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(len(keys)); i = next.Add(1) - 1 {
				if err := deny(l, keys[i]); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := firstErr.Load(); err != nil {
		b.Fatalf("driving the keys over their limit: %v", err)
	}
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

// A commandMeter counts the commands a Redis processes in a benchmark's
// timed part and reports them per second (redis-cmds/s) and per key per
// retry window (cmds/key/retry), through c, a client of that Redis.
type commandMeter struct {
	c      *redis.Client
	keys   int
	retry  time.Duration
	before int64
}

func (m *commandMeter) start(b *testing.B) { m.before = redisCommands(b, m.c) }

func (m *commandMeter) stop(b *testing.B) {
	// The first INFO is counted once it has run; the second, not yet.
	n := redisCommands(b, m.c) - m.before - 1
	perSec := float64(n) / b.Elapsed().Seconds()
	b.ReportMetric(perSec, "redis-cmds/s")
	b.ReportMetric(perSec*m.retry.Seconds()/float64(m.keys), "cmds/key/retry")
}

// redisCommands returns the number of commands the Redis of c has
// processed since it started (INFO stats, total_commands_processed),
// failing b when it cannot tell.
func redisCommands(b testing.TB, c *redis.Client) int64 {
	s, err := c.Info(ctx, "stats").Result()
	if err != nil {
		b.Fatalf("INFO stats: %v", err)
	}
	const field = "total_commands_processed:"
	for line := range strings.Lines(s) {
		if v, ok := strings.CutPrefix(line, field); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				b.Fatalf("INFO stats: %s%s: %v", field, v, err)
			}
			return n
		}
	}
	b.Fatalf("INFO stats has no %s", field)
	return 0
}

// TestFloodHarness checks the flood benchmarks' own parts on a real
// redis-server: driveOver leaves every key denied, and two readings of
// the command count with nothing between them differ by the first INFO
// alone, as commandMeter assumes. The readings come before any limiter
// exists: a store with the deny cache keeps a tracking connection that
// pings Redis and reads denied keys in the background, which the
// benchmarks count as the peer's commands.
func TestFloodHarness(t *testing.T) {
	srv := redistest.NewServer(t)
	c := srv.Client(t)
	before := redisCommands(t, c)
	if d := redisCommands(t, c) - before; d != 1 {
		t.Errorf("two readings of INFO's count differ by %d, want 1 (the first INFO)", d)
	}
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
