package bench

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// RedisKeys is the number of keys of the keyed Redis scenarios.
const RedisKeys = 100_000

// RedisCallers are the numbers of concurrent callers of the Redis
// scenarios.
var RedisCallers = []int{1, 16, 64}

// RedisPoolSize is the client's number of connections: enough for each of
// the most callers to have one.
const RedisPoolSize = 128

// prefixes numbers the Redis peers' key prefixes.
var prefixes atomic.Int64

// BenchmarkRedis: the Redis peers on one redis-server on loopback TCP,
// started for the benchmark (skipped when redis-server is not installed),
// through one go-redis client. keys=1: every call on one key;
// keys=100000: each call on a key picked at random among 100,000.
// callers=N: exactly N goroutines share b.N calls. ns/op is wall time per
// decision, decisions/s its inverse; redis-µs/op, redis-cmds/op and
// redis-bytes/op are Redis's CPU time, commands and bytes per decision,
// and cpu-ns/op this process's CPU time (redisMeter). Redis is flushed
// before each run and every peer is new, so that no run sees state from
// another.
func BenchmarkRedis(b *testing.B) {
	srv := redistest.NewServer(b)
	c := benchClient(b, srv)
	for _, keys := range [][]string{oneKey, benchKeys()[:RedisKeys]} {
		for _, callers := range RedisCallers {
			for _, p := range RedisPeers {
				b.Run(fmt.Sprintf("keys=%d/callers=%d/%s", len(keys), callers, p.Name), func(b *testing.B) {
					if err := c.FlushDB(ctx).Err(); err != nil {
						b.Fatal(err)
					}
					l, err := p.New(c, fmt.Sprintf("bench%d:", prefixes.Add(1)))
					if err != nil {
						b.Fatal(err)
					}
					defer l.Close()
					runCallers(b, l, callers, keys, redisMeter(srv))
				})
			}
		}
	}
}

// benchClient returns the client of srv that the Redis peers share, closed
// when b ends. ContextTimeoutEnabled, as storeurl's clients have, lets
// floodgate's lone caller send its own call (redisstore's doc);
// redis_rate's calls carry no deadline, so it changes nothing for it.
func benchClient(b *testing.B, srv *redistest.Server) *redis.Client {
	c := redis.NewClient(&redis.Options{Network: srv.Network(), Addr: srv.Addr(), PoolSize: RedisPoolSize, ContextTimeoutEnabled: true})
	b.Cleanup(func() { c.Close() })
	return c
}

// A meter measures what happens in a benchmark's timed part: start is
// called just before the timer starts, and stop just after it stops, to
// report what it measured.
type meter interface {
	start(b *testing.B)
	stop(b *testing.B)
}

// A usageMeter reports what the Redis servers of its redistest.Meter and
// this process spent in the timed part, per decision: perCall decisions
// a call, b.N calls.
type usageMeter struct {
	m       *redistest.Meter
	perCall int
}

// redisMeter returns the usageMeter of servers, one decision a call.
func redisMeter(servers ...*redistest.Server) usageMeter {
	return usageMeter{m: redistest.NewMeter(servers...), perCall: 1}
}

func (u usageMeter) start(b *testing.B) { u.m.Start(b) }

func (u usageMeter) stop(b *testing.B) { u.m.Stop(b).Report(b, b.N*u.perCall) }

// runCallers calls l.Allow b.N times from exactly callers goroutines
// (callConcurrently), measured by meters, and fails b on any error, in
// the warm-up or timed.
func runCallers(b *testing.B, l Limiter, callers int, keys []string, meters ...meter) {
	r := callConcurrently(b, l, callers, keys, meters...)
	if r.warmErr != nil {
		b.Fatalf("warming up: %v", r.warmErr)
	}
	if r.errs > 0 {
		b.Fatalf("%d errors in %d calls; the first: %v", r.errs, b.N, r.firstErr)
	}
}

// The errors of callConcurrently: the first of the warm-up, and how many
// calls of the timed part failed and the first error.
type callErrors struct {
	warmErr  any
	errs     int64
	firstErr any
}

// callConcurrently calls l.Allow b.N times from exactly callers goroutines,
// which share the calls, on keys[0] if there is one key and on keys picked
// at random otherwise. It reports the calls answered without error per
// second of wall time (decisions/s), the fraction admitted and the fraction
// that failed (report), and returns the errors. Untimed first, each
// goroutine makes a few calls, so that the client's connections are open
// and the peer's scripts loaded. Each of meters measures the timed part.
func callConcurrently(b *testing.B, l Limiter, callers int, keys []string, meters ...meter) callErrors {
	b.ReportAllocs()
	var allowed, errs atomic.Int64
	var warmErr, firstErr atomic.Value
	n := uint64(len(keys))
	call := func(r *rng, a, e *int64, first *atomic.Value) {
		k := keys[0]
		if n > 1 {
			k = keys[r.intn(n)]
		}
		ok, err := l.Allow(k)
		if ok {
			*a++
		}
		if err != nil {
			first.CompareAndSwap(nil, err.Error())
			*e++
		}
	}

	const warmCalls = 4
	var warm, done sync.WaitGroup
	warm.Add(callers)
	start := make(chan struct{})
	for i := range callers {
		calls := b.N / callers
		if i < b.N%callers {
			calls++
		}
		done.Go(func() {
			r := newRNG()
			var a, e int64
			for range warmCalls {
				call(&r, &a, &e, &warmErr)
			}
			warm.Done()
			a, e = 0, 0
			<-start
			for range calls {
				call(&r, &a, &e, &firstErr)
			}
			allowed.Add(a)
			errs.Add(e)
		})
	}
	warm.Wait()
	for _, m := range meters {
		m.start(b)
	}
	b.ResetTimer()
	close(start)
	done.Wait()
	b.StopTimer()
	for _, m := range meters {
		m.stop(b)
	}

	b.ReportMetric(float64(int64(b.N)-errs.Load())/b.Elapsed().Seconds(), "decisions/s")
	report(b, allowed.Load(), errs.Load(), int64(b.N), firstErr.Load())
	return callErrors{warmErr: warmErr.Load(), errs: errs.Load(), firstErr: firstErr.Load()}
}
