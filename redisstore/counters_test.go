package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/memstore"
	"github.com/floodgate/floodgate/redisstore"
	"github.com/floodgate/floodgate/store"
)

var t0 = time.Date(2026, 11, 28, 8, 0, 0, 0, time.UTC).UnixNano()

// TestCountersDifferential adds random hits to counters on memory (a
// table, package algo's fixed window), on one Redis and on a Redis
// Cluster (INCRBY, PEXPIRE), and demands the same count for every
// addition: keys over the cluster's masters, some sharing a hash tag,
// several additions on one key in a call, reads of 0 hits, costs up to
// past MaxCount, windows of two lengths, the time stepping forward within
// and across windows.
func TestCountersDifferential(t *testing.T) {
	ctx := context.Background()
	stores := []store.Store{
		memstore.New(0),
		newStore(t, testClient(t)),
		newStore(t, redistest.SharedCluster(t).Client(t)),
	}
	keys := []string{"a", "b", "c", "{u}:1", "{u}:2", "x/y", "", "long:" + string(make([]byte, 300))}
	for seed := range uint64(8) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 3))
			name := fmt.Sprint("diff", seed)
			var cs [2][]store.Counters
			for w, period := range []time.Duration{time.Second, time.Minute} {
				for _, st := range stores {
					c, err := store.CountersOf(st, name, period)
					if err != nil {
						t.Fatal(err)
					}
					cs[w] = append(cs[w], c)
				}
			}
			now := t0 + rng.Int64N(int64(time.Second))
			for step := range 300 {
				now += []int64{0, 0, int64(time.Millisecond), int64(300 * time.Millisecond), int64(time.Second)}[rng.IntN(5)]
				hs := make([]store.Hits, 1+rng.IntN(6))
				for i := range hs {
					n := []int64{0, 1, 1, 2, 7, store.MaxCount / 3, store.MaxCount}[rng.IntN(7)]
					hs[i] = store.Hits{Key: keys[rng.IntN(len(keys))], Now: now, N: n}
				}
				w := rng.IntN(2)
				want := addEach(t, ctx, cs[w][0], hs)
				for i := range hs {
					if hs[i].N == 0 && want[i] == store.MaxCount-1 {
						// A table holds at most MaxCount-1: read, a
						// counter filled past it reads MaxCount-1 on
						// memory (store.TableCounters), MaxCount on Redis.
						want[i] = store.MaxCount
					}
				}
				for j, c := range cs[w][1:] {
					if got := addEach(t, ctx, c, hs); fmt.Sprint(got) != fmt.Sprint(want) {
						t.Fatalf("step %d, window %d, %v: store %d counted %v, memory %v", step, w, hs, j+1, got, want)
					}
				}
			}
		})
	}
}

// addEach adds hs (a copy) to c, and returns the counts.
func addEach(t *testing.T, ctx context.Context, c store.Counters, hs []store.Hits) []int64 {
	t.Helper()
	own := append([]store.Hits(nil), hs...)
	if err := c.AddEach(ctx, own); err != nil {
		t.Fatal(err)
	}
	counts := make([]int64, len(own))
	for i, h := range own {
		if h.Unknown || h.Err != nil {
			t.Fatalf("addition %d: %+v", i, h)
		}
		counts[i] = h.Count
	}
	return counts
}

// TestCountersKeys pins the Redis keys of the counters, as INCRBY and
// PEXPIRE leave them (Redis semantics): an integer at a key naming the
// window, outside the store's prefix, expiring at the end of the next
// window; Clear deletes it.
func TestCountersKeys(t *testing.T) {
	ctx := context.Background()
	c := testClient(t)
	st, err := redisstore.New(c, redisstore.WithPrefix("counterkeys:"))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Clear(ctx); err != nil {
		t.Fatal(err)
	}
	cs, err := st.Counters("envoyrls/d:{x}", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	now := t0 + int64(15*time.Second)
	if err := cs.AddEach(ctx, []store.Hits{{Key: "user=u", Now: now, N: 3}}); err != nil {
		t.Fatal(err)
	}
	key := fmt.Sprintf("#counterkeys:envoyrls/d%%3A%%7Bx%%7D@1m0s@%d:user=u", now/int64(time.Minute))
	if got, err := c.Get(ctx, key).Result(); err != nil || got != "3" {
		t.Fatalf("Redis: GET %s = %q, %v; want 3", key, got, err)
	}
	ttl, err := c.PTTL(ctx, key).Result()
	if want := 105 * time.Second; err != nil || ttl > want || ttl < want-5*time.Second {
		t.Errorf("Redis: PTTL %s = %v, %v; want about %v (the next window's end)", key, ttl, err, want)
	}
	if err := st.Clear(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Exists(ctx, key).Result(); err != nil || n != 0 {
		t.Errorf("after Clear, EXISTS %s = %d, %v; want 0", key, n, err)
	}
}

// TestCountersErrors: bad input fails before anything is sent; a Redis
// that does not answer fails with ErrUnavailable.
func TestCountersErrors(t *testing.T) {
	ctx := context.Background()
	st := newStore(t, testClient(t))
	if _, err := st.Counters("n", 0); !errors.Is(err, algo.ErrInvalidPolicy) {
		t.Errorf("a window of 0: %v, want ErrInvalidPolicy", err)
	}
	cs, err := st.Counters("n", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.AddEach(ctx, []store.Hits{{Key: "k", Now: t0, N: -1}}); !errors.Is(err, algo.ErrInvalidCost) {
		t.Errorf("a negative cost: %v, want ErrInvalidCost", err)
	}
	if err := cs.AddEach(ctx, []store.Hits{{Key: "k", Now: -1, N: 1}}); !errors.Is(err, algo.ErrInvalidTime) {
		t.Errorf("a negative time: %v, want ErrInvalidTime", err)
	}
	srv := redistest.NewServer(t)
	down := newStore(t, srv.Client(t), redisstore.WithTimeout(200*time.Millisecond))
	dc, err := down.Counters("n", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	srv.Pause()
	defer srv.Resume()
	start := time.Now()
	err = dc.AddEach(ctx, []store.Hits{{Key: "k", Now: t0, N: 1}})
	if !errors.Is(err, redisstore.ErrUnavailable) {
		t.Errorf("a stalled Redis: %v, want ErrUnavailable", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("a stalled Redis held AddEach for %v, past the store's timeout", d)
	}
}

// WithCounters(false) leaves a store no counters of its own: Counters
// answers errors.ErrUnsupported, and store.CountersOf counts on its
// tables, through the decisions' script.
func TestCountersTurnedOff(t *testing.T) {
	st := newStore(t, testClient(t), redisstore.WithCounters(false))
	if _, err := st.Counters("n", time.Minute); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Counters with WithCounters(false): %v, want errors.ErrUnsupported", err)
	}
	cs, err := store.CountersOf(st, "n", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	hs := []store.Hits{{Key: "k", Now: time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC).UnixNano(), N: 3}}
	if err := cs.AddEach(context.Background(), hs); err != nil || hs[0].Count != 3 {
		t.Errorf("CountersOf on the tables: %+v %v, want a count of 3", hs[0], err)
	}
}
