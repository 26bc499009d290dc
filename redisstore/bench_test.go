package redisstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/redisstore"
	"github.com/floodgate/floodgate/store"
	"github.com/redis/go-redis/v9"
)

// BenchmarkDecide decides on one key of the package's Redis (loopback TCP),
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

// runCalls times call on a new store's table on a client of client,
// serially and in parallel.
func runCalls(b *testing.B, client func(testing.TB) redis.UniversalClient, call func(ctx context.Context, s *redisstore.Store, tb store.Table, now int64) error) {
	for _, parallel := range []bool{false, true} {
		b.Run(map[bool]string{false: "serial", true: "parallel"}[parallel], func(b *testing.B) {
			s := newStore(b, client(b))
			tb, err := s.Table("bench", algo.MustParsePolicy("token-bucket 1000000000/1s"))
			if err != nil {
				b.Fatal(err)
			}
			ctx, now := context.Background(), time.Now().UnixNano()
			if err := call(ctx, s, tb, now); err != nil { // loads the script
				b.Fatal(err)
			}
			b.ReportAllocs()
			if !parallel {
				for b.Loop() {
					if err := call(ctx, s, tb, now); err != nil {
						b.Fatal(err)
					}
				}
				return
			}
			b.SetParallelism(8)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := call(ctx, s, tb, now); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// single returns a client of the package's shared Redis, for runCalls.
func single(t testing.TB) redis.UniversalClient { return testClient(t) }

// clusterClient returns a client of the package's shared Redis Cluster,
// for runCalls.
func clusterClient(t testing.TB) redis.UniversalClient { return redistest.SharedCluster(t).Client(t) }
