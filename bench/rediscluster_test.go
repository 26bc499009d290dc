package bench

import (
	"fmt"
	"testing"

	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// RedisMasters are the numbers of masters of BenchmarkRedisCluster's
// clusters, and RedisClusterCallers its number of concurrent callers.
var RedisMasters = []int{3, 6}

const RedisClusterCallers = 64

// BenchmarkRedisCluster: as BenchmarkRedis on RedisKeys keys, on a Redis
// Cluster of masters=N masters on loopback TCP (redistest.NewClusterN),
// started for the benchmark, through one cluster client, with
// RedisClusterCallers callers. The Redis figures are summed over the
// masters: redis-µs/op is the Redis CPU a decision costs the cluster. The
// masters are flushed before each run and every peer is new.
func BenchmarkRedisCluster(b *testing.B) {
	keys := benchKeys()[:RedisKeys]
	for _, masters := range RedisMasters {
		b.Run(fmt.Sprintf("masters=%d", masters), func(b *testing.B) {
			cl := redistest.NewClusterN(b, masters)
			c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), PoolSize: RedisPoolSize, ContextTimeoutEnabled: true})
			b.Cleanup(func() { c.Close() })
			for _, p := range RedisPeers {
				b.Run(fmt.Sprintf("keys=%d/callers=%d/%s", len(keys), RedisClusterCallers, p.Name), func(b *testing.B) {
					for _, s := range cl.Servers() {
						s.Flush(b)
					}
					l, err := p.New(c, fmt.Sprintf("bench%d:", prefixes.Add(1)))
					if err != nil {
						b.Fatal(err)
					}
					defer l.Close()
					runCallers(b, l, RedisClusterCallers, keys, redisMeter(cl.Servers()...))
				})
			}
		})
	}
}
