package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/memstore"
	"github.com/floodgate/floodgate/redisstore"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/storetest"
	"github.com/redis/go-redis/v9"
)

// t0 is a realistic time: 2026-11-22 in nanoseconds since the Unix epoch.
const cacheT0 = int64(1795305600) * 1e9

// cachedStore returns a store on c with a deny cache, deciding at the
// caller's time, whose tracking connection is up.
func cachedStore(t testing.TB, c redis.UniversalClient, prefix string, opts ...redisstore.Option) *redisstore.Store {
	t.Helper()
	opts = append([]redisstore.Option{redisstore.WithPrefix(prefix), redisstore.WithCallerTime(),
		redisstore.WithMinTTL(time.Hour), redisstore.WithDenyCache(1 << 20)}, opts...)
	s, err := redisstore.New(c, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	waitLive(t, s)
	return s
}

// waitLive waits, up to 5 s, for s's deny cache to be live.
func waitLive(t testing.TB, s *redisstore.Store) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !s.CacheStats().Live {
		if time.Now().After(deadline) {
			t.Fatalf("the deny cache is not live after 5 s: %+v", s.CacheStats())
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = s.Sync(ctx)
		cancel()
		time.Sleep(time.Millisecond)
	}
}

// commands returns how many commands Redis has run, by name, from INFO
// commandstats.
func commands(t testing.TB, c *redis.Client) map[string]int64 {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]int64{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok {
			continue
		}
		n, _, _ := strings.Cut(rest, ",")
		m[strings.TrimPrefix(name, "cmdstat_")], _ = strconv.ParseInt(n, 10, 64)
	}
	return m
}

// A flood of denied decisions on one key costs Redis a handful of
// commands, and each is the decision the store's state gives.
func TestDenyCacheFlood(t *testing.T) {
	srv := redistest.NewServer(t)
	c := srv.Client(t)
	s := cachedStore(t, c, "flood:")
	p := algo.MustParsePolicy("token-bucket 10/1s")
	tb, err := s.Table("api", p)
	if err != nil {
		t.Fatal(err)
	}
	mem, _ := memstore.New(0).Table("api", p)
	ctx := context.Background()
	for i := range 11 {
		if i == 10 {
			// The admissions' own invalidations, which would drop a fill
			// begun before they arrive, are in.
			if err := s.Sync(ctx); err != nil {
				t.Fatal(err)
			}
		}
		d, err := tb.Decide(ctx, "k", cacheT0, 1)
		if err != nil || d.Allowed != (i < 10) {
			t.Fatalf("decision %d: %+v %v", i, d, err)
		}
		mem.Decide(ctx, "k", cacheT0, 1)
	}
	redisstore.WaitFills(s)
	before := commands(t, c)
	const flood = 10_000
	for i := range flood {
		now := cacheT0 + int64(i)*1000 // 10 ms in all: still denied
		d, err := tb.Decide(ctx, "k", now, 1)
		want, _ := mem.Decide(ctx, "k", now, 1)
		if err != nil || d != want {
			t.Fatalf("decision %d: %+v %v, want %+v", i, d, err, want)
		}
	}
	after := commands(t, c)
	var sent int64
	for name, n := range after {
		if name != "info" && name != "ping" {
			sent += n - before[name]
		}
	}
	st := s.CacheStats()
	t.Logf("%d denied decisions: %d Redis commands (not counting INFO and PING); %+v", flood, sent, st)
	if sent > 5 || st.Hits < flood-5 {
		t.Errorf("%d denied decisions cost %d Redis commands, %d hits; want at most 5 commands", flood, sent, st.Hits)
	}
}

var _ = fmt.Sprint
var _ store.Op

// processes is a store.Store made of several Stores on one Redis, with
// one prefix, each with its own deny cache, as if in processes of their
// own: each call goes to one of them, drawn at random, and then every
// cache has seen every invalidation of the call's writes (Sync) and
// every fill has finished, so that the next call finds the caches as
// full as they can be.
type processes struct {
	t      testing.TB
	ss     []*redisstore.Store
	next   func() int
	noSync bool // no barrier after a call: for one process, which sees its own writes at once
}

type procTable struct {
	p  *processes
	ts []store.Table
}

func (pt procTable) Decide(ctx context.Context, key string, now, n int64) (algo.Decision, error) {
	d, err := pt.ts[pt.p.next()].Decide(ctx, key, now, n)
	pt.p.barrier(ctx)
	return d, err
}

func (p *processes) Table(name string, pol algo.Policy) (store.Table, error) {
	pt := procTable{p: p}
	for _, s := range p.ss {
		t, err := s.Table(name, pol)
		if err != nil {
			return nil, err
		}
		pt.ts = append(pt.ts, t)
	}
	return pt, nil
}

func (p *processes) Apply(ctx context.Context, ops []store.Op) error {
	return p.call(ctx, ops, (*redisstore.Store).Apply)
}

func (p *processes) ApplyEach(ctx context.Context, ops []store.Op) error {
	return p.call(ctx, ops, (*redisstore.Store).ApplyEach)
}

func (p *processes) call(ctx context.Context, ops []store.Op, f func(*redisstore.Store, context.Context, []store.Op) error) error {
	i := p.next()
	own := make([]store.Op, len(ops))
	for k, op := range ops {
		own[k] = op
		own[k].Table = op.Table.(procTable).ts[i]
	}
	err := f(p.ss[i], ctx, own)
	for k := range ops {
		ops[k].Result = own[k].Result
	}
	p.barrier(ctx)
	return err
}

// hits returns the decisions answered by the caches so far.
func (p *processes) hits() uint64 {
	var n uint64
	for _, s := range p.ss {
		n += s.CacheStats().Hits
	}
	return n
}

// barrier waits until every cache has seen the invalidations of every
// write so far, and every fill is done.
func (p *processes) barrier(ctx context.Context) {
	if p.noSync {
		return
	}
	for _, s := range p.ss {
		if err := s.Sync(ctx); err != nil {
			p.t.Fatalf("sync: %v", err)
		}
		redisstore.WaitFills(s)
	}
}

// Random traces of the storetest suite (policies at algo's bounds,
// batches of several ops) through three processes with deny caches on one
// Redis decide exactly as the memory store, the exact model that Redis
// without a cache matches (TestDifferential).
func TestDenyCacheDifferentialSuite(t *testing.T) {
	c := testClient(t)
	traces := 60
	if testing.Short() {
		traces = 10
	}
	for i, b := range storetest.Traces(19, 1, traces, 2000) {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			storetest.Differential(t, newProcesses(t, c, uint64(i)), b, 60)
		})
	}
}

// newProcesses returns three Stores with deny caches on c, sharing a new
// prefix, as processes, the one of each call drawn from seed.
func newProcesses(t testing.TB, c redis.UniversalClient, seed uint64) *processes {
	prefix := fmt.Sprintf("dcdiff%d:", prefixes.Add(1))
	rng := rand.New(rand.NewPCG(seed, 19))
	p := &processes{t: t, next: func() int { return rng.IntN(3) }}
	for range 3 {
		p.ss = append(p.ss, cachedStore(t, c, prefix))
	}
	return p
}

// Floods through three processes with deny caches on one Redis decide
// exactly as the memory store, decision by decision, to the nanosecond
// (storetest.Flood: mostly denied decisions, with admissions,
// reservations, refunds, resets, ApplyEach and reloads), each op by a
// process drawn at random, all caches synced after each op.
func TestDenyCacheDifferential(t *testing.T) {
	traces := 40
	if testing.Short() {
		traces = 8
	}
	denyCacheDifferential(t, testClient(t), traces, storetest.FloodPolicies)
}

// logPolicies are sliding logs for floods: a log whose entries all
// count for the whole trace (a login form's 5 per 15 minutes), logs
// whose entries expire between the trace's steps. (The memory store
// refuses logs of counts above 2^32.)
var logPolicies = []string{"sliding-log 5/15m", "sliding-log 3/1s", "sliding-log 8/20ms", "sliding-log 2/40ms"}

// TestDenyCacheDifferential's floods on sliding logs only: every
// decision that a cache answers from a log it read from Redis is the
// one Redis gives.
func TestDenyCacheSlidingLogDifferential(t *testing.T) {
	traces := 30
	if testing.Short() {
		traces = 8
	}
	denyCacheDifferential(t, testClient(t), traces, logPolicies)
}

// denyCacheDifferential runs traces of TestDenyCacheDifferential on c,
// with policies drawn from pols.
func denyCacheDifferential(t *testing.T, c redis.UniversalClient, traces int, pols []string) {
	const steps = 300
	var hits, fills, bigHits uint64
	big := slices.ContainsFunc(pols, func(p string) bool { return algo.MustParsePolicy(p).Burst() > 1<<32 })
	for i := range traces {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			p := newProcesses(t, c, uint64(i))
			f := storetest.NewFloodOf(t, p, uint64(i), cacheT0, pols)
			f.Hits = p.hits
			for range steps {
				f.Step()
			}
			for _, s := range p.ss {
				st := s.CacheStats()
				hits, fills = hits+st.Hits, fills+st.Fills
			}
			bigHits += f.BigHits
		})
	}
	t.Logf("%d traces of %d ops: %d decisions answered by a cache (%d on counts above 2^32), %d fills", traces, steps, hits, bigHits, fills)
	if hits < uint64(traces*steps/10) || big && bigHits == 0 {
		t.Errorf("%d decisions answered by a cache, in %d, %d on counts above 2^32: the test tests too little", hits, traces*steps, bigHits)
	}
}

// One process sees its own writes at once: floods through one store with
// a deny cache, without waiting for invalidations or fills, decide
// exactly as the memory store.
func TestDenyCacheOwnWrites(t *testing.T) {
	c := testClient(t)
	var hits uint64
	for i := range 20 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			p := &processes{t: t, next: func() int { return 0 }, noSync: true}
			p.ss = []*redisstore.Store{cachedStore(t, c, fmt.Sprintf("dcown%d:", prefixes.Add(1)))}
			f := storetest.NewFlood(t, p, uint64(i), cacheT0)
			for range 300 {
				f.Step()
			}
			hits += p.ss[0].CacheStats().Hits
		})
	}
	t.Logf("%d decisions answered by the cache", hits)
	if hits == 0 {
		t.Error("no decision was answered by the cache: the test tests nothing")
	}
}

// Denied decisions on one key from 32 goroutines a CPU, as in a flood:
// with the deny cache (answered in memory) and without (script calls,
// batched), on a single Redis and on a Cluster.
func BenchmarkDenied(b *testing.B) {
	for _, on := range []struct {
		name   string
		target func(testing.TB) (redis.UniversalClient, []*redistest.Server)
	}{{"server", single}, {"cluster", clusterClient}} {
		b.Run(on.name, func(b *testing.B) { benchmarkDenied(b, on.target, "fixed-window 1/1h", 1) })
	}
}

// BenchmarkDenied on a login form's sliding log, 5 attempts per 15
// minutes, that holds 5 entries.
func BenchmarkDeniedLog(b *testing.B) {
	for _, on := range []struct {
		name   string
		target func(testing.TB) (redis.UniversalClient, []*redistest.Server)
	}{{"server", single}, {"cluster", clusterClient}} {
		b.Run(on.name, func(b *testing.B) { benchmarkDenied(b, on.target, "sliding-log 5/15m", 5) })
	}
}

// benchmarkDenied floods a key of pol denied after admits admissions, a
// nanosecond apart, from cacheT0 on, and reports what the Redis servers
// and this process spent per decision.
func benchmarkDenied(b *testing.B, target func(testing.TB) (redis.UniversalClient, []*redistest.Server), pol string, admits int) {
	c, servers := target(b)
	for _, cached := range []bool{false, true} {
		b.Run(fmt.Sprint("cache=", cached), func(b *testing.B) {
			prefix := fmt.Sprintf("bdenied%d:", prefixes.Add(1))
			var s *redisstore.Store
			if cached {
				s = cachedStore(b, c, prefix)
			} else {
				s = newStore(b, c, redisstore.WithPrefix(prefix), redisstore.WithCallerTime(), redisstore.WithMinTTL(time.Hour))
			}
			tb, _ := s.Table("b", algo.MustParsePolicy(pol))
			ctx := context.Background()
			now := cacheT0 + int64(admits-1)
			for i := range admits {
				tb.Decide(ctx, "k", cacheT0+int64(i), 1)
			}
			if cached {
				// The admissions' invalidations, which would drop a fill
				// begun before they arrive, are in.
				if err := s.Sync(ctx); err != nil {
					b.Fatal(err)
				}
			}
			tb.Decide(ctx, "k", now, 1)
			redisstore.WaitFills(s)
			b.ReportAllocs()
			b.SetParallelism(32)
			m := redistest.NewMeter(servers...) // Redis's cost, and this process's CPU: steadier than wall time here
			b.ResetTimer()
			m.Start(b)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if d, err := tb.Decide(ctx, "k", now, 1); err != nil || d.Allowed {
						b.Errorf("%+v %v", d, err)
						return
					}
				}
			})
			b.StopTimer()
			m.Stop(b).Report(b, b.N)
			if cached {
				b.ReportMetric(float64(s.CacheStats().Hits)/float64(b.N), "hits/op")
			}
		})
	}
}

// 64 callers flooding one key from its first denial on: the calls sent
// to Redis while the fill is under way find their key filled when they
// come back denied, and leave the state be, so after the fill every
// decision is answered from the cache.
func TestDenyCacheConcurrentFlood(t *testing.T) {
	srv := redistest.NewServer(t)
	c := srv.Client(t)
	s := cachedStore(t, c, "cflood:")
	tb, _ := s.Table("api", algo.MustParsePolicy("fixed-window 1/1h"))
	ctx := context.Background()
	if d, err := tb.Decide(ctx, "k", cacheT0, 1); err != nil || !d.Allowed {
		t.Fatalf("the first decision: %+v %v", d, err)
	}
	before := commands(t, c)
	const callers, each = 64, 200
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for range each {
				if d, err := tb.Decide(ctx, "k", cacheT0, 1); err != nil || d.Allowed {
					t.Errorf("%+v %v", d, err)
					return
				}
			}
		})
	}
	wg.Wait()
	after := commands(t, c)
	calls := after["fcall"] - before["fcall"] + after["evalsha"] - before["evalsha"]
	t.Logf("%d callers, %d denied decisions each: %d script calls to Redis; %+v", callers, each, calls, s.CacheStats())
	if hits := s.CacheStats().Hits; hits < callers*each*9/10 || calls > 100 {
		t.Errorf("%d decisions: %d answered by the cache, %d script calls; want nine tenths answered, and at most 100 calls",
			callers*each, hits, calls)
	}
}

// A store with a deny cache on a server that refuses every connection
// fails its decisions, never serves from a cache that is not live, and
// closes at once. Its tracker's first redial races its own publication
// when the dial fails fast, and CacheStats (a metrics scrape) may come
// at the same moment: under -race, this caught the tracker started
// before the cache held it (a failed CI run of server's
// TestRunLogsHidePassword) and CacheStats reading it unguarded.
func TestDenyCacheOnARefusingServer(t *testing.T) {
	refuse := func(context.Context, string, string) (net.Conn, error) {
		return nil, errors.New("connection refused (test)")
	}
	for i := range 300 {
		c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", Dialer: refuse, MaxRetries: -1, DialerRetries: 1})
		s, err := redisstore.New(c, redisstore.WithDenyCache(1<<20), redisstore.WithCallerTime())
		if err != nil {
			t.Fatal(err)
		}
		tb, err := s.Table("t", algo.MustParsePolicy("token-bucket 1/1s"))
		if err != nil {
			t.Fatal(err)
		}
		scraped := make(chan store.CacheStats)
		go func() { scraped <- s.CacheStats() }()
		if _, err := tb.Decide(context.Background(), "k", cacheT0, 1); !errors.Is(err, redisstore.ErrUnavailable) {
			t.Fatalf("run %d: Decide on a refusing server: %v, want ErrUnavailable", i, err)
		}
		if st := <-scraped; st.Live || st.Entries != 0 {
			t.Fatalf("run %d: a scrape during the first decision: %+v", i, st)
		}
		if st := s.CacheStats(); st.Live || st.Entries != 0 {
			t.Fatalf("run %d: the cache of a store that reached no server: %+v", i, st)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
}

// A cached sliding log is read by many callers at once, and a decision
// that it would admit (which goes to Redis) writes nothing to it: under
// -race, this caught a cache deciding on the log it shares with its
// other readers, which algo's Decide writes when it admits.
func TestDenyCacheSlidingLogConcurrent(t *testing.T) {
	s := cachedStore(t, testClient(t), fmt.Sprintf("dclogc%d:", prefixes.Add(1)))
	tb, _ := s.Table("login", algo.MustParsePolicy("sliding-log 3/1h"))
	ctx := context.Background()
	for round := range 20 {
		if err := s.Apply(ctx, []store.Op{{Kind: store.OpReset, Table: tb, Key: "k", Now: cacheT0}}); err != nil {
			t.Fatal(err)
		}
		if d, err := tb.Decide(ctx, "k", cacheT0, 3); err != nil || !d.Allowed {
			t.Fatalf("round %d: the admission: %+v %v", round, d, err)
		}
		tb.Decide(ctx, "k", cacheT0, 1)
		redisstore.WaitFills(s)
		if !redisstore.Cached(s, tb, "k") {
			continue // a fill that a heartbeat overtook
		}
		var wg sync.WaitGroup
		for range 7 {
			// Denied both before and after the admission below: by the
			// log of 3 units, then by the one of 1 unit an hour later.
			wg.Go(func() {
				for range 50 {
					if d, err := tb.Decide(ctx, "k", cacheT0+1, 3); err != nil || d.Allowed {
						t.Errorf("round %d: %+v %v, want a denial", round, d, err)
						return
					}
				}
			})
		}
		wg.Go(func() {
			// The log's entries have expired: admitted, by Redis.
			want := algo.Decision{Allowed: true, Remaining: 2, ResetAfter: time.Hour}
			if d, err := tb.Decide(ctx, "k", cacheT0+int64(time.Hour), 1); err != nil || d != want {
				t.Errorf("round %d: %+v %v, want %+v", round, d, err, want)
			}
		})
		wg.Wait()
	}
	if s.CacheStats().Hits == 0 {
		t.Error("no decision was answered by the cache: the test tests nothing")
	}
}
