package filestore_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/filestore"
	"github.com/floodgate/floodgate/memstore"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/storetest"
)

// cachedStore opens the file at path with a deny cache of 1 MiB.
func cachedStore(t testing.TB, path string, opts ...filestore.Option) *filestore.Store {
	t.Helper()
	return openStore(t, path, append(opts, filestore.WithDenyCache(1<<20))...)
}

// The conformance suite, with a deny cache.
func TestConformanceDenyCache(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return newStore(t, filestore.WithDenyCache(1<<20)) })
}

// shared is a store.Store made of several stores on one file, as if in
// processes of their own (Stores of this process exclude each other as
// processes do, and a remote one is a real process): each call goes to
// one of them, drawn at random. Nothing waits between calls: a store
// sees another's write from its very next call.
type shared struct {
	ss   []store.Store
	next func() int
}

type sharedTable struct {
	p  *shared
	ts []store.Table
}

func (st sharedTable) Decide(ctx context.Context, key string, now, n int64) (algo.Decision, error) {
	return st.ts[st.p.next()].Decide(ctx, key, now, n)
}

func (p *shared) Table(name string, pol algo.Policy) (store.Table, error) {
	st := sharedTable{p: p}
	for _, s := range p.ss {
		t, err := s.Table(name, pol)
		if err != nil {
			return nil, err
		}
		st.ts = append(st.ts, t)
	}
	return st, nil
}

func (p *shared) Apply(ctx context.Context, ops []store.Op) error {
	i := p.next()
	return p.call(ops, i, func(own []store.Op) error { return p.ss[i].Apply(ctx, own) })
}

func (p *shared) ApplyEach(ctx context.Context, ops []store.Op) error {
	i := p.next()
	return p.call(ops, i, func(own []store.Op) error { return p.ss[i].ApplyEach(ctx, own) })
}

func (p *shared) call(ops []store.Op, i int, f func([]store.Op) error) error {
	own := make([]store.Op, len(ops))
	for k, op := range ops {
		own[k] = op
		own[k].Table = op.Table.(sharedTable).ts[i]
	}
	err := f(own)
	for k := range ops {
		ops[k].Result = own[k].Result
	}
	return err
}

// hits returns the decisions that the stores' caches answered so far.
func (p *shared) hits() uint64 {
	var n uint64
	for _, s := range p.ss {
		if c, ok := s.(interface{ CacheStats() store.CacheStats }); ok {
			n += c.CacheStats().Hits
		}
	}
	return n
}

// newShared returns a shared store of two Stores with deny caches and one
// without on a new file, and, when remote, a child process with a deny
// cache on it too; the store of each call is drawn from seed.
func newShared(t testing.TB, seed uint64, remote bool) *shared {
	path := filepath.Join(t.TempDir(), "shared.db")
	rng := rand.New(rand.NewPCG(seed, 19))
	p := &shared{ss: []store.Store{cachedStore(t, path), cachedStore(t, path), openStore(t, path)}}
	if remote {
		p.ss = append(p.ss, startRemote(t, path))
	}
	p.next = func() int { return rng.IntN(len(p.ss)) }
	return p
}

// Random traces of the storetest suite (policies at algo's bounds,
// batches of several ops, times stepping back) through three Stores on
// one file, two of them with deny caches, decide exactly as the memory
// store.
func TestDenyCacheDifferentialSuite(t *testing.T) {
	traces := 60
	if testing.Short() {
		traces = 10
	}
	var hits uint64
	for i, b := range storetest.Traces(19, 1, traces, 2000) {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			p := newShared(t, uint64(i), false)
			storetest.Differential(t, p, b, 60)
			hits += p.hits()
		})
	}
	// Few of its decisions are lone denials, answered from a cache:
	// TestDenyCacheDifferential has the floods.
	t.Logf("%d decisions answered by a cache", hits)
}

// Floods (storetest.Flood: mostly denied decisions, with admissions,
// reservations, refunds, resets, ApplyEach and reloads) through stores on
// one file, each op by one drawn at random, decide exactly as the memory
// store, decision by decision, to the nanosecond: two Stores with deny
// caches and one without, and in every fourth trace a child process with
// a deny cache too.
func TestDenyCacheDifferential(t *testing.T) {
	traces := 40
	if testing.Short() {
		traces = 8
	}
	const steps = 300
	var hits, remoteHits, bigHits uint64
	for i := range traces {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			p := newShared(t, uint64(i), i%4 == 0)
			f := storetest.NewFlood(t, p, uint64(i), t0)
			f.Hits = p.hits
			for range steps {
				f.Step()
			}
			hits, bigHits = hits+p.hits(), bigHits+f.BigHits
			if i%4 == 0 {
				remoteHits += p.ss[3].(*remote).cacheStats().Hits
			}
		})
	}
	t.Logf("%d traces of %d ops: %d decisions answered by a cache (%d on counts above 2^32, %d by a child process)",
		traces, steps, hits, bigHits, remoteHits)
	if hits < uint64(traces*steps/10) || bigHits == 0 || remoteHits == 0 {
		t.Errorf("%d decisions answered by a cache, in %d, %d on counts above 2^32, %d by a child: the test tests too little",
			hits, traces*steps, bigHits, remoteHits)
	}
}

// One Store with a deny cache, alone on its file, decides floods exactly
// as the memory store: its own writes (which leave other keys' entries
// in place) drop its entries of the keys they write.
func TestDenyCacheOwnWrites(t *testing.T) {
	var hits uint64
	for i := range 20 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			s := newStore(t, filestore.WithDenyCache(1<<20))
			f := storetest.NewFlood(t, s, uint64(i), t0)
			for range 300 {
				f.Step()
			}
			hits += s.CacheStats().Hits
		})
	}
	t.Logf("%d decisions answered by the cache", hits)
	if hits == 0 {
		t.Error("no decision was answered by the cache: the test tests nothing")
	}
}

// A flood of denied decisions, on one key and on 1,000, costs the file no
// transaction once each key was denied once, and each is the decision of
// the memory store.
func TestDenyCacheFlood(t *testing.T) {
	for _, keys := range []int{1, 1000} {
		t.Run(fmt.Sprint("keys=", keys), func(t *testing.T) {
			s := newStore(t, filestore.WithDenyCache(1<<20))
			p := algo.MustParsePolicy("token-bucket 2/1s")
			tb, _ := s.Table("api", p)
			mem, _ := memstore.New(0).Table("api", p)
			for k := range keys {
				for range 3 { // two admitted, then the denial that fills the cache
					tb.Decide(ctx, fmt.Sprint("k", k), t0, 1)
					mem.Decide(ctx, fmt.Sprint("k", k), t0, 1)
				}
			}
			before, hits := filestore.Transactions(s), s.CacheStats().Hits
			const flood = 10_000
			for i := range flood {
				key, now := fmt.Sprint("k", i%keys), t0+int64(i)*1000 // 10 ms in all: still denied
				d, err := tb.Decide(ctx, key, now, 1)
				want, _ := mem.Decide(ctx, key, now, 1)
				if err != nil || d != want {
					t.Fatalf("decision %d: %+v %v, want %+v", i, d, err, want)
				}
			}
			txns, st := filestore.Transactions(s)-before, s.CacheStats()
			t.Logf("%d denied decisions on %d keys: %d transactions; %+v", flood, keys, txns, st)
			if txns != 0 || st.Hits-hits != flood {
				t.Errorf("%d denied decisions cost %d transactions, %d hits; want none, and every one a hit", flood, txns, st.Hits-hits)
			}
		})
	}
}

// A Store's entries of keys it did not write survive its own commits: a
// flood of denials on one key, with admissions of other keys between
// them, is answered from the cache.
func TestDenyCacheSurvivesOwnCommits(t *testing.T) {
	s := newStore(t, filestore.WithDenyCache(1<<20))
	tb := table(t, s, "api", "token-bucket 1/1h")
	tb.Decide(ctx, "hot", t0, 1)
	tb.Decide(ctx, "hot", t0, 1) // denied: filled
	before := s.CacheStats().Hits
	for i := range 100 {
		if d, err := tb.Decide(ctx, fmt.Sprint("cold", i), t0, 1); err != nil || !d.Allowed {
			t.Fatalf("cold %d: %+v %v", i, d, err)
		}
		if d, err := tb.Decide(ctx, "hot", t0+int64(i), 1); err != nil || d.Allowed {
			t.Fatalf("hot %d: %+v %v", i, d, err)
		}
	}
	if hits := s.CacheStats().Hits - before; hits != 100 {
		t.Errorf("%d of 100 denials answered from the cache between commits of other keys; want all", hits)
	}
}

// A key that the store's own commit sweeps (drained as of its table's
// clock, which a decision far ahead moved) leaves the cache: the next
// decision on it, at the earlier time, is the file's (refused until the
// table's horizon), as a store without a cache answers it.
func TestDenyCacheSweptKey(t *testing.T) {
	dir := t.TempDir()
	cached, plain := cachedStore(t, filepath.Join(dir, "cached.db")), openStore(t, filepath.Join(dir, "plain.db"))
	tc, tp := table(t, cached, "api", "token-bucket 2/1h"), table(t, plain, "api", "token-bucket 2/1h")
	for i, c := range []struct {
		key string
		now int64
	}{{"k", t0}, {"k", t0}, {"k", t0}, {"k", t0 + 1}, {"far", t0 + int64(2*time.Hour)}, {"k", t0 + 2}} {
		got, gerr := tc.Decide(ctx, c.key, c.now, 1)
		want, werr := tp.Decide(ctx, c.key, c.now, 1)
		if got != want || !storetest.SameErrors(gerr, werr) {
			t.Fatalf("decision %d, %s at %d: %+v %v, want %+v %v", i, c.key, c.now, got, gerr, want, werr)
		}
	}
	if st := cached.CacheStats(); st.Hits != 1 || st.Invalidations != 1 {
		t.Errorf("%+v: want one hit, then the key swept", st)
	}
}

// The window in which another process's reset is not yet seen is empty:
// after another Store, or a child process, resets a key that a Store has
// cached as denied, that Store's very next decision on the key is
// admitted, every time, though the file's size and modification time
// are as before: its meta pages name another transaction.
func TestDenyCacheWindow(t *testing.T) {
	path := filepath.Join(t.TempDir(), "window.db")
	s := cachedStore(t, path)
	tb := table(t, s, "api", "fixed-window 1/1h")
	others := map[string]store.Store{"store": openStore(t, path), "process": startRemote(t, path)}
	const trials = 100
	for name, other := range others {
		ot := table(t, other, "api", "fixed-window 1/1h")
		stale, same := 0, 0 // same: trials in which the file kept its size
		for i := range trials {
			now := t0 + int64(i)
			tb.Decide(ctx, "k", now, 1) // admitted
			tb.Decide(ctx, "k", now, 1) // denied: filled
			hits := s.CacheStats().Hits
			if d, err := tb.Decide(ctx, "k", now, 1); err != nil || d.Allowed || s.CacheStats().Hits != hits+1 {
				t.Fatalf("%s, trial %d: a denial not answered from the cache: %+v %v", name, i, d, err)
			}
			before, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := other.Apply(ctx, []store.Op{{Kind: store.OpReset, Table: ot, Key: "k", Now: now}}); err != nil {
				t.Fatal(err)
			}
			// A commit within one tick of the kernel's clock leaves the
			// modification time as it was: so does this one, so that
			// only the meta pages tell.
			if err := os.Chtimes(path, before.ModTime(), before.ModTime()); err != nil {
				t.Fatal(err)
			}
			if after, err := os.Stat(path); err != nil {
				t.Fatal(err)
			} else if after.Size() == before.Size() {
				same++
			}
			if d, err := tb.Decide(ctx, "k", now, 1); err != nil {
				t.Fatal(err)
			} else if !d.Allowed {
				stale++
			}
		}
		t.Logf("reset by another %s: %d stale answers in %d trials, %d of them with the file's size unchanged", name, stale, trials, same)
		if stale != 0 || same < trials/2 {
			t.Errorf("reset by another %s: %d of %d next decisions denied from a stale cache; %d trials of the same size", name, stale, trials, same)
		}
	}
}

// A decision cached as denied is not answered from the cache once the
// file is replaced (by a store whose last transaction has the same id),
// truncated, or damaged (either meta page, or the other pages); the
// Store's answer is then that of a Store without a cache:
// the replacement's decision, or an error wrapping ErrCorrupt.
func TestChaosDenyCache(t *testing.T) {
	for _, c := range []struct {
		name  string
		fault func(t *testing.T, path, spare string)
	}{
		{"replaced", func(t *testing.T, path, spare string) {
			if err := os.Rename(spare, path); err != nil {
				t.Fatal(err)
			}
		}},
		{"truncated", func(t *testing.T, path, _ string) {
			if err := os.Truncate(path, 3*int64(os.Getpagesize())); err != nil {
				t.Fatal(err)
			}
		}},
		{"meta", func(t *testing.T, path, _ string) {
			// The current meta page garbled: bbolt goes back to the
			// other, the transaction before, which admitted less.
			damage(t, path, currentMetaOffset(t, path)+64, 16)
		}},
		{"meta-other", func(t *testing.T, path, _ string) {
			// The other meta page garbled, as one being written reads:
			// bbolt goes by the current one, but the cache, in doubt,
			// answers nothing.
			// Its modification time kept, as within a clock tick.
			fi, _ := os.Stat(path)
			damage(t, path, int64(os.Getpagesize())-currentMetaOffset(t, path)+64, 16)
			if err := os.Chtimes(path, fi.ModTime(), fi.ModTime()); err != nil {
				t.Fatal(err)
			}
		}},
		{"page", func(t *testing.T, path, _ string) {
			// Every page past the metas garbled, the size kept: a clock
			// tick, which would show in the modification time, stands in
			// for the time the damage took.
			fi, _ := os.Stat(path)
			for off := 2 * int64(os.Getpagesize()); off < fi.Size(); off += int64(os.Getpagesize()) {
				damage(t, path, off, 16)
			}
			if err := os.Chtimes(path, fi.ModTime(), fi.ModTime().Add(time.Second)); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		for _, parity := range []int64{0, 1} {
			t.Run(fmt.Sprint(c.name, "/", parity), func(t *testing.T) { chaosDenyCache(t, c.fault, c.name, parity) })
		}
	}
}

// chaosDenyCache is one case of TestChaosDenyCache: fault, after a
// denial on a file whose last transaction's id has the given parity.
func chaosDenyCache(t *testing.T, fault func(t *testing.T, path, spare string), name string, parity int64) {
	dir := t.TempDir()
	path, spare := filepath.Join(dir, "state.db"), filepath.Join(dir, "spare.db")
	s := cachedStore(t, path)
	tb := table(t, s, "api", "fixed-window 2/1h")
	for i := range parity { // one more commit, on a key of its own
		tb.Decide(ctx, fmt.Sprint("parity", i), t0, 1)
	}
	tb.Decide(ctx, "k", t0, 1)
	copyFile(t, path, spare)
	// The spare commits once to a key of its own, as the file
	// commits its second admission: the same transaction ids.
	sp := openStore(t, spare)
	if d, err := table(t, sp, "api", "fixed-window 2/1h").Decide(ctx, "other", t0, 1); err != nil || !d.Allowed {
		t.Fatalf("the spare: %+v %v", d, err)
	}
	sp.Close()
	tb.Decide(ctx, "k", t0, 1)
	if d, err := tb.Decide(ctx, "k", t0, 1); err != nil || d.Allowed || s.CacheStats().Hits != 0 {
		t.Fatalf("the denial that fills the cache: %+v %v", d, err)
	}
	if d, err := tb.Decide(ctx, "k", t0, 1); err != nil || d.Allowed || s.CacheStats().Hits != 1 {
		t.Fatalf("the denial from the cache: %+v %v, %+v", d, err, s.CacheStats())
	}
	fault(t, path, spare)
	want, werr := decideUncached(t, path, filepath.Join(dir, "copy.db"), "k", t0)
	got, gerr := tb.Decide(ctx, "k", t0, 1)
	t.Logf("after the fault: %+v %v; without a cache: %+v %v", got, gerr, want, werr)
	if hits := s.CacheStats().Hits; hits != 1 {
		t.Errorf("a decision answered from the cache after the fault: %d hits", hits)
	}
	if got != want || (gerr == nil) != (werr == nil) || errors.Is(gerr, filestore.ErrCorrupt) != errors.Is(werr, filestore.ErrCorrupt) {
		t.Errorf("after the fault: %+v %v, want as a store without a cache: %+v %v", got, gerr, want, werr)
	}
	if (name == "truncated" || name == "page") && !errors.Is(gerr, filestore.ErrCorrupt) {
		t.Errorf("a damaged file: %v, want ErrCorrupt", gerr)
	}
}

// decideUncached decides one unit of key at now, fixed-window 2/1h, by
// a Store without a cache on a copy (at spare) of the file at path: what
// a Store on the file would answer.
func decideUncached(t *testing.T, path, spare, key string, now int64) (algo.Decision, error) {
	t.Helper()
	copyFile(t, path, spare)
	s, err := filestore.Open(spare)
	if err != nil {
		return algo.Decision{}, err
	}
	defer s.Close()
	return table(t, s, "api", "fixed-window 2/1h").Decide(ctx, key, now, 1)
}

// copyFile copies the file at from to a new file at to.
func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err == nil {
		err = os.WriteFile(to, b, 0o666)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// damage overwrites n bytes of the file at path, from off, with 0xA5.
func damage(t *testing.T, path string, off int64, n int) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, n)
	for i := range b {
		b[i] = 0xA5
	}
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// currentMetaOffset returns the offset of the meta page of the file's
// last transaction: page txid%2.
func currentMetaOffset(t *testing.T, path string) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil || len(b) < 2*os.Getpagesize() {
		t.Fatalf("reading %s: %v", path, err)
	}
	le := func(b []byte) uint64 {
		var x uint64
		for i := 7; i >= 0; i-- {
			x = x<<8 | uint64(b[i])
		}
		return x
	}
	size := int64(le(append(b[24:28:28], 0, 0, 0, 0)))
	if le(b[size+64:]) > le(b[64:]) {
		return size
	}
	return 0
}

// remote is a store.Store in a child process (TestChild, role "serve")
// on a file, with a deny cache: each call goes to it as a line of JSON,
// and comes back so.
type remote struct {
	t   testing.TB
	in  io.Writer
	out *bufio.Scanner
}

type remoteTable struct {
	r    *remote
	name string
	pol  string
}

// wireOp, wireResult and wireErr are ops, results and errors in the
// child's protocol: an error keeps its text and which of storetest's
// sentinels it wraps.
type wireOp struct {
	Kind    store.OpKind
	Name    string // the table's
	Policy  string
	Key     string
	Now, N  int64
	MaxWait time.Duration
	Stamp   algo.Stamp
}

type wireResult struct {
	Decision algo.Decision
	At       int64
	Stamp    algo.Stamp
	Err      *wireErr
}

type wireErr struct {
	Msg string
	Is  []int
}

type wireCall struct {
	Call string // decide, apply, each or stats
	Ops  []wireOp
}

type wireReply struct {
	Results []wireResult
	Err     *wireErr
	Stats   store.CacheStats
}

var wireSentinels = []error{algo.ErrInvalidTime, algo.ErrInvalidCost, algo.ErrCostExceedsBurst, algo.ErrInvalidPolicy}

func toWire(err error) *wireErr {
	if err == nil {
		return nil
	}
	w := &wireErr{Msg: err.Error()}
	for i, e := range wireSentinels {
		if errors.Is(err, e) {
			w.Is = append(w.Is, i)
		}
	}
	return w
}

func (w *wireErr) error() error {
	if w == nil {
		return nil
	}
	errs := []error{errors.New(w.Msg)}
	for _, i := range w.Is {
		errs = append(errs, wireSentinels[i])
	}
	return errors.Join(errs...)
}

// startRemote starts a child process with a Store with a deny cache on
// path, killed at the test's end.
func startRemote(t testing.TB, path string) *remote {
	cmd := child("serve", "CHILD_PATH="+path, "CHILD_CACHE=true", "CHILD_POLICY=token-bucket 1/1s")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); cmd.Wait() })
	sc := bufio.NewScanner(out)
	sc.Buffer(nil, 1<<20)
	return &remote{t: t, in: in, out: sc}
}

func (r *remote) Table(name string, p algo.Policy) (store.Table, error) {
	return remoteTable{r, name, p.String()}, nil
}

func (rt remoteTable) Decide(_ context.Context, key string, now, n int64) (algo.Decision, error) {
	rep := rt.r.call(wireCall{Call: "decide", Ops: []wireOp{{Kind: store.OpDecide, Name: rt.name, Policy: rt.pol, Key: key, Now: now, N: n}}})
	if rep.Err != nil {
		return algo.Decision{}, rep.Err.error()
	}
	return rep.Results[0].Decision, rep.Results[0].Err.error()
}

func (r *remote) Apply(_ context.Context, ops []store.Op) error     { return r.apply("apply", ops) }
func (r *remote) ApplyEach(_ context.Context, ops []store.Op) error { return r.apply("each", ops) }

func (r *remote) apply(call string, ops []store.Op) error {
	w := wireCall{Call: call}
	for _, op := range ops {
		rt := op.Table.(remoteTable)
		w.Ops = append(w.Ops, wireOp{op.Kind, rt.name, rt.pol, op.Key, op.Now, op.N, op.MaxWait, op.Stamp})
	}
	rep := r.call(w)
	for i := range rep.Results {
		res := rep.Results[i]
		ops[i].Result = store.Result{Decision: res.Decision, At: res.At, Stamp: res.Stamp, Err: res.Err.error()}
	}
	return rep.Err.error()
}

func (r *remote) cacheStats() store.CacheStats { return r.call(wireCall{Call: "stats"}).Stats }

func (r *remote) call(w wireCall) wireReply {
	r.t.Helper()
	b, _ := json.Marshal(w)
	if _, err := r.in.Write(append(b, '\n')); err != nil {
		r.t.Fatalf("the child: %v", err)
	}
	if !r.out.Scan() {
		r.t.Fatalf("the child did not answer: %v", r.out.Err())
	}
	var rep wireReply
	if err := json.Unmarshal(r.out.Bytes(), &rep); err != nil {
		r.t.Fatalf("the child's answer %q: %v", r.out.Bytes(), err)
	}
	return rep
}

// childServe is the child of startRemote: it carries out the calls that
// come on its standard input, one line of JSON each, on s, until the
// input ends.
func childServe(t *testing.T, s *filestore.Store) {
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(nil, 1<<20)
	enc := json.NewEncoder(os.Stdout)
	for sc.Scan() {
		var w wireCall
		if err := json.Unmarshal(sc.Bytes(), &w); err != nil {
			t.Fatal(err)
		}
		var rep wireReply
		ops := make([]store.Op, len(w.Ops))
		for i, o := range w.Ops {
			tb, err := s.Table(o.Name, algo.MustParsePolicy(o.Policy))
			if err != nil {
				t.Fatal(err)
			}
			ops[i] = store.Op{Kind: o.Kind, Table: tb, Key: o.Key, Now: o.Now, N: o.N, MaxWait: o.MaxWait, Stamp: o.Stamp}
		}
		var err error
		switch w.Call {
		case "decide":
			ops[0].Result.Decision, err = ops[0].Table.Decide(ctx, ops[0].Key, ops[0].Now, ops[0].N)
			if d := ops[0].Result.Decision; err != nil && errors.Is(err, algo.ErrCostExceedsBurst) {
				ops[0].Result = store.Result{Decision: d, Err: err}
				err = nil
			}
		case "apply":
			err = s.Apply(ctx, ops)
		case "each":
			err = s.ApplyEach(ctx, ops)
		case "stats":
			rep.Stats = s.CacheStats()
		}
		rep.Err = toWire(err)
		for _, op := range ops {
			rep.Results = append(rep.Results, wireResult{op.Result.Decision, op.Result.At, op.Result.Stamp, toWire(op.Result.Err)})
		}
		if err := enc.Encode(rep); err != nil {
			t.Fatal(err)
		}
	}
}

// The bound counts at least what an entry takes on the heap: 20,000 keys
// denied (an ApplyEach of a thousand decisions at a time, so that the
// test takes a few transactions), each key's state held.
func TestDenyCacheBytes(t *testing.T) {
	s := newStore(t, filestore.WithDenyCache(1<<30))
	tb := table(t, s, "bytes", "token-bucket 1/1h")
	const n, batch = 20_000, 1000
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("user-%08d", i)
	}
	ops := make([]store.Op, batch)
	run := func() {
		for i := 0; i < n; i += batch {
			for j := range ops {
				ops[j] = store.Op{Kind: store.OpDecide, Table: tb, Key: keys[i+j], Now: t0, N: 1}
			}
			if err := s.ApplyEach(ctx, ops); err != nil {
				t.Fatal(err)
			}
		}
	}
	run() // admitted
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	run() // denied: filled
	runtime.GC()
	runtime.ReadMemStats(&after)
	st := s.CacheStats()
	if st.Entries != n {
		t.Fatalf("%+v: want %d entries", st, n)
	}
	heap := float64(after.HeapAlloc-before.HeapAlloc) / n
	counted := float64(st.Bytes) / n
	t.Logf("%d entries: %.1f bytes each on the heap, %.1f counted (keys of %d bytes)", n, heap, counted, len(keys[0]))
	if heap > counted {
		t.Errorf("an entry takes %.1f bytes on the heap, more than the %.1f the bound counts", heap, counted)
	}
	runtime.KeepAlive(keys)
	runtime.KeepAlive(ops)
}

// 64 callers flooding one key from its first denial on: those that reach
// the file before the denial's transaction has filled the cache share a
// few transactions, and from then on every decision is answered from the
// cache.
func TestDenyCacheConcurrentFlood(t *testing.T) {
	s := newStore(t, filestore.WithDenyCache(1<<20))
	tb := table(t, s, "api", "fixed-window 1/1h")
	if d, err := tb.Decide(ctx, "k", t0, 1); err != nil || !d.Allowed {
		t.Fatalf("the first decision: %+v %v", d, err)
	}
	before := filestore.Transactions(s)
	const callers, each = 64, 200
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for range each {
				if d, err := tb.Decide(ctx, "k", t0, 1); err != nil || d.Allowed {
					t.Errorf("%+v %v", d, err)
					return
				}
			}
		})
	}
	wg.Wait()
	txns, st := filestore.Transactions(s)-before, s.CacheStats()
	t.Logf("%d callers, %d denied decisions each: %d transactions; %+v", callers, each, txns, st)
	if st.Hits < callers*each*9/10 || txns > 20 {
		t.Errorf("%d decisions: %d answered by the cache, %d transactions; want nine tenths answered, and at most 20 transactions",
			callers*each, st.Hits, txns)
	}
}
