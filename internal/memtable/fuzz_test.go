package memtable

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"github.com/floodgate/floodgate/algo"
)

// FuzzTable decodes the input into events (key, time step, cost, and
// whether to use the locked Load/Store path) on a small bounded table with
// one shard, and holds it to a map of States: while no key is evicted,
// every decision must be identical, and the bound must always hold.
func FuzzTable(f *testing.F) {
	f.Add(uint8(0), []byte("\x00\x01\x02\x03\x10\x20\x30\x40"))
	f.Add(uint8(2), []byte("\xff\xfe\x00\x00\x01\x01\x80\x7f\x00\x03"))
	f.Add(uint8(4), make([]byte, 64))
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		p, err := algo.ParsePolicy(policies[int(which)%len(policies)])
		if err != nil {
			t.Fatal(err)
		}
		const bound = 12
		tb := New(p, bound, 1, NewBudget(math.MaxInt64))
		ref := map[string]*algo.State{}
		now := int64(0)
		for len(data) >= 4 {
			key := fmt.Sprint("k", data[0]%16)
			step := int64(binary.LittleEndian.Uint16(data[1:3])) * int64(p.Period()) / 4096
			n := int64(data[3] % 8)
			locked := data[3]&0x80 != 0
			data = data[4:]
			now += step
			var got algo.Decision
			var gerr error
			if locked {
				h := tb.Hash(key)
				tb.Lock(tb.Shard(h))
				s, _ := tb.Load(h, key, now)
				got, gerr = p.Decide(&s, now, n)
				tb.Store(h, key, s, now)
				tb.Unlock(tb.Shard(h))
			} else {
				got, gerr = tb.Decide(key, now, n)
			}
			s := ref[key]
			if s == nil {
				s = new(algo.State)
				ref[key] = s
			}
			want, werr := p.Decide(s, now, n)
			st := tb.Stats()
			if st.Keys > bound {
				t.Fatalf("%d keys held, bound %d", st.Keys, bound)
			}
			if st.Evictions == 0 && (got != want || (gerr == nil) != (werr == nil)) {
				t.Fatalf("%v: %s at %d n %d: table %+v %v, map %+v %v", p, key, now, n, got, gerr, want, werr)
			}
			if st.Evictions > 0 {
				return // state was legitimately lost; the bound is all that is left to check
			}
		}
	})
}
