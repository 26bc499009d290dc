package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/internal/redistest"
)

// A SWAPDB that replaces the store's database (which Redis's tracking
// does not invalidate) ends the deny cache's entries: a key that the
// cache held denied, and that the database now lacks, is admitted, by
// the next heartbeat (Sync here), and a SWAPDB back is seen too.
func TestDenyCacheSwapDB(t *testing.T) {
	srv := redistest.NewServer(t)
	admin := srv.Client(t)
	ctx := context.Background()
	s := cachedStore(t, admin, "swap:")
	tb, err := s.Table("t", algo.MustParsePolicy("token-bucket 1/1h"))
	if err != nil {
		t.Fatal(err)
	}
	denyCached := func(key string) {
		t.Helper()
		_, _ = tb.Decide(ctx, key, cacheT0, 1)
		fills := s.CacheStats().Fills
		if d, err := tb.Decide(ctx, key, cacheT0, 1); err != nil || d.Allowed {
			t.Fatalf("the second decision on %s: %+v %v; want denied", key, d, err)
		}
		waitFor(t, 5*time.Second, "the fill of "+key, func() bool { return s.CacheStats().Fills > fills })
		hits := s.CacheStats().Hits
		if d, err := tb.Decide(ctx, key, cacheT0, 1); err != nil || d.Allowed || s.CacheStats().Hits != hits+1 {
			t.Fatalf("a decision on %s once cached: %+v %v, hits %d -> %d; want denied by the cache",
				key, d, err, hits, s.CacheStats().Hits)
		}
	}
	// k denied in database 0, which the swap empties; then k2 in the
	// new 0, which the swap back empties.
	for _, key := range []string{"k", "k2"} {
		denyCached(key)
		if err := admin.Do(ctx, "SWAPDB", "0", "1").Err(); err != nil {
			t.Fatal(err)
		}
		if err := s.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if d, err := tb.Decide(ctx, key, cacheT0, 1); err != nil || !d.Allowed {
			t.Fatalf("after SWAPDB, a decision on %s, which the database no longer holds: %+v %v; want allowed (hits %d)",
				key, d, err, s.CacheStats().Hits)
		}
	}
}
