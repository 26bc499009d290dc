package algo_test

import (
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"
)

// BenchmarkDecide measures one decision on one key, the core's share of
// every limiter call. Events arrive at the policy's own rate, so about as
// many are admitted as denied, and the sliding log stays at its size.
func BenchmarkDecide(b *testing.B) {
	for _, ps := range []string{
		"token-bucket 3/1s burst=5",
		"leaky-bucket 100/1s",
		"sliding-log 100/1s",
		"sliding-window 100/1s",
		"fixed-window 100/1s",
	} {
		b.Run(ps, func(b *testing.B) {
			p := mustParse(b, ps)
			var s algo.State
			step := int64(p.Period()) / p.Limit() / 2
			now := int64(time.Hour)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				now += step
				if _, err := p.Decide(&s, now, 1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
