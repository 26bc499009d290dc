package memtable

import (
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"
)

// The tests of the lock-free path's invariants, one per item of the list
// in fast.go, each on a state built by hand: no goroutines, no timing.

// fastTable returns a Table of one shard for a policy decideFast decides.
func fastTable(t *testing.T, policy string) (*Table, *shard) {
	t.Helper()
	tb := New(algo.MustParsePolicy(policy), 1<<20, 1, NewBudget(math.MaxInt64))
	if !tb.fast {
		t.Fatalf("%s: not a fast table", policy)
	}
	return tb, &tb.shards[0]
}

// slotOf returns the index of key's slot in sh, failing if it is missing.
func slotOf(t *testing.T, tb *Table, sh *shard, key string) int {
	t.Helper()
	i, ok := sh.find(tb.Hash(key), key)
	if !ok {
		t.Fatalf("%q is not held", key)
	}
	return i
}

// fast calls decideFast on key, as Decide does.
func fast(tb *Table, sh *shard, key string, now, n int64) (algo.Decision, bool) {
	return tb.decideFast(sh, tb.Hash(key), key, now, n)
}

func TestFastInvariant1OnlyWhatDecideTATDecides(t *testing.T) {
	tb, sh := fastTable(t, "token-bucket 10/1s burst=5")
	long := "a-key-of-12b"
	for _, k := range []string{"k", long} {
		if d, _ := tb.Decide(k, 0, 1); !d.Allowed {
			t.Fatalf("%q: first event denied", k)
		}
	}
	if _, ok := fast(tb, sh, "k", 0, 1); !ok {
		t.Fatal("an inline key's event of cost 1 went to the lock")
	}
	for _, c := range []struct {
		key  string
		cost int64
	}{{long, 1}, {"k", 0}, {"k", 6}, {"missing", 1}} {
		w := sh.slots[slotOf(t, tb, sh, "k")].word
		if _, ok := fast(tb, sh, c.key, 0, c.cost); ok {
			t.Errorf("%q cost %d decided without the lock", c.key, c.cost)
		}
		if sh.slots[slotOf(t, tb, sh, "k")].word != w {
			t.Errorf("%q cost %d changed a word without deciding", c.key, c.cost)
		}
	}
	slow := New(algo.MustParsePolicy("token-bucket 3/1s"), 1<<20, 1, NewBudget(math.MaxInt64))
	slow.Decide("k", 0, 1)
	if slow.fast || slow.shards[0].tab.Load() != nil {
		t.Error("a policy whose T is not whole nanoseconds has a lock-free path")
	}
}

func TestFastInvariant2HeldWordGoesToLock(t *testing.T) {
	tb, sh := fastTable(t, "token-bucket 10/1s burst=5")
	tb.Decide("k", 0, 1)
	i := slotOf(t, tb, sh, "k")
	c := sh.hold(i)
	w := sh.slots[i].word
	if _, ok := fast(tb, sh, "k", 0, 1); ok || sh.slots[i].word != w {
		t.Fatal("decideFast decided or wrote on a held word")
	}
	sh.setCell(i, c)
	if _, ok := fast(tb, sh, "k", 0, 1); !ok {
		t.Fatal("decideFast still went to the lock after setCell released the word")
	}
	tb.Decide("drained", 0, 1)
	j := slotOf(t, tb, sh, "drained")
	tb.dropDrained(sh, j, int64(time.Hour))
	if sh.slots[j].word >= 0 {
		t.Fatal("dropDrained removed a key without holding its word")
	}
}

func TestFastInvariant3ClearBitMeansWholeState(t *testing.T) {
	tb, sh := fastTable(t, "token-bucket 10/1s burst=5")
	tb.Decide("k", 0, 1)
	i := slotOf(t, tb, sh, "k")
	sh.hold(i)
	sh.setCell(i, algo.MakeCell(int64(time.Second), 1, 0)) // a fraction
	if sh.slots[i].word >= 0 {
		t.Fatal("setCell left the held bit clear on a state with a fraction")
	}
	tb.hold(true)
	tb.hold(false)
	if sh.slots[i].word >= 0 {
		t.Fatal("Table.hold(false) cleared the held bit of a state with a fraction")
	}
	if _, ok := fast(tb, sh, "k", 0, 1); ok {
		t.Fatal("decideFast decided on a state with a fraction")
	}
}

func TestFastInvariant4SlotNamesOneKey(t *testing.T) {
	tb, sh := fastTable(t, "token-bucket 10/1s burst=5")
	tb.Decide("gone", 0, 1)
	i := slotOf(t, tb, sh, "gone")
	tb.dropDrained(sh, i, int64(time.Hour))
	if sh.slots[i].k1 != deadWord {
		t.Fatalf("a removed key left k1 %#x, want the tombstone %#x", sh.slots[i].k1, deadWord)
	}
	var other string // a key whose home is the tombstone
	for n := 0; other == ""; n++ {
		if k := fmt.Sprint(n); home(sh.local(tb.Hash(k)), len(sh.slots)) == i {
			other = k
		}
	}
	tb.Decide(other, int64(time.Hour), 1)
	if j := slotOf(t, tb, sh, other); j == i || sh.slots[i].k1 != deadWord {
		t.Fatalf("%q took the tombstone of a removed key (slot %d)", other, j)
	}
	if _, ok := fast(tb, sh, "gone", int64(time.Hour), 1); ok {
		t.Fatal("decideFast found a removed key")
	}
}

func TestFastInvariant5KeyPublishedK1Last(t *testing.T) {
	tb, sh := fastTable(t, "token-bucket 10/1s burst=5")
	tb.Decide("other", 0, 1) // publishes an array
	h := tb.Hash("k")
	i, found := sh.find(h, "k")
	if found {
		t.Fatal("k held before it was decided")
	}
	w0, w1 := keyWords(h, "k")
	atomic.StoreUint64(&sh.slots[i].k0, w0) // half published: k1 still empty
	if _, ok := fast(tb, sh, "k", 0, 1); ok {
		t.Fatal("decideFast matched a key whose k1 was not published")
	}
	atomic.StoreUint32(&sh.slots[i].k1, w1)
	if _, ok := fast(tb, sh, "k", 0, 1); !ok {
		t.Fatal("decideFast missed a key once its k1 was published")
	}
}

func TestFastInvariant6ReplacedArrayHeld(t *testing.T) {
	tb, sh := fastTable(t, "token-bucket 10/1s burst=5")
	for k := range 5 {
		tb.Decide(fmt.Sprint(k), 0, 1)
	}
	old := *sh.tab.Load()
	tb.resize(sh, len(sh.slots)*2)
	for i := range old {
		if old[i].live() && old[i].word >= 0 {
			t.Fatalf("resize left old slot %d's word clear", i)
		}
	}
	if &(*sh.tab.Load())[0] == &old[0] {
		t.Fatal("resize did not publish the new array")
	}
	if _, ok := fast(tb, sh, "3", 0, 1); !ok {
		t.Fatal("decideFast missed a key in the new array")
	}
	dr, dsh := fastTable(t, "token-bucket 10/1s burst=5")
	dr.Decide("k", 0, 1)
	dr.Decide("peek", int64(time.Hour), 0) // last = 1h, where k has drained
	if !dr.Close() {
		t.Fatal("Close kept a table whose keys had drained")
	}
	if dsh.tab.Load() != nil {
		t.Fatal("a freed shard still publishes an array")
	}
	if _, err := dr.Decide("k", int64(time.Hour), 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("Decide on a freed table: %v, want ErrClosed", err)
	}
}

func TestFastInvariant7DenialWritesNothing(t *testing.T) {
	tb, sh := fastTable(t, "token-bucket 10/1s burst=2")
	tb.Decide("k", 0, 2)
	i := slotOf(t, tb, sh, "k")
	w := atomic.LoadInt64(&sh.slots[i].word)
	d, ok := fast(tb, sh, "k", 0, 1)
	if !ok || d.Allowed {
		t.Fatalf("a full key's event: allowed %v, lock-free %v; want a lock-free denial", d.Allowed, ok)
	}
	if atomic.LoadInt64(&sh.slots[i].word) != w {
		t.Fatal("a denial wrote the slot's word")
	}
}

func TestFastInvariant8LastUnmoved(t *testing.T) {
	tb, sh := fastTable(t, "token-bucket 10/1s burst=5")
	tb.Decide("k", int64(time.Second), 1) // under the lock: a new key
	if _, ok := fast(tb, sh, "k", 3*int64(time.Second), 1); !ok {
		t.Fatal("the event went to the lock")
	}
	if tb.Decide("k", 4*int64(time.Second), 1); tb.Last() != int64(time.Second) {
		t.Fatalf("Last = %v after decisions without the lock, want 1s", time.Duration(tb.Last()))
	}
}
