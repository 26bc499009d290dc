package filestore_test

import (
	"fmt"
	"testing"

	"github.com/floodgate/floodgate/filestore"
	"github.com/floodgate/floodgate/storetest"
)

// FuzzDifferential runs traces drawn from the fuzzer's bytes through memory
// and the file store and demands identical outcomes.
func FuzzDifferential(f *testing.F) {
	for _, b := range storetest.Traces(1, 2, 8, 600) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		storetest.Differential(t, newStore(t, filestore.WithHold()), data, 40)
	})
}

// TestDifferential runs many random traces through memory and the file
// store, every fourth opening the file for each call, the others holding
// it (which is faster, and decides alike).
func TestDifferential(t *testing.T) {
	traces := 300
	if testing.Short() {
		traces = 30
	}
	for i, b := range storetest.Traces(7, 11, traces, 2000) {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			var opts []filestore.Option
			if i%4 != 0 {
				opts = append(opts, filestore.WithHold())
			}
			storetest.Differential(t, newStore(t, opts...), b, 60)
		})
	}
}
