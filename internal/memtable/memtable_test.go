package memtable

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
	"unsafe"

	"github.com/floodgate/floodgate/algo"
)

var policies = []string{
	"token-bucket 3/1s burst=5", "leaky-bucket 7/2s", "token-bucket 4/1s burst=6", "sliding-log 4/1s",
	"sliding-window 5/1s", "fixed-window 3/500ms",
}

// TestDifferential runs random traces over many keys through a Table with
// few shards (long probe runs, many removals) and through a plain map of
// States: every decision must be the same, since dropping drained keys
// and backward-shift deletion must change nothing.
func TestDifferential(t *testing.T) {
	for _, ps := range policies {
		p, err := algo.ParsePolicy(ps)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(ps, func(t *testing.T) {
			tb := New(p, 1<<20, 2, NewBudget(math.MaxInt64))
			ref := map[string]*algo.State{}
			rng := rand.New(rand.NewPCG(1, 2))
			now := int64(time.Hour)
			for i := range 40_000 {
				switch rng.IntN(4) {
				case 0:
					now += rng.Int64N(int64(p.Period()) / 4)
				case 1:
					now += rng.Int64N(3 * int64(p.Period())) // let many keys drain
				}
				key := fmt.Sprint("k", rng.IntN(700))
				n := rng.Int64N(4)
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
			st := tb.Stats()
			if st.Drained == 0 || st.Evictions != 0 {
				t.Fatalf("stats %+v: want drained keys dropped and no evictions", st)
			}
		})
	}
}

// TestLoadStore checks the locked access path against Decide.
func TestLoadStore(t *testing.T) {
	for _, ps := range policies {
		p, _ := algo.ParsePolicy(ps)
		tb := New(p, 1<<20, 4, NewBudget(math.MaxInt64))
		ref := map[string]*algo.State{}
		rng := rand.New(rand.NewPCG(3, 4))
		now := int64(0)
		for i := range 20_000 {
			now += rng.Int64N(int64(p.Period()) / 3)
			key := fmt.Sprint("k", rng.IntN(50))
			h := tb.Hash(key)
			sh := tb.Shard(h)
			tb.Lock(sh)
			s, _ := tb.Load(h, key, now)
			got, _ := p.Decide(&s, now, 1)
			tb.Store(h, key, s, now)
			tb.Unlock(sh)
			r := ref[key]
			if r == nil {
				r = new(algo.State)
				ref[key] = r
			}
			if want, _ := p.Decide(r, now, 1); got != want {
				t.Fatalf("%s event %d: Load/Store path %+v, want %+v", ps, i, got, want)
			}
		}
	}
}

// TestBound sends 200,000 distinct keys, none of which drains, to a
// table bounded to 4,096: it never holds more, and counts each eviction.
// Once evicted keys fill the shadow, a new key starts from their state:
// most are denied, which is the price of never admitting a returning key.
func TestBound(t *testing.T) {
	for _, ps := range []string{"token-bucket 1/1h", "sliding-log 1/1h"} {
		p, _ := algo.ParsePolicy(ps)
		const max, keys = 4096, 200_000
		tb := New(p, max, 64, NewBudget(math.MaxInt64))
		if len(tb.shards) != 4 {
			t.Fatalf("%d shards for %d keys, want 4 (at least %d keys each)", len(tb.shards), max, minShardKeys)
		}
		admitted := 0
		for i := range keys {
			if d, _ := tb.Decide(fmt.Sprint("attacker-", i), int64(i), 1); d.Allowed {
				admitted++
			}
			if i%1000 == 0 {
				if n := tb.Stats().Keys; n > max {
					t.Fatalf("%s: %d keys held, bound %d", ps, n, max)
				}
			}
		}
		st := tb.Stats()
		if st.Keys > max || st.Keys < max*9/10 || uint64(st.Keys)+st.Evictions != uint64(admitted) {
			t.Fatalf("%s: stats %+v after %d keys, bound %d", ps, st, keys, max)
		}
		for i := range tb.shards {
			if n := len(tb.shards[i].slots); n > 2*1024*8/7+minSlots {
				t.Fatalf("%s: shard %d has %d slots for at most 1024 keys", ps, i, n)
			}
		}
	}
}

// TestDrainedHoldNoMemory fills a table, lets every key drain, then sends
// a few new keys: the drained ones are dropped and the shards shrink.
func TestDrainedHoldNoMemory(t *testing.T) {
	p, _ := algo.ParsePolicy("token-bucket 10/1s")
	tb := New(p, 1<<20, 4, NewBudget(math.MaxInt64))
	for i := range 100_000 {
		tb.Decide(fmt.Sprint("k", i), 0, 1)
	}
	slots := func() (n int) {
		for i := range tb.shards {
			n += len(tb.shards[i].slots)
		}
		return n
	}
	if slots() < 100_000 {
		t.Fatalf("only %d slots for 100,000 keys", slots())
	}
	later := int64(time.Second)
	for i := range 40_000 { // enough inserts to reach every shard's growth point
		tb.Decide(fmt.Sprint("new", i), later, 1)
	}
	st := tb.Stats()
	if st.Keys != 40_000 || st.Drained != 100_000 || st.Evictions != 0 {
		t.Fatalf("stats %+v, want 40,000 keys, 100,000 drained, no evictions", st)
	}
	if n := slots(); n > 2*40_000+4*minSlots {
		t.Fatalf("%d slots for 40,000 live keys", n)
	}
}

// TestEvictsSoonestDrained fills a shard with keys that drain soon and a
// few that drain late; evictions must take the soon ones.
func TestEvictsSoonestDrained(t *testing.T) {
	p, _ := algo.ParsePolicy("leaky-bucket 1/1s capacity=1000")
	tb := New(p, 1024, 1, NewBudget(math.MaxInt64))
	for i := range 1000 {
		tb.Decide(fmt.Sprint("soon", i), 0, 1) // drains at 1s
	}
	for i := range 24 {
		tb.Decide(fmt.Sprint("late", i), 0, 900) // drains at 900s
	}
	for i := range 500 {
		tb.Decide(fmt.Sprint("new", i), 1, 1)
	}
	survived := 0
	for i := range 24 {
		key := fmt.Sprint("late", i)
		h := tb.Hash(key)
		if _, ok := tb.Load(h, key, 1); ok {
			survived++
		}
	}
	if st := tb.Stats(); st.Evictions != 500 || st.Keys != 1024 {
		t.Fatalf("stats %+v, want 500 evictions and 1024 keys", st)
	}
	if survived < 22 {
		t.Fatalf("only %d of 24 late-draining keys survived 500 evictions among 1000 soon-draining ones", survived)
	}
}

func BenchmarkDecideOneKey(b *testing.B) {
	p, _ := algo.ParsePolicy("token-bucket 1000000000/1s")
	tb := New(p, 1<<20, 64, NewBudget(math.MaxInt64))
	b.ReportAllocs()
	now := int64(0)
	for b.Loop() {
		now++
		tb.Decide("user:12345", now, 1)
	}
}

// AppendEntries copies every live key of every shard, skipping drained
// ones, and the copies share nothing with the table.
func TestAppendEntries(t *testing.T) {
	for _, ps := range policies {
		t.Run(ps, func(t *testing.T) {
			p, err := algo.ParsePolicy(ps)
			if err != nil {
				t.Fatal(err)
			}
			tb := New(p, 1<<14, 4, NewBudget(math.MaxInt64))
			period := int64(p.Period())
			for i := range 3000 {
				if _, err := tb.Decide(fmt.Sprint("k", i), int64(i%2)*10*period, 1); err != nil {
					t.Fatal(err)
				}
			}
			// At 5 periods, the keys decided at 0 have drained and those
			// decided at 10 periods have not.
			var got []Entry
			for i := range tb.Shards() {
				got = tb.AppendEntries(got, i, 5*period)
			}
			if len(got) != 1500 {
				t.Fatalf("%d entries, want 1500", len(got))
			}
			seen := map[string]bool{}
			for _, e := range got {
				var n int
				if _, err := fmt.Sscanf(e.Key, "k%d", &n); err != nil || n%2 != 1 || seen[e.Key] {
					t.Fatalf("unexpected entry %q", e.Key)
				}
				seen[e.Key] = true
				h := tb.Hash(e.Key)
				tb.Lock(tb.Shard(h))
				s, ok := tb.Load(h, e.Key, 0)
				tb.Unlock(tb.Shard(h))
				a, _ := s.MarshalBinary()
				b, _ := e.State.MarshalBinary()
				if !ok || string(a) != string(b) {
					t.Fatalf("%q: entry %x, table %x", e.Key, b, a)
				}
			}
			// Deciding on a copy leaves the table alone.
			e := got[0]
			before, _ := e.State.MarshalBinary()
			if _, err := p.Decide(&e.State, 10*period, 1); err != nil {
				t.Fatal(err)
			}
			h := tb.Hash(e.Key)
			s, _ := tb.Load(h, e.Key, 0)
			if after, _ := s.MarshalBinary(); string(after) != string(before) {
				t.Errorf("deciding on a copy changed the table: %x, then %x", before, after)
			}
		})
	}
}

// TestLongKeysSharingHashBits decides on long keys of one length whose
// hashes share the bits their slots keep and their home slot, so that
// each lookup meets the other key's slot with the same words and must tell
// them apart by the bytes in the arena, then removes one (a peek of a
// drained key) and looks the other up across the hole.
func TestLongKeysSharingHashBits(t *testing.T) {
	p := algo.MustParsePolicy("token-bucket 2/1h")
	tb := New(p, 1<<20, 1, NewBudget(math.MaxInt64))
	seen := map[uint64]string{}
	var a, b string
	for i := 0; b == ""; i++ {
		k := fmt.Sprintf("a long key, number %08d", i)
		h := tb.Hash(k)
		id := h&0xffffff | uint64(home(tb.shards[0].local(h), minSlots))<<24
		if seen[id] != "" {
			a, b = seen[id], k
		}
		seen[id] = k
	}
	_, wa := keyWords(tb.Hash(a), a)
	if _, wb := keyWords(tb.Hash(b), b); wa != wb {
		t.Fatalf("the keys' words differ: %#x, %#x", wa, wb)
	}
	for i, c := range []struct {
		key     string
		now     int64
		allowed bool
	}{
		{a, 0, true}, {a, 0, true}, {a, 0, false}, {b, 0, true}, {b, 0, true}, {b, 0, false},
		{a, int64(time.Hour), true}, {b, int64(time.Hour), true},
	} {
		if d, err := tb.Decide(c.key, c.now, 1); err != nil || d.Allowed != c.allowed {
			t.Fatalf("event %d, %q at %d: %+v, %v; want allowed %v", i, c.key, c.now, d, err, c.allowed)
		}
	}
	if d, _ := tb.Decide(a, 2*int64(time.Hour), 0); d.Remaining != 2 || tb.Stats().Keys != 1 {
		t.Fatalf("a peek of drained %q: %+v, %+v; want 2 remaining, the key dropped", a, d, tb.Stats())
	}
	if s, ok := tb.Load(tb.Hash(b), b, int64(time.Hour)); !ok || p.ResetAt(&s) <= int64(time.Hour) {
		t.Fatalf("%q after %q was dropped: %+v, held %v", b, a, s, ok)
	}
}

// TestSlotBytes checks the size of a slot, which the memory store's bytes
// per key (in docs/benchmarks.md) follow.
func TestSlotBytes(t *testing.T) {
	if n := unsafe.Sizeof(slot{}); n != 24 {
		t.Fatalf("a slot takes %d bytes, want 24", n)
	}
}

// TestKeyWords checks the words of every inline key length against the
// layout the slot's doc gives (byte i of the key at bits 8i of k0, then of
// k1, 1+len in k1's top byte), and that keyOf gives the key back.
func TestKeyWords(t *testing.T) {
	var sh shard
	for n := 0; n <= inlineMax; n++ {
		for _, fill := range []byte{0x00, 0x5a, 0xff} {
			key := make([]byte, n)
			for i := range key {
				key[i] = fill ^ byte(i*37+n)
			}
			var b [12]byte
			copy(b[:], key)
			b[11] = byte(n + 1)
			w0, w1 := keyWords(0, string(key))
			if want0, want1 := binary.LittleEndian.Uint64(b[:8]), binary.LittleEndian.Uint32(b[8:]); w0 != want0 || w1 != want1 {
				t.Fatalf("key %x: words %#x %#x, want %#x %#x", key, w0, w1, want0, want1)
			}
			var buf [12]byte
			if got := sh.keyOf(&slot{k0: w0, k1: w1}, &buf); string(got) != string(key) {
				t.Fatalf("key %x: keyOf gives %x", key, got)
			}
		}
	}
	if _, w1 := keyWords(0xabcdef12, "a key longer than eleven bytes"); w1 != 0xffcdef12 || marker(w1) != longKey {
		t.Fatalf("a long key's k1 is %#x, want 0xffcdef12", w1)
	}
}
