package filestore_test

import (
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
