package httplimit

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/floodgate/floodgate/algo"

	"github.com/floodgate/floodgate"
)

// nopWriter is a ResponseWriter that keeps nothing but its header map,
// cleared for each request, so that the benchmarks measure the middleware.
type nopWriter struct{ h http.Header }

func (w *nopWriter) Header() http.Header         { return w.h }
func (w *nopWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *nopWriter) WriteHeader(int)             {}

var nop = http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})

func benchHandler(b *testing.B, h http.Handler) {
	b.ReportAllocs()
	req := httptest.NewRequest("GET", "/", nil)
	w := &nopWriter{h: make(http.Header)}
	for b.Loop() {
		clear(w.h)
		h.ServeHTTP(w, req)
	}
}

// BenchmarkHandler: one request on one key through the middleware:
// admitted (a quota no run exhausts), denied, and two limits at once.
func BenchmarkHandler(b *testing.B) {
	high := algo.MustParsePolicy("token-bucket 1000000000/1h")
	b.Run("bare", func(b *testing.B) { benchHandler(b, nop) })
	b.Run("admitted", func(b *testing.B) {
		benchHandler(b, New(floodgate.Must(floodgate.NewLimiter(high))).Handler(nop))
	})
	b.Run("admitted-legacy", func(b *testing.B) {
		benchHandler(b, New(floodgate.Must(floodgate.NewLimiter(high)), WithHeaders(RateLimitHeaders|LegacyHeaders)).Handler(nop))
	})
	b.Run("denied", func(b *testing.B) {
		l := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("fixed-window 1/1h")))
		benchHandler(b, New(l, WithLogger(nil)).Handler(nop))
	})
	b.Run("all2", func(b *testing.B) {
		a := floodgate.Must(floodgate.NewLimiter(high, floodgate.WithName("a")))
		g := floodgate.Must(floodgate.NewLimiter(high, floodgate.WithName("g")))
		benchHandler(b, NewAll([]Limit{{Limiter: a}, {Limiter: g, Key: Global}}).Handler(nop))
	})
	b.Run("decide", func(b *testing.B) {
		l := floodgate.Must(floodgate.NewLimiter(high))
		b.ReportAllocs()
		for b.Loop() {
			l.Allow(b.Context(), "192.0.2.1")
		}
	})
}
