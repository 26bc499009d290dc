package server

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate/clock"
	"github.com/floodgate/floodgate/failsafe"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/redisstore"
)

const scheduleConfig = `
policies:
  api: token-bucket 1/1s
  drip: leaky-bucket 1/1s capacity=2
  login: sliding-log 2/10s
  hourly: fixed-window 1/1h
limits: {max_wait: 4s}
`

// Five checks at one instant with max_wait 3 on a bucket of 1 a second:
// admitted after 0, 1, 2 and 3 seconds exactly, each holding its second,
// and the fifth, which would wait 4, refused; it holds nothing.
func TestCheckMaxWaitSchedule(t *testing.T) {
	ts := newTestServer(t, scheduleConfig)
	req := `{"policy":"api","key":"alice","max_wait":3}`
	wantBody(t, "1", ts.check(t, req), `{"allowed":true,"remaining":0,"retry_after":0,"reset_after":1,"delay":0}`)
	for i := 1; i < 4; i++ {
		want := fmt.Sprintf(`{"allowed":true,"remaining":0,"retry_after":0,"reset_after":%d,"delay":%d}`, i+1, i)
		wantBody(t, fmt.Sprint(i+1), ts.check(t, req), want)
	}
	wantBody(t, "past the max_wait", ts.check(t, req), `{"allowed":false,"remaining":0,"retry_after":4,"reset_after":4,"delay":0}`)
	// Without max_wait the answer is today's: refused, no delay field.
	wantBody(t, "without max_wait", ts.check(t, `{"policy":"api","key":"alice"}`), `{"allowed":false,"remaining":0,"retry_after":4,"reset_after":4}`)
	// Time drains the queue: 2.5s later, the next waits 1.5s.
	ts.clock.Advance(2500 * time.Millisecond)
	wantBody(t, "2.5s later", ts.check(t, req), `{"allowed":true,"remaining":0,"retry_after":0,"reset_after":2.5,"delay":1.5}`)

	// A leaky bucket of capacity 2 takes two at once, then delays.
	for i, want := range []string{"0", "0", "1", "2", "3", "refused after 4"} {
		a := ts.check(t, `{"policy":"drip","key":"bob","max_wait":3}`)
		got := fmt.Sprint(a.json["delay"])
		if a.json["allowed"] != true {
			got = fmt.Sprintf("refused after %v", a.json["retry_after"])
		}
		if got != want {
			t.Errorf("drip %d: %s, want %s", i+1, a.body, want)
		}
	}
}

// limits.max_wait bounds a check's max_wait: a key's queue is at most that
// deep, and a check asking more is refused when it is full.
func TestCheckMaxWaitBound(t *testing.T) {
	ts := newTestServer(t, scheduleConfig)
	req := `{"policy":"api","key":"k","max_wait":3600}`
	for i := range 5 {
		if a := ts.check(t, req); a.json["allowed"] != true || a.json["delay"] != float64(i) {
			t.Fatalf("check %d: %s", i+1, a.body)
		}
	}
	wantBody(t, "queue full", ts.check(t, req), `{"allowed":false,"remaining":0,"retry_after":5,"reset_after":5,"delay":0}`)
	def := newTestServer(t, "policies: {api: token-bucket 1/1s}")
	for range 61 {
		def.check(t, req)
	}
	if a := def.check(t, req); a.json["allowed"] != false || a.json["retry_after"] != float64(61) {
		t.Errorf("the default limits.max_wait of 1m: %s", a.body)
	}
}

// The window and log algorithms cannot hold units for later: a check with
// max_wait is admitted at once or refused, with retry_after the wait
// after which to ask again (nothing is held meanwhile), as
// floodgate.Limiter.WaitN does for them.
func TestCheckMaxWaitWindows(t *testing.T) {
	ts := newTestServer(t, scheduleConfig)
	req := `{"policy":"login","key":"k","max_wait":30}`
	wantBody(t, "1", ts.check(t, req), `{"allowed":true,"remaining":1,"retry_after":0,"reset_after":10,"delay":0}`)
	wantBody(t, "2", ts.check(t, req), `{"allowed":true,"remaining":0,"retry_after":0,"reset_after":10,"delay":0}`)
	wantBody(t, "3", ts.check(t, req), `{"allowed":false,"remaining":0,"retry_after":10,"reset_after":10,"delay":0}`)
	ts.clock.Advance(10 * time.Second)
	wantBody(t, "after retry_after", ts.check(t, req), `{"allowed":true,"remaining":1,"retry_after":0,"reset_after":10,"delay":0}`)
	wantBody(t, "fixed window", ts.check(t, `{"policy":"hourly","key":"k","max_wait":1}`), `{"allowed":true,"remaining":0,"retry_after":0,"reset_after":3590,"delay":0}`)
	wantBody(t, "peek", ts.check(t, `{"policy":"hourly","key":"k","cost":0,"max_wait":1}`), `{"allowed":true,"remaining":0,"retry_after":0,"reset_after":3590,"delay":0}`)
}

// A bad max_wait is a 400 naming the field, and spends nothing.
func TestCheckMaxWaitBadRequests(t *testing.T) {
	ts := newTestServer(t, scheduleConfig)
	for _, c := range []struct{ wait, want string }{
		{`-1`, "max_wait -1 is negative"},
		{`-0.5`, "max_wait -0.5 is negative"},
		{`1e30`, "max_wait 1e30 is too large"},
		{`"5s"`, `max_wait "5s": want seconds`},
		{`null`, "max_wait null: want seconds"},
		{`true`, "max_wait true: want seconds"},
		{`[1]`, "max_wait [1]: want seconds"},
	} {
		a := ts.check(t, `{"policy":"api","key":"k","max_wait":`+c.wait+`}`)
		if msg, _ := a.json["error"].(string); a.code != http.StatusBadRequest || !strings.Contains(msg, c.want) {
			t.Errorf("max_wait %s: %d %s; want 400 with %q", c.wait, a.code, a.body, c.want)
		}
	}
	for _, body := range []string{
		`{"checks":[{"policy":"api","key":"k"}],"max_wait":1}`,
		`{"checks":[{"policy":"api","key":"k","max_wait":1}]}`,
	} {
		if a := ts.check(t, body); a.code != http.StatusBadRequest || !strings.Contains(a.body, "max_wait goes with one check") {
			t.Errorf("%s: %d %s", body, a.code, a.body)
		}
	}
	wantBody(t, "untouched", ts.check(t, `{"policy":"api","key":"k","cost":0}`), `{"allowed":true,"remaining":1,"retry_after":0,"reset_after":0}`)
	if _, err := ParseConfig([]byte("limits: {max_wait: -1s}"), ""); err == nil || !strings.Contains(err.Error(), "limits.max_wait -1s is negative") {
		t.Errorf("a negative limits.max_wait: %v", err)
	}
}

// A check with max_wait on a failing store is a 503 like any other, and
// failing open admits it at once.
func TestCheckMaxWaitStoreFailure(t *testing.T) {
	clk := clock.NewFake(t0)
	closed := newTestServerOn(t, newFailsafe(brokenStore{}, failsafe.Options{Clock: clk}), "")
	if a := closed.check(t, `{"policy":"default","key":"k","max_wait":5}`); a.code != http.StatusServiceUnavailable || a.hdr.Get("Retry-After") == "" {
		t.Errorf("failing closed: %d %s", a.code, a.body)
	}
	open := newTestServerOn(t, newFailsafe(brokenStore{}, failsafe.Options{Mode: failsafe.FailOpen, Clock: clk}), "")
	wantBody(t, "failing open", open.check(t, `{"policy":"default","key":"k","max_wait":5}`), `{"allowed":true,"remaining":0,"retry_after":0,"reset_after":0,"delay":0}`)
}

// The queue is kept in the store: two service instances on one real
// Redis hand out the places of one key's queue between them, exactly as
// one would (delays 0, 1, 2, 3 s alternately, then a refusal).
func TestCheckMaxWaitRedis(t *testing.T) {
	rs, err := redisstore.New(redistest.NewServer(t).Client(t), redisstore.WithCallerTime())
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseConfig([]byte(scheduleConfig), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(t0)
	var urls []string
	for range 2 {
		s, err := New(rs, cfg, WithClock(clk))
		if err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewServer(s.Handler())
		t.Cleanup(hs.Close)
		urls = append(urls, hs.URL)
	}
	req := `{"policy":"api","key":"alice","max_wait":3}`
	for i, want := range []string{"0", "1", "2", "3", "refused after 4"} {
		a := do(t, http.MethodPost, urls[i%2]+"/v1/check", req)
		got := fmt.Sprint(a.json["delay"])
		if a.json["allowed"] != true {
			got = fmt.Sprintf("refused after %v", a.json["retry_after"])
		}
		if got != want {
			t.Errorf("check %d on instance %d: %s, want %s", i+1, i%2, a.body, want)
		}
	}
}

// The service holds nothing open for a queued check: a thousand checks
// given delays of up to 999 s leave no goroutine behind them.
func TestCheckMaxWaitHoldsNothingOpen(t *testing.T) {
	ts := newTestServer(t, "policies: {api: token-bucket 1/1s}\nlimits: {max_wait: 1h}")
	req := `{"policy":"api","key":"k","max_wait":3600}`
	ts.check(t, req) // the connection, warm
	before := runtime.NumGoroutine()
	for i := 1; i < 1000; i++ {
		if a := ts.check(t, req); a.json["delay"] != float64(i) {
			t.Fatalf("check %d: %s", i+1, a.body)
		}
	}
	after := runtime.NumGoroutine()
	t.Logf("goroutines: %d before, %d after 999 queued checks (delays up to 999 s)", before, after)
	if after > before+5 {
		t.Errorf("goroutines grew from %d to %d", before, after)
	}
}
