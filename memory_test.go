package floodgate_test

import (
	"testing"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/storetest"
)

func TestMemoryStoreConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return floodgate.NewMemoryStore(0) })
}

// A tiny bound exercises eviction and shard bounds under the same rules.
func TestMemoryStoreConformanceSmall(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return floodgate.NewMemoryStore(64) })
}
