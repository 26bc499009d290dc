package bench

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/httplimit"
	"github.com/go-chi/httprate"
	golimithttp "github.com/sethvargo/go-limiter/httplimit"
	"github.com/sethvargo/go-limiter/memorystore"
)

// okHandler is the handler every middleware wraps: it writes a status and
// nothing else, so that the middleware is most of what is measured.
var okHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })

// middlewares returns the handlers of BenchmarkMiddleware: the bare
// handler and each middleware around it, all with a quota so high that
// every request of a run is admitted (the High quota of the Limiter
// benchmarks), each keyed on the client address.
func middlewares(b *testing.B) []struct {
	name string
	h    http.Handler
} {
	fg := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("token-bucket 1000000000/1h")))
	gs, err := memorystore.New(&memorystore.Config{Tokens: 1e8, Interval: 1e16})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { gs.Close(context.Background()) })
	gm, err := golimithttp.NewMiddleware(gs, golimithttp.IPKeyFunc())
	if err != nil {
		b.Fatal(err)
	}
	return []struct {
		name string
		h    http.Handler
	}{
		{"bare", okHandler},
		{"floodgate", httplimit.New(fg).Handler(okHandler)},
		{"httprate", httprate.LimitBy(1e9, time.Hour, httprateKey)(okHandler)},
		{"golimiter-http", gm.Handle(okHandler)},
	}
}

// httprateKey keys httprate on the client address as its LimitByIP does
// (deprecated since v0.16 because it keys on r.RemoteAddr without saying
// so): the peer's address without its port, IPv6 grouped by /64, the
// whole RemoteAddr when it has no port.
func httprateKey(r *http.Request) (string, error) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return httprate.CanonicalizeIP(host), nil
}

// BenchmarkMiddleware: one GET on one client address through each
// middleware, in process, with a new httptest.ResponseRecorder per request;
// every request is admitted. Beside them, floodgate's decision alone
// (floodgate-decide, no HTTP) and the least middleware that decides and
// writes the two header fields (floodgate-core, see minimal), to compute
// the middleware's overhead ratio (OverheadRatio): what floodgate's
// middleware adds to the bare handler over what the decision and the
// header writing add.
func BenchmarkMiddleware(b *testing.B) {
	for _, mode := range modes {
		parallel := mode == "parallel"
		for _, m := range middlewares(b) {
			b.Run("admitted/"+mode+"/"+m.name, func(b *testing.B) {
				runHTTP(b, m.h, parallel)
			})
		}
		b.Run("admitted/"+mode+"/"+MiddlewareDecide, func(b *testing.B) {
			l := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("token-bucket 1000000000/1h")))
			runCore(b, parallel, func() bool {
				d, _ := l.Allow(ctx, "192.0.2.1")
				return d.Allowed
			})
		})
		b.Run("admitted/"+mode+"/"+MiddlewareCore, func(b *testing.B) {
			l := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("token-bucket 1000000000/1h")))
			runHTTP(b, minimal(l, okHandler), parallel)
		})
	}
}

// minimal is the least a rate-limiting middleware can do with floodgate:
// decide on a fixed key, write the two IETF header fields, call next. What
// floodgate's middleware takes beyond it is its overhead (OverheadRatio):
// finding the key, keeping the decision in the context, and its checks.
func minimal(l *floodgate.Limiter, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, _ := l.Allow(r.Context(), "192.0.2.1")
		h := w.Header()
		h.Set("RateLimit-Policy", `"default";q=1000000000;w=3600`)
		h.Set("RateLimit", `"default";r=`+strconv.FormatInt(d.Remaining, 10)+";t="+
			strconv.FormatInt(int64((d.ResetAfter+time.Second-1)/time.Second), 10))
		if !d.Allowed {
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// runHTTP serves b.N requests with h, serially or from b.RunParallel's
// goroutines, and reports the fraction admitted (status 200).
func runHTTP(b *testing.B, h http.Handler, parallel bool) {
	b.ReportAllocs()
	req := httptest.NewRequest(http.MethodGet, "/", nil) // from 192.0.2.1:1234
	var mu sync.Mutex
	admitted := 0
	body := func(pb interface{ Next() bool }) {
		n := 0
		for pb.Next() {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code == http.StatusOK {
				n++
			}
		}
		mu.Lock()
		admitted += n
		mu.Unlock()
	}
	if parallel {
		b.RunParallel(func(pb *testing.PB) { body(pb) })
	} else {
		b.ResetTimer()
		body(&serialPB{left: b.N})
	}
	b.StopTimer()
	report(b, int64(admitted), 0, int64(b.N), nil)
}

// runCore runs f b.N times, serially or in parallel, and reports the
// fraction admitted.
func runCore(b *testing.B, parallel bool, f func() bool) {
	b.ReportAllocs()
	var mu sync.Mutex
	admitted := 0
	body := func(pb interface{ Next() bool }) {
		n := 0
		for pb.Next() {
			if f() {
				n++
			}
		}
		mu.Lock()
		admitted += n
		mu.Unlock()
	}
	if parallel {
		b.RunParallel(func(pb *testing.PB) { body(pb) })
	} else {
		b.ResetTimer()
		body(&serialPB{left: b.N})
	}
	b.StopTimer()
	report(b, int64(admitted), 0, int64(b.N), nil)
}

// serialPB hands out b.N iterations to one goroutine, as testing.PB does
// to many.
type serialPB struct{ left int }

func (s *serialPB) Next() bool {
	if s.left == 0 {
		return false
	}
	s.left--
	return true
}
