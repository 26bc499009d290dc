package storetest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/floodgate/floodgate/memstore"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/store"
)

// DifferentialPolicies are the policies Differential draws from: every
// algorithm at the bounds of package algo, where a store that computes
// otherwise (Lua's doubles, say) would lose exactness: periods up to 366
// days (beyond 2^53 ns), limits up to 10^9, bursts that take years to
// drain, periods of a few nanoseconds.
var DifferentialPolicies = []string{
	"token-bucket 3/1s burst=5",
	"token-bucket 1000000000/1s",
	"token-bucket 7/8784h burst=1",
	"token-bucket 999999937/8760h burst=999999999",
	"leaky-bucket 3/1s capacity=1000000000",
	"leaky-bucket 1/1h capacity=20",
	"leaky-bucket 13/7ns capacity=2",
	"sliding-log 3/1s",
	"sliding-log 5/8784h",
	"sliding-log 4/3ns",
	"sliding-window 3/500ms",
	"sliding-window 1000000000/8784h",
	"sliding-window 1000000000/1s",
	"sliding-window 97/4380001ms",
	"sliding-window 3/7ns",
	"fixed-window 5/8784h",
	"fixed-window 1000000000/1s",
	"fixed-window 2/3ns",
}

// Traces returns n random traces of size bytes each for Differential,
// always the same for the same seeds: a fuzz target's seed corpus, or a
// test's many traces.
func Traces(seed1, seed2 uint64, n, size int) [][]byte {
	r := rand.New(rand.NewPCG(seed1, seed2))
	traces := make([][]byte, n)
	for i := range traces {
		traces[i] = make([]byte, size)
		for j := range traces[i] {
			traces[i][j] = byte(r.Uint32())
		}
	}
	return traces
}

// source draws numbers from a fuzzer's bytes, then zeros.
type source struct{ b []byte }

func (s *source) u64() uint64 {
	var v [8]byte
	n := copy(v[:], s.b)
	s.b = s.b[n:]
	return binary.LittleEndian.Uint64(v[:])
}

func (s *source) intn(n int64) int64 { return int64(s.u64() % uint64(n)) }

func (s *source) empty() bool { return len(s.b) == 0 }

// sentinels are the errors whose presence must agree between the stores.
var sentinels = []error{algo.ErrInvalidTime, algo.ErrInvalidCost, algo.ErrCostExceedsBurst}

// SameErrors reports whether two stores' errors for one operation agree:
// both nil, or both not, wrapping the same of ErrInvalidTime,
// ErrInvalidCost and ErrCostExceedsBurst (the rest of an error's text is
// the store's own).
func SameErrors(a, b error) bool {
	if (a == nil) != (b == nil) {
		return false
	}
	for _, e := range sentinels {
		if errors.Is(a, e) != errors.Is(b, e) {
			return false
		}
	}
	return true
}

// Differential replays a random trace drawn from data (a fuzzer's bytes,
// or random ones; past their end it draws zeros) through a new memory store
// and through st, in up to batches calls of Store.Apply of one to three
// operations each, a quarter of them through ApplyEach instead (decisions,
// schedules, refunds of earlier stamps, resets, costs up to past the
// burst, now and then a bad time or cost, but not in ApplyEach), on two
// tables of two policies and three keys, the time stepping forward by
// every size and sometimes back. It fails t at the first operation whose
// outcome differs: decision, instant, stamp, or error (by the sentinels
// ErrInvalidTime, ErrInvalidCost and ErrCostExceedsBurst); after each batch
// it also peeks at every key. st must decide at the operations' own
// times (for redisstore, WithCallerTime).
func Differential(t testing.TB, st store.Store, data []byte, batches int) {
	t.Helper()
	src := &source{data}
	ctx := context.Background()
	mem := memstore.New(0)
	pi := src.intn(int64(len(DifferentialPolicies)))
	p := algo.MustParsePolicy(DifferentialPolicies[pi])
	pol2 := algo.MustParsePolicy(DifferentialPolicies[(pi+1+src.intn(int64(len(DifferentialPolicies)-1)))%int64(len(DifferentialPolicies))])
	var tm, tf [2]store.Table
	for i, q := range []algo.Policy{p, pol2} {
		var err error
		if tm[i], err = mem.Table("diff", q); err != nil {
			t.Fatal(err)
		}
		if tf[i], err = st.Table("diff", q); err != nil {
			t.Fatal(err)
		}
	}
	pols := [2]algo.Policy{p, pol2}
	// A start anywhere in [0, MaxTime], often near either end.
	var now int64
	switch src.intn(4) {
	case 0:
		now = src.intn(1000)
	case 1:
		now = algo.MaxTime - src.intn(int64(400*24*time.Hour))
	default:
		now = src.intn(algo.MaxTime)
	}
	type slotKey struct {
		table int
		key   string
	}
	stamps := map[slotKey]algo.Stamp{}
	// Time may step back, but never to before the instant a key's state
	// drained: a store may drop a drained state (the memory store when it
	// next sees the key, a file store then or in a sweep), after which an
	// earlier time would find it gone in one store and present in the
	// other.
	resetAt := map[slotKey]int64{}
	hwm := now
	floor := func() int64 {
		f := int64(0)
		for _, r := range resetAt {
			if r <= hwm {
				f = max(f, r)
			}
		}
		return f
	}
	for b := 0; b < batches && !src.empty(); b++ {
		// Steps of every size, sometimes backwards.
		period := int64(pols[0].Period())
		switch src.intn(8) {
		case 0:
		case 1:
			now += src.intn(10)
		case 2:
			now += src.intn(period + 1)
		case 3:
			now += src.intn(3*period + 1)
		case 4:
			now -= src.intn(period + 1)
		case 5:
			now += src.intn(algo.MaxTime / 64)
		default:
			now += src.intn(period/int64(pols[0].Limit()) + 2)
		}
		now = min(max(now, floor()), algo.MaxTime)
		hwm = max(hwm, now)
		nops := 1 + int(src.intn(3))
		// A quarter of the batches go through ApplyEach, each op as if alone.
		each := src.intn(4) == 0
		var om, of []store.Op
		for range nops {
			ti := int(src.intn(2))
			k := slotKey{ti, fmt.Sprint("k", src.intn(3))}
			burst := pols[ti].Burst()
			var n int64
			switch src.intn(4) {
			case 0:
				n = src.intn(3)
			case 1:
				n = src.intn(burst + 2)
			case 2:
				n = burst - src.intn(min(burst, 3))
			default:
				n = 1
			}
			op := store.Op{Key: k.key, Now: now, N: n}
			switch src.intn(6) {
			case 0:
				op.Kind = store.OpSchedule
				op.MaxWait = time.Duration(src.intn(4 * int64(pols[ti].Period())))
				if src.intn(4) == 0 {
					op.MaxWait = time.Duration(1<<63 - 1)
				}
			case 1:
				op.Kind = store.OpRefund
				op.Stamp = stamps[k]
				op.N = min(n, burst)
			case 2:
				if src.intn(4) == 0 {
					op.Kind = store.OpReset
					break
				}
				fallthrough
			default:
				op.Kind = store.OpDecide
			}
			if src.intn(64) == 0 && !each { // bad input fails the whole batch
				if src.intn(2) == 0 {
					op.N = -1
				} else {
					op.Now = algo.MaxTime + 1
				}
			}
			a, c := op, op
			a.Table, c.Table = tm[ti], tf[ti]
			om, of = append(om, a), append(of, c)
		}
		if testing.Verbose() {
			for i := range om {
				t.Logf("batch %d op %d: kind %d table %d key %s now %d n %d maxwait %d stamp %+v", b, i, om[i].Kind, tableIndex(tm, om[i].Table), om[i].Key, om[i].Now, om[i].N, om[i].MaxWait, om[i].Stamp)
			}
		}
		apply := func(s store.Store, ops []store.Op) error { return s.Apply(ctx, ops) }
		if each {
			// Memory's ApplyEach is an Apply per op, the reference.
			apply = func(s store.Store, ops []store.Op) error { return s.ApplyEach(ctx, ops) }
		}
		errM := apply(mem, om)
		errF := apply(st, of)
		if !SameErrors(errM, errF) {
			t.Fatalf("batch %d: memory's error %v, the store's %v", b, errM, errF)
		}
		for i := range om {
			m, f := om[i], of[i]
			if errM != nil {
				break // the outputs of a failed batch mean nothing
			}
			if m.Result.Decision != f.Result.Decision || m.Result.At != f.Result.At || m.Result.Stamp != f.Result.Stamp || !SameErrors(m.Result.Err, f.Result.Err) {
				t.Fatalf("batch %d op %d (kind %d, %q n=%d at %d):\nmemory %+v at %d stamp %+v err %v\nstore  %+v at %d stamp %+v err %v",
					b, i, m.Kind, m.Key, m.N, m.Now, m.Result.Decision, m.Result.At, m.Result.Stamp, m.Result.Err, f.Result.Decision, f.Result.At, f.Result.Stamp, f.Result.Err)
			}
			if m.Result.Decision.Allowed && m.N > 0 && (m.Kind == store.OpDecide || m.Kind == store.OpSchedule) {
				stamps[slotKey{tableIndex(tm, m.Table), m.Key}] = m.Result.Stamp
			}
		}
		// Every key's headroom must agree after the batch.
		for ti := range 2 {
			for j := range 3 {
				key := fmt.Sprint("k", j)
				dm, _ := tm[ti].Decide(ctx, key, now, 0)
				df, err := tf[ti].Decide(ctx, key, now, 0)
				if err != nil || dm != df {
					t.Fatalf("after batch %d, peek %s/%s at %d: memory %+v, store %+v (%v)", b, pols[ti], key, now, dm, df, err)
				}
				if dm.ResetAfter > 0 {
					resetAt[slotKey{ti, key}] = now + int64(dm.ResetAfter)
				}
			}
		}
	}
}

func tableIndex(ts [2]store.Table, t store.Table) int {
	if ts[0] == t {
		return 0
	}
	return 1
}
