package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/redisstore"
	"github.com/floodgate/floodgate/server"
	"github.com/redis/go-redis/v9"
)

// FleetSizes are the numbers of floodgate instances of
// BenchmarkRedisFleet, and FleetCallers the callers of the one that
// decides.
var FleetSizes = []int{1, 8, 32}

const FleetCallers = 64

// BenchmarkRedisFleet: instances=N floodgate stores on one redis-server,
// each with its own client and the deny cache of floodgate serve's
// default size, as N processes of floodgate serve would have them. Redis
// tells every one of them of each write under their prefix (CLIENT
// TRACKING BCAST). One store decides, from FleetCallers callers, RedisRate
// on keys picked at random among RedisKeys: every decision is admitted,
// so every decision is a write, and the Redis figures per decision are
// per write, the other N-1 stores' invalidations included. Redis is
// flushed before each run.
func BenchmarkRedisFleet(b *testing.B) {
	srv := redistest.NewServer(b)
	c := benchClient(b, srv)
	keys := benchKeys()[:RedisKeys]
	policy := fmt.Sprintf("token-bucket %d/1s", RedisRate)
	for _, n := range FleetSizes {
		b.Run(fmt.Sprintf("instances=%d/keys=%d/callers=%d/floodgate", n, len(keys), FleetCallers), func(b *testing.B) {
			srv.Flush(b)
			prefix := fmt.Sprintf("bench%d:", prefixes.Add(1))
			listeners(b, srv, prefix, n-1)
			l, err := floodgateOnRedis(policy, redisstore.WithDenyCache(server.DefaultDenyCacheBytes))(c, prefix)
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			runCallers(b, l, FleetCallers, keys, redisMeter(srv))
		})
	}
}

// listeners starts n stores with the deny cache on srv under prefix, each
// on a client of its own, closed when b ends, and waits until each one's
// tracking connection is live (Store.Sync), for up to 10 s.
func listeners(b *testing.B, srv *redistest.Server, prefix string, n int) {
	for range n {
		c := redis.NewClient(&redis.Options{Network: srv.Network(), Addr: srv.Addr()})
		s, err := redisstore.New(c, redisstore.WithPrefix(prefix), redisstore.WithDenyCache(server.DefaultDenyCacheBytes))
		if err != nil {
			c.Close()
			b.Fatal(err)
		}
		b.Cleanup(func() {
			s.Close()
			c.Close()
		})
		if err := syncStore(s); err != nil {
			b.Fatalf("a listening store's tracking connection: %v", err)
		}
	}
}

// syncStore calls s.Sync until it succeeds, for up to 10 s: until then,
// the store's tracking connection is not live.
func syncStore(s *redisstore.Store) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := s.Sync(context.Background())
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}
