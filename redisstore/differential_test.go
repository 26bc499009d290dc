package redisstore_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/memstore"
	"github.com/floodgate/floodgate/redisstore"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/storetest"
)

// FuzzDifferential runs traces drawn from the fuzzer's bytes through memory
// and Redis and demands identical outcomes.
func FuzzDifferential(f *testing.F) {
	c := testClient(f)
	for _, b := range storetest.Traces(1, 2, 8, 600) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		storetest.Differential(t, newStore(t, c, redisstore.WithCallerTime(), redisstore.WithMinTTL(time.Hour)), data, 40)
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
	for i, b := range storetest.Traces(7, 11, traces, 2000) {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			storetest.Differential(t, newStore(t, c, redisstore.WithCallerTime(), redisstore.WithMinTTL(time.Hour)), b, 60)
		})
	}
}

// TestDifferentialEachCluster carries out random ApplyEach batches on a
// Redis Cluster, whose ApplyEach sends each master's share of the ops
// through that master's calls, the masters at once, and on memory (the
// exact model), and demands the same outcome for every op: decisions of
// four policies on keys over every master, several ops on one key in a
// batch, costs up to past the burst, refunds of earlier admissions, and
// resets, the time stepping forward. (storetest.Differential's Apply of
// keys in several slots, a refund when one denies, leaves a reset done,
// which memory's all or nothing does not: it is for one Redis.)
func TestDifferentialEachCluster(t *testing.T) {
	c := redistest.SharedCluster(t).Client(t)
	st := newStore(t, c, redisstore.WithCallerTime(), redisstore.WithMinTTL(time.Hour), redisstore.WithMaxBatch(3))
	mem := memstore.New(0)
	var tst, tmem []store.Table
	for _, p := range []string{"token-bucket 10/1s burst=5", "fixed-window 6/1s", "sliding-window 8/1s", "sliding-log 4/1s"} {
		pol := algo.MustParsePolicy(p)
		tst = append(tst, must(st.Table("each "+p, pol))) // a name per policy: apart
		tmem = append(tmem, must(mem.Table("each "+p, pol)))
	}
	rng := rand.New(rand.NewPCG(17, 13))
	now := int64(1795305600) * 1e9
	var stamps []store.Op // admissions of both stores, to refund: the store's, then memory's
	for b := range 300 {
		now += rng.Int64N(int64(300 * time.Millisecond))
		n := 1 + rng.IntN(12)
		ops, opsMem := make([]store.Op, n), make([]store.Op, n)
		for i := range ops {
			tb, key := rng.IntN(len(tst)), fmt.Sprintf("k%d", rng.IntN(9))
			ops[i] = store.Op{Kind: store.OpDecide, Table: tst[tb], Key: key, Now: now, N: rng.Int64N(7)}
			switch r := rng.IntN(20); {
			case r == 0:
				ops[i].Kind, ops[i].N = store.OpReset, 0
			case r < 4 && len(stamps) >= 2:
				j := 2 * rng.IntN(len(stamps)/2)
				ops[i], _ = stamps[j].Refund(now)
				opsMem[i], _ = stamps[j+1].Refund(now)
				stamps = slices.Delete(stamps, j, j+2)
				continue
			}
			opsMem[i] = ops[i]
			opsMem[i].Table = tmem[tb]
		}
		if err := st.ApplyEach(ctx, ops); err != nil {
			t.Fatalf("batch %d: ApplyEach on the Cluster: %v", b, err)
		}
		if err := mem.ApplyEach(ctx, opsMem); err != nil {
			t.Fatalf("batch %d: ApplyEach on memory: %v", b, err)
		}
		for i := range ops {
			got, want := ops[i].Result, opsMem[i].Result
			if got.Decision != want.Decision || got.At != want.At || !storetest.SameErrors(got.Err, want.Err) {
				t.Fatalf("batch %d, op %d (%v %q n=%d): Cluster %+v, memory %+v", b, i, ops[i].Kind, ops[i].Key, ops[i].N, got, want)
			}
			if _, ok := ops[i].Refund(now); ok {
				stamps = append(stamps, ops[i], opsMem[i])
			}
		}
	}
}

// must returns v, panicking on err.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
