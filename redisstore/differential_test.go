package redisstore_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/redisstore"
)

// diffPolicies span the bounds of package algo, where Lua's doubles would
// lose exactness without the script's big integers: periods up to 366 days
// (beyond 2^53 ns), limits up to 10^9, bursts that take years to drain.
var diffPolicies = []string{
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
	"sliding-window 97/4380001ms",
	"sliding-window 3/7ns",
	"fixed-window 5/8784h",
	"fixed-window 1000000000/1s",
	"fixed-window 2/3ns",
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

// runDifferential replays the batches drawn from src through a memory store
// and a Redis store (the caller's time) and fails at the first op whose
// outcome differs: decision, error, instant, stamp.
func runDifferential(t *testing.T, redis floodgate.Store, src *source, batches int) {
	t.Helper()
	ctx := context.Background()
	mem := floodgate.NewMemoryStore(0)
	pi := src.intn(int64(len(diffPolicies)))
	p := floodgate.MustParsePolicy(diffPolicies[pi])
	pol2 := floodgate.MustParsePolicy(diffPolicies[(pi+1+src.intn(int64(len(diffPolicies)-1)))%int64(len(diffPolicies))])
	var tm, tr [2]floodgate.Table
	for i, q := range []floodgate.Policy{p, pol2} {
		var err error
		if tm[i], err = mem.Table("diff", q); err != nil {
			t.Fatal(err)
		}
		if tr[i], err = redis.Table("diff", q); err != nil {
			t.Fatal(err)
		}
	}
	pols := [2]floodgate.Policy{p, pol2}
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
	// drained: a store may drop a drained state (the memory store drops it
	// when it next sees the key), after which an earlier time would find
	// it gone in one store and present in another.
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
		var om, or []floodgate.Op
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
			op := floodgate.Op{Key: k.key, Now: now, N: n}
			switch src.intn(6) {
			case 0:
				op.Kind = floodgate.OpSchedule
				op.MaxWait = time.Duration(src.intn(4 * int64(pols[ti].Period())))
				if src.intn(4) == 0 {
					op.MaxWait = time.Duration(1<<63 - 1)
				}
			case 1:
				op.Kind = floodgate.OpRefund
				op.Stamp = stamps[k]
				op.N = min(n, burst)
			case 2:
				if src.intn(4) == 0 {
					op.Kind = floodgate.OpReset
					break
				}
				fallthrough
			default:
				op.Kind = floodgate.OpDecide
			}
			a, c := op, op
			a.Table, c.Table = tm[ti], tr[ti]
			om, or = append(om, a), append(or, c)
		}
		if testing.Verbose() {
			for i := range om {
				t.Logf("batch %d op %d: kind %d table %d key %s now %d n %d maxwait %d stamp %+v", b, i, om[i].Kind, tableIndex(tm, om[i].Table), om[i].Key, om[i].Now, om[i].N, om[i].MaxWait, om[i].Stamp)
			}
		}
		errM := mem.Apply(ctx, om)
		errR := redis.Apply(ctx, or)
		if (errM == nil) != (errR == nil) {
			t.Fatalf("batch %d: memory's error %v, Redis's %v", b, errM, errR)
		}
		for i := range om {
			m, r := om[i], or[i]
			if m.Decision != r.Decision || m.At != r.At || m.Stamp != r.Stamp ||
				errors.Is(m.Err, floodgate.ErrCostExceedsBurst) != errors.Is(r.Err, floodgate.ErrCostExceedsBurst) {
				t.Fatalf("batch %d op %d (kind %d, %q n=%d at %d on %v):\nmemory %+v at %d stamp %+v err %v\nRedis  %+v at %d stamp %+v err %v",
					b, i, m.Kind, m.Key, m.N, m.Now, m.Table.(interface{}), m.Decision, m.At, m.Stamp, m.Err, r.Decision, r.At, r.Stamp, r.Err)
			}
			if m.Decision.Allowed && m.N > 0 && (m.Kind == floodgate.OpDecide || m.Kind == floodgate.OpSchedule) {
				stamps[slotKey{tableIndex(tm, m.Table), m.Key}] = m.Stamp
			}
		}
		// Every key's headroom must agree after the batch.
		for ti := range 2 {
			for j := range 3 {
				key := fmt.Sprint("k", j)
				dm, _ := tm[ti].Decide(ctx, key, now, 0)
				dr, err := tr[ti].Decide(ctx, key, now, 0)
				if err != nil || dm != dr {
					t.Fatalf("after batch %d, peek %s/%s at %d: memory %+v, Redis %+v (%v)", b, pols[ti], key, now, dm, dr, err)
				}
				if dm.ResetAfter > 0 {
					resetAt[slotKey{ti, key}] = now + int64(dm.ResetAfter)
				}
			}
		}
	}
}

func tableIndex(ts [2]floodgate.Table, t floodgate.Table) int {
	if ts[0] == t {
		return 0
	}
	return 1
}

// FuzzDifferential runs traces drawn from the fuzzer's bytes through memory
// and Redis and demands identical outcomes.
func FuzzDifferential(f *testing.F) {
	c := testClient(f)
	r := rand.New(rand.NewPCG(1, 2))
	for range 8 {
		b := make([]byte, 600)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		runDifferential(t, newStore(t, c, redisstore.WithCallerTime(), redisstore.WithMinTTL(time.Hour)), &source{data}, 40)
	})
}

// TestDifferential runs many random traces, each over every policy pair
// it draws, through memory and Redis.
func TestDifferential(t *testing.T) {
	c := testClient(t)
	traces := 400
	if testing.Short() {
		traces = 50
	}
	r := rand.New(rand.NewPCG(7, 11))
	for i := range traces {
		b := make([]byte, 2000)
		for j := range b {
			b[j] = byte(r.Uint32())
		}
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			runDifferential(t, newStore(t, c, redisstore.WithCallerTime(), redisstore.WithMinTTL(time.Hour)), &source{b}, 60)
		})
	}
}
