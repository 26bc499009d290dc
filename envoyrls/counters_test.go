package envoyrls

import (
	"fmt"
	"testing"
	"time"

	"github.com/floodgate/floodgate/clock"
	"github.com/floodgate/floodgate/internal/redistest"
)

// TestFixedWindowsOnRedisCounters: on Redis, a fixed window's hits go to
// the store's counters (store.Counting: an INCRBY of an integer key naming
// the window, as upstream's), not to a table's script; every hit counts,
// the descriptors of one counter in the request's order.
func TestFixedWindowsOnRedisCounters(t *testing.T) {
	srv := redistest.NewServer(t)
	s := NewService(mustParse(t, localConfigs[0]), newRedisStore(t, srv, "counters:"), WithClock(clock.NewFake(t0)), WithFlushInterval(-1))
	req := request("d", descriptor("user", "u0"), descriptor("user", "u1"), descriptor("user", "u0"))
	for range 2 {
		call(t, s, req)
	}
	c := srv.Client(t)
	w := t0.UnixNano() / int64(time.Second)
	for key, want := range map[string]string{"user=u0": "4", "user=u1": "2"} {
		k := fmt.Sprintf("#counters:envoyrls/d@1s@%d:%s", w, key)
		if got, err := c.Get(t.Context(), k).Result(); err != nil || got != want {
			t.Errorf("Redis: GET %s = %q, %v; want %s", k, got, err, want)
		}
	}
}
