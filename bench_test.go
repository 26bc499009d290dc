package floodgate_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/clock"
)

// The peers are measured against these in the bench module (make bench);
// these are floodgate's own figures, for benchstat across changes.

func BenchmarkAllowOneKey(b *testing.B) {
	for _, c := range []struct {
		name string
		p    algo.Policy
	}{
		{"allowed", algo.MustParsePolicy("token-bucket 1000000000/1s")},
		{"denied", algo.MustParsePolicy("token-bucket 10/1h")},
	} {
		b.Run(c.name+"/serial", func(b *testing.B) {
			l := floodgate.Must(floodgate.NewLimiter(c.p))
			b.ReportAllocs()
			for b.Loop() {
				l.Allow(ctx, "user:12345")
			}
		})
		b.Run(c.name+"/serial-coarse-clock", func(b *testing.B) {
			coarse := clock.NewCoarse(time.Millisecond)
			defer coarse.Stop()
			l := floodgate.Must(floodgate.NewLimiter(c.p, floodgate.WithClock(coarse)))
			b.ReportAllocs()
			for b.Loop() {
				l.Allow(ctx, "user:12345")
			}
		})
		b.Run(c.name+"/parallel", func(b *testing.B) {
			l := floodgate.Must(floodgate.NewLimiter(c.p))
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					l.Allow(ctx, "user:12345")
				}
			})
		})
	}
}

func BenchmarkAllowRandomKeys(b *testing.B) {
	const n = 1_000_000
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprint("user:", i)
	}
	p := algo.MustParsePolicy("token-bucket 1000/1s")
	b.Run("serial", func(b *testing.B) {
		l := floodgate.Must(floodgate.NewLimiter(p, floodgate.WithMaxKeys(2*n)))
		rng := rand.New(rand.NewPCG(1, 2))
		b.ReportAllocs()
		for b.Loop() {
			l.Allow(ctx, keys[rng.IntN(n)])
		}
	})
	b.Run("parallel", func(b *testing.B) {
		l := floodgate.Must(floodgate.NewLimiter(p, floodgate.WithMaxKeys(2*n)))
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			rng := rand.New(rand.NewPCG(rand.Uint64(), 2))
			for pb.Next() {
				l.Allow(ctx, keys[rng.IntN(n)])
			}
		})
	})
}
