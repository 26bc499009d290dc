package redisstore_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/redisstore"
	"github.com/floodgate/floodgate/store"
	"github.com/redis/go-redis/v9"
)

// The benchmarks report, beside ns/op, the Redis CPU, commands and bytes
// and this process's CPU per call (redistest.Usage.Report): on a shared
// machine, the CPU figures are the ones to compare.

// BenchmarkDecide decides on one key of the package's Redis (unix socket),
// every decision admitted: one caller at a time, each call a round trip
// of its own, and 8 callers per processor at once (b.RunParallel), whose
// calls share script calls.
func BenchmarkDecide(b *testing.B) {
	runCalls(b, single, func(ctx context.Context, _ *redisstore.Store, tb store.Table, now int64) error {
		_, err := tb.Decide(ctx, "k", now, 1)
		return err
	})
}

// BenchmarkApply carries out Apply on the package's Redis as
// BenchmarkDecide decides: of one decision (as Limiter.Reserve does), and
// of two decisions on two keys, all or nothing (as floodgate.AllowAll
// does).
func BenchmarkApply(b *testing.B) {
	for _, n := range []int{1, 2} {
		b.Run(fmt.Sprintf("ops=%d", n), func(b *testing.B) {
			runCalls(b, single, func(ctx context.Context, s *redisstore.Store, tb store.Table, now int64) error {
				ops := []store.Op{{Kind: store.OpDecide, Table: tb, Key: "k", Now: now, N: 1},
					{Kind: store.OpDecide, Table: tb, Key: "j", Now: now, N: 1}}
				return s.Apply(ctx, ops[:n])
			})
		})
	}
}

// BenchmarkCluster decides on the package's shared Redis Cluster of three
// masters: one decision (as Limiter.AllowAt does), and an ApplyEach of 8
// decisions on 8 keys spread over the masters (as floodgate.AllowEachAt
// does for an Envoy request of 8 descriptors). Its ns/op and allocs/op
// are per call, of one op or of 8.
func BenchmarkCluster(b *testing.B) {
	b.Run("decide", func(b *testing.B) {
		runCalls(b, clusterClient, func(ctx context.Context, _ *redisstore.Store, tb store.Table, now int64) error {
			_, err := tb.Decide(ctx, "k", now, 1)
			return err
		})
	})
	b.Run("each=8", func(b *testing.B) {
		keys := []string{"a", "b", "c", "d", "e", "f", "g", "h"} // slots on each of the three masters
		runCalls(b, clusterClient, func(ctx context.Context, s *redisstore.Store, tb store.Table, now int64) error {
			ops := make([]store.Op, len(keys))
			for i, k := range keys {
				ops[i] = store.Op{Kind: store.OpDecide, Table: tb, Key: k, Now: now, N: 1}
			}
			return s.ApplyEach(ctx, ops)
		})
	})
}

// runCalls times call on a new store's table on a client of target,
// serially and in parallel, and reports what the Redis servers and this
// process spent per call (redistest.Usage.Report).
func runCalls(b *testing.B, target func(testing.TB) (redis.UniversalClient, []*redistest.Server), call func(ctx context.Context, s *redisstore.Store, tb store.Table, now int64) error) {
	for _, parallel := range []bool{false, true} {
		b.Run(map[bool]string{false: "serial", true: "parallel"}[parallel], func(b *testing.B) {
			c, servers := target(b)
			s := newStore(b, c)
			tb, err := s.Table("bench", algo.MustParsePolicy("token-bucket 1000000000/1s"))
			if err != nil {
				b.Fatal(err)
			}
			ctx, now := context.Background(), time.Now().UnixNano()
			if err := call(ctx, s, tb, now); err != nil { // loads the script
				b.Fatal(err)
			}
			b.ReportAllocs()
			m := redistest.NewMeter(servers...)
			m.Start(b)
			b.ResetTimer()
			if parallel {
				b.SetParallelism(8)
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if err := call(ctx, s, tb, now); err != nil {
							b.Error(err)
							return
						}
					}
				})
			} else {
				for range b.N {
					if err := call(ctx, s, tb, now); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.StopTimer()
			m.Stop(b).Report(b, b.N)
		})
	}
}

// single returns a client of the package's shared Redis and the server,
// for runCalls.
func single(t testing.TB) (redis.UniversalClient, []*redistest.Server) {
	return testClient(t), []*redistest.Server{testServer(t)}
}

// clusterClient returns a client of the package's shared Redis Cluster and
// its masters, for runCalls.
func clusterClient(t testing.TB) (redis.UniversalClient, []*redistest.Server) {
	cl := redistest.SharedCluster(t)
	return cl.Client(t), cl.Servers()
}

// BenchmarkPolicies decides on keys drawn from 1,000 of the package's
// Redis, on Redis's clock, each key decided once before the timer starts:
// every algorithm at 100/1h, 1000/24h and 10000/1h, by one caller at a
// time (callers=1, a lone call each) and by 64 at once (callers=64, whose
// calls share script calls). The Redis CPU per decision (redis-µs/op) is
// the figure to compare across policies.
func BenchmarkPolicies(b *testing.B) {
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%d", i)
	}
	for _, alg := range []string{"token-bucket", "leaky-bucket", "fixed-window", "sliding-window", "sliding-log"} {
		for _, rate := range []string{"100/1h", "1000/24h", "10000/1h"} {
			for _, callers := range []int{1, 64} {
				name := fmt.Sprintf("%s/%s/callers=%d", alg, strings.Replace(rate, "/", "per", 1), callers)
				b.Run(name, func(b *testing.B) { benchPolicy(b, alg+" "+rate, callers, keys) })
			}
		}
	}
}

// benchPolicy times b.N decisions of policy on keys, taken in turn, by
// callers goroutines (one: a plain loop), after one untimed decision on
// each key.
func benchPolicy(b *testing.B, policy string, callers int, keys []string) {
	s := newStore(b, testClient(b))
	tb, err := s.Table("bench "+policy, algo.MustParsePolicy(policy))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for _, k := range keys {
		if _, err := tb.Decide(ctx, k, time.Now().UnixNano(), 1); err != nil {
			b.Fatal(err)
		}
	}
	var next atomic.Int64
	decide := func() error {
		_, err := tb.Decide(ctx, keys[next.Add(7919)%int64(len(keys))], time.Now().UnixNano(), 1)
		return err
	}
	b.ReportAllocs()
	m := redistest.NewMeter(testServer(b))
	m.Start(b)
	b.ResetTimer()
	if callers == 1 {
		for range b.N {
			if err := decide(); err != nil {
				b.Fatal(err)
			}
		}
	} else {
		b.SetParallelism(max(callers/runtime.GOMAXPROCS(0), 1))
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := decide(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	b.StopTimer()
	m.Stop(b).Report(b, b.N)
}
