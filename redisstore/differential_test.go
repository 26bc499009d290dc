package redisstore_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/floodgate/floodgate/redisstore"
	"github.com/floodgate/floodgate/storetest"
)

// FuzzDifferential runs traces drawn from the fuzzer's bytes through memory
// and Redis and demands identical outcomes.
func FuzzDifferential(f *testing.F) {
	c := testClient(f)
	r := rand.New(rand.NewPCG(1, 2))
	for range 8 {
		b := make([]byte, 600)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
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
	r := rand.New(rand.NewPCG(7, 11))
	for i := range traces {
		b := make([]byte, 2000)
		for j := range b {
			b[j] = byte(r.Uint32())
		}
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			storetest.Differential(t, newStore(t, c, redisstore.WithCallerTime(), redisstore.WithMinTTL(time.Hour)), b, 60)
		})
	}
}
