package envoyrls

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/floodgate/floodgate/clock"
	"github.com/floodgate/floodgate/filestore"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/memstore"
	"github.com/floodgate/floodgate/redisstore"
	"github.com/floodgate/floodgate/store"
	"github.com/redis/go-redis/v9"
)

// TestStoresDifferential runs random traces (randomRequest, the reloads
// and clock steps of TestLocalAnswersDifferential) on services over the
// memory store, a file store (tables of fixed windows), one Redis and a
// Redis Cluster (counters of their own), all on one fake clock, every
// hit to the store: every answer, every field, is the memory store's,
// and so are the counts at the end.
func TestStoresDifferential(t *testing.T) {
	ctx := context.Background()
	srv, cluster := redistest.NewServer(t), redistest.NewCluster(t)
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 23))
			clk := clock.NewFake(t0.Add(time.Duration(rng.IntN(1000)) * time.Millisecond))
			prefix := fmt.Sprintf("stores%d-%d:", seed, time.Now().UnixNano())
			fs, err := filestore.Open(filepath.Join(t.TempDir(), "state"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { fs.Close() })
			stores := []store.Store{memstore.New(0), fs, newRedisStoreOn(t, srv.Client(t), prefix), newRedisStoreOn(t, cluster.Client(t), prefix)}
			cfg := mustParse(t, localConfigs[0])
			var ss []*Service
			for _, st := range stores {
				ss = append(ss, NewService(cfg, st, WithClock(clk), WithFlushInterval(-1)))
			}
			for step := range 400 {
				switch r := rng.IntN(100); {
				case r < 8:
					clk.Advance([]time.Duration{time.Millisecond, 300 * time.Millisecond, time.Second, 7 * time.Second, 61 * time.Second}[rng.IntN(5)])
					continue
				case r < 11:
					cfg := mustParse(t, localConfigs[rng.IntN(len(localConfigs))])
					for _, s := range ss {
						s.SetConfig(cfg)
					}
					continue
				}
				req := randomRequest(rng)
				want, err := ss[0].ShouldRateLimit(ctx, req)
				if err != nil {
					t.Fatal(err)
				}
				for i, s := range ss[1:] {
					got, err := s.ShouldRateLimit(ctx, req)
					if err != nil {
						t.Fatalf("step %d, store %d: %v", step, i+1, err)
					}
					if !proto.Equal(got, want) {
						t.Fatalf("step %d, store %d (%T), %v:\n got  %v\n want %v (memory)", step, i+1, stores[i+1], req, got, want)
					}
				}
			}
			want := counts(t, stores[0], clk)
			for i, st := range stores[1:] {
				if got := counts(t, st, clk); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("store %d (%T): counts %v, want %v (memory)", i+1, st, got, want)
				}
			}
		})
	}
}

// newRedisStoreOn returns a store on c (one Redis or a Cluster), deciding
// at the caller's time (the tests' fake clock), its keys under prefix,
// kept an hour of real time (the fake clock runs slower than real time).
func newRedisStoreOn(t testing.TB, c redis.UniversalClient, prefix string) store.Store {
	t.Helper()
	rs, err := redisstore.New(c, redisstore.WithCallerTime(), redisstore.WithPrefix(prefix), redisstore.WithMinTTL(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return rs
}
