package memtable

import (
	"math"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/floodgate/floodgate/algo"
)

// BenchmarkDecideFlood decides on a new key each time in a full table, so
// that every decision evicts a key whose state has not drained.
func BenchmarkDecideFlood(b *testing.B) {
	for _, ps := range []string{"token-bucket 10/1m", "sliding-log 10/1m"} {
		b.Run(ps, func(b *testing.B) {
			p := algo.MustParsePolicy(ps)
			tb := New(p, 1<<12, 4, NewBudget(math.MaxInt64))
			keys := make([]string, 1<<16)
			for i := range keys {
				keys[i] = "flood:" + strconv.Itoa(i)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				tb.Decide(keys[i&(len(keys)-1)], int64(i), 1+int64(i%10))
				i++
			}
		})
	}
}

// BenchmarkDecideOneKeyParallel is BenchmarkDecideOneKey from GOMAXPROCS
// goroutines: every call waits for the same shard lock.
func BenchmarkDecideOneKeyParallel(b *testing.B) {
	p := algo.MustParsePolicy("token-bucket 1000000000/1s")
	tb := New(p, 1<<20, 64, NewBudget(math.MaxInt64))
	var now atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			tb.Decide("user:12345", now.Add(1), 1)
		}
	})
}
