package redisstore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/floodgate/floodgate/redisstore"
	"github.com/floodgate/floodgate/storetest"
)

// FuzzDifferential runs traces drawn from the fuzzer's bytes through memory
// and Redis and demands identical outcomes.
func FuzzDifferential(f *testing.F) {
	c := testClient(f)
	for _, b := range storetest.Traces(1, 2, 8, 600) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		storetest.Differential(t, newStore(t, c, redisstore.WithCallerTime(), redisstore.WithMinTTL(time.Hour)), data, 40)
	})
}

// TestDifferential runs many random traces, each over every policy pair
// it draws, through memory and Redis.
func TestDifferential(t *testing.T) {
	c := testClient(t)
	traces := 400
	if testing.Short() {
		traces = 50
	}
	for i, b := range storetest.Traces(7, 11, traces, 2000) {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			storetest.Differential(t, newStore(t, c, redisstore.WithCallerTime(), redisstore.WithMinTTL(time.Hour)), b, 60)
		})
	}
}
