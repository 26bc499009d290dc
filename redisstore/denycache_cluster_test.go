package redisstore_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/memstore"
	"github.com/floodgate/floodgate/redisstore"
	"github.com/redis/go-redis/v9"
)

// TestDenyCacheDifferential's floods, through three processes with deny
// caches on a Redis Cluster of three masters (each cache with a tracking
// connection to each master), decide exactly as the memory store.
func TestDenyCacheClusterDifferential(t *testing.T) {
	traces := 10
	if testing.Short() {
		traces = 4
	}
	denyCacheDifferential(t, redistest.SharedCluster(t).Client(t), traces)
}

// nodeClients returns a client of each node of cl, closed when t ends.
func nodeClients(t testing.TB, cl *redistest.Cluster) []*redis.Client {
	var cs []*redis.Client
	for _, addr := range cl.Addrs() {
		c := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { c.Close() })
		cs = append(cs, c)
	}
	return cs
}

// scriptsRun returns how many commands other than INFO, PING and CLUSTER
// the nodes have run in all.
func scriptsRun(t testing.TB, nodes []*redis.Client) int64 {
	var n int64
	for _, c := range nodes {
		for name, calls := range commands(t, c) {
			switch name {
			case "info", "ping", "cluster|slots", "cluster|shards", "cluster|nodes", "cluster|info", "hello", "client|setname", "client|tracking":
			default:
				n += calls
			}
		}
	}
	return n
}

// A flood of denied decisions on keys of every master of a Cluster costs
// the Cluster a handful of commands a key, and each is the decision the
// store's state gives.
func TestDenyCacheClusterFlood(t *testing.T) {
	cl := redistest.SharedCluster(t)
	c := cl.Client(t)
	s := cachedStore(t, c, fmt.Sprintf("cflood%d:", prefixes.Add(1)))
	p := algo.MustParsePolicy("token-bucket 10/1s")
	tb, err := s.Table("api", p)
	if err != nil {
		t.Fatal(err)
	}
	mem, _ := memstore.New(0).Table("api", p)
	ctx := context.Background()
	masters := map[string]bool{}
	var keys []string
	for i := 0; len(keys) < 6; i++ {
		key := fmt.Sprint("user", i)
		m, err := c.MasterForKey(ctx, redisstore.KeyOf(tb, key))
		if err != nil {
			t.Fatal(err)
		}
		if n := len(keys); n < 3 && masters[m.Options().Addr] {
			continue // the first three keys, one on each master
		}
		masters[m.Options().Addr] = true
		keys = append(keys, key)
	}
	for _, key := range keys {
		for range 10 {
			mem.Decide(ctx, key, cacheT0, 1)
			if d, err := tb.Decide(ctx, key, cacheT0, 1); err != nil || !d.Allowed {
				t.Fatalf("%s: %+v %v", key, d, err)
			}
		}
	}
	if err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	for _, key := range keys {
		tb.Decide(ctx, key, cacheT0, 1)
		mem.Decide(ctx, key, cacheT0, 1)
	}
	redisstore.WaitFills(s)
	nodes := nodeClients(t, cl)
	before := scriptsRun(t, nodes)
	const flood = 3000
	for i := range flood {
		now := cacheT0 + int64(i)*1000 // 3 ms in all: still denied
		key := keys[i%len(keys)]
		d, err := tb.Decide(ctx, key, now, 1)
		want, _ := mem.Decide(ctx, key, now, 1)
		if err != nil || d != want {
			t.Fatalf("decision %d on %s: %+v %v, want %+v", i, key, d, err, want)
		}
	}
	sent := scriptsRun(t, nodes) - before
	st := s.CacheStats()
	t.Logf("%d denied decisions on %d keys of %d masters: %d Redis commands (not counting INFO, PING, CLUSTER); %+v",
		flood, len(keys), len(masters), sent, st)
	if len(masters) != 3 || sent > 5 || st.Hits < flood-5 {
		t.Errorf("%d denied decisions on %d masters cost %d Redis commands, %d hits; want 3 masters, at most 5 commands",
			flood, len(masters), sent, st.Hits)
	}
}
