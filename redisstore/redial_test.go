package redisstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/redisstore"
)

// A server that refuses to track (an ACL forbids CLIENT) leaves the
// cache off, says why in CacheStats, and is asked again after waits
// that double up to 5 s rather than every 100 ms; once it tracks, the
// cache serves, and a connection lost after that is redialled at once.
func TestDenyCacheTrackingRefused(t *testing.T) {
	srv := redistest.NewServer(t)
	admin := srv.Client(t)
	ctx := context.Background()
	c := noTrackClient(t, srv)
	s, err := redisstore.New(c, redisstore.WithDenyCache(1<<20), redisstore.WithCallerTime())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	waits, release := make(chan time.Duration), make(chan time.Time)
	redisstore.SetRedialAfter(s, func(d time.Duration) <-chan time.Time { waits <- d; return release })
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
	for i, want := range []time.Duration{100, 200, 400, 800, 1600, 3200, 5000, 5000} {
		var got time.Duration
		select {
		case got = <-waits:
		case <-time.After(time.Minute):
			t.Fatalf("no redial %d: the tracker took a refused set-up for tracking (live: %v)", i, s.CacheStats().Live)
		}
		if got != want*time.Millisecond {
			t.Fatalf("wait %d before redialling a refusing server: %v, want %v", i, got, want*time.Millisecond)
		}
		if st := s.CacheStats(); st.Live || st.Err == nil || !strings.Contains(st.Err.Error(), "NOPERM") {
			t.Fatalf("stats with tracking refused: live %v, err %v; want not live, a NOPERM error", st.Live, st.Err)
		}
		if i < 7 {
			release <- time.Time{}
		}
	}
	if st := s.CacheStats(); st.Hits != 0 {
		t.Fatalf("a cache that never tracked answered %d decisions", st.Hits)
	}

	// The server now lets it track.
	if err := admin.Do(ctx, "ACL", "SETUSER", "notrack", "+client").Err(); err != nil {
		t.Fatal(err)
	}
	release <- time.Time{}
	for s.Sync(ctx) != nil {
		select {
		case d := <-waits:
			t.Fatalf("redialled after %v with tracking allowed: %v", d, s.CacheStats().Err)
		case <-time.After(time.Millisecond): // a dial and a handshake under way
		}
	}
	if st := s.CacheStats(); !st.Live || st.Err != nil {
		t.Fatalf("stats once tracking: live %v, err %v", st.Live, st.Err)
	}
	if err := admin.ClientKillByFilter(ctx, "USER", "notrack", "SKIPME", "no").Err(); err != nil {
		t.Fatal(err)
	}
	if got := <-waits; got != 100*time.Millisecond {
		t.Fatalf("wait before redialling a connection that was live: %v, want 100ms", got)
	}
	if st := s.CacheStats(); st.Live || st.Err == nil {
		t.Fatalf("stats after the connection was killed: live %v, err %v", st.Live, st.Err)
	}
	release <- time.Time{}
}

// noTrackClient returns a client of srv signed in as the user "notrack",
// whom an ACL forbids CLIENT (so CLIENT TRACKING), closed when t ends;
// ACL SETUSER notrack +client lets it track.
func noTrackClient(t *testing.T, srv *redistest.Server) *redis.Client {
	t.Helper()
	err := srv.Client(t).Do(context.Background(), "ACL", "SETUSER", "notrack", "on", ">secret", "~*", "&*", "+@all", "-client").Err()
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Network: srv.Network(), Addr: srv.Addr(), Username: "notrack", Password: "secret"})
	t.Cleanup(func() { c.Close() })
	return c
}
