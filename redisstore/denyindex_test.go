package redisstore

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/floodgate/floodgate/algo"
)

// TestIndexCheck: random inserts, removals, evictions and rebuilds keep
// the index consistent (invariant 7, index.check) and in step with a map
// of what it should hold, through growing and shrinking.
func TestIndexCheck(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 27))
	x := newIndex()
	model := map[string]*entry{}
	for step := range 10_000 {
		key := fmt.Sprint("k", rng.IntN(600))
		switch e := model[key]; {
		case step%997 == 0:
			x.rebuild(func(e *entry) bool {
				if len(e.key)%2 == 0 {
					delete(model, e.key)
					return true
				}
				return false
			})
		case rng.IntN(50) == 0 && x.n > 0:
			delete(model, x.evict().key)
		case e == nil && rng.IntN(3) > 0:
			e = &entry{key: key}
			x.insert(e)
			model[key] = e
		case e != nil:
			x.remove(e)
			delete(model, key)
		}
		if err := x.check(); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if x.n != len(model) {
			t.Fatalf("step %d: %d entries, want %d", step, x.n, len(model))
		}
		if got := x.get([]byte(key)); got != model[key] {
			t.Fatalf("step %d: get(%q) = %p, want %p", step, key, got, model[key])
		}
	}
}

// TestIndexRemoved: once remove returns, no lookup finds the entry, and
// every other entry of its run is still found where its probe looks; an
// array that a rebuild replaced holds no entry (invariant 6).
func TestIndexRemoved(t *testing.T) {
	x := newIndex()
	var es []*entry
	for i := range minSlots / 2 { // a full array: runs that wrap
		e := &entry{key: fmt.Sprint("k", i)}
		x.insert(e)
		es = append(es, e)
	}
	old := x.slots.Load()
	x.insert(&entry{key: "grows"})
	for i := range old.s {
		if e := old.s[i].Load(); e != nil {
			t.Fatalf("the array a rebuild replaced holds %q in slot %d", e.key, i)
		}
	}
	x.remove(x.find("grows"))
	for i, e := range es {
		x.remove(e)
		if got := x.get([]byte(e.key)); got != nil {
			t.Fatalf("%q found after its removal", e.key)
		}
		for _, f := range es[i+1:] {
			if got := x.get([]byte(f.key)); got != f {
				t.Fatalf("after removing %q, %q is not found", e.key, f.key)
			}
		}
		if err := x.check(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestIndexConcurrent: lookups running beside a writer never find an
// entry that was removed before they began (invariant 6), under -race:
// each k key is removed at most once, and never put back.
func TestIndexConcurrent(t *testing.T) {
	x := newIndex()
	const keys = 64
	var removed [keys]atomic.Bool
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				k := i % keys
				gone := removed[k].Load()
				if e := x.get(fmt.Appendf(nil, "k%d", k)); gone && e != nil {
					t.Errorf("k%d found after its removal", k)
					return
				}
			}
		})
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for k := range keys {
		x.insert(&entry{key: fmt.Sprint("k", k)})
	}
	for round := range 2000 {
		k := rng.IntN(keys)
		if round%2 == 0 {
			// Others come and go: runs shift, arrays grow and shrink.
			for i := range rng.IntN(40) {
				if e := x.find(fmt.Sprint("o", i)); e != nil {
					x.remove(e)
				} else {
					x.insert(&entry{key: fmt.Sprint("o", i)})
				}
			}
		}
		if e := x.find(fmt.Sprint("k", k)); e != nil && !removed[k].Load() {
			x.remove(e)
			removed[k].Store(true)
		}
	}
	stop.Store(true)
	wg.Wait()
}

// TestDenyCacheEntriesImmutable: keep fills a key by putting a new entry
// in its pending one's place, never writing the pending entry, which a
// lock-free decision may be reading (invariant 5).
func TestDenyCacheEntriesImmutable(t *testing.T) {
	c := newDenyCache(nil, 1<<20)
	tb := &table{policy: algo.MustParsePolicy("token-bucket 1/1s")}
	pending := &entry{key: "k", t: tb, size: entrySize("k", 0)}
	c.mu.Lock()
	c.add(pending)
	c.mu.Unlock()
	before := *pending
	var st algo.State
	if _, err := tb.policy.Decide(&st, 1e9, 1); err != nil {
		t.Fatal(err)
	}
	c.keep("k", pending, st, 5, 1<<40)
	if *pending != before {
		t.Errorf("keep wrote the pending entry: %+v, was %+v", *pending, before)
	}
	if e := c.idx.get([]byte("k")); e == pending || e == nil || e.until != 1<<40 || e.offset != 5 {
		t.Errorf("after keep the key's entry is %+v, want a new one holding the state", e)
	}
}
