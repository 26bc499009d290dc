package bench

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/clock"
	"github.com/floodgate/floodgate/httplimit"
)

// The waiting scenarios: DelayedH2C requests held at once over cleartext
// HTTP/2 (one connection, a stream each), DelayedHTTP1 over HTTP/1.1 (a
// connection each: two descriptors per request in a process that is both
// client and server, so fewer).
const (
	DelayedH2C   = 10000
	DelayedHTTP1 = 2000
)

// waitingServer is a real HTTP server on loopback holding requests until
// released: behind httplimit.WithDelay on a fake clock (held by the
// middleware, the floodgate peer), or in a handler blocked on a channel
// (held in the handler, the DelayedHeld peer, which has the same HTTP
// costs and no middleware).
type waitingServer struct {
	url     string
	client  *http.Client
	fc      *clock.Fake
	release chan struct{} // closed to release the held peer's requests
	held    atomic.Int64  // requests in the held peer's handler
	delayed bool
}

func newWaitingServer(tb testing.TB, h2c, delayed bool, n int) *waitingServer {
	ws := &waitingServer{fc: clock.NewFake(time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)), release: make(chan struct{}), delayed: delayed}
	var h http.Handler = okHandler
	if delayed {
		// One request a millisecond, with room for one: every request after
		// the first waits its own millisecond, up to an hour.
		l := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("leaky-bucket 1/1ms capacity=1"), floodgate.WithClock(ws.fc)))
		h = httplimit.New(l, httplimit.WithDelay(time.Hour), httplimit.WithLogger(slog.New(slog.DiscardHandler))).Handler(okHandler)
	} else {
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == warmPath {
				return
			}
			ws.held.Add(1)
			<-ws.release
			w.WriteHeader(http.StatusOK)
		})
	}
	srv := httptest.NewUnstartedServer(h)
	tr := &http.Transport{MaxIdleConnsPerHost: n + 1}
	if h2c {
		srv.Config.Protocols = new(http.Protocols)
		srv.Config.Protocols.SetUnencryptedHTTP2(true)
		srv.Config.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: n + 16}
		tr.Protocols = new(http.Protocols)
		tr.Protocols.SetUnencryptedHTTP2(true)
	}
	srv.Start()
	tb.Cleanup(srv.Close)
	tb.Cleanup(tr.CloseIdleConnections)
	ws.url, ws.client = srv.URL, &http.Client{Transport: tr}
	if !delayed {
		// The connection up, and HTTP/2's settings in, before n requests
		// race for it: without them each request past the first dials a
		// connection of its own (10,000 of them ran out of descriptors).
		// The delayed peer's first request, which fills its bucket, does
		// the same.
		if _, err := ws.get(warmPath); err != nil {
			tb.Fatal(err)
		}
	}
	return ws
}

// warmPath is the held peer's path that answers at once.
const warmPath = "/warm"

// waiting returns the number of requests held.
func (ws *waitingServer) waiting() int {
	if ws.delayed {
		return ws.fc.Timers()
	}
	return int(ws.held.Load())
}

// get sends a GET and returns its status, or the error.
func (ws *waitingServer) get(path string) (int, error) {
	resp, err := ws.client.Get(ws.url + path)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// hold sends n requests at once, each from its own goroutine, and returns
// once all n are held; their statuses arrive on the returned channel.
func (ws *waitingServer) hold(tb testing.TB, n int) chan int {
	done := make(chan int, n)
	var failed atomic.Int64
	for range n {
		go func() {
			code, err := ws.get("/")
			if err != nil {
				failed.Add(1)
				tb.Error(err)
			}
			done <- code
		}()
	}
	for ws.waiting()+int(failed.Load()) < n {
		time.Sleep(time.Millisecond) // real requests arriving
	}
	if failed.Load() > 0 { // no wait for requests that never came
		ws.unhold(n)
		tb.Fatalf("%d of %d requests failed", failed.Load(), n)
	}
	return done
}

// unhold releases every held request: the fake clock past the last
// one's turn, or the held peer's channel closed.
func (ws *waitingServer) unhold(n int) {
	if ws.delayed {
		ws.fc.Advance(time.Duration(n) * time.Millisecond)
		return
	}
	close(ws.release)
}

// footprint is the process's goroutines and in-use heap and stack bytes,
// after a collection.
func footprint() (goroutines int, bytes uint64) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return runtime.NumGoroutine(), ms.HeapInuse + ms.StackInuse
}

// TestLoopbackDelayedHeld: 10,000 requests waiting at once in the
// middleware (WithDelay), over a real HTTP/2 server on loopback and a fake
// clock, are held without refusal or error, released one a millisecond in
// exact turn as the clock advances, all served, and leave no goroutine
// behind. With the race detector, 2,000.
func TestLoopbackDelayedHeld(t *testing.T) {
	ws := newWaitingServer(t, true, true, DelayedH2C)
	if code, err := ws.get("/"); err != nil || code != http.StatusOK {
		t.Fatalf("the first request: %d, %v", code, err) // it fills the bucket
	}
	n := DelayedH2C
	if raceEnabled {
		n = DelayedH2C / 5 // 10,000 take 35 s with the race detector
	}
	start := time.Now()
	g0, b0 := footprint()
	done := ws.hold(t, n)
	g1, b1 := footprint()
	t.Logf("%d waiting, held in %v: %+d goroutines, %+d bytes of heap and stack (%.1f goroutines, %d bytes each, both ends of the connection)",
		n, time.Since(start).Round(time.Millisecond), g1-g0, int64(b1-b0), float64(g1-g0)/float64(n), int64(b1-b0)/int64(n))
	served := 0
	for _, step := range []int{1, 9, n/10 - 10, n / 2, n - n/10 - n/2} {
		ws.fc.Advance(time.Duration(step) * time.Millisecond)
		served += step
		// Timers fire as the clock reaches them: exactly step more are
		// released, each at its own millisecond.
		if left := ws.fc.Timers(); left != n-served {
			t.Fatalf("%d ms on: %d still waiting, want %d", served, left, n-served)
		}
		for range step {
			if code := <-done; code != http.StatusOK {
				t.Fatalf("a released request answered %d", code)
			}
		}
	}
	ws.client.CloseIdleConnections()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > g0+2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines after all were served, %d before", runtime.NumGoroutine(), g0)
		}
		time.Sleep(10 * time.Millisecond) // connections closing
	}
}

// BenchmarkDelayed: the cost of requests waiting their turn in the
// middleware (httplimit.WithDelay), beside the same requests held in the
// handler (DelayedHeld): each op holds n requests at once over a real
// loopback server, HTTP/1.1 or cleartext HTTP/2, then releases them. It
// reports, per waiting request, the goroutines and the heap and stack
// bytes of the whole process (client and server), and the ns to hold and
// serve it; the middleware's own cost is the difference from the held
// peer.
func BenchmarkDelayed(b *testing.B) {
	for _, sc := range []struct {
		proto string
		h2c   bool
		n     int
	}{{"h2c", true, DelayedH2C}, {"http1", false, DelayedHTTP1}} {
		for _, delayed := range []bool{true, false} {
			peer := MiddlewareBase
			if !delayed {
				peer = DelayedHeld
			}
			b.Run(fmt.Sprintf("%s/waiting=%d/%s", sc.proto, sc.n, peer), func(b *testing.B) {
				runDelayed(b, sc.h2c, delayed, sc.n)
			})
		}
	}
}

// runDelayed is one scenario of BenchmarkDelayed.
func runDelayed(b *testing.B, h2c, delayed bool, n int) {
	var goroutines, bytes float64
	var mu sync.Mutex
	for b.Loop() {
		b.StopTimer()
		ws := newWaitingServer(b, h2c, delayed, n)
		if delayed {
			if _, err := ws.get("/"); err != nil { // fills the bucket
				b.Fatal(err)
			}
		}
		g0, b0 := footprint()
		b.StartTimer()
		done := ws.hold(b, n)
		b.StopTimer()
		g1, b1 := footprint()
		mu.Lock()
		goroutines, bytes = goroutines+float64(g1-g0), bytes+float64(int64(b1-b0))
		mu.Unlock()
		b.StartTimer()
		ws.unhold(n)
		for range n {
			if code := <-done; code != http.StatusOK {
				b.Fatalf("a released request answered %d", code)
			}
		}
		b.StopTimer()
		ws.client.CloseIdleConnections()
		b.StartTimer()
	}
	runs := float64(b.N) * float64(n)
	b.ReportMetric(goroutines/runs, "goroutines/waiting")
	b.ReportMetric(bytes/runs, "B/waiting")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/runs, "ns/waiting")
}
