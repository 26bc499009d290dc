package memtable

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"
)

// TestFastExactTotals hammers a few keys of limit N, at one instant, from
// 8 goroutines deciding without the lock (decideFast), 4N/3 decisions on
// each key at the pace of a flood of new keys, while others take the
// locked paths on the same keys and shard: peeks, costs above the burst,
// Load and Store as memstore's Apply does, the flood, which grows and
// rebuilds the shard's slots under the hammered keys and drops drained
// ones (tombstones), and Close attempts, every 500 new keys, that hold
// and release every word. Each hot key must admit exactly N, no more (a
// lost compare-and-swap, or a state read before another path changed it)
// and no less.
func TestFastExactTotals(t *testing.T) {
	const limit, hot, workers, tries, floods = 3000, 4, 8, 2000, 10_000
	p := algo.MustParsePolicy(fmt.Sprintf("token-bucket %d/1h", limit))
	if _, _, ok := p.DecideTAT(0, 0, 1); !ok {
		t.Fatalf("%v: DecideTAT does not decide its events", p)
	}
	for round := range 2 {
		tb := New(p, 1<<20, 1, NewBudget(math.MaxInt64))
		now := int64(time.Hour) * int64(round+1)
		keys := make([]string, hot)
		for i := range keys {
			keys[i] = fmt.Sprint("hot", i)
		}
		var admitted [hot]atomic.Int64
		for k := range keys { // held before Close may run
			if d, _ := tb.Decide(keys[k], now, 1); d.Allowed {
				admitted[k].Add(1)
			}
		}
		var wg sync.WaitGroup
		var stop atomic.Bool
		var flooded atomic.Int64
		closes := make(chan struct{}, 1)
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range tries {
					for flooded.Load() < int64(i)*floods/tries { // keep pace with the flood
						runtime.Gosched()
					}
					k := (w + i) % hot
					d, err := tb.Decide(keys[k], now, 1)
					if err != nil {
						t.Error(err)
						return
					}
					if d.Allowed {
						admitted[k].Add(1)
					}
				}
			}()
		}
		var others sync.WaitGroup
		others.Add(3)
		go func() { // locked paths on the hot keys
			defer others.Done()
			for i := 0; !stop.Load(); i++ {
				key := keys[i%hot]
				switch i % 3 {
				case 0:
					tb.Decide(key, now, 0)
				case 1:
					tb.Decide(key, now, limit+1)
				case 2:
					h := tb.Hash(key)
					tb.Lock(tb.Shard(h))
					s, _ := tb.Load(h, key, now)
					runtime.Gosched() // let decideFast try the key meanwhile
					if d, _ := p.Decide(&s, now, 1); d.Allowed {
						admitted[i%hot].Add(1)
					}
					tb.Store(h, key, s, now)
					tb.Unlock(tb.Shard(h))
				}
			}
		}()
		go func() { // new keys, some drained at once: growth, sweeps, rebuilds
			defer others.Done()
			for i := 0; !stop.Load(); i++ {
				at := now
				if i%2 == 0 {
					at = now - 2*int64(time.Hour) // drained by now
				}
				tb.Decide(fmt.Sprint("new", i), at, 1)
				if flooded.Add(1)%500 == 0 {
					select {
					case closes <- struct{}{}:
					default:
					}
				}
			}
			close(closes)
		}()
		go func() { // Close never frees a table with live keys
			defer others.Done()
			for range closes {
				if tb.Close() {
					t.Error("Close freed a table with live keys")
					return
				}
			}
		}()
		wg.Wait()
		stop.Store(true)
		others.Wait()
		for k := range keys {
			if n := admitted[k].Load(); n != limit {
				t.Fatalf("round %d: %q admitted %d, want exactly %d", round, keys[k], n, limit)
			}
		}
	}
}

// TestFastCloseRace races Close, on a table whose one key has drained at
// the latest time of its locked ops, with a decideFast admission on that
// key at a later time: either the admission comes first and Close keeps
// the table, or Close frees it and the decision finds it closed; never an
// admission that Close then throws away.
func TestFastCloseRace(t *testing.T) {
	p := algo.MustParsePolicy("token-bucket 10/1s")
	for i := range 2000 {
		tb := New(p, 1<<20, 1, NewBudget(math.MaxInt64))
		tb.Decide("k", 0, 1)
		tb.Decide("other", int64(time.Second), 0) // a peek: the shard's last is 1s, where k has drained
		var d algo.Decision
		var err error
		done := make(chan struct{})
		go func() {
			d, err = tb.Decide("k", 2*int64(time.Second), 1)
			close(done)
		}()
		closed := tb.Close()
		<-done
		if closed && d.Allowed && err == nil {
			t.Fatalf("trial %d: Close freed the table after it admitted an event", i)
		}
	}
}
