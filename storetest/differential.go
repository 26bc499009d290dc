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
// days (beyond 2^53 ns), limits and bursts up to 10^15 (beyond 2^32, and
// products beyond 2^100), bursts that take years to drain, periods of a few
// nanoseconds; buckets of LIMIT 2^32-1 and burst 2^32 over 366 days, and
// either side of 2^50 units of tau (13/24h, 14/24h); sliding windows past
// LIMIT*PERIOD 2^50 and logs past PERIOD 2^50 ns.
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
	"token-bucket 1250000000/1s burst=4294967296",
	"token-bucket 1000000000000000/8784h",
	"token-bucket 999999999999989/1ns burst=1000000000000000",
	"leaky-bucket 1000000000000000/1s capacity=999999999999999",
	"leaky-bucket 4294967297/1s",
	"sliding-log 1000000000000000/1s",
	"sliding-window 1000000000000000/8784h",
	"sliding-window 999999999999999/1s",
	"sliding-window 4294967295/3ns",
	"fixed-window 1000000000000000/8784h",
	"fixed-window 4294967296/1s",
	"token-bucket 4294967295/8784h",
	"leaky-bucket 4294967295/8784h capacity=4294967296",
	"token-bucket 13/24h",
	"token-bucket 14/24h",
	"leaky-bucket 1000/720h",
	"fixed-window 1000/720h",
	"sliding-window 1000/24h",
	"sliding-window 4294967295/1248h",
	"sliding-log 1000/720h",
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
	d := newDifferential(t, st, &source{data})
	for b := 0; b < batches && !d.src.empty(); b++ {
		d.batch(b)
	}
}

// diffKeys is the number of keys per table a trace uses: k0, k1, ...
const diffKeys = 3

// slot is one key of one of a trace's two tables.
type slot struct {
	table int
	key   string
}

// differential is one trace of Differential in progress: the reference
// and the store under test, a table of each per policy, the trace's
// clock, and what past batches left that later ones draw on.
type differential struct {
	t       testing.TB
	ctx     context.Context
	src     *source
	mem, st store.Store
	pols    [2]algo.Policy
	tm, tf  [2]store.Table // the memory store's tables, the store's
	now     int64
	hwm     int64                  // the latest now so far
	stamps  map[slot][2]algo.Stamp // each key's last two admissions, to refund
	resetAt map[slot]int64         // when each key last drained, by a peek
}

// refBytes is the memory store's bound in Differential: enough that it
// takes a sliding log of LIMIT 10^15 (algo.MaxLimit), which the default
// refuses as a log that could outgrow its memory. The traces' few keys
// never come near it.
var refBytes = memstore.MaxBytes(1 << 60)

// newDifferential draws a trace's two policies and its start from src and
// opens their tables in a new memory store and in st.
func newDifferential(t testing.TB, st store.Store, src *source) *differential {
	t.Helper()
	d := &differential{
		t:       t,
		ctx:     context.Background(),
		src:     src,
		mem:     memstore.New(0, refBytes),
		st:      st,
		pols:    drawPolicies(src),
		stamps:  map[slot][2]algo.Stamp{},
		resetAt: map[slot]int64{},
	}
	for i, q := range d.pols {
		var err error
		name := fmt.Sprint("diff-", i) // apart: a policy change under one name is PolicyChange's
		if d.tm[i], err = d.mem.Table(name, q); err != nil {
			t.Fatal(err)
		}
		if d.tf[i], err = st.Table(name, q); err != nil {
			t.Fatal(err)
		}
	}
	d.now = drawStart(src)
	d.hwm = d.now
	return d
}

// drawPolicies draws two different policies of DifferentialPolicies.
func drawPolicies(src *source) [2]algo.Policy {
	n := int64(len(DifferentialPolicies))
	i := src.intn(n)
	j := (i + 1 + src.intn(n-1)) % n
	return [2]algo.Policy{
		algo.MustParsePolicy(DifferentialPolicies[i]),
		algo.MustParsePolicy(DifferentialPolicies[j]),
	}
}

// drawStart draws a start anywhere in [0, MaxTime], often near either end.
func drawStart(src *source) int64 {
	switch src.intn(4) {
	case 0:
		return src.intn(1000)
	case 1:
		return algo.MaxTime - src.intn(int64(400*24*time.Hour))
	default:
		return src.intn(algo.MaxTime)
	}
}

// batch draws batch b's time and operations, applies them to both stores,
// and fails t unless their errors, results, and then every key's headroom
// agree.
func (d *differential) batch(b int) {
	d.t.Helper()
	d.advance()
	nops := 1 + int(d.src.intn(3))
	// A quarter of the batches go through ApplyEach, each op as if alone.
	each := d.src.intn(4) == 0
	om, of := d.drawOps(nops, each)
	d.logOps(b, om)
	errM, errF := d.apply(each, om, of)
	if !SameErrors(errM, errF) {
		d.t.Fatalf("batch %d: memory's error %v, the store's %v", b, errM, errF)
	}
	if errM == nil { // the outputs of a failed batch mean nothing
		d.compare(b, om, of)
	}
	d.peek(b)
}

// advance steps the trace's clock by a drawn step of any size, sometimes
// backwards, within [floor, MaxTime].
func (d *differential) advance() {
	d.now = min(max(d.now+d.drawStep(), d.floor()), algo.MaxTime)
	d.hwm = max(d.hwm, d.now)
}

// drawStep draws a step of the clock, measured by the first policy.
func (d *differential) drawStep() int64 {
	period := int64(d.pols[0].Period())
	switch d.src.intn(8) {
	case 0:
		return 0
	case 1:
		return d.src.intn(10)
	case 2:
		return d.src.intn(period + 1)
	case 3:
		return d.src.intn(3*period + 1)
	case 4:
		return -d.src.intn(period + 1)
	case 5:
		return d.src.intn(algo.MaxTime / 64)
	default:
		return d.src.intn(period/int64(d.pols[0].Limit()) + 2)
	}
}

// floor is the earliest instant time may step back to: the latest instant
// at which a key's state drained, up to the latest now. A store may drop a
// drained state (the memory store when it next sees the key, a file store
// then or in a sweep), after which an earlier time would find it gone in
// one store and present in the other.
func (d *differential) floor() int64 {
	f := int64(0)
	for _, r := range d.resetAt {
		if r <= d.hwm {
			f = max(f, r)
		}
	}
	return f
}

// drawOps draws nops operations at now, returning them twice: on the
// memory store's tables and on the store's.
func (d *differential) drawOps(nops int, each bool) (om, of []store.Op) {
	for range nops {
		ti, op := d.drawOp(each)
		a, c := op, op
		a.Table, c.Table = d.tm[ti], d.tf[ti]
		om, of = append(om, a), append(of, c)
	}
	return om, of
}

// drawOp draws one operation at now, without its table, and the index of
// that table: a decision, schedule, refund or reset of a drawn key and
// cost, and now and then (unless each) a bad cost or time.
func (d *differential) drawOp(each bool) (int, store.Op) {
	ti := int(d.src.intn(2))
	k := slot{ti, fmt.Sprint("k", d.src.intn(diffKeys))}
	p := d.pols[ti]
	op := store.Op{Key: k.key, Now: d.now, N: d.drawCost(p.Burst())}
	switch d.src.intn(6) {
	case 0:
		op.Kind = store.OpSchedule
		op.MaxWait = d.drawMaxWait(p)
	case 1:
		op.Kind = store.OpRefund
		op.Stamp = d.stamps[k][d.src.intn(2)] // the last, or one queued before it
		op.N = min(op.N, p.Burst())
	case 2:
		if d.src.intn(4) == 0 {
			op.Kind = store.OpReset
			break
		}
		fallthrough
	default:
		op.Kind = store.OpDecide
	}
	if d.src.intn(64) == 0 && !each { // bad input fails the whole batch
		d.spoil(&op)
	}
	return ti, op
}

// drawCost draws a cost from 0 to past burst, often 1 or near burst.
func (d *differential) drawCost(burst int64) int64 {
	switch d.src.intn(4) {
	case 0:
		return d.src.intn(3)
	case 1:
		return d.src.intn(burst + 2)
	case 2:
		return burst - d.src.intn(min(burst, 3))
	default:
		return 1
	}
}

// drawMaxWait draws a schedule's wait of up to four periods of p, or
// now and then the longest Duration.
func (d *differential) drawMaxWait(p algo.Policy) time.Duration {
	w := time.Duration(d.src.intn(4 * int64(p.Period())))
	if d.src.intn(4) == 0 {
		w = time.Duration(1<<63 - 1)
	}
	return w
}

// spoil makes op bad input: a negative cost or a time past MaxTime.
func (d *differential) spoil(op *store.Op) {
	if d.src.intn(2) == 0 {
		op.N = -1
	} else {
		op.Now = algo.MaxTime + 1
	}
}

// logOps logs batch b's operations when the tests run verbose.
func (d *differential) logOps(b int, om []store.Op) {
	d.t.Helper()
	if !testing.Verbose() {
		return
	}
	for i, o := range om {
		d.t.Logf("batch %d op %d: kind %d table %d key %s now %d n %d maxwait %d stamp %+v", b, i, o.Kind, tableIndex(d.tm, o.Table), o.Key, o.Now, o.N, o.MaxWait, o.Stamp)
	}
}

// apply applies om to the memory store and of to the store, both by Apply
// or both by ApplyEach (memory's ApplyEach is an Apply per op, the
// reference).
func (d *differential) apply(each bool, om, of []store.Op) (errM, errF error) {
	if each {
		errM = d.mem.ApplyEach(d.ctx, om)
		errF = d.st.ApplyEach(d.ctx, of)
		return errM, errF
	}
	errM = d.mem.Apply(d.ctx, om)
	errF = d.st.Apply(d.ctx, of)
	return errM, errF
}

// compare fails t at the first operation of batch b whose result differs
// between the stores, and keeps the stamp of every admission to refund
// later.
func (d *differential) compare(b int, om, of []store.Op) {
	d.t.Helper()
	for i := range om {
		m, f := om[i], of[i]
		if !sameResult(m.Result, f.Result) {
			d.t.Fatalf("batch %d op %d (kind %d, %q n=%d at %d):\nmemory %+v at %d stamp %+v err %v\nstore  %+v at %d stamp %+v err %v",
				b, i, m.Kind, m.Key, m.N, m.Now, m.Result.Decision, m.Result.At, m.Result.Stamp, m.Result.Err, f.Result.Decision, f.Result.At, f.Result.Stamp, f.Result.Err)
		}
		if m.Result.Decision.Allowed && m.N > 0 && (m.Kind == store.OpDecide || m.Kind == store.OpSchedule) {
			k := slot{tableIndex(d.tm, m.Table), m.Key}
			d.stamps[k] = [2]algo.Stamp{m.Result.Stamp, d.stamps[k][0]}
		}
	}
}

// sameResult reports whether two stores' results for one operation agree:
// decision, instant, stamp, and error by SameErrors.
func sameResult(a, b store.Result) bool {
	return a.Decision == b.Decision && a.At == b.At && a.Stamp == b.Stamp && SameErrors(a.Err, b.Err)
}

// peek fails t, after batch b, unless every key's headroom at now agrees
// between the stores, and notes when each key drains.
func (d *differential) peek(b int) {
	d.t.Helper()
	for ti := range d.tm {
		for j := range diffKeys {
			key := fmt.Sprint("k", j)
			dm, _ := d.tm[ti].Decide(d.ctx, key, d.now, 0)
			df, err := d.tf[ti].Decide(d.ctx, key, d.now, 0)
			if err != nil || dm != df && !d.dropped(ti, dm, df) {
				d.t.Fatalf("after batch %d, peek %s/%s at %d: memory %+v, store %+v (%v)", b, d.pols[ti], key, d.now, dm, df, err)
			}
			if dm.ResetAfter > 0 {
				d.resetAt[slot{ti, key}] = d.now + int64(dm.ResetAfter)
			}
		}
	}
}

// dropped reports whether df, the store's peek of a key of table ti, is
// the initial state's where memory's, dm, is a state drained as of the
// latest time of the trace: a state written after the clock stepped back,
// which a store may drop at once (the file store's sweep does, by its
// table's clock). peek then records when it drained, so that the clock
// moves past it (floor) before the key is used again.
func (d *differential) dropped(ti int, dm, df algo.Decision) bool {
	fresh := algo.Decision{Allowed: true, Remaining: d.pols[ti].Burst()}
	return df == fresh && d.now+int64(dm.ResetAfter) <= d.hwm
}

// tableIndex is the index in ts of t, one of them.
func tableIndex(ts [2]store.Table, t store.Table) int {
	if ts[0] == t {
		return 0
	}
	return 1
}
