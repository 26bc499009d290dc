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
	"github.com/floodgate/floodgate/memstore"
	"github.com/floodgate/floodgate/redisstore"
	"github.com/floodgate/floodgate/store"
	"github.com/redis/go-redis/v9"
)

// t0 is a realistic time: 2026-11-22 in nanoseconds since the Unix epoch.
const cacheT0 = int64(1795305600) * 1e9

// cachedStore returns a store on c with a deny cache, deciding at the
// caller's time, whose tracking connection is up.
func cachedStore(t testing.TB, c redis.UniversalClient, prefix string, opts ...redisstore.Option) *redisstore.Store {
	t.Helper()
	opts = append([]redisstore.Option{redisstore.WithPrefix(prefix), redisstore.WithCallerTime(),
		redisstore.WithMinTTL(time.Hour), redisstore.WithDenyCache(1 << 20)}, opts...)
	s, err := redisstore.New(c, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	waitLive(t, s)
	return s
}

// waitLive waits, up to 5 s, for s's deny cache to be live.
func waitLive(t testing.TB, s *redisstore.Store) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !s.CacheStats().Live {
		if time.Now().After(deadline) {
			t.Fatalf("the deny cache is not live after 5 s: %+v", s.CacheStats())
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = s.Sync(ctx)
		cancel()
		time.Sleep(time.Millisecond)
	}
}

// commands returns how many commands Redis has run, by name, from INFO
// commandstats.
func commands(t testing.TB, c *redis.Client) map[string]int64 {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]int64{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok {
			continue
		}
		n, _, _ := strings.Cut(rest, ",")
		m[strings.TrimPrefix(name, "cmdstat_")], _ = strconv.ParseInt(n, 10, 64)
	}
	return m
}

// A flood of denied decisions on one key costs Redis a handful of
// commands, and each is the decision the store's state gives.
func TestDenyCacheFlood(t *testing.T) {
	srv := redistest.NewServer(t)
	c := srv.Client(t)
	s := cachedStore(t, c, "flood:")
	p := algo.MustParsePolicy("token-bucket 10/1s")
	tb, err := s.Table("api", p)
	if err != nil {
		t.Fatal(err)
	}
	mem, _ := memstore.New(0).Table("api", p)
	ctx := context.Background()
	for i := range 11 {
		d, err := tb.Decide(ctx, "k", cacheT0, 1)
		if err != nil || d.Allowed != (i < 10) {
			t.Fatalf("decision %d: %+v %v", i, d, err)
		}
		mem.Decide(ctx, "k", cacheT0, 1)
	}
	redisstore.WaitFills(s)
	before := commands(t, c)
	const flood = 10_000
	for i := range flood {
		now := cacheT0 + int64(i)*1000 // 10 ms in all: still denied
		d, err := tb.Decide(ctx, "k", now, 1)
		want, _ := mem.Decide(ctx, "k", now, 1)
		if err != nil || d != want {
			t.Fatalf("decision %d: %+v %v, want %+v", i, d, err, want)
		}
	}
	after := commands(t, c)
	var sent int64
	for name, n := range after {
		if name != "info" && name != "ping" {
			sent += n - before[name]
		}
	}
	st := s.CacheStats()
	t.Logf("%d denied decisions: %d Redis commands (not counting INFO and PING); %+v", flood, sent, st)
	if sent > 5 || st.Hits < flood-5 {
		t.Errorf("%d denied decisions cost %d Redis commands, %d hits; want at most 5 commands", flood, sent, st.Hits)
	}
}

var _ = fmt.Sprint
var _ store.Op
