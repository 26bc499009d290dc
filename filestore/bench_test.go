package filestore_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/floodgate/floodgate/filestore"
)

// BenchmarkDecide decides on one key of a warm file (created, the key
// present), every decision admitted and so written and synced: alone
// (open, transaction, fsync, close), holding the file (WithHold), and from
// several goroutines at once, whose calls share transactions unless
// batching is off.
func BenchmarkDecide(b *testing.B) {
	for _, c := range []struct {
		name      string
		hold      bool
		parallel  bool
		unbatched bool
	}{
		{"serial", false, false, false},
		{"serial-hold", true, false, false},
		{"parallel", false, true, false},
		{"parallel-unbatched", false, true, true},
		{"parallel-hold", true, true, false},
	} {
		b.Run(c.name, func(b *testing.B) {
			var opts []filestore.Option
			if c.hold {
				opts = append(opts, filestore.WithHold())
			}
			s := newStore(b, opts...)
			if c.unbatched {
				filestore.SetMaxBatch(s, 1)
			}
			tb := table(b, s, "bench", "token-bucket 1000000000/1s")
			var now atomic.Int64
			now.Store(t0)
			if _, err := tb.Decide(ctx, "user:12345", t0, 1); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			if !c.parallel {
				for b.Loop() {
					if d, err := tb.Decide(ctx, "user:12345", now.Add(1), 1); err != nil || !d.Allowed {
						b.Fatal(d, err)
					}
				}
				return
			}
			b.SetParallelism(4)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if d, err := tb.Decide(ctx, "user:12345", now.Add(1), 1); err != nil || !d.Allowed {
						b.Error(d, err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkDenied decides on keys already over their limit, one key or
// 1,000 taken in turn, with the deny cache (a stat and two reads of the
// file's meta pages a decision) and without (a transaction, shared by the
// calls waiting for it): from one goroutine, and from 32 a CPU, as in a
// flood. txns/op counts the transactions, each of which holds the file's
// lock, keeping other processes out.
func BenchmarkDenied(b *testing.B) {
	for _, c := range []struct {
		keys     int
		parallel bool
	}{{1, false}, {1, true}, {1000, true}} {
		for _, cached := range []bool{false, true} {
			name := fmt.Sprintf("keys=%d/parallel=%v/cache=%v", c.keys, c.parallel, cached)
			b.Run(name, func(b *testing.B) { benchmarkDenied(b, c.keys, c.parallel, cached) })
		}
	}
}

func benchmarkDenied(b *testing.B, keys int, parallel, cached bool) {
	var opts []filestore.Option
	if cached {
		opts = append(opts, filestore.WithDenyCache(1<<20))
	}
	s := newStore(b, opts...)
	tb := table(b, s, "b", "fixed-window 1/1h")
	names := make([]string, keys)
	for k := range names {
		names[k] = fmt.Sprint("user:", k)
		tb.Decide(ctx, names[k], t0, 1) // admitted
		tb.Decide(ctx, names[k], t0, 1) // denied: filled
	}
	var next atomic.Uint64
	decide := func() bool {
		d, err := tb.Decide(ctx, names[next.Add(1)%uint64(keys)], t0, 1)
		if err != nil || d.Allowed {
			b.Errorf("%+v %v", d, err)
			return false
		}
		return true
	}
	hits, txns := s.CacheStats().Hits, filestore.Transactions(s)
	b.ReportAllocs()
	b.ResetTimer()
	if parallel {
		b.SetParallelism(32)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() && decide() {
			}
		})
	} else {
		for i := 0; i < b.N && decide(); i++ {
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(s.CacheStats().Hits-hits)/float64(b.N), "hits/op")
	b.ReportMetric(float64(filestore.Transactions(s)-txns)/float64(b.N), "txns/op")
}
