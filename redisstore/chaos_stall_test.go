package redisstore_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/failsafe"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// stall is a script that holds Redis for ARGV[1] microseconds: no other
// client is served meanwhile, as when Redis stalls (a slow command, a
// fork, a swapped page).
var stall = redis.NewScript(`
local t = redis.call('TIME')
local start = t[1] * 1000000 + t[2]
repeat t = redis.call('TIME') until t[1] * 1000000 + t[2] - start >= tonumber(ARGV[1])
return 1`)

// TestChaosOneStallTripsNothing: Redis stalls for 150ms under load through
// a failsafe.Store failing open with its default options (a 100ms
// Timeout). The calls the stall holds past the Timeout are admitted by
// the mode (about one a caller), and nothing else: the store is not taken
// down, so every call after the stall is decided by Redis again.
func TestChaosOneStallTripsNothing(t *testing.T) {
	srv := redistest.NewServer(t)
	s := newStore(t, srv.Client(t))
	fs := newFailsafe(s, failsafe.Options{Mode: failsafe.FailOpen})
	l := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("token-bucket 1000000/1s"), floodgate.WithStore(fs)))
	const callers = 8
	var stop atomic.Bool
	var calls atomic.Int64
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			key := string(rune('a' + i))
			for !stop.Load() {
				if _, err := l.Allow(ctx, key); err != nil {
					t.Error(err)
					return
				}
				calls.Add(1)
			}
		})
	}
	time.Sleep(300 * time.Millisecond) // load before the stall
	if err := stall.Run(ctx, srv.Client(t), nil, 150_000).Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // load after it: on the store again at once
	stop.Store(true)
	wg.Wait()
	st := fs.Stats()
	t.Logf("a 150ms stall in %d calls: %d admitted by the mode, %d trips", calls.Load(), st.Open, st.Trips)
	// Each caller has at most one call out; those that the stall holds
	// past the Timeout fail, and the next ones wait for the stall's end,
	// less than a Timeout away: one a caller. The bound leaves room for
	// calls that this loaded machine makes outlast the Timeout by itself.
	if st.Trips != 0 || st.Open > 4*callers {
		t.Errorf("a 150ms stall: %+v; want no trip and at most %d calls admitted by the mode", st, 4*callers)
	}
}
