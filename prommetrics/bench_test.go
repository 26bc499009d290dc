package prommetrics_test

import (
	"testing"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/clock"
	"github.com/floodgate/floodgate/prommetrics"
)

// BenchmarkAllowOneKey is the root package's benchmark of the same name,
// on a coarse clock, with no Observer and with a Collector's: the cost of
// counting a decision.
func BenchmarkAllowOneKey(b *testing.B) {
	coarse := clock.NewCoarse(time.Millisecond)
	defer coarse.Stop()
	for _, c := range []struct {
		name string
		p    algo.Policy
	}{
		{"allowed", algo.MustParsePolicy("token-bucket 1000000000/1s")},
		{"denied", algo.MustParsePolicy("token-bucket 10/1h")},
	} {
		for _, observed := range []bool{false, true} {
			opts := []floodgate.Option{floodgate.WithClock(coarse)}
			name := c.name + "/none"
			if observed {
				opts = append(opts, floodgate.WithObserver(prommetrics.New().Observer("bench")))
				name = c.name + "/observer"
			}
			b.Run(name+"/serial", func(b *testing.B) {
				l := floodgate.Must(floodgate.NewLimiter(c.p, opts...))
				b.ReportAllocs()
				for b.Loop() {
					l.Allow(ctx, "user:12345")
				}
			})
			b.Run(name+"/parallel", func(b *testing.B) {
				l := floodgate.Must(floodgate.NewLimiter(c.p, opts...))
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						l.Allow(ctx, "user:12345")
					}
				})
			})
		}
	}
}

// BenchmarkObserve is the cost of counting one admission, alone.
func BenchmarkObserve(b *testing.B) {
	o := prommetrics.New().Observer("bench")
	d, _ := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("token-bucket 10/1s"))).Allow(ctx, "k")
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			o.Observe(d, nil)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				o.Observe(d, nil)
			}
		})
	})
}
