package redisstore_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/redisstore"
)

// A server that refuses to track (an ACL forbids CLIENT) leaves the
// cache off: another process's reset is seen at once.
func TestDenyCacheTrackingRefused(t *testing.T) {
	srv := redistest.NewServer(t)
	admin := srv.Client(t)
	ctx := context.Background()
	if err := admin.Do(ctx, "ACL", "SETUSER", "notrack", "on", ">secret", "~*", "&*", "+@all", "-client").Err(); err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Network: srv.Network(), Addr: srv.Addr(), Username: "notrack", Password: "secret"})
	t.Cleanup(func() { c.Close() })
	s, err := redisstore.New(c, redisstore.WithDenyCache(1<<20), redisstore.WithCallerTime())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	tb, err := s.Table("t", algo.MustParsePolicy("token-bucket 2/1h"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 { // the first decision starts the tracker
		if d, err := tb.Decide(ctx, "k", cacheT0, 1); err != nil || d.Allowed != (i < 2) {
			t.Fatalf("decision %d with tracking refused: %+v %v", i, d, err)
		}
	}
	if err := admin.Del(ctx, redisstore.KeyOf(tb, "k")).Err(); err != nil { // a reset by another process
		t.Fatal(err)
	}
	if d, err := tb.Decide(ctx, "k", cacheT0, 1); err != nil || !d.Allowed {
		t.Fatalf("the decision after another process's reset, tracking refused: %+v %v; want allowed", d, err)
	}
	if st := s.CacheStats(); st.Live || st.Hits != 0 {
		t.Fatalf("a cache that never tracked: live %v, %d hits", st.Live, st.Hits)
	}
}
