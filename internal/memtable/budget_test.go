package memtable

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"
)

// counted recomputes the bytes t holds, as its Budget counts them.
func counted(t *Table) int64 {
	n := fixedBytes(len(t.shards))
	for i := range t.shards {
		n += t.shards[i].bytes()
	}
	return n
}

// TestBudget runs random traces of long keys through tables sharing a
// small Budget: the count always matches what the tables hold, the bytes
// held never exceed the budget, and closing the tables once drained gives every byte back.
func TestBudget(t *testing.T) {
	const budget = 256 << 10
	b := NewBudget(budget)
	var tables []*Table
	for _, ps := range policies {
		tables = append(tables, New(algo.MustParsePolicy(ps), 1<<20, 4, b))
	}
	rng := rand.New(rand.NewPCG(5, 6))
	pad := strings.Repeat("x", 1000)
	now := int64(time.Hour)
	for i := range 30_000 {
		now += rng.Int64N(int64(time.Millisecond))
		tb := tables[rng.IntN(len(tables))]
		key := fmt.Sprint(pad[:rng.IntN(len(pad))], rng.IntN(5000))
		if _, err := tb.Decide(key, now, 1+rng.Int64N(3)); err != nil {
			t.Fatal(err)
		}
		if b.Held() > budget {
			t.Fatalf("event %d: %d bytes held, budget %d", i, b.Held(), budget)
		}
		if i%1000 == 0 {
			var sum int64
			for _, tb := range tables {
				sum += counted(tb)
			}
			if sum != b.Held() {
				t.Fatalf("event %d: budget counts %d bytes, tables hold %d", i, b.Held(), sum)
			}
		}
	}
	now += int64(time.Hour)
	for _, tb := range tables {
		tb.Decide("late", now, 0) // a peek moves the table's clock, adds nothing
		if !tb.Close() {
			t.Fatalf("%s: a drained table did not close", tb.Policy())
		}
		if _, err := tb.Decide("k", now, 1); err != ErrClosed {
			t.Fatalf("Decide on a closed table: %v", err)
		}
	}
	if b.Held() != 0 {
		t.Fatalf("%d bytes held after every table closed", b.Held())
	}
}

// TestCloseKeepsLiveTables: a table holding state that has not drained at
// its latest time, in a key or in its shadow only, does not close.
func TestCloseKeepsLiveTables(t *testing.T) {
	p := algo.MustParsePolicy("fixed-window 5/1m")
	tb := New(p, 1, 1, NewBudget(1<<30))
	tb.Decide("a", 0, 1)
	tb.Decide("b", 0, 1) // evicts a into the shadow
	tb.Decide("b", int64(time.Minute)-1, 0)
	if tb.Close() {
		t.Fatal("a table with a live key closed")
	}
	tb.Decide("c", int64(time.Minute), 0) // b drains; the shadow too
	if !tb.Close() {
		t.Fatal("a drained table did not close")
	}
}

// TestFold folds a table into a Shadow and gives it to the next one as
// its floor: a key that was at its limit stays denied, for every
// algorithm, and the floor drains with the key's state.
func TestFold(t *testing.T) {
	for _, ps := range policies {
		p := algo.MustParsePolicy(ps)
		b := NewBudget(1 << 30)
		tb := New(p, 1<<10, 4, b)
		for {
			if d, _ := tb.Decide("k", 0, 1); !d.Allowed {
				break
			}
		}
		if _, ok := tb.Fold(0); ok {
			t.Fatalf("%s: a table of one key folded with a maximum of none", ps)
		}
		f, ok := tb.Fold(1)
		if !ok || b.Held() != 0 {
			t.Fatalf("%s: Fold: %v, %d bytes held after", ps, ok, b.Held())
		}
		next := New(p, 1<<10, 4, b)
		next.SetFloor(f)
		if d, _ := next.Decide("k", 1, 1); d.Allowed {
			t.Fatalf("%s: a key at its limit was admitted after its table folded", ps)
		}
		if next.Close() {
			t.Fatalf("%s: a table whose floor has not drained closed", ps)
		}
		later := 3 * int64(p.Period())
		if d, _ := next.Decide("other", later, 0); !d.Allowed || !next.Close() { // a peek moves its clock
			t.Fatalf("%s: the floor did not drain", ps)
		}
	}
}

// heapAlloc returns the bytes of the heap's live objects after a
// collection (HeapAlloc: each object as its size class rounds it, unlike
// HeapInuse, which counts whole spans, freed objects and all, and so
// grows little when new objects fill the gaps the last test left).
func heapAlloc() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// TestBudgetTracksHeap fills tables with keys of several sizes, and
// sliding logs, and makes many tables of one key: the growth of the live
// heap after a collection is at most 5% above the Budget's count, and at
// most 20% below it (keys of 8 bytes count 16, what they take under the
// race detector); many tables of one key count a little more than they
// take (a Table counts its shards' smallest shadows before their first
// eviction allocates them).
func TestBudgetTracksHeap(t *testing.T) {
	for _, c := range []struct {
		size, keys int
		policy     string
	}{
		{8, 200_000, "fixed-window 2/1h"}, {32, 200_000, "token-bucket 2/1h"},
		{149, 100_000, "fixed-window 2/1h"}, {1012, 20_000, "fixed-window 2/1h"},
		{32, 100_000, "sliding-log 2/1h"},
	} {
		keys := make([]string, c.keys)
		for i := range keys {
			keys[i] = fmt.Sprintf("%0*d", c.size, i)
		}
		b := NewBudget(math.MaxInt64)
		base := heapAlloc()
		tb := New(algo.MustParsePolicy(c.policy), 1<<30, 64, b)
		for _, k := range keys {
			tb.Decide(k, 1, 1)
		}
		grew := heapAlloc() - base
		t.Logf("%s, %d keys of %d bytes: heap +%d, counted %d (%.3f)", c.policy, c.keys, c.size, grew, b.Held(), float64(grew)/float64(b.Held()))
		if grew > b.Held()+b.Held()/20 || grew < b.Held()-b.Held()/5 {
			t.Errorf("%s, keys of %d bytes: the heap grew by %d bytes, the Budget counts %d", c.policy, c.size, grew, b.Held())
		}
		runtime.KeepAlive(tb)
		runtime.KeepAlive(keys)
	}
	for _, c := range []struct{ tables, shards int }{{10_000, 1}, {1_000, 64}} {
		b := NewBudget(math.MaxInt64)
		base := heapAlloc()
		tables := make([]*Table, c.tables)
		for i := range tables {
			tables[i] = New(algo.MustParsePolicy(fmt.Sprintf("fixed-window %d/1s", i+1)), 1<<20, c.shards, b)
			tables[i].Decide("client", 1, 1)
		}
		grew := heapAlloc() - base
		runtime.KeepAlive(tables)
		t.Logf("%d tables of %d shards and one key: heap +%d, counted %d (%.3f)", c.tables, c.shards, grew, b.Held(), float64(grew)/float64(b.Held()))
		if grew > b.Held()+b.Held()/20 {
			t.Errorf("%d tables of %d shards: the heap grew by %d bytes, the Budget counts %d", c.tables, c.shards, grew, b.Held())
		}
	}
}

// TestBudgetConcurrent floods tables that share a small Budget from
// several goroutines while another watches the count: it never exceeds
// the budget, since every byte is taken before it is allocated.
func TestBudgetConcurrent(t *testing.T) {
	const budget = 64 << 10
	b := NewBudget(budget)
	var tables []*Table
	for _, ps := range policies {
		tables = append(tables, New(algo.MustParsePolicy(ps), 1<<20, 4, b))
	}
	if b.Held() > budget {
		t.Fatalf("the tables' fixed parts take %d bytes, more than the budget", b.Held())
	}
	var wg, watch sync.WaitGroup
	var stop atomic.Bool
	var most atomic.Int64
	watch.Add(1)
	go func() {
		defer watch.Done()
		for !stop.Load() {
			most.Store(max(most.Load(), b.Held()))
			runtime.Gosched()
		}
	}()
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for i := range 5_000 {
				tb := tables[rng.IntN(len(tables))]
				tb.Decide(fmt.Sprint(strings.Repeat("x", rng.IntN(300)), g, "-", i), int64(time.Hour)+int64(i), 1+rng.Int64N(3))
			}
		}()
	}
	wg.Wait()
	stop.Store(true)
	watch.Wait()
	t.Logf("at most %d bytes counted, budget %d", most.Load(), budget)
	if most.Load() > budget {
		t.Fatalf("%d bytes counted, budget %d", most.Load(), budget)
	}
}

// TestShed: shedding a few bytes from a table of short keys (held in their
// slots, so that evicting one frees nothing until the slots shrink) evicts
// only the keys that a smaller slot array cannot hold, and frees at least
// what was asked; the count stays exact.
func TestShed(t *testing.T) {
	b := NewBudget(math.MaxInt64)
	tb := New(algo.MustParsePolicy("token-bucket 2/1h"), 1<<20, 1, b)
	for i := range 10_000 {
		tb.Decide(fmt.Sprint("k", i), 1, 1)
	}
	before := tb.Stats().Keys
	const need = 4 << 10
	if freed := tb.Shed(need); freed < need {
		t.Fatalf("Shed(%d) freed %d bytes", need, freed)
	}
	st := tb.Stats()
	t.Logf("%d keys before, %+v after", before, st)
	if st.Keys < before*3/4 || uint64(before-st.Keys) != st.Evictions {
		t.Fatalf("Shed(%d) left %d of %d keys (stats %+v)", need, st.Keys, before, st)
	}
	if counted(tb) != b.Held() {
		t.Fatalf("the Budget counts %d bytes, the table holds %d", b.Held(), counted(tb))
	}
	if freed := tb.Shed(math.MaxInt64); tb.Stats().Keys != 0 || freed <= 0 || counted(tb) != b.Held() {
		t.Fatalf("Shed(all) freed %d, left %+v; counted %d, held %d", freed, tb.Stats(), counted(tb), b.Held())
	}
}
