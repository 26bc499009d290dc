package redisstore_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/redisstore"
	"github.com/redis/go-redis/v9"
)

// redisCost is what Redis spent: CPU (INFO used_cpu_user plus
// used_cpu_sys) and bytes sent (total_net_output_bytes).
type redisCost struct {
	cpu   time.Duration
	bytes int64
}

// costOf returns what the server of c has spent so far.
func costOf(t testing.TB, c *redis.Client) redisCost {
	t.Helper()
	info, err := c.Info(context.Background(), "cpu", "stats").Result()
	if err != nil {
		t.Fatal(err)
	}
	var rc redisCost
	for _, line := range strings.Split(info, "\r\n") {
		name, v, _ := strings.Cut(line, ":")
		switch name {
		case "used_cpu_user", "used_cpu_sys":
			s, _ := strconv.ParseFloat(v, 64)
			rc.cpu += time.Duration(s * 1e9)
		case "total_net_output_bytes":
			rc.bytes, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return rc
}

// fleetWrites returns what Redis spends a write when n instances with
// deny caches (none when n is 0), each holding a denied key of its own,
// share srv with a writer that admits writes decisions on keys that none
// of them caches.
func fleetWrites(t *testing.T, srv *redistest.Server, n, writes int) (cpu time.Duration, bytes float64) {
	prefix := fmt.Sprintf("fleet%d:", prefixes.Add(1))
	held := algo.MustParsePolicy("fixed-window 1/1h")
	ctx := context.Background()
	for i := range n {
		s := cachedStore(t, srv.Client(t), prefix)
		tb, _ := s.Table("held", held)
		key := fmt.Sprint("instance-", i)
		tb.Decide(ctx, key, cacheT0, 1)
		tb.Decide(ctx, key, cacheT0, 1)
		redisstore.WaitFills(s)
	}
	c := srv.Client(t)
	w := newStore(t, c, redisstore.WithPrefix(prefix), redisstore.WithCallerTime())
	tb, _ := w.Table("written", algo.MustParsePolicy("token-bucket 1000000000/1s"))
	tb.Decide(ctx, "warm-up", cacheT0, 1) // loads the script
	before := costOf(t, c)
	for i := range writes {
		if d, err := tb.Decide(ctx, strconv.Itoa(i%1000), cacheT0+int64(i), 1); err != nil || !d.Allowed {
			t.Fatalf("write %d: %+v %v", i, d, err)
		}
	}
	after := costOf(t, c)
	return (after.cpu - before.cpu) / time.Duration(writes), float64(after.bytes-before.bytes) / float64(writes)
}

// A fleet's deny caches cost a write of a key that none of them caches
// what it costs with no cache: Redis tracks only the keys that each
// cache read, so it sends nothing to the fleet for that write. Redis's
// bytes sent a write are within 10% of the cost with no cache, for 1, 8
// and 32 instances; its CPU a write is logged (the machine's load makes
// it too noisy to demand).
func TestDenyCacheFleetWrites(t *testing.T) {
	writes := 5000
	if testing.Short() {
		writes = 1000
	}
	for _, n := range []int{1, 8, 32} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			srv := redistest.NewServer(t)
			offCPU, offBytes := fleetWrites(t, srv, 0, writes)
			onCPU, onBytes := fleetWrites(t, srv, n, writes)
			t.Logf("%d instances: Redis CPU a write %v with their caches, %v without (%.2fx); bytes sent a write %.1f, %.1f (%.2fx)",
				n, onCPU, offCPU, float64(onCPU)/float64(offCPU), onBytes, offBytes, onBytes/offBytes)
			if onBytes > 1.1*offBytes {
				t.Errorf("%d instances with deny caches: Redis sent %.1f bytes a write of a key none caches, more than 1.1 times the %.1f with no cache",
					n, onBytes, offBytes)
			}
		})
	}
}
