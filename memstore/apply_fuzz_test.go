package memstore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/floodgate/floodgate/memstore"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/store"
)

// FuzzMemoryApply decodes the input into batches of ops (decide, schedule,
// refund, reset) over two tables and three keys, applies them with
// Store.Apply, and holds every result to a model built on package
// algo: each batch applied in order to copies of the states, kept only if
// no decide or schedule in it was denied.
func FuzzMemoryApply(f *testing.F) {
	f.Add([]byte("\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c"))
	f.Add([]byte("\x81\x00\x10\x42\x33\xc4\x05\x96\x07\xf8\x29\x0a\x0b\x0c\x33\x44"))
	f.Fuzz(func(t *testing.T, data []byte) {
		policies := []algo.Policy{algo.MustParsePolicy("token-bucket 3/1s burst=4"), algo.MustParsePolicy("sliding-log 3/1s")}
		mem := memstore.New(0)
		tables := make([]store.Table, len(policies))
		for i, p := range policies {
			tb, err := mem.Table(fmt.Sprint("t", i), p)
			if err != nil {
				t.Fatal(err)
			}
			tables[i] = tb
		}
		type mkey struct {
			table int
			key   string
		}
		model := map[mkey]*algo.State{}
		stamps := map[mkey]algo.Stamp{} // the latest admitted stamp per key, for refunds
		now := int64(1_000_000_000)
		for len(data) >= 3 {
			nops := 1 + int(data[0]%3)
			now += int64(data[0]>>2) * int64(20*time.Millisecond)
			data = data[1:]
			var ops []store.Op
			var keys []mkey
			for range nops {
				if len(data) < 2 {
					break
				}
				b, c := data[0], data[1]
				data = data[2:]
				k := mkey{int(b % 2), fmt.Sprint("k", (b>>1)%3)}
				op := store.Op{Table: tables[k.table], Key: k.key, Now: now, N: int64(c % 5)}
				switch (b >> 3) % 4 {
				case 0:
					op.Kind = store.OpDecide
				case 1:
					op.Kind = store.OpSchedule
					op.MaxWait = time.Duration(c>>3) * 50 * time.Millisecond
				case 2:
					op.Kind = store.OpRefund
					op.Stamp = stamps[k]
					op.N = min(op.N, policies[k.table].Burst())
				default:
					op.Kind = store.OpReset
				}
				ops = append(ops, op)
				keys = append(keys, k)
			}
			if len(ops) == 0 {
				break
			}
			// The model: copies of the states, in order.
			work := map[mkey]*algo.State{}
			get := func(k mkey) *algo.State {
				if s := work[k]; s != nil {
					return s
				}
				s := new(algo.State)
				if m := model[k]; m != nil {
					*s = m.Clone()
				}
				work[k] = s
				return s
			}
			want := make([]algo.Decision, len(ops))
			wantAt := make([]int64, len(ops))
			denied := false
			for i, op := range ops {
				p := policies[keys[i].table]
				s := get(keys[i])
				switch op.Kind {
				case store.OpDecide:
					want[i], _ = p.Decide(s, now, op.N)
				case store.OpSchedule:
					want[i], wantAt[i], _ = p.Schedule(s, now, op.N, int64(op.MaxWait))
				case store.OpRefund:
					if err := p.Refund(s, op.Stamp, now, op.N); err != nil {
						t.Fatal(err)
					}
				case store.OpReset:
					*s = algo.State{}
				}
				if (op.Kind == store.OpDecide || op.Kind == store.OpSchedule) && !want[i].Allowed {
					denied = true
				}
			}
			if err := mem.Apply(ctx, ops); err != nil {
				t.Fatalf("Apply: %v", err)
			}
			for i, op := range ops {
				if op.Kind != store.OpDecide && op.Kind != store.OpSchedule {
					continue
				}
				if op.Result.Decision != want[i] || (op.Kind == store.OpSchedule && want[i].Allowed && op.Result.At != wantAt[i]) {
					t.Fatalf("batch at %d, op %d (%+v on %v): store %+v at %d, model %+v at %d", now, i, op.Kind, keys[i], op.Result.Decision, op.Result.At, want[i], wantAt[i])
				}
			}
			if !denied {
				for k, s := range work {
					model[k] = s
				}
				for i, op := range ops {
					if (op.Kind == store.OpDecide || op.Kind == store.OpSchedule) && op.N > 0 {
						stamps[keys[i]] = op.Result.Stamp
					}
				}
			}
			// Every key's headroom must match the model after the batch.
			for ti, tb := range tables {
				for j := range 3 {
					k := mkey{ti, fmt.Sprint("k", j)}
					s := new(algo.State)
					if m := model[k]; m != nil {
						*s = m.Clone()
					}
					wantPeek, _ := policies[ti].Decide(s, now, 0)
					gotPeek, err := tb.Decide(ctx, k.key, now, 0)
					if err != nil || gotPeek != wantPeek {
						t.Fatalf("after the batch at %d (denied %v), %v: store %+v, model %+v", now, denied, k, gotPeek, wantPeek)
					}
				}
			}
		}
	})
}
