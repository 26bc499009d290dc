package memtable

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"
)

// shadowPolicies are policies and Compact's exception, a LIMIT above
// 2^32-1, whose shadows count in units of 3.
var shadowPolicies = append([]string{"token-bucket 10000000000/1s"}, policies...)

// TestShadowSlotsStrict checks invariant 1: a table of one key evicts a
// key at each new one, at random costs, and every shadow slot of every
// key it evicted recalls a state at least as strict (no more remaining)
// as the units the key was admitted, counted from its first event.
func TestShadowSlotsStrict(t *testing.T) {
	for _, ps := range shadowPolicies {
		p := algo.MustParsePolicy(ps)
		tb := New(p, 1, 1, NewBudget(math.MaxInt64))
		used := map[string]*algo.State{} // each key's admitted events
		rng := rand.New(rand.NewPCG(11, 12))
		now := int64(time.Hour)
		held := ""
		for i := range 300 {
			key := fmt.Sprint("k", i%60)
			now += rng.Int64N(int64(p.Period()) / 20)
			n := 1 + rng.Int64N(p.Burst())
			if d, _ := tb.Decide(key, now, n); d.Allowed {
				held = key // evicting the key held before
				if used[key] == nil {
					used[key] = new(algo.State)
				}
				if want, _ := p.Decide(used[key], now, n); !want.Allowed {
					t.Fatalf("%s: %q admitted %d at %d beyond its policy", ps, key, n, now)
				}
			}
		}
		sh := &tb.shards[0]
		for key, s := range used {
			if key == held {
				continue // the one key the table holds
			}
			for _, i := range sh.shadowSlots(tb.Hash(key)) {
				if got := p.Recall(sh.shadow[i], now); remaining(p, got, now) > remaining(p, *s, now) {
					t.Fatalf("%s: %q's slot %d recalls %+v, less strict than its %+v", ps, key, i, got, *s)
				}
			}
		}
		if tb.Stats().Evictions < 50 {
			t.Fatalf("%s: %d evictions, want most keys evicted", ps, tb.Stats().Evictions)
		}
	}
}

// TestShadowSlotsOfAKey checks invariant 2: a key's slots are distinct,
// within the shadow, and the only ones its eviction into a fresh shadow
// fills.
func TestShadowSlotsOfAKey(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for size := minShadowSlots; size <= 1<<14; size *= 2 {
		sh := &shard{shadow: make([]algo.Shadow, size)}
		for range 10_000 {
			idx := sh.shadowSlots(rng.Uint64())
			seen := map[int]bool{}
			for _, i := range idx {
				if i < 0 || i >= size || seen[i] {
					t.Fatalf("size %d: slots %v: out of range or repeated", size, idx)
				}
				seen[i] = true
			}
		}
	}
	for _, ps := range shadowPolicies {
		p := algo.MustParsePolicy(ps)
		tb := New(p, 1, 1, NewBudget(math.MaxInt64))
		tb.Decide("a", 0, p.Burst())
		tb.Decide("b", 1, 1) // evicts a
		sh := &tb.shards[0]
		want := map[int]bool{}
		for _, i := range sh.shadowSlots(tb.Hash("a")) {
			want[i] = true
		}
		for i, v := range sh.shadow {
			if s := p.Recall(v, 1); (p.ResetAt(&s) > 1) != want[i] {
				t.Fatalf("%s: slot %d holds %+v; a's slots are %v", ps, i, s, sh.shadowSlots(tb.Hash("a")))
			}
		}
	}
}

// TestShadowSizeFixed checks invariant 3: a shard's shadow is allocated at
// its first eviction, at the table's size, and stays the same array under
// hundreds more.
func TestShadowSizeFixed(t *testing.T) {
	tb := New(algo.MustParsePolicy("token-bucket 1/1h"), 1024, 1, NewBudget(1<<30))
	sh := &tb.shards[0]
	for i := range 1025 {
		tb.Decide(fmt.Sprint("k", i), 0, 1)
	}
	if len(sh.shadow) != tb.shadowN || tb.shadowN != 1024 {
		t.Fatalf("a shadow of %d slots, the table's size %d, want 1024", len(sh.shadow), tb.shadowN)
	}
	first := &sh.shadow[0]
	for i := range 10_000 {
		tb.Decide(fmt.Sprint("x", i), 0, 1)
	}
	if len(sh.shadow) != 1024 || &sh.shadow[0] != first || tb.Stats().Evictions < 500 {
		t.Fatalf("after %d evictions, a shadow of %d slots, moved: %v", tb.Stats().Evictions, len(sh.shadow), &sh.shadow[0] != first)
	}
}

// TestShadowRecallsLoosest checks invariant 4: a missing key starts from
// the loosest of its slots, joined with the table's floor: fresh while one
// of its slots is, at its limit once all of them are, or the floor is.
func TestShadowRecallsLoosest(t *testing.T) {
	for _, ps := range shadowPolicies {
		p := algo.MustParsePolicy(ps)
		tb := New(p, 1, 1, NewBudget(math.MaxInt64))
		tb.Decide("a", 0, 1)
		tb.Decide("b", 0, 1) // evicts a: the shadow exists
		sh := &tb.shards[0]
		clear(sh.shadow)
		var full algo.State
		p.Decide(&full, 0, p.Burst())
		h := tb.Hash("k")
		idx := sh.shadowSlots(h)
		for _, i := range idx[:shadowWays-1] {
			p.Forget(&sh.shadow[i], &full, 0)
		}
		if s := tb.recall(sh, h, 0); remaining(p, s, 0) != p.Burst() {
			t.Fatalf("%s: one slot is empty, the key starts from %+v", ps, s)
		}
		p.Forget(&sh.shadow[idx[shadowWays-1]], &full, 0)
		if d, _ := tb.Decide("k", 0, 1); d.Allowed {
			t.Fatalf("%s: every slot is at the limit, the key was admitted", ps)
		}
		clear(sh.shadow)
		var f algo.Shadow
		p.Forget(&f, &full, 0)
		tb.SetFloor(f)
		if d, _ := tb.Decide("k", 0, 1); d.Allowed {
			t.Fatalf("%s: the floor is at the limit, the key was admitted", ps)
		}
	}
}

// TestShadowBudget checks invariant 5: tables flooded on one Budget count
// every shadow's bytes in it, exactly, and their shadows beyond the
// smallest never take more than their share of it, later tables getting
// smaller ones; closing the tables gives every byte back.
func TestShadowBudget(t *testing.T) {
	const budget = 4 << 20
	b := NewBudget(budget)
	var tables []*Table
	for i := range 8 {
		tb := New(algo.MustParsePolicy(fmt.Sprintf("fixed-window %d/1h", i+1)), 4096, 4, b)
		tables = append(tables, tb)
		for k := range 5000 {
			tb.Decide(fmt.Sprint("k", k), 0, 1)
		}
		var extra int64
		for _, tb := range tables {
			for j := range tb.shards {
				if sh := &tb.shards[j]; sh.shadow != nil {
					extra += shadowExtra(len(sh.shadow))
				}
			}
		}
		if b.shadows.Load() != extra || extra > budget/shadowShare || counted(tb) > b.Held() {
			t.Fatalf("table %d: shadows take %d bytes beyond their smallest, counted %d, share %d", i, extra, b.shadows.Load(), budget/shadowShare)
		}
	}
	if first, last := len(tables[0].shards[0].shadow), len(tables[7].shards[0].shadow); first != 1024 || last >= first {
		t.Fatalf("the first table's shadows have %d slots, the last's %d: want 1024, then fewer", first, last)
	}
	var sum int64
	for _, tb := range tables {
		sum += counted(tb)
	}
	if sum != b.Held() {
		t.Fatalf("the Budget counts %d bytes, the tables hold %d", b.Held(), sum)
	}
	for _, tb := range tables {
		tb.Decide("late", int64(2*time.Hour), 0)
		if !tb.Close() {
			t.Fatalf("%s: a drained table did not close", tb.Policy())
		}
	}
	if b.Held() != 0 || b.shadows.Load() != 0 {
		t.Fatalf("%d bytes held, %d of shadows, after every table closed", b.Held(), b.shadows.Load())
	}
}
