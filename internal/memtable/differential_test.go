package memtable

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"
)

// TestDifferentialPressure holds tables to a plain map of States under
// random traces that evict: keys of every length around inlineMax (held
// in their slot or in the shard's arena) and around 128 bytes (whose
// length takes two bytes there), many keys sharing probe runs in small
// shards, peeks that drop drained keys, time jumps that drain most keys,
// and a Budget and a key bound far below what the keys would take. Before
// each event it checks that a key the table holds
// has exactly the map's state, and that a key it does not hold (drained
// or evicted) starts from a state at least as strict as the map's (no
// more remaining); then it decides on the same state in both, which must
// agree. The map keeps a missing key's state unless the table admits it
// and stores it: a denial or a peek leaves the key what it was, and its
// next start may be looser than this one (another of its shadow slots),
// never looser than the map's. The Budget's count must match what the tables hold, and stay
// within the budget.
func TestDifferentialPressure(t *testing.T) {
	for _, c := range []struct {
		policy          string
		maxKeys, shards int
		budget          int64
	}{
		{"token-bucket 5/1s burst=7", 300, 2, 24 << 10},
		{"leaky-bucket 3/1s", 1 << 20, 1, 16 << 10},
		{"fixed-window 4/1s", 200, 1, 1 << 20},
		{"sliding-window 6/2s", 1 << 20, 4, 20 << 10},
	} {
		t.Run(c.policy, func(t *testing.T) {
			p := algo.MustParsePolicy(c.policy)
			b := NewBudget(c.budget)
			tb := New(p, c.maxKeys, c.shards, b)
			if b.Held() > c.budget {
				t.Fatalf("the fixed parts take %d bytes, budget %d", b.Held(), c.budget)
			}
			ref := map[string]algo.State{}
			rng := rand.New(rand.NewPCG(7, uint64(len(c.policy))))
			pad := strings.Repeat("k", 40)
			long := strings.Repeat("l", 100)
			now := int64(time.Hour)
			held, recalled := 0, 0
			for i := range 60_000 {
				switch rng.IntN(2000) {
				case 0:
					now += rng.Int64N(2 * int64(p.Period())) // drain most keys
				case 1, 2, 3, 4, 5, 6, 7, 8:
					now += rng.Int64N(int64(p.Period()) / 16)
				}
				id := rng.IntN(700)
				key := fmt.Sprint(id)
				key = pad[:id%41] + key // lengths from 1 to 44, around inlineMax
				if id%5 == 0 {
					key = long + key // lengths around 128, whose length takes 2 bytes in the arena
				}
				n := rng.Int64N(4)
				h := tb.Hash(key)
				tb.Lock(tb.Shard(h))
				s, ok := tb.Load(h, key, now)
				tb.Unlock(tb.Shard(h))
				want := ref[key]
				if ok {
					held++
					if s != want {
						t.Fatalf("event %d: %q held as %+v, map has %+v", i, key, s, want)
					}
				} else {
					recalled++
					if remaining(p, s, now) > remaining(p, want, now) {
						t.Fatalf("event %d: %q starts from %+v, less strict than the map's %+v", i, key, s, want)
					}
				}
				if !ok {
					want = s
				}
				wd, werr := p.Decide(&want, now, n)
				locked := rng.IntN(4) == 0
				// What the table holds for the key next: Store keeps any
				// state not drained, Decide a missing key's only when it
				// admits units; else the key's true state is still the map's.
				if ok || locked && p.ResetAt(&want) > now || wd.Allowed && n > 0 {
					ref[key] = want
				}
				var got algo.Decision
				var gerr error
				if locked {
					tb.Lock(tb.Shard(h))
					s, _ := tb.Load(h, key, now)
					got, gerr = p.Decide(&s, now, n)
					tb.Store(h, key, s, now)
					tb.Unlock(tb.Shard(h))
				} else {
					got, gerr = tb.Decide(key, now, n)
				}
				if got != wd || (gerr == nil) != (werr == nil) {
					t.Fatalf("event %d (%q at %d, n %d): table %+v %v, map %+v %v", i, key, now, n, got, gerr, wd, werr)
				}
				if b.Held() > c.budget {
					t.Fatalf("event %d: %d bytes held, budget %d", i, b.Held(), c.budget)
				}
				if i%5000 == 0 && counted(tb) != b.Held() {
					t.Fatalf("event %d: the Budget counts %d bytes, the table holds %d", i, b.Held(), counted(tb))
				}
			}
			st := tb.Stats()
			t.Logf("%+v; %d events on held keys, %d on keys recalled", st, held, recalled)
			if st.Evictions == 0 || st.Drained == 0 || st.Keys > c.maxKeys {
				t.Fatalf("stats %+v: want evictions, drained keys, at most %d keys", st, c.maxKeys)
			}
		})
	}
}

// remaining returns what a peek at s at now reports remaining.
func remaining(p algo.Policy, s algo.State, now int64) int64 {
	d, _ := p.Decide(&s, now, 0)
	return d.Remaining
}
