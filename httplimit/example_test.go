package httplimit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/floodgate/floodgate/algo"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/clock"
	"github.com/floodgate/floodgate/httplimit"
)

// fakeClock stands in for the real clock, so that the examples' output is
// always the same: omit WithClock in production.
func fakeClock() floodgate.Option {
	return floodgate.WithClock(clock.NewFake(time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)))
}

// Two requests a minute per client address: the third is refused with a
// 429, Retry-After and the RateLimit fields.
func Example() {
	limiter := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("fixed-window 2/1m"), fakeClock()))
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello\n") })
	handler := httplimit.New(limiter).Handler(hello)

	for range 3 {
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		fmt.Printf("%d RateLimit: %s | RateLimit-Policy: %s | Retry-After: %q\n",
			rec.Code, rec.Header().Get("RateLimit"), rec.Header().Get("RateLimit-Policy"), rec.Header().Get("Retry-After"))
	}
	// Output:
	// 200 RateLimit: "default";r=1;t=60 | RateLimit-Policy: "default";q=2;w=60 | Retry-After: ""
	// 200 RateLimit: "default";r=0;t=60 | RateLimit-Policy: "default";q=2;w=60 | Retry-After: ""
	// 429 RateLimit: "default";r=0;t=60 | RateLimit-Policy: "default";q=2;w=60 | Retry-After: "60"
}

// Behind your own reverse proxies (here in 10.0.0.0/8), the client's
// address comes from X-Forwarded-For, read from the right. A client that
// writes the header itself changes nothing.
func ExampleClientIP() {
	ip := httplimit.ClientIP{
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
		Header:         httplimit.XForwardedFor,
	}
	for _, req := range []struct{ peer, xff string }{
		{"10.0.0.5:4711", "203.0.113.9"},              // through the proxy
		{"10.0.0.5:4711", "6.6.6.6, 203.0.113.9"},     // the client prepended a lie
		{"10.0.0.5:4711", "203.0.113.9, 10.0.0.7"},    // through two proxies
		{"198.51.100.1:4711", "203.0.113.9"},          // straight to the server: not believed
		{"10.0.0.5:4711", "2001:db8:1:2:aaaa::1"},     // IPv6, grouped by /64
		{"10.0.0.5:4711", "203.0.113.9, not-an-addr"}, // malformed: the peer
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = req.peer
		r.Header.Set("X-Forwarded-For", req.xff)
		key, _ := ip.Key(r)
		fmt.Printf("%-18s %-26s -> %s\n", req.peer, req.xff, key)
	}
	// Output:
	// 10.0.0.5:4711      203.0.113.9                -> 203.0.113.9
	// 10.0.0.5:4711      6.6.6.6, 203.0.113.9       -> 203.0.113.9
	// 10.0.0.5:4711      203.0.113.9, 10.0.0.7      -> 203.0.113.9
	// 198.51.100.1:4711  203.0.113.9                -> 198.51.100.1
	// 10.0.0.5:4711      2001:db8:1:2:aaaa::1       -> 2001:db8:1:2::/64
	// 10.0.0.5:4711      203.0.113.9, not-an-addr   -> 10.0.0.5
}

type userKey struct{}

// Seed 004: a limit per signed-in user, keyed on the user ID that the
// authentication middleware put in the context; anonymous requests are
// keyed on their address.
func ExampleFirstOf() {
	limiter := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("sliding-log 2/1m"), fakeClock()))
	m := httplimit.New(limiter, httplimit.WithKey(httplimit.FirstOf(
		httplimit.ByContext(userKey{}), // "0:alice"
		httplimit.ClientIP{}.Key,       // "1:192.0.2.1"
	)))
	auth := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if u := r.Header.Get("X-Demo-User"); u != "" { // a real one checks a session
				r = r.WithContext(context.WithValue(r.Context(), userKey{}, u))
			}
			next.ServeHTTP(w, r)
		})
	}
	handler := auth(m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))

	for _, user := range []string{"alice", "alice", "alice", "bob", "", "", ""} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-Demo-User", user)
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, r)
		fmt.Printf("%-5q %d\n", user, rec.Code)
	}
	// Output:
	// "alice" 200
	// "alice" 200
	// "alice" 429
	// "bob" 200
	// ""    200
	// ""    200
	// ""    429
}

// A GraphQL API that charges each query by its estimated cost, the way
// Shopify's does: a bucket of 1000 points refilled at 50 a second, a query
// costing 1 plus what its connections may return (first: N). The cost
// function reads the body and puts it back for the handler.
func ExampleWithCostFunc() {
	firstN := regexp.MustCompile(`first:\s*(\d+)`)
	queryCost := func(r *http.Request) int64 {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		r.Body = io.NopCloser(bytes.NewReader(body))
		var q struct{ Query string }
		if err != nil || json.Unmarshal(body, &q) != nil {
			return 1
		}
		cost := int64(1)
		for _, m := range firstN.FindAllStringSubmatch(q.Query, -1) {
			n, _ := strconv.ParseInt(m[1], 10, 64)
			cost += min(n, 1000)
		}
		return cost
	}
	limiter := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("leaky-bucket 50/1s capacity=1000"), floodgate.WithName("graphql"), fakeClock()))
	m := httplimit.New(limiter, httplimit.WithCostFunc(queryCost))
	graphql := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body) // the body is still there
		fmt.Fprintf(w, "%d bytes of query", len(b))
	})
	handler := m.Handler(graphql)

	for _, query := range []string{
		`{ shop { name } }`,
		`{ products(first: 250) { edges { node { variants(first: 2) { edges { node { id } } } } } } }`,
		`{ orders(first: 700) { edges { node { id } } } }`,
		`{ customers(first: 100) { edges { node { id } } } }`,
	} {
		body, _ := json.Marshal(map[string]string{"query": query})
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, httptest.NewRequest("POST", "/graphql", bytes.NewReader(body)))
		result := rec.Body.String()
		if rec.Code != http.StatusOK {
			result = "Retry-After: " + rec.Header().Get("Retry-After")
		}
		fmt.Println(rec.Code, rec.Header().Get("RateLimit"), result)
	}
	// Output:
	// 200 "graphql";r=999;t=1 29 bytes of query
	// 200 "graphql";r=746;t=6 104 bytes of query
	// 200 "graphql";r=45;t=20 60 bytes of query
	// 429 "graphql";r=45;t=2 Retry-After: 2
}

// A per-client limit and a global one, checked all or nothing: a request
// refused by either spends nothing from the other.
func ExampleNewAll() {
	perClient := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("fixed-window 2/1m"), floodgate.WithName("per-client"), fakeClock()))
	global := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("fixed-window 3/1m"), floodgate.WithName("global"), fakeClock()))
	m := httplimit.NewAll([]httplimit.Limit{
		{Limiter: perClient},                     // the client's address, the default key
		{Limiter: global, Key: httplimit.Global}, // one key for everyone
	})
	handler := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))

	for _, addr := range []string{"192.0.2.1", "192.0.2.1", "192.0.2.1", "192.0.2.2", "192.0.2.3"} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = addr + ":1234"
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, r)
		fmt.Println(addr, rec.Code, rec.Header().Get("RateLimit"))
	}
	// Output:
	// 192.0.2.1 200 "per-client";r=1;t=60, "global";r=2;t=60
	// 192.0.2.1 200 "per-client";r=0;t=60, "global";r=1;t=60
	// 192.0.2.1 429 "per-client";r=0;t=60, "global";r=1;t=60
	// 192.0.2.2 200 "per-client";r=1;t=60, "global";r=0;t=60
	// 192.0.2.3 429 "per-client";r=2;t=60, "global";r=0;t=60
}

// The next handler finds the decision in its request's context.
func ExampleDecisionFrom() {
	limiter := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("token-bucket 10/1s"), fakeClock()))
	handler := httplimit.New(limiter).Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d, ok := httplimit.DecisionFrom(r.Context()); ok && d.Remaining < 9 {
			fmt.Println("slow down:", d.Remaining, "left")
			return
		}
		fmt.Println("fine")
	}))
	for range 3 {
		handler.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	}
	// Output:
	// fine
	// slow down: 8 left
	// slow down: 7 left
}

// nginx's two-stage limiting, limit_req_zone … rate=5r/s with
// limit_req zone=ip burst=12 delay=8: a bucket of capacity delay+1 = 9 at
// 5 a second serves 9 requests of a burst at once; the next 4 wait their
// turn, at most (burst-delay)/rate = 800ms; the rest are refused with a 429.
func ExampleWithDelay() {
	fc := clock.NewFake(time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)) // omit in production
	limiter := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("leaky-bucket 5/1s capacity=9"),
		floodgate.WithClock(fc), floodgate.WithMaxQueue(100))) // at most 100 waiting per key
	start := fc.Now()
	handler := httplimit.New(limiter, httplimit.WithDelay(800*time.Millisecond)).Handler(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, fc.Now().Sub(start)) }))

	// 15 requests at once: 11 are answered at once, 4 wait on the clock.
	var mu sync.Mutex
	var outcomes []string
	var answered sync.WaitGroup
	for range 15 {
		answered.Add(1)
		go func() {
			defer answered.Done()
			rec := httptest.NewRecorder()
			handler.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
			mu.Lock()
			defer mu.Unlock()
			if rec.Code != http.StatusOK {
				outcomes = append(outcomes, "refused")
				return
			}
			outcomes = append(outcomes, "served at "+rec.Body.String())
		}()
	}
	until := func(n, waiting int) { // n answered and waiting asleep
		for mu.Lock(); len(outcomes) < n || fc.Timers() != waiting; mu.Lock() {
			mu.Unlock()
			runtime.Gosched()
		}
		mu.Unlock()
	}
	until(11, 4)
	for i := range 4 { // every 200ms, the next one's turn
		fc.Advance(200 * time.Millisecond)
		until(12+i, 3-i)
	}
	answered.Wait()
	slices.Sort(outcomes)
	fmt.Println(strings.Join(slices.Compact(outcomes), "\n"))
	// Output:
	// refused
	// served at 0s
	// served at 200ms
	// served at 400ms
	// served at 600ms
	// served at 800ms
}
