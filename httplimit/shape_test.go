package httplimit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate/clock"
)

// nginxLimitReq is the accounting of nginx's limit_req for one key, as
// ngx_http_limit_req_module.c defines it (ngx_http_limit_req_lookup and
// ngx_http_limit_req_account): excess and the thresholds in
// milli-requests, the rate in milli-requests per second, time in
// milliseconds. It is the independent model the shaping tests hold the
// middleware to.
type nginxLimitReq struct {
	rate, burst, delay int64 // rate=R r/s: R*1000; burst=B: B*1000; delay=D: D*1000
	excess, last       int64
	seen               bool
}

// arrive decides a request at now (ms): refused (excess over the burst,
// nothing recorded), or admitted, its excess recorded, after a delay in
// ms: none while the excess is at most delay, else the time to work the
// excess above delay off at the rate.
func (z *nginxLimitReq) arrive(now int64) (delay int64, admitted bool) {
	excess := z.excessAt(now)
	if excess > z.burst {
		return 0, false
	}
	z.excess, z.last, z.seen = excess, now, true
	if excess <= z.delay {
		return 0, true
	}
	return (excess - z.delay) * 1000 / z.rate, true
}

// excessAt is the excess a request arriving at now (ms) would have.
func (z *nginxLimitReq) excessAt(now int64) int64 {
	if !z.seen {
		return 0 // a key's first request has none
	}
	return max(z.excess-z.rate*(now-z.last)/1000+1000, 0)
}

// level is the key's level at now (ms) in milli-requests: the excess of
// the last admitted request, plus that request itself, worked off at the
// rate since.
func (z *nginxLimitReq) level(now int64) int64 {
	return max(z.excess+1000-z.rate*(now-z.last)/1000, 0)
}

// shaped is one request of a shaping test: its number, its outcome, and
// the fake time at which the handler served it.
type shaped struct {
	id     int
	status int
	header http.Header
	served time.Duration // since t0, as the handler read the fake clock
	err    error
}

// shapeClient is a client of a real server whose handler, behind m, tells
// the fake time at which it runs.
type shapeClient struct {
	c   *http.Client
	url string
}

func newShapeClient(t *testing.T, m *Middleware, fc *clock.Fake) shapeClient {
	t.Helper()
	srv := server(t, m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, fc.Now().Sub(t0).Nanoseconds())
	})))
	c := srv.Client()
	c.Timeout = 30 * time.Second // a guard against a hung test, never reached
	return shapeClient{c, srv.URL}
}

// send sends request id with ctx and delivers its outcome to out.
func (sc shapeClient) send(ctx context.Context, id int, out chan<- shaped) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, sc.url, nil)
	if err != nil {
		out <- shaped{id: id, err: err}
		return
	}
	resp, err := sc.c.Do(req)
	if err != nil {
		out <- shaped{id: id, err: err}
		return
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	s := shaped{id: id, status: resp.StatusCode, header: resp.Header, err: err}
	if resp.StatusCode == http.StatusOK && err == nil {
		var ns int64
		_, s.err = fmt.Sscan(string(b), &ns)
		s.served = time.Duration(ns)
	}
	out <- s
}

// arrive sends request id and returns once the middleware has decided
// it: answered (the outcome is returned) or asleep on a fake timer, one
// more than the timers pending before (nil).
func arrive(t *testing.T, sc shapeClient, fc *clock.Fake, id int, out chan shaped) *shaped {
	t.Helper()
	pending := fc.Timers()
	go sc.send(context.Background(), id, out)
	tick := time.NewTicker(100 * time.Microsecond) // polls; fake time does not move
	defer tick.Stop()
	for {
		select {
		case s := <-out:
			if s.id != id {
				t.Fatalf("request %d answered while request %d arrived", s.id, id)
			}
			return &s
		case <-tick.C:
			if fc.Timers() > pending {
				return nil
			}
		}
	}
}

// TestShapeNginxTwoStage: nginx's documented two-stage example, rate=5r/s
// with burst=12 delay=8, is leaky-bucket 5/1s capacity=9 (delay+1) with
// WithDelay(800ms) ((burst-delay)/rate). Bursts of requests arriving at
// the same instant, at three instants, are admitted at once, delayed to
// the exact millisecond, and refused as nginx's accounting decides them
// (nginxLimitReq): of the first 15, 9 at once (the first request and the
// 8 excess that delay lets through), 4 delayed by 200, 400, 600 and 800ms
// (to the rate of 5 a second), 2 refused (excess past the burst of 12);
// then 7 a second later, and 12 at 3.5s, when the excess has partly
// drained (delays of 100, 300, 500, 700ms).
// Delayed responses tell the truth: r=0, and t the seconds until the
// bucket is empty, as of the moment they are served.
func TestShapeNginxTwoStage(t *testing.T) {
	batches := []batch{{0, 15}, {1000, 7}, {3500, 12}}
	counts, first := shapeLikeNginx(t, 5, 12, 8, batches)
	// The example as nginx's documentation tells it: the first request and
	// 8 excess ones at once, 4 excess delayed to the rate, the rest refused.
	if got := fmt.Sprint(first); got != "[0s 0s 0s 0s 0s 0s 0s 0s 0s 200ms 400ms 600ms 800ms refused refused]" {
		t.Fatalf("the first burst of 15: %s", got)
	}
	if fmt.Sprint(counts) != "map[at once:18 delayed:12 refused:4]" {
		t.Fatalf("outcomes %v", counts)
	}
	t.Logf("34 requests in 3 bursts, as nginx decides them: %v; the first 15: %v", counts, first)
}

// TestShapeNginxForms: the other forms of limit_req map the same way:
// burst=B alone (delay=0: every excess request delayed) is capacity 1
// with WithDelay(B/rate); burst=B nodelay (delay=B) is capacity B+1
// without WithDelay.
func TestShapeNginxForms(t *testing.T) {
	for _, tc := range []struct {
		name               string
		rate, burst, delay int64
		counts             string
	}{
		{"rate=2r/s burst=5", 2, 5, 0, "map[at once:1 delayed:8 refused:9]"},
		{"rate=2r/s burst=5 nodelay", 2, 5, 5, "map[at once:9 refused:9]"},
		{"rate=10r/s burst=4 delay=1", 10, 4, 1, "map[at once:4 delayed:8 refused:6]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			counts, _ := shapeLikeNginx(t, tc.rate, tc.burst, tc.delay, []batch{{0, 8}, {1500, 5}, {1750, 5}})
			if fmt.Sprint(counts) != tc.counts {
				t.Fatalf("outcomes %v, want %s", counts, tc.counts)
			}
		})
	}
}

// batch is n requests arriving together at ms.
type batch struct{ at, n int64 }

// shapeLikeNginx sends batches of requests to a middleware configured as
// nginx's limit_req rate=R burst=B delay=D (D=B: nodelay): policy
// leaky-bucket R/1s capacity=D+1, WithDelay((B-D)/R), and checks that
// each is served at once, served after its delay to the millisecond, or
// refused, as nginxLimitReq decides it. It returns the count of each
// outcome, and the outcomes of the first batch in order.
func shapeLikeNginx(t *testing.T, rate, burst, delay int64, batches []batch) (counts map[string]int, first []string) {
	t.Helper()
	l, fc := newLimiter(t, fmt.Sprintf("leaky-bucket %d/1s capacity=%d", rate, delay+1))
	m := New(l, WithDelay(time.Duration(burst-delay)*time.Second/time.Duration(rate)))
	sc := newShapeClient(t, m, fc)
	nginx := &nginxLimitReq{rate: rate * 1000, burst: burst * 1000, delay: delay * 1000}
	out := make(chan shaped, 64)
	due := map[int64][]int{} // ms -> ids served then
	counts = map[string]int{}
	id := 0
	for _, b := range batches {
		release(t, fc, due, out, b.at, nginx)
		for range b.n {
			id++
			over := nginx.excessAt(b.at) - nginx.burst // refused: the excess to work off before a retry fits
			d, ok := nginx.arrive(b.at)
			if b == batches[0] {
				first = append(first, outcome(d, ok))
			}
			s := arrive(t, sc, fc, id, out)
			switch {
			case !ok:
				counts["refused"]++
				if s == nil || s.err != nil || s.status != http.StatusTooManyRequests {
					t.Fatalf("request %d at %dms: %+v; nginx refuses it (excess over the burst)", id, b.at, s)
				}
				// A retry fits once the excess over the burst has drained.
				retry := int((over + nginx.rate - 1) / nginx.rate)
				checkStanding(t, s.header, "default", 0, retry)
				if got := s.header.Get("Retry-After"); got != fmt.Sprint(max(retry, 1)) {
					t.Fatalf("request %d refused with Retry-After %q, want %d", id, got, max(retry, 1))
				}
			case d == 0:
				counts["at once"]++
				if s == nil || s.err != nil || s.status != http.StatusOK || s.served != time.Duration(b.at)*time.Millisecond {
					t.Fatalf("request %d at %dms: %+v; nginx serves it at once", id, b.at, s)
				}
			default:
				counts["delayed"]++
				if s != nil {
					t.Fatalf("request %d at %dms answered at once (%+v); nginx delays it %dms", id, b.at, s, d)
				}
				due[b.at+d] = append(due[b.at+d], id)
			}
		}
	}
	release(t, fc, due, out, 1<<40, nginx)
	return counts, first
}

// outcome names an nginx decision: refused, or the delay ("0": at once).
func outcome(delay int64, admitted bool) string {
	if !admitted {
		return "refused"
	}
	return (time.Duration(delay) * time.Millisecond).String()
}

// release advances the fake clock through every due time up to until,
// and checks that the requests due then are served then, with truthful
// fields.
func release(t *testing.T, fc *clock.Fake, due map[int64][]int, out chan shaped, until int64, nginx *nginxLimitReq) {
	t.Helper()
	var times []int64
	for at := range due {
		if at <= until {
			times = append(times, at)
		}
	}
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	for _, at := range times {
		fc.Set(t0.Add(time.Duration(at) * time.Millisecond))
		for range due[at] {
			s := <-out
			if s.err != nil || s.status != http.StatusOK || s.served != time.Duration(at)*time.Millisecond {
				t.Fatalf("request %d: %+v; due at %dms", s.id, s, at)
			}
			// Truthful fields: nothing left, and t the whole seconds until
			// the bucket is empty (level/rate), as of now.
			lvl := nginx.level(at)
			checkStanding(t, s.header, "default", 0, int((lvl+nginx.rate-1)/nginx.rate))
		}
		delete(due, at)
	}
	if until < 1<<40 {
		fc.Set(t0.Add(time.Duration(until) * time.Millisecond))
	}
}

// TestShapeDisconnectRefunds: a client that goes away while its request
// waits gives its place back: the request after it is admitted when the
// one that left would have been, not after it. Nothing is written for the
// one that left, it is counted, and no goroutine stays behind.
func TestShapeDisconnectRefunds(t *testing.T) {
	l, fc := newLimiter(t, "token-bucket 1/1s")
	m := New(l, WithDelay(10*time.Second))
	sc := newShapeClient(t, m, fc)
	before := runtime.NumGoroutine()
	out := make(chan shaped, 4)
	if s := arrive(t, sc, fc, 1, out); s == nil || s.status != http.StatusOK {
		t.Fatalf("first request: %+v", s)
	}
	// The second waits for 1s; its client gives up.
	gone, cancel := context.WithCancel(context.Background())
	left := make(chan shaped, 1)
	go sc.send(gone, 2, left)
	fc.WaitTimers(1)
	cancel()
	if s := <-left; !errors.Is(s.err, context.Canceled) {
		t.Fatalf("the request that left: %+v", s)
	}
	for m.Stats().Abandoned != 1 || fc.Timers() != 0 {
		runtime.Gosched() // the server notices the closed connection
	}
	// Its unit is back: the third request takes its turn at 1s, not 2s.
	if s := arrive(t, sc, fc, 3, out); s != nil {
		t.Fatalf("third request answered at once: %+v", s)
	}
	fc.Advance(time.Second - time.Nanosecond)
	fc.Advance(time.Nanosecond)
	if s := <-out; s.status != http.StatusOK || s.served != time.Second {
		t.Fatalf("third request: %+v; want served at 1s, the turn the second gave back", s)
	}
	if st := m.Stats(); st.Abandoned != 1 || st.Errors != 0 || st.Denied != 0 {
		t.Fatalf("stats %+v", st)
	}
	sc.c.CloseIdleConnections()
	waitGoroutines(t, before)
}

// TestShapeDisconnectQueued: a client that goes away while others wait
// behind it gives nothing back, since they keep their turns (issue 28).
// On leaky-bucket 5/1s capacity=1, requests at 0, 30, 60 and 90ms are
// served at 0, 200, 400 and 600ms; the one at 30ms leaves at 100ms; one
// at 300ms must then be served at 800ms, not at 600ms beside the one from
// 90ms.
func TestShapeDisconnectQueued(t *testing.T) {
	l, fc := newLimiter(t, "leaky-bucket 5/1s capacity=1")
	m := New(l, WithDelay(time.Second))
	sc := newShapeClient(t, m, fc)
	out := make(chan shaped, 8)
	at := func(ms int) { fc.Set(t0.Add(time.Duration(ms) * time.Millisecond)) }
	if s := arrive(t, sc, fc, 1, out); s == nil || s.status != http.StatusOK {
		t.Fatalf("first request: %+v", s)
	}
	at(30)
	gone, cancel := context.WithCancel(context.Background())
	left := make(chan shaped, 1)
	go sc.send(gone, 2, left)
	fc.WaitTimers(1)
	for _, r := range []struct{ id, ms int }{{3, 60}, {4, 90}} {
		at(r.ms)
		if s := arrive(t, sc, fc, r.id, out); s != nil {
			t.Fatalf("request %d answered at once: %+v", r.id, s)
		}
	}
	at(100)
	cancel()
	if s := <-left; !errors.Is(s.err, context.Canceled) {
		t.Fatalf("the request that left: %+v", s)
	}
	for m.Stats().Abandoned != 1 || fc.Timers() != 2 {
		runtime.Gosched() // the server notices the closed connection
	}
	at(300)
	if s := arrive(t, sc, fc, 5, out); s != nil {
		t.Fatalf("request at 300ms answered at once: %+v", s)
	}
	for _, ms := range []int{400, 600, 800} {
		at(ms)
		if s := <-out; s.status != http.StatusOK || s.served != time.Duration(ms)*time.Millisecond {
			t.Fatalf("at %dms: %+v", ms, s)
		}
		if want := (800 - ms) / 200; fc.Timers() != want {
			t.Fatalf("at %dms, %d requests wait, want %d: one at 300ms was served beside the one from 90ms", ms, fc.Timers(), want)
		}
	}
}

// waitGoroutines fails t unless the goroutines fall back to at most
// before (plus 2, for the runtime's own) within 5 seconds of real time:
// connections close asynchronously.
func waitGoroutines(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before+2 {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond) // real connections closing
	}
	t.Logf("goroutines: %d before, %d after", before, runtime.NumGoroutine())
}

// TestShapeNewAllRefusesDelay: NewAll, all or nothing, cannot wait; it
// says so when it is made rather than ignoring the option.
func TestShapeNewAllRefusesDelay(t *testing.T) {
	l, _ := newLimiter(t, "token-bucket 1/1s")
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "WithDelay") {
			t.Fatalf("NewAll with WithDelay: %v", r)
		}
	}()
	NewAll([]Limit{{Limiter: l}}, WithDelay(time.Second))
}

// TestShapeWindowQueueBounded: WithDelay on a window policy queues at most
// the requests the policy admits within the maximum wait (here 90s: two
// windows begun, 20); the next is refused at once, not held (issue 28:
// 990 of 1,000 held on fixed-window 10/1m).
func TestShapeWindowQueueBounded(t *testing.T) {
	l, fc := newLimiter(t, "fixed-window 10/1m")
	m := New(l, WithDelay(90*time.Second))
	sc := newShapeClient(t, m, fc)
	out := make(chan shaped, 32)
	for id := range 10 {
		if s := arrive(t, sc, fc, id, out); s == nil || s.status != http.StatusOK {
			t.Fatalf("request %d of the first 10: %+v", id, s)
		}
	}
	for id := 10; id < 30; id++ {
		if s := arrive(t, sc, fc, id, out); s != nil {
			t.Fatalf("request %d answered at once: %+v; want it queued", id, s)
		}
	}
	if s := arrive(t, sc, fc, 30, out); s == nil || s.status != http.StatusTooManyRequests {
		t.Fatalf("request 31, past a queue of 20: %+v; want 429 at once", s)
	}
	fc.Advance(2 * time.Minute)
	for range 20 {
		<-out
	}
}
