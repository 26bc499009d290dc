package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/memstore"
	"github.com/floodgate/floodgate/redisstore"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/storetest"
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
	denyCacheDifferential(t, redistest.SharedCluster(t).Client(t), traces, storetest.FloodPolicies)
}

// TestDenyCacheSlidingLogDifferential on a Redis Cluster of three
// masters.
func TestDenyCacheClusterSlidingLogDifferential(t *testing.T) {
	traces := 10
	if testing.Short() {
		traces = 4
	}
	denyCacheDifferential(t, redistest.SharedCluster(t).Client(t), traces, logPolicies)
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

// nodeID returns the cluster node ID of c's node.
func nodeID(t *testing.T, c *redis.Client) string {
	t.Helper()
	id, err := c.Do(ctx, "CLUSTER", "MYID").Text()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// moveSlot moves slot from node src to node dst of nodes as redis-cli
// --cluster reshard does: IMPORTING and MIGRATING, MIGRATE of its keys,
// then SETSLOT NODE on every node.
func moveSlot(t *testing.T, nodes []*redis.Client, slot int64, src, dst int) {
	t.Helper()
	srcID, dstID := nodeID(t, nodes[src]), nodeID(t, nodes[dst])
	must := func(c *redis.Client, args ...any) {
		if err := c.Do(ctx, args...).Err(); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
	}
	must(nodes[dst], "CLUSTER", "SETSLOT", slot, "IMPORTING", srcID)
	must(nodes[src], "CLUSTER", "SETSLOT", slot, "MIGRATING", dstID)
	keys, err := nodes[src].ClusterGetKeysInSlot(ctx, int(slot), 1000).Result()
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := strings.Cut(nodes[dst].Options().Addr, ":")
	if len(keys) > 0 {
		args := []any{"MIGRATE", host, port, "", 0, 5000, "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		must(nodes[src], args...)
	}
	must(nodes[dst], "CLUSTER", "SETSLOT", slot, "NODE", dstID)
	for i, c := range nodes {
		if i != dst {
			must(c, "CLUSTER", "SETSLOT", slot, "NODE", dstID)
		}
	}
}

// A slot resharded to another master while a key of it is cached: the
// migration drops the entry, and a reset of the key on its new master by
// another process is seen (the key admitted), though this process's
// client still holds the old layout.
func TestDenyCacheClusterReshard(t *testing.T) {
	cl := redistest.NewCluster(t)
	c := cl.Client(t)
	s := cachedStore(t, c, "reshard:")
	p := algo.MustParsePolicy("fixed-window 2/1h")
	tb, _ := s.Table("api", p)
	overLimitOn(t, s, tb, "k")
	nodes := nodeClients(t, cl)
	k := redisstore.KeyOf(tb, "k")
	master, err := c.MasterForKey(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	src := slices.Index(cl.Addrs(), master.Options().Addr)
	dst := (src + 1) % len(nodes)
	slot, err := nodes[src].ClusterKeySlot(ctx, k).Result()
	if err != nil {
		t.Fatal(err)
	}
	moveSlot(t, nodes, slot, src, dst)
	if err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if redisstore.Cached(s, tb, "k") {
		t.Fatalf("the cache holds a key whose slot moved: %+v", s.CacheStats())
	}
	other := newStore(t, cl.Client(t), redisstore.WithPrefix("reshard:"), redisstore.WithCallerTime(), redisstore.WithMinTTL(time.Hour))
	to, _ := other.Table("api", p)
	if err := other.Apply(ctx, []store.Op{{Kind: store.OpReset, Table: to, Key: "k", Now: cacheT0}}); err != nil {
		t.Fatal(err)
	}
	if d, err := tb.Decide(ctx, "k", cacheT0, 1); err != nil || !d.Allowed {
		t.Fatalf("after the move and another process's reset: %+v %v, want admitted", d, err)
	}
	// Denied again, the key is cached again, from its new master, once
	// go-redis has its new layout.
	if d, err := tb.Decide(ctx, "k", cacheT0, 1); err != nil || !d.Allowed {
		t.Fatalf("the second unit after the reset: %+v %v", d, err)
	}
	took := waitFor(t, 5*time.Second, "the key cached from its new master", func() bool {
		if err := s.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if d, err := tb.Decide(ctx, "k", cacheT0, 1); err != nil || d.Allowed {
			t.Fatalf("denied on its new master: %+v %v", d, err)
		}
		redisstore.WaitFills(s)
		return redisstore.Cached(s, tb, "k")
	})
	hits := s.CacheStats().Hits
	if d, err := tb.Decide(ctx, "k", cacheT0, 1); err != nil || d.Allowed || s.CacheStats().Hits != hits+1 {
		t.Fatalf("a denial on the new master: %+v %v, %+v; want denied by the cache", d, err, s.CacheStats())
	}
	t.Logf("cached again from the new master %v after the move; %+v", took, s.CacheStats())
}

// On a Cluster a denied key that Redis does not hold (a cost above the
// burst on a fresh key) is not cached: a move of its slot would not drop
// it.
func TestDenyCacheClusterAbsentKey(t *testing.T) {
	s := cachedStore(t, redistest.SharedCluster(t).Client(t), fmt.Sprintf("absent%d:", prefixes.Add(1)))
	tb, _ := s.Table("api", algo.MustParsePolicy("fixed-window 2/1h"))
	if err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if d, err := tb.Decide(ctx, "fresh", cacheT0, 3); d.Allowed || !errors.Is(err, algo.ErrCostExceedsBurst) {
		t.Fatalf("a cost above the burst: %+v %v", d, err)
	}
	redisstore.WaitFills(s)
	if redisstore.Cached(s, tb, "fresh") {
		t.Fatalf("the cache holds a key that Redis does not: %+v", s.CacheStats())
	}
}
