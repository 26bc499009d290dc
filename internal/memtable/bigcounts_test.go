package memtable

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"
)

// TestLargeCounts runs random traces of costs up to the burst, for
// policies whose counts do not fit in an algo.Cell (LIMIT above 2^32-1,
// which the Table keeps as States in its maps) and for one at the Cell's
// largest count, through a Table and a plain map of States: every
// decision must be the same.
func TestLargeCounts(t *testing.T) {
	for _, ps := range []string{
		"token-bucket 1250000000/1s burst=4294967296", "token-bucket 4294967296/1s",
		"leaky-bucket 1000000000000000/1s", "fixed-window 1000000000000000/1s",
		"sliding-window 999999999999999/1s", "fixed-window 4294967295/1s",
	} {
		p := algo.MustParsePolicy(ps)
		t.Run(ps, func(t *testing.T) {
			tb := New(p, 1<<20, 2, NewBudget(math.MaxInt64))
			defer tb.Close()
			ref := map[string]*algo.State{}
			rng := rand.New(rand.NewPCG(3, 4))
			now := int64(time.Hour)
			for i := range 5_000 {
				now += rng.Int64N(int64(p.Period()) / 4)
				key := fmt.Sprint("k", rng.IntN(50))
				n := rng.Int64N(p.Burst()/2 + 1)
				s := ref[key]
				if s == nil {
					s = new(algo.State)
					ref[key] = s
				}
				want, werr := p.Decide(s, now, n)
				got, gerr := tb.Decide(key, now, n)
				if got != want || (werr == nil) != (gerr == nil) {
					t.Fatalf("event %d (%s at %d, n %d): table %+v %v, map %+v %v", i, key, now, n, got, gerr, want, werr)
				}
			}
		})
	}
}
