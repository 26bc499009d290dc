package memstore_test

import (
	"fmt"
	"math/big"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/memstore"
)

// floodPolicies are the policies of TestFloodSparesNewKeys and
// BenchmarkFlood: every algorithm, and one that is not Compact (its states
// in a map, its shadows in units of 3).
var floodPolicies = []string{
	"token-bucket 100/1h burst=100", "leaky-bucket 100/1h", "fixed-window 100/1h",
	"sliding-window 100/1h", "sliding-log 100/1h", "fixed-window 10000000000/1h",
}

// TestFloodSparesNewKeys is issue 28's lockout, on a table of 2^16 keys: a
// flood of new keys at a cost of the whole burst, 0.14% more than the
// table's bound (so that its shards evict about 1,500), then 1,000 new
// keys at a cost of 1, of which at most 1% may be denied (a new key is
// denied only when every one of its shadow slots is strict), then every
// key again at the burst. Nothing is admitted beyond the policy: the
// events span less than one unit's emission interval, so no key may be
// admitted more than the burst and what is emitted meanwhile, counted per
// key. BenchmarkFlood runs it at the default bound, 2^20 keys.
func TestFloodSparesNewKeys(t *testing.T) {
	for _, text := range floodPolicies {
		t.Run(text, func(t *testing.T) {
			denied, evictions := flood(t, algo.MustParsePolicy(text), 1<<16)
			t.Logf("%d evictions; %d of 1000 new keys denied", evictions, denied)
			if evictions == 0 || denied > 10 {
				t.Fatalf("%d of 1000 new keys denied after %d evictions, want at most 10", denied, evictions)
			}
		})
	}
}

// BenchmarkFlood runs TestFloodSparesNewKeys's flood at the default bound
// (the reproduction: 1.05 million keys flood a table of 2^20),
// reporting the new keys denied, in percent, and the evictions; it fails
// if anything is admitted beyond the policy. Run it with -benchtime 1x.
func BenchmarkFlood(b *testing.B) {
	for _, text := range floodPolicies {
		b.Run(text, func(b *testing.B) {
			var denied int
			var evictions uint64
			for range b.N {
				denied, evictions = flood(b, algo.MustParsePolicy(text), memstore.DefaultMaxKeys)
			}
			b.ReportMetric(float64(denied)/10, "%denied")
			b.ReportMetric(float64(evictions), "evictions")
		})
	}
}

// flood runs TestFloodSparesNewKeys's flood on a store bounded to maxKeys keys a
// table, and returns how many of its new keys were denied and how many
// keys the table evicted.
func flood(t testing.TB, p algo.Policy, maxKeys int) (denied int, evictions uint64) {
	store := memstore.New(maxKeys)
	tb, err := store.Table("flood", p)
	if err != nil {
		t.Fatal(err)
	}
	floodKeys := maxKeys + maxKeys*14/10000
	const victims = 1000
	admitted := make([]int64, floodKeys+victims) // units, by key
	start := int64(10 * time.Hour)               // a whole number of periods
	now, step := start, int64(12*time.Second)/int64(floodKeys)
	decide := func(i int, n int64) bool {
		key := fmt.Sprint("f", i)
		if i >= floodKeys {
			key = fmt.Sprint("v", i-floodKeys)
		}
		d, err := tb.Decide(ctx, key, now, n)
		if err != nil {
			t.Fatal(err)
		}
		now += step
		if d.Allowed {
			admitted[i] += n
		}
		return d.Allowed
	}
	for i := range floodKeys {
		decide(i, p.Burst())
	}
	for i := range victims {
		if !decide(floodKeys+i, 1) {
			denied++
		}
	}
	for i := range admitted {
		decide(i, p.Burst())
	}
	// The burst and what is emitted meanwhile: nothing, in less than one
	// unit's interval, for a Compact policy.
	emitted := new(big.Int).Mul(big.NewInt(p.Limit()), big.NewInt(now-start))
	most := p.Burst() + emitted.Quo(emitted, big.NewInt(int64(p.Period()))).Int64()
	for i, n := range admitted {
		if n > most {
			t.Fatalf("key %d admitted %d units in %v, the policy at most %d", i, n, time.Duration(now-start), most)
		}
	}
	return denied, store.Stats().Evictions
}
