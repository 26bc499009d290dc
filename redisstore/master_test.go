package redisstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/memstore"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/storetest"
	"github.com/redis/go-redis/v9"
)

// masterKeys returns, for each master of cc, the keys among "k0", "k1",
// ... and "{t0}:a", "{t0}:b", "{t1}:a", ... (pairs in one slot) that its
// slots hold in t, as go-redis knows the layout: n plain keys and n pairs
// each.
func masterKeys(t *testing.T, cc *redis.ClusterClient, tb *table, n int) map[*redis.Client][]string {
	t.Helper()
	var masters atomic.Int64
	if err := cc.ForEachMaster(context.Background(), func(context.Context, *redis.Client) error { masters.Add(1); return nil }); err != nil {
		t.Fatal(err)
	}
	keys := map[*redis.Client][]string{}
	add := func(k string) int {
		m, err := cc.MasterForKey(context.Background(), tb.redisKey(k))
		if err != nil {
			t.Fatal(err)
		}
		keys[m] = append(keys[m], k)
		return len(keys[m])
	}
	for i, full := 0, 0; full < int(masters.Load()); i++ {
		if add(fmt.Sprintf("k%d", i)) == n {
			full++
		}
	}
	pairs := map[*redis.Client]int{}
	for i, full := 0, 0; full < int(masters.Load()); i++ {
		k := fmt.Sprintf("{t%d}:", i)
		m, _ := cc.MasterForKey(context.Background(), tb.redisKey(k))
		if pairs[m] == n {
			continue
		}
		keys[m] = append(keys[m], k+"a", k+"b")
		if pairs[m]++; pairs[m] == n {
			full++
		}
	}
	return keys
}

// fcalls returns the FCALLs that m has carried out, and those that failed
// (INFO commandstats).
func fcalls(t *testing.T, m *redis.Client) (calls, failed int) {
	t.Helper()
	info, err := m.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	_, line, _ := strings.Cut(info, "cmdstat_fcall:")
	line, _, _ = strings.Cut(line, "\r\n")
	for _, f := range strings.Split(line, ",") {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "calls":
			calls, _ = strconv.Atoi(v)
		case "failed_calls":
			failed, _ = strconv.Atoi(v)
		}
	}
	return calls, failed
}

// batchGen draws random calls on keys of one master, for a store's table
// and memory's alike: decisions of 0 to 5 units, and resets.
type batchGen struct {
	rng    *rand.Rand
	tb, mt store.Table
}

// calls returns n calls on keys at now, each carried out all or nothing
// (or each op alone when the call's each is set), and the same ops on
// memory's table.
func (g *batchGen) calls(n int, keys []string, now int64) ([]*call, [][]store.Op) {
	var calls []*call
	var mem [][]store.Op
	for range n {
		var ops []store.Op
		each := false
		switch r := g.rng.IntN(10); {
		case r < 6: // a lone decision: the script's quick path
			ops = []store.Op{g.op(keys[g.rng.IntN(len(keys))], now)}
		default: // the keys of a pair, in one slot
			a := g.pair(keys)
			b := a[:len(a)-1] + "b"
			ops = []store.Op{g.op(a, now), g.op(b, now), g.op(a, now)}
			each = r == 9
		}
		m := make([]store.Op, len(ops))
		for i := range ops {
			m[i] = ops[i]
			m[i].Table = g.mt
		}
		calls = append(calls, &call{Work: work{ops: ops, each: each, slot: slot(g.tb.(*table).prefix, ops[0].Key)}})
		mem = append(mem, m)
	}
	return calls, mem
}

// op returns a decision on key, or now and then a reset.
func (g *batchGen) op(key string, now int64) store.Op {
	if g.rng.IntN(12) == 0 {
		return store.Op{Kind: store.OpReset, Table: g.tb, Key: key, Now: now}
	}
	return store.Op{Kind: store.OpDecide, Table: g.tb, Key: key, Now: now, N: g.rng.Int64N(6)}
}

// pair returns the "a" key of a pair among keys.
func (g *batchGen) pair(keys []string) string {
	for {
		if k := keys[g.rng.IntN(len(keys))]; strings.HasSuffix(k, "}:a") {
			return k
		}
	}
}

// applyMem carries out mem's calls on memory, in order, as calls says.
func applyMem(t *testing.T, ms *memstore.Store, calls []*call, mem [][]store.Op) {
	t.Helper()
	for i, ops := range mem {
		apply := ms.Apply
		if calls[i].Work.each {
			apply = ms.ApplyEach
		}
		if err := apply(context.Background(), ops); err != nil {
			t.Fatal(err)
		}
	}
}

// sameResults fails t unless every op of calls has the result of mem's.
func sameResults(t *testing.T, what string, calls []*call, mem [][]store.Op) {
	t.Helper()
	for i, c := range calls {
		if c.Err != nil {
			t.Fatalf("%s: call %d: %v", what, i, c.Err)
		}
		for j := range c.Work.ops {
			op, got, want := &c.Work.ops[j], c.Work.ops[j].Result, mem[i][j].Result
			if got.Decision != want.Decision || got.At != want.At || !storetest.SameErrors(got.Err, want.Err) {
				t.Fatalf("%s: call %d, op %d (%v %q n=%d): Redis %+v, memory %+v", what, i, j, op.Kind, op.Key, op.N, got, want)
			}
		}
	}
}

// On a Redis Cluster, a batch of calls of many slots of one master goes in
// one script call (FCALL) on that master, and decides exactly as memory:
// lone decisions (the script's quick path) and all-or-nothing calls of
// three ops on two keys of one slot, and such calls' ops each alone,
// every master's batch at once, over many rounds with time stepping on.
func TestCarryOnMasterDifferential(t *testing.T) {
	cc := redistest.SharedCluster(t).Client(t)
	s, err := New(cc, WithCallerTime(), WithMinTTL(time.Hour), WithPrefix("carryonmaster:"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Clear(context.Background()); err != nil {
		t.Fatal(err)
	}
	ms := memstore.New(0)
	for _, p := range []string{"token-bucket 10/1s burst=5", "fixed-window 6/1s", "sliding-window 8/1s", "sliding-log 4/1s"} {
		pol := algo.MustParsePolicy(p)
		tb, _ := s.Table("m "+p, pol) // a name per policy: one name under two is a policy change
		mt, _ := ms.Table("m "+p, pol)
		g := &batchGen{rng: rand.New(rand.NewPCG(3, 5)), tb: tb, mt: mt}
		keys := masterKeys(t, cc, tb.(*table), 12)
		masters := slices.Collect(maps.Keys(keys))
		// The library loaded on every master: a peek, which changes
		// nothing, at a key of each.
		for m := range keys {
			s.carry(context.Background(), []*call{{Work: work{ops: []store.Op{{Kind: store.OpDecide, Table: tb, Key: keys[m][0], Now: 1}}}}}, true)
		}
		now := int64(1795305600) * 1e9
		for round := range 40 {
			now += g.rng.Int64N(int64(400 * time.Millisecond))
			for _, m := range masters {
				calls, mem := g.calls(1+g.rng.IntN(30), keys[m], now)
				sent := slices.Clone(calls)
				before, failedBefore := fcalls(t, m)
				s.carry(context.Background(), sent, true)
				after, failedAfter := fcalls(t, m)
				if slots := distinctSlots(calls); slots > 1 && (after-before != 1 || failedAfter != failedBefore) {
					t.Fatalf("%s, round %d: %d calls of %d slots of one master took %d FCALLs, %d failed; want one",
						p, round, len(calls), slots, after-before, failedAfter-failedBefore)
				}
				applyMem(t, ms, calls, mem)
				sameResults(t, fmt.Sprintf("%s, round %d", p, round), calls, mem)
			}
		}
	}
}

// distinctSlots returns how many hash slots calls span.
func distinctSlots(calls []*call) int {
	seen := map[uint16]bool{}
	for _, c := range calls {
		seen[c.Work.slot] = true
	}
	return len(seen)
}

// A slot that moves away from a master under a batch of its calls costs
// the batch its script call on that master, which fails at a read having
// changed nothing, and the calls go again a script call per slot: every
// op is carried out once, exactly as memory carries it out. The slot
// moves three ways: whole, behind go-redis's back, with a key of another
// slot routing the batch (its script call finds the key not its node's)
// and with the moved slot's key routing it (MOVED, which go-redis
// follows to a node that holds none of the other keys); and half way, the
// key migrated while the slot is still the old master's (ASK).
func TestCarryOnMasterSlotMoved(t *testing.T) {
	cc := redistest.NewCluster(t).Client(t)
	s, err := New(cc, WithCallerTime(), WithMinTTL(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	pol := algo.MustParsePolicy("token-bucket 10/1s burst=8")
	tb, _ := s.Table("moved", pol)
	ms := memstore.New(0)
	mt, _ := ms.Table("moved", pol)
	keys := masterKeys(t, cc, tb.(*table), 8)
	var a, b *redis.Client
	for m := range keys {
		if a == nil {
			a = m
		} else if b == nil {
			b = m
		}
	}
	own := slices.DeleteFunc(slices.Clone(keys[a]), func(k string) bool { return strings.Contains(k, "{") })
	slices.SortFunc(own, func(x, y string) int { return int(slot(tb.(*table).prefix, x)) - int(slot(tb.(*table).prefix, y)) })
	now := int64(1795305600) * 1e9
	decideAll := func(what string, wantFailed bool) {
		t.Helper()
		now += int64(30 * time.Millisecond)
		var calls []*call
		var mem [][]store.Op
		for _, k := range own {
			op := store.Op{Kind: store.OpDecide, Table: tb, Key: k, Now: now, N: 1}
			calls = append(calls, &call{Work: work{ops: []store.Op{op}, slot: slot(tb.(*table).prefix, k)}})
			op.Table = mt
			mem = append(mem, []store.Op{op})
		}
		failed := totalFCalls(t, cc, true)
		s.carry(context.Background(), slices.Clone(calls), true)
		if got := totalFCalls(t, cc, true) - failed; (got > 0) != wantFailed {
			t.Errorf("%s: %d script calls failed, want failures %v", what, got, wantFailed)
		}
		applyMem(t, ms, calls, mem)
		sameResults(t, what, calls, mem)
	}
	decideAll("before any move, loading the library", true)
	decideAll("before any move", false)
	migrate(t, a, b, slot(tb.(*table).prefix, own[len(own)-1]), true)
	decideAll("a slot moved whole, another's key routing", true)
	migrate(t, a, b, slot(tb.(*table).prefix, own[0]), true)
	decideAll("a slot moved whole, its key routing", true)
	migrate(t, a, b, slot(tb.(*table).prefix, own[len(own)/2]), false)
	decideAll("a slot half way", true)
	decideAll("a slot half way, again", true)
}

// totalFCalls returns the FCALLs that the masters of cc have carried out,
// or those that failed.
func totalFCalls(t *testing.T, cc *redis.ClusterClient, failed bool) int {
	t.Helper()
	var n atomic.Int64
	err := cc.ForEachMaster(context.Background(), func(_ context.Context, m *redis.Client) error {
		calls, fails := fcalls(t, m)
		if failed {
			calls = fails
		}
		n.Add(int64(calls))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return int(n.Load())
}

// migrate moves hash slot sl's keys from master from to master to, and,
// when whole, the slot too (CLUSTER SETSLOT NODE on both; the third
// master learns it from them), else leaves the slot migrating.
func migrate(t *testing.T, from, to *redis.Client, sl uint16, whole bool) {
	t.Helper()
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("Redis: migrating slot %d: %v", sl, err)
		}
	}
	fromID, err := from.Do(ctx, "CLUSTER", "MYID").Text()
	must(err)
	toID, err := to.Do(ctx, "CLUSTER", "MYID").Text()
	must(err)
	must(to.Do(ctx, "CLUSTER", "SETSLOT", sl, "IMPORTING", fromID).Err())
	must(from.Do(ctx, "CLUSTER", "SETSLOT", sl, "MIGRATING", toID).Err())
	keys, err := from.ClusterGetKeysInSlot(ctx, int(sl), 1000).Result()
	must(err)
	host, port, _ := strings.Cut(to.Options().Addr, ":")
	for _, k := range keys {
		must(from.Migrate(ctx, host, port, k, 0, 5*time.Second).Err())
	}
	if whole {
		must(to.Do(ctx, "CLUSTER", "SETSLOT", sl, "NODE", toID).Err())
		must(from.Do(ctx, "CLUSTER", "SETSLOT", sl, "NODE", toID).Err())
	}
}

// A script call across slots that Redis fails (here at a corrupt key)
// fails only the calls of the slot at fault: the calls go again a script
// call per slot, and the other slots' are decided.
func TestCarryOnMasterErrorStaysInSlot(t *testing.T) {
	cc := redistest.SharedCluster(t).Client(t)
	s, err := New(cc, WithPrefix("carryonmastererr:"))
	if err != nil {
		t.Fatal(err)
	}
	tb, _ := s.Table("e", algo.MustParsePolicy("token-bucket 10/1s"))
	keys := masterKeys(t, cc, tb.(*table), 4)
	var m *redis.Client
	for m = range keys {
		break
	}
	own := slices.DeleteFunc(keys[m], func(k string) bool { return strings.Contains(k, "{") })
	if err := m.Set(context.Background(), tb.(*table).redisKey(own[0]), "not a state", 0).Err(); err != nil {
		t.Fatal(err)
	}
	var calls []*call
	for _, k := range own {
		calls = append(calls, &call{Work: work{ops: []store.Op{{Kind: store.OpDecide, Table: tb, Key: k, N: 1}}, slot: slot(tb.(*table).prefix, k)}})
	}
	s.carry(context.Background(), slices.Clone(calls), true)
	for i, c := range calls {
		if corrupt := errors.Is(c.Err, ErrCorrupt); corrupt != (i == 0) || (i > 0 && (c.Err != nil || !c.Work.ops[0].Result.Decision.Allowed)) {
			t.Errorf("call %d (%q, corrupt %v): %v, %+v", i, own[i], i == 0, c.Err, c.Work.ops[0].Result)
		}
	}
}

// An ApplyEach of many keys over every master of a Redis Cluster costs
// one script call a master, not one a hash slot (INFO commandstats).
func TestApplyEachOneScriptCallPerMaster(t *testing.T) {
	cc := redistest.SharedCluster(t).Client(t)
	s, err := New(cc, WithPrefix("onepermaster:"))
	if err != nil {
		t.Fatal(err)
	}
	tb, _ := s.Table("e", algo.MustParsePolicy("token-bucket 10/1s"))
	ops := make([]store.Op, 48)
	decide := func() {
		for i := range ops {
			ops[i] = store.Op{Kind: store.OpDecide, Table: tb, Key: fmt.Sprintf("k%d", i), N: 1}
		}
		if err := s.ApplyEach(context.Background(), ops); err != nil {
			t.Fatal(err)
		}
	}
	decide() // loads the library where it is missing
	masters := len(masterKeys(t, cc, tb.(*table), 1))
	before := totalFCalls(t, cc, false)
	decide()
	if got := totalFCalls(t, cc, false) - before; got != masters {
		t.Errorf("an ApplyEach of %d keys on %d masters took %d script calls, want one a master", len(ops), masters, got)
	}
}

// A master whose function lacks the flag allow-cross-slot-keys (as a
// library registered without it would) refuses a script call across
// slots, having changed nothing: the calls go again a script call per
// slot, decided, and the store sends no more across slots.
func TestCarryOnMasterWithoutTheFlag(t *testing.T) {
	cc := redistest.SharedCluster(t).Client(t)
	s, err := New(cc, WithPrefix("withouttheflag:"))
	if err != nil {
		t.Fatal(err)
	}
	tb, _ := s.Table("e", algo.MustParsePolicy("token-bucket 10/1s"))
	keys := masterKeys(t, cc, tb.(*table), 4)
	unflagged := strings.Replace(library, ", flags={'"+functionFlag+"'}", "", 1)
	load := func(lib string) {
		err := cc.ForEachMaster(context.Background(), func(ctx context.Context, m *redis.Client) error {
			return m.FunctionLoadReplace(ctx, lib).Err()
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	load(unflagged)
	t.Cleanup(func() { load(library) })
	for m := range keys {
		own := slices.DeleteFunc(keys[m], func(k string) bool { return strings.Contains(k, "{") })
		var calls []*call
		for _, k := range own {
			calls = append(calls, &call{Work: work{ops: []store.Op{{Kind: store.OpDecide, Table: tb, Key: k, N: 1}}, slot: slot(tb.(*table).prefix, k)}})
		}
		s.carry(context.Background(), slices.Clone(calls), true)
		for i, c := range calls {
			if c.Err != nil || !c.Work.ops[0].Result.Decision.Allowed {
				t.Errorf("call %d: %v, %+v; want admitted", i, c.Err, c.Work.ops[0].Result)
			}
		}
		if !s.oneSlotOnly.Load() {
			t.Fatalf("Redis: a script call across slots to a function without %s did not fail with %q", functionFlag, "do not hash to the same slot")
		}
	}
}
