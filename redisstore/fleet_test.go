package redisstore_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/redisstore"
)

// fleetWrites returns what Redis spends a write when n instances with
// deny caches (none when n is 0), each holding a denied key of its own,
// share srv with a writer that admits writes decisions on keys that none
// of them caches: its CPU and the bytes it sends.
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
	m := redistest.NewMeter(srv)
	m.Start(t)
	for i := range writes {
		if d, err := tb.Decide(ctx, strconv.Itoa(i%1000), cacheT0+int64(i), 1); err != nil || !d.Allowed {
			t.Fatalf("write %d: %+v %v", i, d, err)
		}
	}
	u := m.Stop(t)
	return u.RedisCPU / time.Duration(writes), float64(u.BytesOut) / float64(writes)
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
