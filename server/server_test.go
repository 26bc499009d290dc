package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/floodgate/floodgate/failsafe"

	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/memstore"
	"github.com/floodgate/floodgate/redisstore"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/clock"
	"github.com/floodgate/floodgate/store"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// t0 is the tests' start of time.
var t0 = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

const testConfig = `
policies:
  per-user: token-bucket 1/1s burst=3
  global: fixed-window 5/1m
  login: sliding-log 2/10s
limits:
  max_checks: 4
  max_key_bytes: 16
  max_body_bytes: 2048
  max_inline_policies: 2
`

// testServer is a Server behind httptest, on a fake clock.
type testServer struct {
	*Server
	url   string
	clock *clock.Fake
}

func newTestServer(t *testing.T, yamlText string, opts ...Option) *testServer {
	t.Helper()
	return newTestServerOn(t, memstore.New(0), yamlText, opts...)
}

func newTestServerOn(t *testing.T, store store.Store, yamlText string, opts ...Option) *testServer {
	t.Helper()
	cfg, err := ParseConfig([]byte(yamlText), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(t0)
	s, err := New(store, cfg, append([]Option{WithClock(clk)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	return &testServer{Server: s, url: hs.URL, clock: clk}
}

// answer is a response: its status and its body, as text and as JSON.
type answer struct {
	code int
	body string
	json map[string]any
	hdr  http.Header
}

func do(t *testing.T, method, url, body string, hdr ...string) answer {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
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
	a := answer{code: resp.StatusCode, body: string(b), hdr: resp.Header}
	if len(b) > 0 {
		if err := json.Unmarshal(b, &a.json); err != nil {
			t.Fatalf("%s %s: a body that is not a JSON object: %q", method, url, b)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s %s: Content-Type %q", method, url, ct)
		}
	}
	return a
}

func (ts *testServer) check(t *testing.T, body string) answer {
	t.Helper()
	return do(t, http.MethodPost, ts.url+"/v1/check", body)
}

// wantBody checks a 200 answer's exact body.
func wantBody(t *testing.T, what string, a answer, want string) {
	t.Helper()
	if a.code != http.StatusOK || a.body != want+"\n" {
		t.Errorf("%s: %d %s\nwant 200 %s", what, a.code, a.body, want)
	}
}

// A token bucket over HTTP: each answer exact to the nanosecond, a denial
// spends nothing, and waiting retry_after suffices.
func TestCheckSingle(t *testing.T) {
	ts := newTestServer(t, testConfig)
	alice := `{"policy":"per-user","key":"alice"}`
	wantBody(t, "1", ts.check(t, alice), `{"allowed":true,"remaining":2,"retry_after":0,"reset_after":1}`)
	wantBody(t, "2", ts.check(t, alice), `{"allowed":true,"remaining":1,"retry_after":0,"reset_after":2}`)
	wantBody(t, "3", ts.check(t, `{"policy":"per-user","key":"alice","cost":1}`), `{"allowed":true,"remaining":0,"retry_after":0,"reset_after":3}`)
	wantBody(t, "4", ts.check(t, alice), `{"allowed":false,"remaining":0,"retry_after":1,"reset_after":3}`)
	ts.clock.Advance(999999999 * time.Nanosecond)
	wantBody(t, "1ns early", ts.check(t, alice), `{"allowed":false,"remaining":0,"retry_after":0.000000001,"reset_after":2.000000001}`)
	ts.clock.Advance(time.Nanosecond)
	wantBody(t, "on time", ts.check(t, alice), `{"allowed":true,"remaining":0,"retry_after":0,"reset_after":3}`)
	wantBody(t, "bob is alone", ts.check(t, `{"policy":"per-user","key":"bob","cost":3}`), `{"allowed":true,"remaining":0,"retry_after":0,"reset_after":3}`)
}

// A cost of 0 peeks: it reports and spends nothing.
func TestCheckPeek(t *testing.T) {
	ts := newTestServer(t, testConfig)
	peek := `{"policy":"global","key":"k","cost":0}`
	wantBody(t, "fresh", ts.check(t, peek), `{"allowed":true,"remaining":5,"retry_after":0,"reset_after":0}`)
	ts.check(t, `{"policy":"global","key":"k","cost":2}`)
	for range 3 {
		wantBody(t, "after 2", ts.check(t, peek), `{"allowed":true,"remaining":3,"retry_after":0,"reset_after":60}`)
	}
}

// A batch in mode all is all or nothing, says which check denied, and a
// denial spends nothing anywhere.
func TestCheckBatchAll(t *testing.T) {
	ts := newTestServer(t, testConfig)
	batch := func(user string) string {
		return `{"checks":[{"policy":"per-user","key":"` + user + `"},{"policy":"global","key":"all","cost":2}]}`
	}
	wantBody(t, "u1", ts.check(t, batch("u1")),
		`{"allowed":true,"retry_after":0,"results":[{"allowed":true,"remaining":2,"retry_after":0,"reset_after":1},{"allowed":true,"remaining":3,"retry_after":0,"reset_after":60}]}`)
	wantBody(t, "u2", ts.check(t, batch("u2")),
		`{"allowed":true,"retry_after":0,"results":[{"allowed":true,"remaining":2,"retry_after":0,"reset_after":1},{"allowed":true,"remaining":1,"retry_after":0,"reset_after":60}]}`)
	// The global limit has 1 left: the next batch is denied by check 1,
	// and u3's bucket stays full.
	wantBody(t, "u3", ts.check(t, `{"mode":"all",`+batch("u3")[1:]),
		`{"allowed":false,"retry_after":60,"denied":1,"results":[{"allowed":true,"remaining":2,"retry_after":0,"reset_after":1},{"allowed":false,"remaining":1,"retry_after":60,"reset_after":60}]}`)
	wantBody(t, "u3 untouched", ts.check(t, `{"policy":"per-user","key":"u3","cost":0}`), `{"allowed":true,"remaining":3,"retry_after":0,"reset_after":0}`)
}

// A batch in mode each decides each check alone.
func TestCheckBatchEach(t *testing.T) {
	ts := newTestServer(t, testConfig)
	body := `{"mode":"each","checks":[{"policy":"login","key":"a","cost":2},{"policy":"login","key":"a"},{"policy":"login","key":"b"}]}`
	wantBody(t, "each", ts.check(t, body),
		`{"allowed":false,"retry_after":10,"denied":1,"results":[{"allowed":true,"remaining":0,"retry_after":0,"reset_after":10},{"allowed":false,"remaining":0,"retry_after":10,"reset_after":10},{"allowed":true,"remaining":1,"retry_after":0,"reset_after":10}]}`)
}

// Inline policies share state by their canonical text, are bounded in
// number, and can be turned off.
func TestCheckInline(t *testing.T) {
	ts := newTestServer(t, testConfig)
	wantBody(t, "first", ts.check(t, `{"policy_text":"fixed-window 1/1h","key":"k"}`), `{"allowed":true,"remaining":0,"retry_after":0,"reset_after":3600}`)
	wantBody(t, "same policy, other spelling", ts.check(t, `{"policy_text":"fixed-window   1/60m","key":"k"}`), `{"allowed":false,"remaining":0,"retry_after":3600,"reset_after":3600}`)
	wantBody(t, "second policy", ts.check(t, `{"policy_text":"fixed-window 2/1h","key":"k"}`), `{"allowed":true,"remaining":1,"retry_after":0,"reset_after":3600}`)
	a := ts.check(t, `{"policy_text":"fixed-window 3/1h","key":"k"}`)
	if a.code != http.StatusBadRequest || !strings.Contains(a.body, "2 distinct inline policies") {
		t.Errorf("a third inline policy past max_inline_policies 2: %d %s", a.code, a.body)
	}
	off := newTestServer(t, "limits: {inline_policies: false}")
	if a := off.check(t, `{"policy_text":"fixed-window 1/1h","key":"k"}`); a.code != http.StatusBadRequest || !strings.Contains(a.body, "turned off") {
		t.Errorf("inline policies turned off: %d %s", a.code, a.body)
	}
}

// Every bad request is a 400 naming its problem.
func TestBadRequests(t *testing.T) {
	ts := newTestServer(t, testConfig)
	long := strings.Repeat("k", 17)
	checks := func(n int) string {
		return `{"checks":[` + strings.TrimSuffix(strings.Repeat(`{"policy":"global","key":"k"},`, n), ",") + `]}`
	}
	for _, c := range []struct{ body, want string }{
		{``, "empty body"},
		{`{"policy":"global","key":"k"`, "ends too soon"},
		{`{"policy":"global","key":"k"}}`, "malformed JSON"},
		{`{"policy":"global","key":"k"} {}`, "more after the request's object"},
		{`not json`, "malformed JSON at byte"},
		{`[]`, "want a JSON object, not array"},
		{`{"policy":"global","key":"k","extra":1}`, `unknown field "extra"`},
		{`{"policy":"global","key":7}`, "field key: want a string, not number"},
		{"{\"policy\":\"global\",\"key\":\"k\xff\"}", "not valid UTF-8 (at byte 27)"},
		{`{"policy":"global","key":"k\udc80"}`, "byte 27 is half a UTF-16 surrogate pair"},
		{`{"policy":"global","key":"k\ud800x"}`, "byte 27 is half a UTF-16 surrogate pair"},
		{`{"policy":"global","Key":"k"}`, `field "Key": fields are spelt in lower case`},
		{`{"policy":"global","key":"k","key":"j"}`, `field "key" is given twice`},
		{`{"checks":[{"policy":"global","key":"k","policy":"login"}]}`, `field "policy" is given twice`},
		{`{"policy":"nope","key":"k"}`, `unknown policy "nope"`},
		{`{"key":"k"}`, "give policy"},
		{`{"policy":"global","policy_text":"fixed-window 1/1s","key":"k"}`, "not both"},
		{`{"policy_text":"fixed-window 0/1s","key":"k"}`, "policy_text: invalid policy"},
		{`{"policy":"global"}`, "key is required"},
		{`{"policy":"global","key":""}`, "key is empty"},
		{`{"policy":"global","key":"` + long + `"}`, "key of 17 bytes: at most 16"},
		{`{"policy":"global","key":"k","cost":-1}`, "cost -1 is negative"},
		{`{"policy":"global","key":"k","cost":1.5}`, "cost 1.5: want a whole number"},
		{`{"policy":"global","key":"k","cost":"1"}`, `cost "1": want a whole number`},
		{`{"policy":"global","key":"k","cost":null}`, `cost null: want a whole number`},
		{`{"policy":"global","key":"k","cost":99999999999999999999}`, "too large"},
		{`{"policy":"global","key":"k","cost":6}`, `cost 6 is more than policy "fixed-window 5/1m" admits at once (5)`},
		{`{"policy":"global","key":"k","mode":"all"}`, "mode goes with checks"},
		{`{"checks":[]}`, "checks is empty"},
		{checks(5), "5 checks: at most 4"},
		{`{"checks":[{"policy":"global","key":"k"},{"policy":"x","key":"k"}]}`, `checks[1]: unknown policy "x"`},
		{`{"checks":[{"policy":"global","key":"k"}],"mode":"some"}`, `mode "some"`},
		{`{"checks":[{"policy":"global","key":"k"}],"key":"k"}`, "not both"},
		{`{"checks":{}}`, "field checks: want an array, not object"},
		{`{"checks":[{"policy":"global","key":"k","cost":3},{"policy":"global","key":"k","cost":3}]}`, `key "k" is checked 2 times`},
		{`{"policy":"global","key":"` + strings.Repeat("k", 3000) + `"}`, "request body larger than 2048 bytes"},
	} {
		a := ts.check(t, c.body)
		if msg, _ := a.json["error"].(string); a.code != http.StatusBadRequest || !strings.Contains(msg, c.want) {
			t.Errorf("%.60s: %d %s\nwant 400 with an error containing %q", c.body, a.code, a.body, c.want)
		}
	}
	// Nothing was spent by any of them.
	wantBody(t, "untouched", ts.check(t, `{"policy":"global","key":"k","cost":0}`), `{"allowed":true,"remaining":5,"retry_after":0,"reset_after":0}`)
	for _, c := range []struct{ method, path string }{{"GET", "/v1/check"}, {"DELETE", "/v1/reset"}, {"POST", "/v1/policies"}} {
		if a := do(t, c.method, ts.url+c.path, ""); a.code != http.StatusMethodNotAllowed || a.json["error"] == nil {
			t.Errorf("%s %s: %d %s, want 405", c.method, c.path, a.code, a.body)
		}
	}
	if a := do(t, "GET", ts.url+"/v2/check", ""); a.code != http.StatusNotFound {
		t.Errorf("GET /v2/check: %d %s, want 404", a.code, a.body)
	}
}

func TestReset(t *testing.T) {
	ts := newTestServer(t, testConfig)
	ts.check(t, `{"policy":"login","key":"a","cost":2}`)
	ts.check(t, `{"policy_text":"fixed-window 1/1h","key":"a"}`)
	if a := do(t, "POST", ts.url+"/v1/reset", `{"policy":"login","key":"a"}`); a.code != http.StatusNoContent || a.body != "" {
		t.Errorf("reset: %d %s", a.code, a.body)
	}
	if a := do(t, "POST", ts.url+"/v1/reset", `{"policy_text":"fixed-window 1/1h","key":"a"}`); a.code != http.StatusNoContent {
		t.Errorf("reset inline: %d %s", a.code, a.body)
	}
	wantBody(t, "after reset", ts.check(t, `{"policy":"login","key":"a","cost":2}`), `{"allowed":true,"remaining":0,"retry_after":0,"reset_after":10}`)
	wantBody(t, "inline after reset", ts.check(t, `{"policy_text":"fixed-window 1/1h","key":"a"}`), `{"allowed":true,"remaining":0,"retry_after":0,"reset_after":3600}`)
	for _, c := range []struct{ body, want string }{
		{`{"policy":"login","key":"a","cost":1}`, `unknown field "cost"`},
		{`{"policy":"nope","key":"a"}`, "unknown policy"},
		{`{"policy":"login"}`, "key is required"},
	} {
		if a := do(t, "POST", ts.url+"/v1/reset", c.body); a.code != http.StatusBadRequest || !strings.Contains(fmt.Sprint(a.json["error"]), c.want) {
			t.Errorf("reset %s: %d %s, want 400 %q", c.body, a.code, a.body, c.want)
		}
	}
}

func TestPolicies(t *testing.T) {
	ts := newTestServer(t, testConfig)
	a := do(t, "GET", ts.url+"/v1/policies", "")
	want := `{"policies":[` +
		`{"name":"global","policy":"fixed-window 5/1m","algorithm":"fixed-window","limit":5,"period":60,"burst":5},` +
		`{"name":"login","policy":"sliding-log 2/10s","algorithm":"sliding-log","limit":2,"period":10,"burst":2},` +
		`{"name":"per-user","policy":"token-bucket 1/1s burst=3","algorithm":"token-bucket","limit":1,"period":1,"burst":3}]}`
	wantBody(t, "policies", a, want)
	def := newTestServer(t, "")
	wantBody(t, "default", do(t, "GET", def.url+"/v1/policies", ""),
		`{"policies":[{"name":"default","policy":"token-bucket 100/1m burst=20","algorithm":"token-bucket","limit":100,"period":60,"burst":20}]}`)
}

// Bearer tokens: from the token file (any of its tokens), else the one
// given; compared whole; the operations endpoints need none.
func TestAuth(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokenFile, []byte("# new one first\nsecret-2\n\nsecret-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseConfig([]byte("auth: {token_file: tokens}"), dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(memstore.New(0), cfg, WithToken("env-token"))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	ops := httptest.NewServer(s.OpsHandler())
	defer ops.Close()
	body := `{"policy":"default","key":"k"}`
	for _, c := range []struct {
		auth string
		code int
	}{
		{"", 401}, {"Bearer", 401}, {"Basic c2VjcmV0LTE=", 401}, {"Bearer secret-", 401}, {"Bearer secret-11", 401},
		{"Bearer env-token", 401}, // the file's tokens replace the environment's
		{"Bearer secret-1", 200}, {"bearer secret-2", 200}, {"Bearer  secret-2 ", 200},
	} {
		var hdr []string
		if c.auth != "" {
			hdr = []string{"Authorization", c.auth}
		}
		a := do(t, "POST", hs.URL+"/v1/check", body, hdr...)
		if a.code != c.code {
			t.Errorf("Authorization %q: %d %s, want %d", c.auth, a.code, a.body, c.code)
		}
		if c.code == 401 && !strings.HasPrefix(a.hdr.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("Authorization %q: WWW-Authenticate %q", c.auth, a.hdr.Get("WWW-Authenticate"))
		}
	}
	if a := do(t, "GET", hs.URL+"/v1/policies", ""); a.code != 401 {
		t.Errorf("policies without a token: %d", a.code)
	}
	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		if resp, err := http.Get(ops.URL + p); err != nil || resp.StatusCode != 200 {
			t.Errorf("%s without a token: %v %v", p, resp, err)
		} else {
			resp.Body.Close()
		}
	}
	// Without a token file, the token given.
	env := newTestServer(t, "", WithToken("env-token"))
	if a := do(t, "POST", env.url+"/v1/check", body, "Authorization", "Bearer env-token"); a.code != 200 {
		t.Errorf("the environment's token: %d %s", a.code, a.body)
	}
	if a := do(t, "POST", env.url+"/v1/check", body); a.code != 401 {
		t.Errorf("no token: %d %s", a.code, a.body)
	}
}

// brokenStore is a Store whose every call fails, or, while blocked, hangs
// until its context is done.
type brokenStore struct{}

var errBroken = errors.New("connection refused")

func (brokenStore) Table(string, algo.Policy) (store.Table, error) {
	return brokenTable{}, nil
}
func (brokenStore) Apply(context.Context, []store.Op) error     { return errBroken }
func (brokenStore) ApplyEach(context.Context, []store.Op) error { return errBroken }

type brokenTable struct{}

func (brokenTable) Decide(context.Context, string, int64, int64) (algo.Decision, error) {
	return algo.Decision{}, errBroken
}

// A failing store is a 503 with Retry-After when failing closed, and not
// ready; failing open admits.
func TestStoreFailure(t *testing.T) {
	clk := clock.NewFake(t0)
	closed := newTestServerOn(t, newFailsafe(brokenStore{}, failsafe.Options{Clock: clk}), "")
	for _, body := range []string{`{"policy":"default","key":"k"}`, `{"checks":[{"policy":"default","key":"k"}]}`, `{"mode":"each","checks":[{"policy":"default","key":"k"}]}`} {
		a := closed.check(t, body)
		if a.code != http.StatusServiceUnavailable || a.hdr.Get("Retry-After") == "" || !strings.Contains(a.body, "store is unavailable") || strings.Contains(a.body, "refused") {
			t.Errorf("%s on a failing store: %d %s (Retry-After %q)", body, a.code, a.body, a.hdr.Get("Retry-After"))
		}
	}
	if a := do(t, "POST", closed.url+"/v1/reset", `{"policy":"default","key":"k"}`); a.code != http.StatusServiceUnavailable {
		t.Errorf("reset on a failing store: %d %s", a.code, a.body)
	}
	if err := closed.Ready(context.Background()); err == nil {
		t.Error("ready on a failing store")
	}
	if got := metricValue(t, closed.metrics.reg, "floodgate_store_errors_total", "policy", "default"); got != 3 {
		t.Errorf("floodgate_store_errors_total = %v, want 3 (the checks; a reset is not a decision)", got)
	}
	open := newTestServerOn(t, newFailsafe(brokenStore{}, failsafe.Options{Mode: failsafe.FailOpen, Clock: clk}), "")
	if a := open.check(t, `{"policy":"default","key":"k"}`); a.code != 200 || a.json["allowed"] != true {
		t.Errorf("failing open: %d %s", a.code, a.body)
	}
}

func TestReady(t *testing.T) {
	ts := newTestServer(t, "")
	ops := httptest.NewServer(ts.OpsHandler())
	defer ops.Close()
	if a := do(t, "GET", ops.URL+"/readyz", ""); a.code != 200 {
		t.Errorf("readyz: %d %s", a.code, a.body)
	}
	if ts.Server.store.(*memstore.Store).Stats().Keys != 0 {
		t.Error("the readiness probe left a key behind")
	}
	ts.SetReady(false)
	if a := do(t, "GET", ops.URL+"/readyz", ""); a.code != 503 || !strings.Contains(a.body, "shutting down") {
		t.Errorf("readyz while shutting down: %d %s", a.code, a.body)
	}
	if a := do(t, "GET", ops.URL+"/healthz", ""); a.code != 200 {
		t.Errorf("healthz while shutting down: %d %s", a.code, a.body)
	}
}

// SetConfig swaps policies: an unchanged policy keeps its state, a changed
// one keeps its keys' spent units (algo.Policy.Convert), and an invalid
// configuration changes nothing.
func TestSetConfig(t *testing.T) {
	ts := newTestServer(t, testConfig)
	ts.check(t, `{"policy":"global","key":"k","cost":5}`)
	ts.check(t, `{"policy":"login","key":"k","cost":2}`)
	cfg, err := ParseConfig([]byte("policies: {global: fixed-window 5/1m, login: sliding-log 3/10s, new: fixed-window 1/1s}"), "")
	if err != nil {
		t.Fatal(err)
	}
	if err := ts.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	wantBody(t, "unchanged policy", ts.check(t, `{"policy":"global","key":"k","cost":0}`), `{"allowed":true,"remaining":0,"retry_after":0,"reset_after":60}`)
	wantBody(t, "changed policy", ts.check(t, `{"policy":"login","key":"k","cost":0}`), `{"allowed":true,"remaining":1,"retry_after":0,"reset_after":10}`)
	wantBody(t, "new policy", ts.check(t, `{"policy":"new","key":"k"}`), `{"allowed":true,"remaining":0,"retry_after":0,"reset_after":1}`)
	if a := ts.check(t, `{"policy":"per-user","key":"k"}`); a.code != 400 {
		t.Errorf("a removed policy: %d %s", a.code, a.body)
	}
	bad := &Config{Auth: AuthConfig{TokenFile: filepath.Join(t.TempDir(), "missing")}}
	if err := ts.SetConfig(bad); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("a missing token file: %v", err)
	}
	if a := ts.check(t, `{"policy":"new","key":"j"}`); a.code != 200 {
		t.Errorf("after a refused configuration: %d %s", a.code, a.body)
	}
}

// A reloaded configuration that raises, cuts or changes the algorithm of
// a named policy keeps each key's spent units: a raise gives the new
// headroom, a cut takes effect at once, over HTTP, on the memory store and
// on a real Redis.
func TestSetConfigKeepsSpentUnits(t *testing.T) {
	rs, err := redisstore.New(redistest.NewServer(t).Client(t), redisstore.WithCallerTime(), redisstore.WithMinTTL(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	for name, st := range map[string]store.Store{"memory": memstore.New(0), "redis": rs} {
		t.Run(name, func(t *testing.T) { keepsSpentUnits(t, st) })
	}
}

func keepsSpentUnits(t *testing.T, st store.Store) {
	ts := newTestServerOn(t, st, "policies: {api: fixed-window 100/1h, upload: fixed-window 100/1h}")
	ts.check(t, `{"policy":"api","key":"alice","cost":80}`)
	ts.check(t, `{"policy":"upload","key":"alice","cost":80}`)
	ts.clock.Advance(time.Minute)
	cfg, err := ParseConfig([]byte("policies: {api: fixed-window 200/1h, upload: token-bucket 50/1h}"), "")
	if err != nil {
		t.Fatal(err)
	}
	if err := ts.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	wantBody(t, "a raise", ts.check(t, `{"policy":"api","key":"alice","cost":0}`), `{"allowed":true,"remaining":120,"retry_after":0,"reset_after":3540}`)
	wantBody(t, "a cut to a bucket", ts.check(t, `{"policy":"upload","key":"alice","cost":1}`), `{"allowed":false,"remaining":0,"retry_after":72,"reset_after":3600}`)
	wantBody(t, "a key never spent", ts.check(t, `{"policy":"api","key":"bob","cost":0}`), `{"allowed":true,"remaining":200,"retry_after":0,"reset_after":0}`)
}

func TestParseConfig(t *testing.T) {
	dir := t.TempDir()
	c, err := ParseConfig([]byte(`
policies: {a: "fixed-window 1/1s"}
tls: {cert_file: c.pem, key_file: /abs/k.pem}
snapshot: {file: snap, interval: 0s}
store: {fail_mode: local, timeout: 250ms}
`), dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.SnapshotFile(); got != filepath.Join(dir, "snap") {
		t.Errorf("snapshot file %q", got)
	}
	if f := c.files(); len(f) != 2 || f[0] != filepath.Join(dir, "c.pem") || f[1] != "/abs/k.pem" {
		t.Errorf("files %q", f)
	}
	if c.Snapshot.Interval == nil || *c.Snapshot.Interval != 0 || c.Store.Timeout != 250*time.Millisecond {
		t.Errorf("durations: %v %v", c.Snapshot.Interval, c.Store.Timeout)
	}
	if l := (&Config{}).limits(); l.maxBody != DefaultMaxBodyBytes || l.maxChecks != DefaultMaxChecks || l.maxKey != DefaultMaxKeyBytes || !l.inline || l.maxInline != DefaultMaxInlinePolicies {
		t.Errorf("default limits %+v", l)
	}
	for _, c := range []struct{ yaml, want string }{
		{"policies: {a: nope}", `policy "a": invalid policy`},
		{"policies: {'bad name': fixed-window 1/1s}", `policy name "bad name"`},
		{"policies: {-a: fixed-window 1/1s}", `policy name "-a"`},
		{"polices: {}", `unknown field "polices" (line 1); did you mean "policies"?`},
		{"limits: {max_checks: -1}", "max_checks -1 is negative"},
		{"limits: {max_body_bytes: lots}", `limits.max_body_bytes (line 1): "lots" is not a whole number`},
		{"store: {fail_mode: sometimes}", `fail_mode "sometimes"`},
		{"store: {timeout: -1s}", "store.timeout -1s is negative"},
		{"store: {threshold: -1}", "store.threshold -1 is negative"},
		{"store: {fail_for: -1s}", "store.fail_for -1s is negative"},
		{"store: {cooldown: -1ms}", "store.cooldown -1ms is negative"},
		{"store: {cooldown: soon}", `store.cooldown (line 1): "soon" is not a duration`},
		{"snapshot: {interval: -1s}", "snapshot.interval -1s is negative"},
		{"tls: {cert_file: c}", "both cert_file and key_file"},
		{"tls: {client_ca_file: c}", "client_ca_file needs"},
		{"[1, 2]", "the configuration (line 1): want settings under it, one NAME: VALUE a line, got a list"},
	} {
		_, err := ParseConfig([]byte(c.yaml), dir)
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrInvalidConfig containing %q", c.yaml, err, c.want)
		}
	}
	if _, err := ParseConfig(nil, dir); err != nil {
		t.Errorf("an empty file: %v", err)
	}
	if _, err := LoadConfig(filepath.Join(dir, "missing.yaml")); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("a missing file: %v", err)
	}
}

// FuzzParseConfig: any input is a configuration or an error wrapping
// ErrInvalidConfig, never a panic.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(testConfig))
	f.Add([]byte("policies: {a: fixed-window 1/1s}\nsnapshot: {interval: 1s}"))
	f.Add([]byte("tls: {cert_file: a, key_file: b}"))
	f.Add([]byte("policies: {bytes: token-bucket 1250000000/1s burst=4294967296, most: fixed-window 1000000000000000/1s}"))
	f.Add([]byte("policies: {over: fixed-window 1000000000000001/1s}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig(data, "")
		if err != nil {
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("%v does not wrap ErrInvalidConfig", err)
			}
			return
		}
		if _, err := c.policies(); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzCheckBody: any body gets a 200 or a 400 with a JSON error, never a
// 5xx or a panic.
func FuzzCheckBody(f *testing.F) {
	for _, s := range []string{`{"policy":"global","key":"k"}`, `{"checks":[{"policy":"login","key":"a","cost":2}],"mode":"each"}`,
		`{"policy_text":"sliding-window 3/1s","key":"x","cost":0}`, `{"key":"k","cost":1e3}`,
		`{"policy_text":"token-bucket 1250000000/1s burst=4294967296","key":"link","cost":4294967296}`} {
		f.Add([]byte(s))
	}
	cfg, err := ParseConfig([]byte(testConfig), "")
	if err != nil {
		f.Fatal(err)
	}
	s, err := New(memstore.New(0), cfg, WithClock(clock.NewFake(t0)))
	if err != nil {
		f.Fatal(err)
	}
	h := s.Handler()
	f.Fuzz(func(t *testing.T, body []byte) {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("POST", "/v1/check", bytes.NewReader(body)))
		var out map[string]any
		if jerr := json.Unmarshal(w.Body.Bytes(), &out); jerr != nil {
			t.Fatalf("%q: %d, body not JSON: %q", body, w.Code, w.Body)
		}
		switch w.Code {
		case 200:
			if _, ok := out["allowed"].(bool); !ok {
				t.Fatalf("%q: 200 without allowed: %s", body, w.Body)
			}
		case 400:
			if msg, _ := out["error"].(string); msg == "" {
				t.Fatalf("%q: 400 without an error: %s", body, w.Body)
			}
		default:
			t.Fatalf("%q: %d %s", body, w.Code, w.Body)
		}
	})
}

// The metrics count decisions by policy and result, and time requests.
func TestMetrics(t *testing.T) {
	ts := newTestServer(t, testConfig)
	for range 4 {
		ts.check(t, `{"policy":"per-user","key":"a"}`)
	}
	ts.check(t, `{"policy_text":"fixed-window 1/1s","key":"a"}`)
	ts.check(t, `{"policy":"nope","key":"a"}`)
	for _, c := range []struct {
		policy, result string
		want           float64
	}{{"per-user", "allowed", 3}, {"per-user", "denied", 1}, {"inline", "allowed", 1}} {
		if got := metricValue(t, ts.metrics.reg, "floodgate_decisions_total", "policy", c.policy, "result", c.result); got != c.want {
			t.Errorf("decisions{%s,%s} = %v, want %v", c.policy, c.result, got, c.want)
		}
	}
	if got := testutil.ToFloat64(ts.metrics.requests.WithLabelValues("http", "check", "400")); got != 1 {
		t.Errorf("requests{check,400} = %v", got)
	}
	ops := httptest.NewServer(ts.OpsHandler())
	defer ops.Close()
	resp, err := http.Get(ops.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`floodgate_decisions_total{policy="per-user",result="denied"} 1`,
		`floodgate_request_duration_seconds_count{api="http",endpoint="check"} 6`,
		`floodgate_memory_keys{store="main"} 2`,
		`floodgate_memory_evictions_total{store="main"} 0`,
		`floodgate_memory_bytes{store="main"} `,
		`floodgate_memory_max_bytes{store="main"} 2.68435456e+08`,
		"go_goroutines", "process_cpu_seconds_total",
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// Concurrent checks on one key over HTTP admit exactly the limit.
func TestConcurrentChecks(t *testing.T) {
	ts := newTestServer(t, "policies: {p: fixed-window 50/1h}")
	var mu sync.Mutex
	allowed := 0
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 25 {
				a := ts.check(t, `{"policy":"p","key":"k"}`)
				if a.json["allowed"] == true {
					mu.Lock()
					allowed++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if allowed != 50 {
		t.Errorf("%d of 200 allowed, want exactly 50", allowed)
	}
}

func Example_config() {
	cfg, err := ParseConfig([]byte("policies: {login: sliding-log 5/1m, api: token-bucket 100/1m burst=20}"), "")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, np := range cfg.policies0() {
		fmt.Println(np.name, np.policy)
	}
	// Output:
	// api token-bucket 100/1m burst=20
	// login sliding-log 5/1m
}

// newFailsafe is failsafe.New with options that are right.
func newFailsafe(s store.Store, o failsafe.Options) *failsafe.Store {
	f, err := failsafe.New(s, o)
	if err != nil {
		panic(err)
	}
	return f
}

// TestFailsafeOptions: the store section's timeout, threshold, fail_for
// and cooldown reach the failsafe.Store, their absence the defaults.
func TestFailsafeOptions(t *testing.T) {
	for _, c := range []struct {
		yaml string
		want failsafe.Options
	}{
		{"", failsafe.Options{Timeout: time.Second}},
		{"store: {fail_mode: open, timeout: 50ms, threshold: 3, fail_for: 1s, cooldown: 2s}",
			failsafe.Options{Mode: failsafe.FailOpen, Timeout: 50 * time.Millisecond, Threshold: 3, FailFor: time.Second, Cooldown: 2 * time.Second}},
		{"store: {fail_for: 0s}", failsafe.Options{Timeout: time.Second, FailFor: -1}},
	} {
		cfg, err := ParseConfig([]byte(c.yaml), "")
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.failsafeOptions(time.Second); got != c.want {
			t.Errorf("%q: %+v, want %+v", c.yaml, got, c.want)
		}
	}
}
