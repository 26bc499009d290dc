package httplimit

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"

	"github.com/dunglas/httpsfv"
	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/clock"
	"github.com/floodgate/floodgate/internal/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// t0 is the start of every fake clock: a whole minute, so that fixed
// windows of a minute start there.
var t0 = time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)

// newLimiter returns a limiter of policy on a fake clock at t0.
func newLimiter(t testing.TB, policy string, opts ...floodgate.Option) (*floodgate.Limiter, *clock.Fake) {
	t.Helper()
	p, err := algo.ParsePolicy(policy)
	if err != nil {
		t.Fatal(err)
	}
	fc := clock.NewFake(t0)
	return floodgate.Must(floodgate.NewLimiter(p, append([]floodgate.Option{floodgate.WithClock(fc)}, opts...)...)), fc
}

// ok is a handler answering 200 "ok".
var ok = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })

// server starts a real HTTP server with h, closed when t ends.
func server(t testing.TB, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// result is a response, its body read.
type result struct {
	status int
	header http.Header
	body   string
}

// get sends a GET to url with the given header fields (name, value
// pairs) and reads the response.
func get(t testing.TB, url string, kv ...string) result {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		req.Header.Add(kv[i], kv[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return result{resp.StatusCode, resp.Header, string(b)}
}

// item is one parsed member of a RateLimit or RateLimit-Policy field.
type item struct {
	name   string
	params map[string]any
}

// parseList parses the structured-field List of a header field with
// httpsfv, and checks that each member is an Item whose value is a
// String, as the draft requires.
func parseList(t testing.TB, h http.Header, name string) []item {
	t.Helper()
	vs := h.Values(name)
	if len(vs) == 0 {
		t.Fatalf("no %s field", name)
	}
	l, err := httpsfv.UnmarshalList(vs)
	if err != nil {
		t.Fatalf("%s: %q is not a structured-field List: %v", name, vs, err)
	}
	var items []item
	for _, m := range l {
		it, ok := m.(httpsfv.Item)
		if !ok {
			t.Fatalf("%s: member %#v is not an Item", name, m)
		}
		s, ok := it.Value.(string)
		if !ok {
			t.Fatalf("%s: item value %#v is not a String", name, it.Value)
		}
		ps := make(map[string]any)
		for _, k := range it.Params.Names() {
			ps[k], _ = it.Params.Get(k)
		}
		items = append(items, item{s, ps})
	}
	return items
}

// checkStanding checks the RateLimit field: one item per name, with r and
// t as given.
func checkStanding(t testing.TB, h http.Header, want ...any) {
	t.Helper()
	items := parseList(t, h, "RateLimit")
	if len(items) != len(want)/3 {
		t.Fatalf("RateLimit %q: %d items, want %d", h.Values("RateLimit"), len(items), len(want)/3)
	}
	for i, it := range items {
		name, r, tt := want[3*i].(string), int64(want[3*i+1].(int)), int64(want[3*i+2].(int))
		if it.name != name || it.params["r"] != r || it.params["t"] != tt || len(it.params) != 2 {
			t.Errorf("RateLimit item %d = %s %v, want %q;r=%d;t=%d", i, it.name, it.params, name, r, tt)
		}
	}
}

func TestAdmittedThenDenied(t *testing.T) {
	l, _ := newLimiter(t, "fixed-window 3/1m")
	srv := server(t, New(l).Handler(ok))
	for i := range 3 {
		res := get(t, srv.URL)
		if res.status != 200 || res.body != "ok" {
			t.Fatalf("request %d: %d %q", i, res.status, res.body)
		}
		checkStanding(t, res.header, "default", 2-i, 60)
		if ra := res.header.Get("Retry-After"); ra != "" {
			t.Errorf("admitted request %d has Retry-After %q", i, ra)
		}
	}
	res := get(t, srv.URL)
	if res.status != http.StatusTooManyRequests {
		t.Fatalf("4th request: %d, want 429", res.status)
	}
	if ra := res.header.Get("Retry-After"); ra != "60" {
		t.Errorf("Retry-After = %q, want 60", ra)
	}
	checkStanding(t, res.header, "default", 0, 60)
	if ct := res.header.Get("Content-Type"); ct != "text/plain; charset=utf-8" {
		t.Errorf("Content-Type = %q", ct)
	}
	if res.body != "Too many requests: retry in 60 seconds.\n" {
		t.Errorf("body = %q", res.body)
	}
}

func TestRateLimitPolicyField(t *testing.T) {
	for _, tc := range []struct {
		policy string
		opts   []Option
		want   string // name;q;w;qu
	}{
		{"fixed-window 100/1m", nil, "default;100;60;"},
		{"token-bucket 10/1s burst=20", nil, "default;10;1;"},
		{"sliding-log 5/10s", []Option{WithName("login")}, "login;5;10;"},
		{"sliding-window 1000/1h", []Option{WithQuotaUnit("content-bytes")}, "default;1000;3600;content-bytes"},
		{"leaky-bucket 1/1h capacity=20", []Option{WithQuotaUnit("requests")}, "default;1;3600;"},
		{"token-bucket 10/100ms", nil, "default;100;1;"},
		{"token-bucket 3/700ms", nil, "default;4;1;"},
		{"fixed-window 3/1500ms", nil, "default;4;2;"},
		{"fixed-window 7/8784h", []Option{WithName(`we"ird\name ü`)}, `we"ird\name _;7;31622400;`},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			l, _ := newLimiter(t, tc.policy)
			rec := httptest.NewRecorder()
			New(l, tc.opts...).Handler(ok).ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
			items := parseList(t, rec.Header(), "RateLimit-Policy")
			if len(items) != 1 {
				t.Fatalf("%d items", len(items))
			}
			it := items[0]
			qu, _ := it.params["qu"].(string)
			got := fmt.Sprintf("%s;%v;%v;%s", it.name, it.params["q"], it.params["w"], qu)
			if got != tc.want {
				t.Errorf("RateLimit-Policy %q parsed as %s, want %s", rec.Header().Get("RateLimit-Policy"), got, tc.want)
			}
		})
	}
}

func TestPolicyNames(t *testing.T) {
	fc := clock.NewFake(t0)
	named := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("fixed-window 10/1m"), floodgate.WithName("per-user"), floodgate.WithClock(fc)))
	plain := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("fixed-window 100/1m"), floodgate.WithClock(fc)))
	plain2 := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("fixed-window 1000/1h"), floodgate.WithClock(fc)))
	m := NewAll([]Limit{{Limiter: named}, {Limiter: plain}, {Limiter: plain2}, {Limiter: plain, Name: "per-user", Key: Global}})
	rec := httptest.NewRecorder()
	m.Handler(ok).ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	var names []string
	for _, it := range parseList(t, rec.Header(), "RateLimit-Policy") {
		names = append(names, it.name)
	}
	if got := strings.Join(names, ","); got != "per-user,default,default-2,per-user-2" {
		t.Errorf("names %s", got)
	}
}

func TestRetryAfterRoundsUp(t *testing.T) {
	for _, tc := range []struct {
		policy string
		spend  int           // requests admitted first
		wait   time.Duration // clock advance before the denied request
		want   string        // Retry-After
		wantT  int           // RateLimit t
	}{
		{"token-bucket 3/1s", 3, 0, "1", 1},                        // 333.33ms
		{"token-bucket 1/1m", 1, 0, "60", 60},                      // exactly 60s
		{"token-bucket 1/1m", 1, time.Nanosecond, "60", 60},        // 59.999999999s
		{"token-bucket 1/1m", 1, 59 * time.Second, "1", 1},         // exactly 1s
		{"token-bucket 1/1m", 1, 59*time.Second + 1, "1", 1},       // 1ns
		{"fixed-window 1/1m", 1, 500 * time.Millisecond, "60", 60}, // 59.5s
		{"sliding-log 1/10s", 1, 2100 * time.Millisecond, "8", 8},  // 7.9s
		{"leaky-bucket 1/1h capacity=2", 2, 0, "3600", 3600},
	} {
		t.Run(fmt.Sprintf("%s/%d/%v", tc.policy, tc.spend, tc.wait), func(t *testing.T) {
			l, fc := newLimiter(t, tc.policy)
			h := New(l).Handler(ok)
			for range tc.spend {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
				if rec.Code != 200 {
					t.Fatalf("admission: %d", rec.Code)
				}
			}
			fc.Advance(tc.wait)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
			if rec.Code != 429 {
				t.Fatalf("status %d, want 429", rec.Code)
			}
			if got := rec.Header().Get("Retry-After"); got != tc.want {
				t.Errorf("Retry-After %q, want %q", got, tc.want)
			}
			checkStanding(t, rec.Header(), "default", 0, tc.wantT)
			// Waiting exactly Retry-After is never early.
			var secs int
			fmt.Sscan(tc.want, &secs)
			fc.Advance(time.Duration(secs) * time.Second)
			rec = httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
			if rec.Code != 200 {
				t.Errorf("after waiting Retry-After: %d", rec.Code)
			}
		})
	}
}

func TestDenialBodyByAccept(t *testing.T) {
	l, _ := newLimiter(t, "fixed-window 1/1m", floodgate.WithName("api"))
	srv := server(t, New(l).Handler(ok))
	get(t, srv.URL)
	for _, tc := range []struct {
		accept string
		json   bool
	}{
		{"", false},
		{"*/*", false},
		{"text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", false},
		{"application/json", true},
		{"application/problem+json", true},
		{"application/json, */*", true},
		{"application/vnd.api+json", true},
		{"text/plain, application/json;q=0.5", false},
		{"application/json;q=0", false},
		{"text/plain;q=0.2, application/json;q=0.9", true},
		{"APPLICATION/JSON", true},
	} {
		res := get(t, srv.URL, "Accept", tc.accept)
		if res.status != 429 {
			t.Fatalf("status %d", res.status)
		}
		ct := res.header.Get("Content-Type")
		if !tc.json {
			if ct != "text/plain; charset=utf-8" || !strings.HasPrefix(res.body, "Too many requests") {
				t.Errorf("Accept %q: %s %q, want text", tc.accept, ct, res.body)
			}
			continue
		}
		if ct != "application/problem+json" {
			t.Errorf("Accept %q: Content-Type %s, want application/problem+json", tc.accept, ct)
			continue
		}
		var p struct {
			Type     string   `json:"type"`
			Title    string   `json:"title"`
			Status   int      `json:"status"`
			Detail   string   `json:"detail"`
			Violated []string `json:"violated-policies"`
		}
		if err := json.Unmarshal([]byte(res.body), &p); err != nil {
			t.Fatalf("body %q: %v", res.body, err)
		}
		if p.Type != quotaExceeded || p.Status != 429 || p.Title == "" ||
			p.Detail != "Too many requests: retry in 60 seconds." || len(p.Violated) != 1 || p.Violated[0] != "api" {
			t.Errorf("problem %+v", p)
		}
	}
}

func TestDeniedOptions(t *testing.T) {
	t.Run("status", func(t *testing.T) {
		l, _ := newLimiter(t, "fixed-window 1/1m")
		srv := server(t, New(l, WithStatus(http.StatusServiceUnavailable)).Handler(ok))
		get(t, srv.URL)
		if res := get(t, srv.URL, "Accept", "application/json"); res.status != 503 || !strings.Contains(res.body, `"status":503`) {
			t.Errorf("%d %q", res.status, res.body)
		}
	})
	t.Run("body", func(t *testing.T) {
		l, _ := newLimiter(t, "fixed-window 1/1m")
		srv := server(t, New(l, WithDeniedBody("text/html", []byte("<p>slow down</p>"))).Handler(ok))
		get(t, srv.URL)
		res := get(t, srv.URL, "Accept", "application/json")
		if res.status != 429 || res.body != "<p>slow down</p>" || res.header.Get("Content-Type") != "text/html" ||
			res.header.Get("Retry-After") != "60" {
			t.Errorf("%d %q %v", res.status, res.body, res.header)
		}
	})
	t.Run("handler", func(t *testing.T) {
		l, _ := newLimiter(t, "fixed-window 1/1m")
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			d, ok := DecisionFrom(r.Context())
			if !ok || d.Allowed {
				t.Errorf("DecisionFrom in the denied handler: %+v %v", d, ok)
			}
			if w.Header().Get("Retry-After") != "60" || w.Header().Get("RateLimit") == "" {
				t.Errorf("fields not set before the denied handler: %v", w.Header())
			}
			w.WriteHeader(http.StatusTeapot)
			fmt.Fprintf(w, "wait %v", d.RetryAfter)
		})
		srv := server(t, New(l, WithDeniedHandler(h)).Handler(ok))
		get(t, srv.URL)
		if res := get(t, srv.URL); res.status != http.StatusTeapot || res.body != "wait 1m0s" {
			t.Errorf("%d %q", res.status, res.body)
		}
	})
}

// syncBuffer is a bytes.Buffer safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newLogger() (*slog.Logger, *syncBuffer) {
	var buf syncBuffer
	return slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), &buf
}

func TestDryRun(t *testing.T) {
	l, _ := newLimiter(t, "fixed-window 2/1m", floodgate.WithDryRun(true), floodgate.WithName("shadow"))
	log, buf := newLogger()
	var mu sync.Mutex
	var limited []floodgate.Decision
	m := New(l, WithLogger(log), WithOnLimited(func(r *http.Request, d floodgate.Decision) {
		mu.Lock()
		defer mu.Unlock()
		limited = append(limited, d)
	}))
	srv := server(t, m.Handler(ok))
	for i := range 5 {
		res := get(t, srv.URL)
		if res.status != 200 {
			t.Fatalf("request %d: %d in dry-run mode", i, res.status)
		}
		if res.header.Get("Retry-After") != "" {
			t.Errorf("request %d: Retry-After in dry-run mode", i)
		}
		// A dry-run limit is not advertised (issue 29).
		if f := res.header.Get("RateLimit") + res.header.Get("RateLimit-Policy"); f != "" {
			t.Errorf("request %d: a dry-run limit advertised: %q", i, f)
		}
	}
	if s := m.Stats(); s.DryRunDenied != 3 || s.Denied != 0 {
		t.Errorf("Stats %+v, want 3 dry-run denials", s)
	}
	if s := l.Stats(); s.DryRunDenied != 3 {
		t.Errorf("limiter Stats %+v", s)
	}
	mu.Lock()
	if len(limited) != 3 || !limited[0].DryRun {
		t.Errorf("OnLimited saw %+v", limited)
	}
	mu.Unlock()
	if n := strings.Count(buf.String(), "dry run"); n != 3 || !strings.Contains(buf.String(), "limit=shadow key=127.0.0.1") {
		t.Errorf("log:\n%s", buf)
	}
}

func TestSkip(t *testing.T) {
	l, _ := newLimiter(t, "fixed-window 1/1m")
	m := New(l,
		WithSkip(func(r *http.Request) bool { return r.URL.Path == "/healthz" }),
		WithSkip(ClientIP{}.In(netip.MustParsePrefix("192.0.2.0/24"))))
	h := m.Handler(ok)
	for i := range 3 {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
		if rec.Code != 200 || rec.Header().Get("RateLimit") != "" {
			t.Errorf("health check %d: %d %v", i, rec.Code, rec.Header())
		}
		req := httptest.NewRequest("GET", "/", nil) // from 192.0.2.1
		rec = httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 {
			t.Errorf("trusted address %d: %d", i, rec.Code)
		}
	}
	srv := server(t, h) // from 127.0.0.1: limited
	if res := get(t, srv.URL); res.status != 200 {
		t.Fatal(res.status)
	}
	if res := get(t, srv.URL); res.status != 429 {
		t.Errorf("second request from 127.0.0.1: %d", res.status)
	}
}

func TestOnLimited(t *testing.T) {
	l, _ := newLimiter(t, "fixed-window 1/1m")
	var calls []string
	m := New(l, WithOnLimited(func(r *http.Request, d floodgate.Decision) {
		md, ok := MultiDecisionFrom(r.Context())
		calls = append(calls, fmt.Sprintf("%s %v %v %v", r.URL.Path, d.Allowed, d.RetryAfter, ok && len(md.Decisions) == 1))
	}))
	h := m.Handler(ok)
	for _, p := range []string{"/a", "/b", "/c"} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", p, nil))
	}
	if got := strings.Join(calls, "|"); got != "/b false 1m0s true|/c false 1m0s true" {
		t.Errorf("OnLimited calls: %s", got)
	}
	if s := m.Stats(); s.Denied != 2 {
		t.Errorf("Stats %+v", s)
	}
}

func TestCost(t *testing.T) {
	t.Run("fixed", func(t *testing.T) {
		l, _ := newLimiter(t, "fixed-window 10/1m")
		h := New(l, WithCost(4)).Handler(ok)
		var codes []int
		for range 3 {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
			codes = append(codes, rec.Code)
		}
		if fmt.Sprint(codes) != "[200 200 429]" {
			t.Errorf("codes %v", codes)
		}
	})
	t.Run("bytes", func(t *testing.T) {
		l, _ := newLimiter(t, "fixed-window 1000/1m")
		m := New(l, WithCostFunc(BodyBytes(1000)), WithQuotaUnit("content-bytes"))
		srv := server(t, m.Handler(ok))
		post := func(n int) result {
			resp, err := http.Post(srv.URL, "text/plain", strings.NewReader(strings.Repeat("x", n)))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return result{resp.StatusCode, resp.Header, string(b)}
		}
		if res := post(600); res.status != 200 {
			t.Fatal(res.status)
		} else {
			checkStanding(t, res.header, "default", 400, 60)
			if !strings.Contains(res.header.Get("RateLimit-Policy"), `qu="content-bytes"`) {
				t.Errorf("RateLimit-Policy %q", res.header.Get("RateLimit-Policy"))
			}
		}
		if res := post(500); res.status != 429 || res.header.Get("Retry-After") != "60" {
			t.Errorf("500 bytes over 400 left: %d", res.status)
		}
		if res := post(400); res.status != 200 {
			t.Errorf("400 bytes: %d", res.status)
		}
		// More than the limit at once: never admitted, so 413, without
		// Retry-After or rate-limit fields (issue 29).
		res := post(1001)
		if res.status != http.StatusRequestEntityTooLarge || res.header.Get("Retry-After") != "" || !strings.Contains(res.body, "never") {
			t.Errorf("1001 bytes: %d Retry-After %q %q; want 413", res.status, res.header.Get("Retry-After"), res.body)
		}
		if res.header.Get("RateLimit") != "" || m.Stats().Errors != 1 || m.Stats().Denied != 1 {
			t.Errorf("1001 bytes: RateLimit %q, %+v", res.header.Get("RateLimit"), m.Stats())
		}
	})
	t.Run("negative", func(t *testing.T) {
		l, _ := newLimiter(t, "fixed-window 10/1m")
		log, buf := newLogger()
		m := New(l, WithCostFunc(func(*http.Request) int64 { return -1 }), WithLogger(log))
		rec := httptest.NewRecorder()
		m.Handler(ok).ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		if rec.Code != 500 || m.Stats().Errors != 1 || !strings.Contains(buf.String(), "negative cost") {
			t.Errorf("negative cost: %d %+v %s", rec.Code, m.Stats(), buf)
		}
	})
}

func TestNewAllAllOrNothing(t *testing.T) {
	fc := clock.NewFake(t0)
	perUser := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("fixed-window 2/1m"), floodgate.WithName("per-user"), floodgate.WithClock(fc)))
	global := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("fixed-window 3/1m"), floodgate.WithName("global"), floodgate.WithClock(fc)))
	m := NewAll([]Limit{
		{Limiter: perUser, Key: ByHeader("X-User")},
		{Limiter: global, Key: Global},
	})
	srv := server(t, m.Handler(ok))
	type step struct {
		user   string
		status int
		fields []any
	}
	for i, s := range []step{
		{"alice", 200, []any{"per-user", 1, 60, "global", 2, 60}},
		{"alice", 200, []any{"per-user", 0, 60, "global", 1, 60}},
		// alice's own limit denies: the global one spends nothing, and
		// reports its headroom (1), not what it would have had left.
		{"alice", 429, []any{"per-user", 0, 60, "global", 1, 60}},
		{"bob", 200, []any{"per-user", 1, 60, "global", 0, 60}},
		// The global limit denies: bob's own spends nothing.
		{"bob", 429, []any{"per-user", 1, 60, "global", 0, 60}},
	} {
		res := get(t, srv.URL, "X-User", s.user)
		if res.status != s.status {
			t.Fatalf("step %d (%s): %d, want %d", i, s.user, res.status, s.status)
		}
		checkStanding(t, res.header, s.fields...)
		if items := parseList(t, res.header, "RateLimit-Policy"); len(items) != 2 || items[0].params["q"] != int64(2) || items[1].params["q"] != int64(3) {
			t.Errorf("RateLimit-Policy %v", items)
		}
	}
	// Nothing was spent by the denials.
	d, _ := perUser.AllowN(context.Background(), "bob", 0)
	if d.Remaining != 1 {
		t.Errorf("bob's remaining %d, want 1", d.Remaining)
	}
	// The problem detail names the limit that denied.
	res := get(t, srv.URL, "X-User", "carol", "Accept", "application/json")
	if res.status != 429 || !strings.Contains(res.body, `"violated-policies":["global"]`) {
		t.Errorf("%d %s", res.status, res.body)
	}
	// A request without the header has no per-user key: 400.
	if res := get(t, srv.URL); res.status != 400 {
		t.Errorf("no X-User: %d", res.status)
	}
}

// TestNewAllDryRunLimit: a dry-run limit beside an enforcing one. When the
// enforcing one denies, AllowAll does not decide the dry-run one: it is
// neither in RateLimit nor among the violated policies.
func TestNewAllDryRunLimit(t *testing.T) {
	fc := clock.NewFake(t0)
	enforced := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("fixed-window 1/1m"), floodgate.WithName("enforced"), floodgate.WithClock(fc)))
	shadow := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("fixed-window 1/1m"), floodgate.WithName("shadow"),
		floodgate.WithDryRun(true), floodgate.WithClock(fc)))
	log, _ := newLogger()
	m := NewAll([]Limit{{Limiter: shadow}, {Limiter: enforced}}, WithLogger(log))
	srv := server(t, m.Handler(ok))
	res := get(t, srv.URL)
	if res.status != 200 {
		t.Fatal(res.status)
	}
	checkStanding(t, res.header, "enforced", 0, 60) // the dry-run limit not advertised
	if items := parseList(t, res.header, "RateLimit-Policy"); len(items) != 1 || items[0].name != "enforced" {
		t.Errorf("RateLimit-Policy %q advertises the dry-run limit", res.header.Values("RateLimit-Policy"))
	}
	res = get(t, srv.URL, "Accept", "application/json")
	if res.status != 429 || !strings.Contains(res.body, `"violated-policies":["enforced"]`) {
		t.Errorf("%d %s", res.status, res.body)
	}
	checkStanding(t, res.header, "enforced", 0, 60)
	if s := m.Stats(); s.Denied != 1 || s.DryRunDenied != 0 {
		t.Errorf("Stats %+v", s)
	}
}

func TestNewAllDefaultKeyOnce(t *testing.T) {
	fc := clock.NewFake(t0)
	a := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("fixed-window 5/1m"), floodgate.WithName("a"), floodgate.WithClock(fc)))
	b := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("fixed-window 5/1m"), floodgate.WithName("b"), floodgate.WithClock(fc)))
	calls := 0
	m := NewAll([]Limit{{Limiter: a}, {Limiter: b, Cost: func(*http.Request) int64 { return 2 }}},
		WithKey(func(*http.Request) (string, error) { calls++; return "k", nil }))
	rec := httptest.NewRecorder()
	m.Handler(ok).ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if calls != 1 {
		t.Errorf("default key function called %d times", calls)
	}
	checkStanding(t, rec.Header(), "a", 4, 60, "b", 3, 60)
}

func TestLegacyAndNoHeaders(t *testing.T) {
	l, _ := newLimiter(t, "fixed-window 2/1m")
	h := New(l, WithHeaders(RateLimitHeaders|LegacyHeaders)).Handler(ok)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	hd := rec.Header()
	if hd.Get("X-RateLimit-Limit") != "2" || hd.Get("X-RateLimit-Remaining") != "1" || hd.Get("X-RateLimit-Reset") != "60" || hd.Get("RateLimit") == "" {
		t.Errorf("legacy headers %v", hd)
	}

	l, _ = newLimiter(t, "fixed-window 1/1m")
	h = New(l, WithHeaders(NoHeaders)).Handler(ok)
	for i := range 2 {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		for k := range rec.Header() {
			if strings.Contains(strings.ToLower(k), "ratelimit") {
				t.Errorf("request %d: %s with NoHeaders", i, k)
			}
		}
		if i == 1 && rec.Header().Get("Retry-After") != "60" {
			t.Errorf("denial without Retry-After")
		}
	}
}

func TestDecisionFrom(t *testing.T) {
	l, _ := newLimiter(t, "token-bucket 5/1s")
	h := New(l).Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, ok := DecisionFrom(r.Context())
		md, mok := MultiDecisionFrom(r.Context())
		fmt.Fprintf(w, "%v %v %d %v %v", ok, d.Allowed, d.Remaining, d.Policy(), mok && md.Allowed && md.Decisions[0] == d)
	}))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if got := rec.Body.String(); got != "true true 4 token-bucket 5/1s true" {
		t.Errorf("handler saw %q", got)
	}
	if _, ok := DecisionFrom(context.Background()); ok {
		t.Error("DecisionFrom of a bare context")
	}
	if _, ok := MultiDecisionFrom(context.Background()); ok {
		t.Error("MultiDecisionFrom of a bare context")
	}
}

// TestConcurrentExact sends many requests at once through a real server on
// one key: exactly the limit is admitted.
func TestConcurrentExact(t *testing.T) {
	l, _ := newLimiter(t, "fixed-window 100/1m")
	m := New(l)
	srv := server(t, m.Handler(ok))
	const goroutines, each = 8, 40
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := make(map[int]int)
	for range goroutines {
		wg.Go(func() {
			for range each {
				resp, err := srv.Client().Get(srv.URL)
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				mu.Lock()
				codes[resp.StatusCode]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if codes[200] != 100 || codes[429] != goroutines*each-100 {
		t.Errorf("codes %v, want 100 200s", codes)
	}
	if s := m.Stats(); s.Denied != goroutines*each-100 {
		t.Errorf("Stats %+v", s)
	}
}

func TestNewPanics(t *testing.T) {
	for name, f := range map[string]func(){
		"nil limiter":  func() { New(nil) },
		"no limits":    func() { NewAll(nil) },
		"nil in all":   func() { NewAll([]Limit{{}}) },
		"nil handler":  func() { l, _ := newLimiter(t, "fixed-window 1/1s"); New(l).Handler(nil) },
		"nil in limit": func() { l, _ := newLimiter(t, "fixed-window 1/1s"); NewAll([]Limit{{Limiter: l}, {}}) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}

// A chunked body (no Content-Length) costs its bytes with BodyBytes, and
// reaches the handler whole. Before, the documented cost function, the
// Content-Length, made every chunked upload free.
func TestBodyBytesChunked(t *testing.T) {
	l, _ := newLimiter(t, "fixed-window 1000/1m")
	m := New(l, WithCostFunc(BodyBytes(1000)), WithQuotaUnit("content-bytes"))
	srv := server(t, m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		fmt.Fprint(w, n)
	})))
	post := func(n int) (int, string) {
		t.Helper()
		// A reader of unknown length: the client sends it chunked.
		body := io.MultiReader(strings.NewReader(strings.Repeat("x", n)))
		resp, err := http.Post(srv.URL, "text/plain", body)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, got := post(600); code != 200 || got != "600" {
		t.Fatalf("600 chunked bytes: %d %q, want 200 and the whole body", code, got)
	}
	if code, _ := post(500); code != 429 {
		t.Errorf("500 chunked bytes over 400 left: %d, want 429", code)
	}
	if code, got := post(400); code != 200 || got != "400" {
		t.Errorf("400 chunked bytes: %d %q", code, got)
	}
	for _, limit := range []int64{math.MaxInt64, -5} { // no overflow, no negative read
		r := httptest.NewRequest("POST", "/", io.MultiReader(strings.NewReader("12345")))
		r.ContentLength = -1
		want := map[int64]int64{math.MaxInt64: 5, -5: 1}[limit]
		if got := BodyBytes(limit)(r); got != want {
			t.Errorf("BodyBytes(%d) of a chunked 5-byte body: %d, want %d", limit, got, want)
		}
		if b, _ := io.ReadAll(r.Body); string(b) != "12345" {
			t.Errorf("BodyBytes(%d) left the body %q", limit, b)
		}
	}
	l2, _ := newLimiter(t, "fixed-window 1000/1m")
	big := server(t, New(l2, WithCostFunc(BodyBytes(1000))).Handler(ok))
	resp, err := http.Post(big.URL, "text/plain", io.MultiReader(strings.NewReader(strings.Repeat("x", 5000))))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || resp.Header.Get("Retry-After") != "" {
		t.Errorf("5000 chunked bytes over a burst of 1000: %d Retry-After %q, want 413 for good", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}

// TestStackedMiddlewares: two middlewares on one route each add their
// limit to the RateLimit fields, a structured-field List, instead of the
// inner one replacing the outer one's (issue 29).
func TestStackedMiddlewares(t *testing.T) {
	outer, _ := newLimiter(t, "fixed-window 100/1m")
	inner, _ := newLimiter(t, "fixed-window 5/1s")
	h := New(outer, WithName("site")).Handler(New(inner, WithName("route")).Handler(ok))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	checkStanding(t, rec.Header(), "site", 99, 60, "route", 4, 1)
	if items := parseList(t, rec.Header(), "RateLimit-Policy"); len(items) != 2 || items[0].name != "site" || items[1].name != "route" {
		t.Errorf("RateLimit-Policy %q, want site's and route's", rec.Header().Values("RateLimit-Policy"))
	}
}

// TestNameOneEscaping: a name with characters a structured-field String
// cannot hold is written the same in the header fields and in a denial's
// problem detail, so that a client can match them (issue 29).
func TestNameOneEscaping(t *testing.T) {
	l, _ := newLimiter(t, "fixed-window 1/1m")
	srv := server(t, New(l, WithName("débit\tmax")).Handler(ok))
	get(t, srv.URL)
	res := get(t, srv.URL, "Accept", "application/json")
	items := parseList(t, res.header, "RateLimit")
	var body struct {
		Violated []string `json:"violated-policies"`
	}
	if err := json.Unmarshal([]byte(res.body), &body); err != nil {
		t.Fatal(err)
	}
	if res.status != 429 || len(body.Violated) != 1 || body.Violated[0] != items[0].name || items[0].name != "d_bit_max" {
		t.Errorf("header name %q, body's %q; want both d_bit_max", items[0].name, body.Violated)
	}
}
