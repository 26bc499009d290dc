package httplimit

import (
	"context"
	"errors"
	"log/slog"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate/failsafe"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/clock"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/redisstore"
	"github.com/floodgate/floodgate/store"
)

// brokenStore stands for a store whose server cannot be reached: every
// call fails, as over a broken network.
type brokenStore struct{}

var errBroken = errors.New("dial tcp 10.0.0.7:6379: connect: connection refused")

func (brokenStore) Table(string, algo.Policy) (store.Table, error) {
	return brokenStore{}, nil
}
func (brokenStore) Apply(context.Context, []store.Op) error     { return errBroken }
func (brokenStore) ApplyEach(context.Context, []store.Op) error { return errBroken }
func (brokenStore) Decide(context.Context, string, int64, int64) (algo.Decision, error) {
	return algo.Decision{}, errBroken
}

// checkNoLeak fails t when the store's error shows in the response.
func checkNoLeak(t *testing.T, rec *httptest.ResponseRecorder) {
	t.Helper()
	for k, vs := range rec.Header() {
		for _, v := range vs {
			if strings.Contains(v, "refused") || strings.Contains(v, "10.0.0.7") {
				t.Errorf("error in header %s: %q", k, v)
			}
		}
		if k == "Ratelimit" || k == "Ratelimit-Policy" {
			t.Errorf("rate-limit field %s on a failed decision", k)
		}
	}
	if b := rec.Body.String(); strings.Contains(b, "refused") || strings.Contains(b, "10.0.0.7") {
		t.Errorf("error in body: %q", b)
	}
}

func TestStoreFailure(t *testing.T) {
	p := algo.MustParsePolicy("fixed-window 2/1m")
	for _, tc := range []struct {
		name       string
		store      func(*clock.Fake) store.Store
		dryRun     bool
		statuses   string // of four requests
		retryAfter string // of the last
		stats      Stats
	}{
		{"no failsafe", func(*clock.Fake) store.Store { return brokenStore{} }, false,
			"503 503 503 503", "1", Stats{Errors: 4}},
		{"fail closed", func(fc *clock.Fake) store.Store {
			return newFailsafe(brokenStore{}, failsafe.Options{Mode: failsafe.FailClosed, Threshold: 1, FailFor: -1, Cooldown: 5 * time.Second, Clock: fc})
		}, false, "503 503 503 503", "5", Stats{Errors: 4}},
		{"fail open", func(fc *clock.Fake) store.Store {
			return newFailsafe(brokenStore{}, failsafe.Options{Mode: failsafe.FailOpen, Threshold: 1, FailFor: -1, Clock: fc})
		}, false, "200 200 200 200", "", Stats{}},
		{"fail local", func(fc *clock.Fake) store.Store {
			return newFailsafe(brokenStore{}, failsafe.Options{Mode: failsafe.FailLocal, Threshold: 1, FailFor: -1, Clock: fc})
		}, false, "200 200 429 429", "60", Stats{Denied: 2}},
		{"dry run", func(*clock.Fake) store.Store { return brokenStore{} }, true,
			"200 200 200 200", "", Stats{ServedOnError: 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc := clock.NewFake(t0)
			l := floodgate.Must(floodgate.NewLimiter(p, floodgate.WithStore(tc.store(fc)), floodgate.WithClock(fc), floodgate.WithDryRun(tc.dryRun)))
			log, buf := newLogger()
			m := New(l, WithLogger(log))
			h := m.Handler(ok)
			var statuses []string
			var rec *httptest.ResponseRecorder
			for range 4 {
				rec = httptest.NewRecorder()
				req := httptest.NewRequest("GET", "/", nil)
				req.Header.Set("Accept", "application/json")
				h.ServeHTTP(rec, req)
				statuses = append(statuses, strconv.Itoa(rec.Code))
				if rec.Code == 503 {
					checkNoLeak(t, rec)
					if rec.Header().Get("Content-Type") != "application/problem+json" {
						t.Errorf("503 Content-Type %q", rec.Header().Get("Content-Type"))
					}
				}
			}
			if got := strings.Join(statuses, " "); got != tc.statuses {
				t.Errorf("statuses %s, want %s", got, tc.statuses)
			}
			if got := rec.Header().Get("Retry-After"); got != tc.retryAfter {
				t.Errorf("Retry-After %q, want %q", got, tc.retryAfter)
			}
			if s := m.Stats(); s != tc.stats {
				t.Errorf("Stats %+v, want %+v", s, tc.stats)
			}
			// Errors are logged, once for the burst of four.
			wantLines := 0
			if tc.stats.Errors+tc.stats.ServedOnError > 0 {
				wantLines = 1
			}
			if n := strings.Count(buf.String(), "limiter failed"); n != wantLines || (n > 0 && !strings.Contains(buf.String(), "connection refused")) {
				t.Errorf("log has %d lines, want %d:\n%s", n, wantLines, buf)
			}
		})
	}
}

func TestStoreFailureNewAll(t *testing.T) {
	fc := clock.NewFake(t0)
	local := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("fixed-window 5/1m"), floodgate.WithName("local"), floodgate.WithClock(fc)))
	closed := newFailsafe(brokenStore{}, failsafe.Options{Threshold: 1, FailFor: -1, Cooldown: 3 * time.Second, Clock: fc})
	shared := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("fixed-window 5/1m"), floodgate.WithName("shared"),
		floodgate.WithStore(closed), floodgate.WithClock(fc)))
	m := NewAll([]Limit{{Limiter: local}, {Limiter: shared}}, WithLogger(newDiscardLogger()))
	rec := httptest.NewRecorder()
	m.Handler(ok).ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	// The failsafe's cooldown comes back through AllowAll: 3 seconds.
	if rec.Code != 503 || rec.Header().Get("Retry-After") != "3" {
		t.Fatalf("%d Retry-After %q", rec.Code, rec.Header().Get("Retry-After"))
	}
	checkNoLeak(t, rec)
	// The local limit spent nothing.
	if d, _ := local.AllowN(context.Background(), "192.0.2.1", 0); d.Remaining != 5 {
		t.Errorf("local remaining %d, want 5", d.Remaining)
	}
}

func newDiscardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// TestRedisDown runs the middleware on a real Redis store, stops the
// server, and checks each failure mode's answer.
func TestRedisDown(t *testing.T) {
	for _, tc := range []struct {
		mode failsafe.Mode
		want int
	}{
		{failsafe.FailClosed, 503},
		{failsafe.FailOpen, 200},
		{failsafe.FailLocal, 200},
	} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			srv := redistest.NewServer(t)
			rs, err := redisstore.New(srv.Client(t))
			if err != nil {
				t.Fatal(err)
			}
			store := newFailsafe(rs, failsafe.Options{Mode: tc.mode, Timeout: time.Second, Threshold: 1, FailFor: -1})
			l := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("fixed-window 100/1h"), floodgate.WithStore(store)))
			m := New(l, WithLogger(newDiscardLogger()))
			web := server(t, m.Handler(ok))
			if res := get(t, web.URL); res.status != 200 {
				t.Fatalf("with Redis up: %d", res.status)
			}
			srv.Stop()
			res := get(t, web.URL)
			if res.status != tc.want {
				t.Fatalf("with Redis down: %d, want %d", res.status, tc.want)
			}
			if tc.want == 503 && (res.header.Get("Retry-After") == "" || strings.Contains(res.body, "refused")) {
				t.Errorf("503 without Retry-After or with the error: %v %q", res.header, res.body)
			}
			if !store.Stats().Down {
				t.Error("the failsafe store did not notice")
			}
		})
	}
}

// newFailsafe is failsafe.New with options that are right.
func newFailsafe(s store.Store, o failsafe.Options) *failsafe.Store {
	f, err := failsafe.New(s, o)
	if err != nil {
		panic(err)
	}
	return f
}
