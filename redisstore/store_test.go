package redisstore_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"
	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/redisstore"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/storetest"
)

// The conformance suite, at the caller's time (the suite's times are its
// own, not the server's clock).
func TestConformance(t *testing.T) {
	c := testClient(t)
	storetest.Run(t, func(t *testing.T) store.Store {
		return newStore(t, c, redisstore.WithCallerTime(), redisstore.WithMinTTL(time.Hour))
	})
}

// The conformance suite on a real three-master Redis Cluster: keys spread
// over the nodes, and all-or-nothing across hash slots.
func TestConformanceCluster(t *testing.T) {
	c := redistest.SharedCluster(t).Client(t)
	storetest.Run(t, func(t *testing.T) store.Store {
		return newStore(t, c, redisstore.WithCallerTime(), redisstore.WithMinTTL(time.Hour))
	})
}

// The conformance suite with script calls of at most 2 calls or ops: many
// batches, and an ApplyEach in several script calls, one after another.
func TestConformanceSmallBatches(t *testing.T) {
	c := testClient(t)
	storetest.Run(t, func(t *testing.T) store.Store {
		return newStore(t, c, redisstore.WithCallerTime(), redisstore.WithMinTTL(time.Hour), redisstore.WithMaxBatch(2))
	})
}

// A timeout that is not positive is refused.
func TestWithTimeoutInvalid(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second} {
		if _, err := redisstore.New(testClient(t), redisstore.WithTimeout(d)); !errors.Is(err, redisstore.ErrInvalidOption) {
			t.Errorf("WithTimeout(%v): %v, want ErrInvalidOption", d, err)
		}
	}
}

// ApplyEach's ops go in calls of WithMaxBatch ops, one slot's calls one
// after another: each op sees the earlier ones on its key, on a single
// Redis and across a cluster's slots, while other callers' calls go to
// Redis at the same time.
func TestApplyEachInOrder(t *testing.T) {
	for _, c := range []struct {
		name   string
		client redis.UniversalClient
	}{
		{"single", testClient(t)},
		{"cluster", redistest.SharedCluster(t).Client(t)},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newStore(t, c.client, redisstore.WithCallerTime(), redisstore.WithMaxBatch(2))
			tb, err := s.Table("each", algo.MustParsePolicy("fixed-window 5/1h"))
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for range 4 { // other callers, so that the calls wait and batch
				wg.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
							tb.Decide(ctx, "other", 1e9, 0)
						}
					}
				})
			}
			defer func() { close(stop); wg.Wait() }()
			keys := []string{"a", "b", "c"} // three slots on the cluster
			var ops []store.Op
			for range 7 {
				for _, k := range keys {
					ops = append(ops, store.Op{Kind: store.OpDecide, Table: tb, Key: k, Now: 1e9, N: 1})
				}
			}
			if err := s.ApplyEach(ctx, ops); err != nil {
				t.Fatal(err)
			}
			for i, op := range ops {
				n := int64(i / len(keys)) // the op's place among its key's
				d := op.Result.Decision
				if want := n < 5; d.Allowed != want || want && d.Remaining != 4-n {
					t.Errorf("op %d (key %s, its %dth): %+v, want allowed %v with %d remaining", i, op.Key, n, d, want, 4-n)
				}
			}
		})
	}
}
