package bench

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/clock"
	"github.com/floodgate/floodgate/httplimit"
)

// The load of the loopback scenarios: LoopbackLimit requests a minute on a
// fixed window, on a fake clock that never moves, so that the whole run
// falls in one window; LoopbackConns connections at once.
const (
	LoopbackLimit = 1000
	LoopbackConns = 64
)

// loopback starts a real HTTP server on loopback TCP with floodgate's
// middleware (every request from 127.0.0.1, so one key) and returns its
// URL and a client holding up to LoopbackConns connections to it.
func loopback(tb testing.TB) (string, *http.Client) {
	fc := clock.NewFake(time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC))
	l := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy(fmt.Sprintf("fixed-window %d/1m", LoopbackLimit)), floodgate.WithClock(fc)))
	m := httplimit.New(l, httplimit.WithLogger(slog.New(slog.DiscardHandler)))
	srv := httptest.NewServer(m.Handler(okHandler))
	tb.Cleanup(srv.Close)
	tr := &http.Transport{MaxConnsPerHost: LoopbackConns, MaxIdleConnsPerHost: LoopbackConns}
	tb.Cleanup(tr.CloseIdleConnections)
	return srv.URL, &http.Client{Transport: tr}
}

// hammer sends total GETs to url from LoopbackConns goroutines at once and
// counts the answers by status.
func hammer(tb testing.TB, url string, c *http.Client, total int) map[int]int {
	var next atomic.Int64
	var mu sync.Mutex
	codes := make(map[int]int)
	var wg sync.WaitGroup
	for range LoopbackConns {
		wg.Go(func() {
			mine := make(map[int]int)
			for next.Add(1) <= int64(total) {
				resp, err := c.Get(url)
				if err != nil {
					tb.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				mine[resp.StatusCode]++
			}
			mu.Lock()
			for k, v := range mine {
				codes[k] += v
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	return codes
}

// checkExact fails tb unless exactly min(total, LoopbackLimit) requests
// were admitted and the rest denied.
func checkExact(tb testing.TB, codes map[int]int, total int) {
	want := min(total, LoopbackLimit)
	if codes[http.StatusOK] != want || codes[http.StatusTooManyRequests] != total-want || len(codes) > 2 {
		tb.Fatalf("%d requests from %d connections: %v, want %d 200s and the rest 429s", total, LoopbackConns, codes, want)
	}
}

// TestLoopbackExactlyLimit: 3000 requests from 64 connections at once
// through a real server, within one window of 1000: exactly 1000 200s.
func TestLoopbackExactlyLimit(t *testing.T) {
	url, c := loopback(t)
	checkExact(t, hammer(t, url, c, 3*LoopbackLimit), 3*LoopbackLimit)
}

// BenchmarkLoopback: b.N requests through a real HTTP client and server on
// loopback TCP, from LoopbackConns connections at once, within one window
// of LoopbackLimit; it fails unless exactly min(b.N, LoopbackLimit) are
// admitted. It reports requests per second (decisions/s) and the number
// admitted.
func BenchmarkLoopback(b *testing.B) {
	name := fmt.Sprintf("fixed-window-%d-per-1m/conns=%d/floodgate", LoopbackLimit, LoopbackConns)
	b.Run(name, func(b *testing.B) {
		url, c := loopback(b)
		b.ResetTimer()
		codes := hammer(b, url, c, b.N)
		b.StopTimer()
		checkExact(b, codes, b.N)
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
		b.ReportMetric(float64(codes[http.StatusOK]), "admitted")
	})
}
