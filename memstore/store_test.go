package memstore_test

import (
	"context"
	"testing"

	"github.com/floodgate/floodgate/memstore"

	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return memstore.New(0) })
}

// A tiny bound exercises eviction and shard bounds under the same rules.
func TestConformanceSmall(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return memstore.New(64) })
}

var ctx = context.Background()
