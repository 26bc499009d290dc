package redisstore_test

import (
	"errors"
	"testing"
	"time"

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
