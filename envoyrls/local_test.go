package envoyrls

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/clock"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/memstore"
	"github.com/floodgate/floodgate/store"
)

// The configurations the differential trace reloads among: the same
// counters (user by the second, team by the minute) under limits that
// rise and fall, shadow and quota modes, and a limit of 0.
var localConfigs = []string{`domain: d
descriptors:
  - key: user
    rate_limit: {unit: second, requests_per_unit: 3}
  - key: team
    rate_limit: {unit: minute, requests_per_unit: 5}
    shadow_mode: true
  - key: zero
    rate_limit: {unit: minute, requests_per_unit: 0}
`, `domain: d
descriptors:
  - key: user
    rate_limit: {unit: second, requests_per_unit: 8}
  - key: team
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: zero
    rate_limit: {unit: minute, requests_per_unit: 0}
`, `domain: d
descriptors:
  - key: user
    rate_limit: {unit: second, requests_per_unit: 1}
    quota_mode: true
  - key: team
    rate_limit: {unit: minute, requests_per_unit: 20}
  - key: zero
    rate_limit: {unit: minute, requests_per_unit: 0}
`}

// newRedisStore is newRedisStoreOn the Redis of srv.
func newRedisStore(t testing.TB, srv *redistest.Server, prefix string) store.Store {
	t.Helper()
	return newRedisStoreOn(t, srv.Client(t), prefix)
}

// randomRequest is a request of one to three descriptors among users,
// teams, a blocked key and limit overrides of users' counters, of
// random costs (0 included).
func randomRequest(rng *rand.Rand) *rlsv3.RateLimitRequest {
	req := request("d")
	if rng.IntN(4) == 0 {
		req.HitsAddend = uint32(rng.IntN(4))
	}
	for range 1 + rng.IntN(3) {
		var d *ratelimitv3.RateLimitDescriptor
		switch k := rng.IntN(10); {
		case k < 5:
			d = descriptor("user", fmt.Sprint("u", rng.IntN(3)))
		case k < 7:
			d = descriptor("team", fmt.Sprint("t", rng.IntN(2)))
		case k < 8:
			d = descriptor("zero", "z")
		default:
			// A limit override, on the user's counter of its window length.
			d = descriptor("user", fmt.Sprint("u", rng.IntN(3)))
			units := []typev3.RateLimitUnit{typev3.RateLimitUnit_SECOND, typev3.RateLimitUnit_MINUTE}
			d.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{
				RequestsPerUnit: []uint32{1, 5, 50}[rng.IntN(3)], Unit: units[rng.IntN(2)]}
		}
		if rng.IntN(3) == 0 {
			d.HitsAddend = wrapperspb.UInt64(uint64(rng.IntN(4)))
		}
		req.Descriptors = append(req.Descriptors, d)
	}
	return req
}

// counts reads, through a service that answers nothing from memory, the
// count of each user's and team's counters on st, at the clock's time:
// a check of 0 hits under a limit override of 2^32-1.
func counts(t *testing.T, st store.Store, clk clock.Clock) []uint32 {
	t.Helper()
	s := NewService(mustParse(t, localConfigs[0]), st, WithClock(clk), WithFlushInterval(-1))
	var got []uint32
	for _, e := range [][2]string{{"user", "u0"}, {"user", "u1"}, {"user", "u2"}, {"team", "t0"}, {"team", "t1"}} {
		for _, u := range []typev3.RateLimitUnit{typev3.RateLimitUnit_SECOND, typev3.RateLimitUnit_MINUTE} {
			d := descriptor(e[0], e[1])
			d.HitsAddend = wrapperspb.UInt64(0)
			d.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: math.MaxUint32, Unit: u}
			resp, err := s.ShouldRateLimit(context.Background(), request("d", d))
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, math.MaxUint32-resp.Statuses[0].LimitRemaining)
		}
	}
	return got
}

// TestLocalAnswersDifferential runs random traces on three services that
// answer over-limit hits from memory, sharing one real redis-server, and
// on three that ask the store about every hit, sharing the same server
// under another prefix, all on one fake clock: hits within and across
// windows, limit overrides of other limits on the same counters, reloads
// that raise and lower limits, shadow and quota modes, response headers
// and metadata. Every answer, every field, is the same on both sides,
// and so are the counters in Redis once flushed. Each service's hits
// are flushed before another service answers (the window in which
// another process reads less than the truth is measured by
// TestLocalAnswersStaleRead); the services' own flushers run too, on the
// fake clock.
func TestLocalAnswersDifferential(t *testing.T) {
	srv := redistest.NewServer(t)
	ctx := context.Background()
	for seed := range uint64(6) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 19))
			clk := clock.NewFake(t0.Add(time.Duration(rng.IntN(1000)) * time.Millisecond))
			opts := []Option{WithClock(clk), WithShadowMode(seed%3 == 2), WithDynamicMetadata(seed%2 == 1)}
			opts = append(opts, WithResponseHeaders([]Headers{RateLimitHeaders, UpstreamHeaders, NoHeaders}[seed%3]))
			localStore := newRedisStore(t, srv, fmt.Sprintf("local%d:", seed))
			refStore := newRedisStore(t, srv, fmt.Sprintf("ref%d:", seed))
			cfg := mustParse(t, localConfigs[0])
			var local, ref []*Service
			for range 3 {
				l := NewService(cfg, localStore, append(opts, WithFlushInterval(100*time.Millisecond))...)
				t.Cleanup(func() { l.Close(ctx) })
				local = append(local, l)
				ref = append(ref, NewService(cfg, refStore, append(opts, WithFlushInterval(-1))...))
			}
			prev, localAnswers := 0, 0
			for step := range 600 {
				switch r := rng.IntN(100); {
				case r < 8:
					clk.Advance([]time.Duration{time.Millisecond, 100 * time.Millisecond, 300 * time.Millisecond, time.Second, 7 * time.Second, 61 * time.Second}[rng.IntN(6)])
					waitFlushers(clk, local)
					continue
				case r < 11:
					cfg := mustParse(t, localConfigs[rng.IntN(len(localConfigs))])
					for i := range local {
						local[i].SetConfig(cfg)
						ref[i].SetConfig(cfg)
					}
					continue
				case r < 14:
					if err := local[rng.IntN(3)].Flush(ctx); err != nil {
						t.Fatal(err)
					}
					continue
				}
				i := rng.IntN(3)
				if i != prev {
					if err := local[prev].Flush(ctx); err != nil {
						t.Fatal(err)
					}
					prev = i
				}
				req := randomRequest(rng)
				before := local[i].localAnswers()
				got, err := local[i].ShouldRateLimit(ctx, req)
				if err != nil {
					t.Fatal(err)
				}
				localAnswers += local[i].localAnswers() - before
				want, err := ref[i].ShouldRateLimit(ctx, req)
				if err != nil {
					t.Fatal(err)
				}
				if !proto.Equal(got, want) {
					t.Fatalf("step %d, service %d, %v:\n got  %v\n want %v", step, i, req, got, want)
				}
				if err := local[i].local.check(); err != nil {
					t.Fatalf("step %d, service %d: %v", step, i, err)
				}
			}
			for _, l := range local {
				if err := l.Flush(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if got, want := counts(t, localStore, clk), counts(t, refStore, clk); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("counters after the flush: %v, want %v", got, want)
			}
			for _, r := range ref {
				if n := r.localAnswers(); n != 0 {
					t.Fatalf("a service with WithFlushInterval(-1) answered %d descriptors from memory", n)
				}
			}
			if localAnswers == 0 {
				t.Error("no descriptor was answered from memory: the trace tests nothing")
			}
			t.Logf("%d descriptors answered from memory", localAnswers)
		})
	}
}

// waitFlushers waits until the flushers of ss that run have flushed what
// the clock's last advance had them flush, and wait again.
func waitFlushers(clk *clock.Fake, ss []*Service) {
	n := 0
	for _, s := range ss {
		if s.local.started.Load() {
			n++
		}
	}
	clk.WaitTimers(n)
}

// localAnswers counts the descriptors s answered from memory.
func (s *Service) localAnswers() int { return int(s.Stats().FromMemory) }

// TestLocalAnswersStaleRead measures the window in which another process
// reads a count lower than the truth: two services on one real
// redis-server, one flooding a counter past its limit, answered from
// memory, the other reading the count (a check of 0 hits under a higher
// limit override). The reader sees the count less the flooder's
// unflushed hits, until the flooder's flusher runs, a flush interval
// later on the fake clock; then it sees the truth.
func TestLocalAnswersStaleRead(t *testing.T) {
	const every = 100 * time.Millisecond
	ctx := context.Background()
	srv := redistest.NewServer(t)
	st := newRedisStore(t, srv, "stale:")
	cfg := mustParse(t, localConfigs[1]) // user: 8 a second
	clk := clock.NewFake(t0.Add(time.Hour))
	flooder := NewService(cfg, st, WithClock(clk), WithFlushInterval(every))
	t.Cleanup(func() { flooder.Close(ctx) })
	reader := NewService(cfg, st, WithClock(clk), WithFlushInterval(-1))
	read := func() int64 {
		d := descriptor("user", "u0")
		d.HitsAddend = wrapperspb.UInt64(0)
		d.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1000, Unit: typev3.RateLimitUnit_SECOND}
		resp, err := reader.ShouldRateLimit(ctx, request("d", d))
		if err != nil {
			t.Fatal(err)
		}
		return 1000 - int64(resp.Statuses[0].LimitRemaining)
	}
	hit := request("d", descriptor("user", "u0"))
	for range 9 { // the 9th is over: the counter is known over
		call(t, flooder, hit)
	}
	if got := read(); got != 9 {
		t.Fatalf("after 9 hits through the store, the reader reads %d", got)
	}
	const flood = 50
	for range flood {
		if got := call(t, flooder, hit); got != "OVER_LIMIT: OVER_LIMIT 8/SECOND t=1s" {
			t.Fatalf("a hit over the limit: %s", got)
		}
	}
	if got := flooder.localAnswers(); got != flood {
		t.Fatalf("%d hits answered from memory, want %d", got, flood)
	}
	clk.WaitTimers(1) // the flusher waits
	clk.Advance(every - time.Nanosecond)
	stale := read()
	t.Logf("a flush interval (%v) less 1ns after the flood began, the reader reads %d, the truth %d", every, stale, 9+flood)
	if stale != 9 {
		t.Errorf("before the flush the reader reads %d, want 9: the count less the %d unflushed hits", stale, flood)
	}
	clk.Advance(time.Nanosecond)
	clk.WaitTimers(1) // the flusher has flushed and waits again
	if got := read(); got != 9+flood {
		t.Errorf("a flush interval after the flood began, the reader reads %d, want the truth, %d", got, 9+flood)
	}
}

// TestLocalAnswersClose: the hits answered from memory are in the store
// once Close returns, without waiting for the flusher, and the hits
// after Close go to the store.
func TestLocalAnswersClose(t *testing.T) {
	ctx := context.Background()
	st := memstore.New(0)
	clk := clock.NewFake(t0)
	s := NewService(mustParse(t, localConfigs[1]), st, WithClock(clk), WithFlushInterval(100*time.Millisecond))
	hit := request("d", descriptor("user", "u0"))
	for range 20 {
		call(t, s, hit)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := counts(t, st, clk)[0]; got != 20 {
		t.Errorf("after 20 hits and Close, the count is %d, want 20", got)
	}
	call(t, s, hit)
	if got := counts(t, st, clk)[0]; got != 21 {
		t.Errorf("after 20 hits, Close and a hit, the count is %d, want 21", got)
	}
	if got := s.localAnswers(); got != 20-9 {
		t.Errorf("%d hits answered from memory, want the 11 before Close", got)
	}
}

// A switchStore fails every call while its flag is set, and otherwise
// is the store it wraps.
type switchStore struct {
	store.Store
	failing atomic.Bool
}

var errSwitchedOff = errors.New("switchStore: failing")

func (s *switchStore) Table(name string, p algo.Policy) (store.Table, error) {
	t, err := s.Store.Table(name, p)
	return switchTable{t, s}, err
}

func (s *switchStore) Apply(ctx context.Context, ops []store.Op) error {
	if s.failing.Load() {
		return errSwitchedOff
	}
	return s.Store.Apply(ctx, ops)
}

func (s *switchStore) ApplyEach(ctx context.Context, ops []store.Op) error {
	if s.failing.Load() {
		return errSwitchedOff
	}
	return s.Store.ApplyEach(ctx, ops)
}

type switchTable struct {
	store.Table
	s *switchStore
}

func (t switchTable) Decide(ctx context.Context, key string, now, n int64) (algo.Decision, error) {
	if t.s.failing.Load() {
		return algo.Decision{}, errSwitchedOff
	}
	return t.Table.Decide(ctx, key, now, n)
}

// TestLocalAnswersStoreFailure: once a flush fails, the counter's hits
// go to the store again, which fails them as it fails every request
// (codes.Unavailable); the hits the flush could not write are kept, and
// written with the next hit once the store is back.
func TestLocalAnswersStoreFailure(t *testing.T) {
	ctx := context.Background()
	st := &switchStore{Store: memstore.New(0)}
	clk := clock.NewFake(t0)
	s := NewService(mustParse(t, localConfigs[1]), st, WithClock(clk), WithFlushInterval(100*time.Millisecond))
	hit := request("d", descriptor("user", "u0"))
	for range 15 { // 9 through the store, 6 from memory
		call(t, s, hit)
	}
	st.failing.Store(true)
	if err := s.Flush(ctx); !errors.Is(err, errSwitchedOff) {
		t.Fatalf("Flush on a failing store: %v, want %v", err, errSwitchedOff)
	}
	if _, err := s.ShouldRateLimit(ctx, hit); err == nil {
		t.Fatal("after a failed flush, a hit was answered from memory, not failed by the store")
	}
	st.failing.Store(false)
	if got := call(t, s, hit); got != "OVER_LIMIT: OVER_LIMIT 8/SECOND t=1s" {
		t.Fatalf("the store back: %s", got)
	}
	if got := counts(t, st, clk)[0]; got != 16 {
		t.Errorf("the count is %d, want 16: the 15 hits, the 6 unflushed among them, and the last", got)
	}
}

// TestLocalAnswersWindowEnd: in the last flush interval of a window, the
// hits over the limit go to the store, so that the flusher writes every
// hit answered from memory before its window ends: another service reads
// each at once.
func TestLocalAnswersWindowEnd(t *testing.T) {
	const every = 100 * time.Millisecond
	st := memstore.New(0)
	clk := clock.NewFake(t0)
	s := NewService(mustParse(t, localConfigs[1]), st, WithClock(clk), WithFlushInterval(every))
	t.Cleanup(func() { s.Close(context.Background()) })
	hit := request("d", descriptor("user", "u0"))
	for range 10 { // over from the 9th: the counter is known over
		call(t, s, hit)
	}
	clk.Set(t0.Add(time.Second - every))
	for i := range 5 {
		if got := call(t, s, hit); got != "OVER_LIMIT: OVER_LIMIT 8/SECOND t=1s" {
			t.Fatalf("a hit over the limit: %s", got)
		}
		if got := counts(t, st, clk)[0]; got != uint32(11+i) {
			t.Fatalf("a flush interval before the window ends, the count after hit %d is %d, want %d", 11+i, got, 11+i)
		}
	}
}

// TestLocalAnswersWindowEnded: the hits owed to a counter whose window
// has ended are not carried into the next window's count; the counter
// is asked of the store afresh.
func TestLocalAnswersWindowEnded(t *testing.T) {
	counter, err := NewService(nil, nil).newCounter("d", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	r := &rule{domain: "d", upstream: true, perUnit: 2, period: time.Minute}
	o := newOverCounts(100 * time.Millisecond)
	now := t0.UnixNano()
	ds := []desc{{r: r, l: limiter{c: counter}, key: "k", n: 1, over: true, count: 5}}
	o.learn("d", ds, []int{0}, now)
	k := ds[0].overKey("d")
	c := o.shardOf(k).m[k]
	if c == nil || c.known != 5 {
		t.Fatalf("after a count of 5 over a limit of 2, the counter is %+v", c)
	}
	c.pending = 7 // hits answered from memory in the window, not written
	next := desc{r: r, l: limiter{c: counter}, key: "k", n: 1}
	if o.answer(nil, "d", &next, now+int64(time.Minute)) {
		t.Fatal("a hit in the next window was answered from memory")
	}
	if next.owed != 0 {
		t.Errorf("a hit in the next window carries %d hits owed to the window before", next.owed)
	}
	if n := o.n.Load(); n != 0 {
		t.Errorf("the ended window's counter is still known: %d counters", n)
	}
}

// TestLocalAnswersFlushInFlight: a request of the next window waits for a
// flush under way of the window before, so that the flush's hits land in
// their own window and not in the next (which a store, seeing an older
// time than its state's, would count them in). The flush is held in the
// store while the request is made; the request must not reach the store
// until the flush is released (the test gives it a second of real time to
// get there, which it does at once without the wait).
func TestLocalAnswersFlushInFlight(t *testing.T) {
	ctx := context.Background()
	g := &gateStore{Store: memstore.New(0), entered: make(chan struct{}), arrived: make(chan struct{}, 1)}
	clk := clock.NewFake(t0)
	s := NewService(mustParse(t, localConfigs[1]), g, WithClock(clk), WithFlushInterval(100*time.Millisecond))
	t.Cleanup(func() { s.Close(ctx) })
	hit := request("d", descriptor("user", "u0"))
	for range 15 { // 9 through the store, 6 from memory
		call(t, s, hit)
	}
	g.hold()
	flushed := make(chan error)
	go func() { flushed <- s.Flush(ctx) }()
	<-g.entered
	clk.Advance(time.Second) // the next window
	answered := make(chan string)
	go func() { answered <- call(t, s, hit) }()
	select {
	case <-g.arrived:
		t.Error("a request of the next window reached the store while a flush of the window before was under way")
	case <-time.After(time.Second):
	}
	g.release()
	if err := <-flushed; err != nil {
		t.Fatal(err)
	}
	if got := <-answered; got != "OK: OK 8/SECOND r=7 t=1s" {
		t.Errorf("the first hit of the next window: %s", got)
	}
	if got := counts(t, g, clk)[0]; got != 1 {
		t.Errorf("the next window's count is %d, want 1: the flush's hits went to it", got)
	}
}
