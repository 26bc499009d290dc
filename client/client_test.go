package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/floodgate/floodgate/failsafe"

	"github.com/floodgate/floodgate/memstore"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/client"
	"github.com/floodgate/floodgate/clock"
	"github.com/floodgate/floodgate/server"
	"github.com/floodgate/floodgate/store"
)

var t0 = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

const config = `
policies:
  per-user: token-bucket 3/1s burst=3
  global: fixed-window 4/1m
auth: {token_file: token}
`

// newServer serves floodgate on a fake clock, with the token "t0ken".
func newServer(t *testing.T, store store.Store) (string, *clock.Fake) {
	t.Helper()
	dir := t.TempDir()
	if err := writeFile(dir+"/token", "t0ken\n"); err != nil {
		t.Fatal(err)
	}
	cfg, err := server.ParseConfig([]byte(config), dir)
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(t0)
	s, err := server.New(store, cfg, server.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	return hs.URL, clk
}

func newClient(t *testing.T, url string, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.New(url, append([]client.Option{client.WithToken("t0ken")}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCheckPeekReset(t *testing.T) {
	url, clk := newServer(t, memstore.New(0))
	c := newClient(t, url)
	ctx := context.Background()
	third := time.Second / 3
	for i, want := range []client.Decision{
		{Allowed: true, Remaining: 2, ResetAfter: third + 1}, // 1/3 s, rounded up to the nanosecond
		{Allowed: true, Remaining: 1, ResetAfter: 2*third + 1},
		{Allowed: true, Remaining: 0, ResetAfter: time.Second},
		{Allowed: false, Remaining: 0, RetryAfter: third + 1, ResetAfter: time.Second},
	} {
		d, err := c.Check(ctx, "per-user", "alice")
		if err != nil || d != want {
			t.Errorf("check %d: %+v %v, want %+v", i+1, d, err, want)
		}
	}
	clk.Advance(third + 1)
	if d, err := c.Peek(ctx, "per-user", "alice"); err != nil || d != (client.Decision{Allowed: true, Remaining: 1, ResetAfter: 2 * third}) {
		t.Errorf("peek after a third of a second: %+v %v", d, err)
	}
	if d, err := c.Decide(ctx, client.Check{PolicyText: "sliding-log 5/1m", Key: "alice", Cost: 5}); err != nil || d != (client.Decision{Allowed: true, ResetAfter: time.Minute}) {
		t.Errorf("inline, cost 5: %+v %v", d, err)
	}
	if err := c.Reset(ctx, client.Check{Policy: "per-user", Key: "alice", Cost: 3}); err != nil {
		t.Fatal(err)
	}
	if d, err := c.Peek(ctx, "per-user", "alice"); err != nil || d.Remaining != 3 {
		t.Errorf("peek after a reset: %+v %v", d, err)
	}
}

func TestCheckAllEach(t *testing.T) {
	url, _ := newServer(t, memstore.New(0))
	c := newClient(t, url)
	ctx := context.Background()
	checks := []client.Check{{Policy: "per-user", Key: "u"}, {Policy: "global", Key: "all", Cost: 3}}
	b, err := c.CheckAll(ctx, checks...)
	if err != nil || !b.Allowed || b.Denied != -1 || len(b.Results) != 2 || b.Results[1].Remaining != 1 {
		t.Fatalf("CheckAll: %+v %v", b, err)
	}
	b, err = c.CheckAll(ctx, checks...)
	if err != nil || b.Allowed || b.Denied != 1 || b.RetryAfter != time.Minute || b.Results[0].Remaining != 1 {
		t.Fatalf("CheckAll over the global limit: %+v %v", b, err)
	}
	if d, _ := c.Peek(ctx, "per-user", "u"); d.Remaining != 2 {
		t.Errorf("a refused CheckAll spent: %+v", d)
	}
	b, err = c.CheckEach(ctx, checks...)
	if err != nil || b.Allowed || b.Denied != 1 || !b.Results[0].Allowed || b.Results[1].Allowed {
		t.Fatalf("CheckEach: %+v %v", b, err)
	}
	if d, _ := c.Peek(ctx, "per-user", "u"); d.Remaining != 1 {
		t.Errorf("CheckEach did not spend its allowed check: %+v", d)
	}
	ps, err := c.Policies(ctx)
	want := []client.Policy{
		{Name: "global", Policy: "fixed-window 4/1m", Algorithm: "fixed-window", Limit: 4, Period: time.Minute, Burst: 4},
		{Name: "per-user", Policy: "token-bucket 3/1s", Algorithm: "token-bucket", Limit: 3, Period: time.Second, Burst: 3},
	}
	if err != nil || len(ps) != 2 || ps[0] != want[0] || ps[1] != want[1] {
		t.Errorf("Policies: %+v %v", ps, err)
	}
}

// brokenStore fails every call.
type brokenStore struct{}

func (brokenStore) Table(string, algo.Policy) (store.Table, error) {
	return brokenStore{}, nil
}
func (brokenStore) Apply(context.Context, []store.Op) error     { return errors.New("down") }
func (brokenStore) ApplyEach(context.Context, []store.Op) error { return errors.New("down") }
func (brokenStore) Decide(context.Context, string, int64, int64) (algo.Decision, error) {
	return algo.Decision{}, errors.New("down")
}

func TestErrors(t *testing.T) {
	url, _ := newServer(t, memstore.New(0))
	ctx := context.Background()
	c := newClient(t, url)
	_, err := c.Check(ctx, "nope", "k")
	var e *client.Error
	if !errors.Is(err, client.ErrBadRequest) || !errors.As(err, &e) || e.Message != `unknown policy "nope" (see GET /v1/policies)` {
		t.Errorf("unknown policy: %v", err)
	}
	if _, err := c.Decide(ctx, client.Check{Policy: "global", Key: "k", Cost: 5}); !errors.Is(err, client.ErrBadRequest) {
		t.Errorf("cost above the burst: %v", err)
	}
	noToken, _ := client.New(url)
	if _, err := noToken.Check(ctx, "global", "k"); !errors.Is(err, client.ErrUnauthorized) || errors.Is(err, client.ErrBadRequest) {
		t.Errorf("no token: %v", err)
	}
	downURL, _ := newServer(t, newFailsafe(brokenStore{}, failsafe.Options{Clock: clock.NewFake(t0)}))
	_, err = newClient(t, downURL).Check(ctx, "global", "k")
	if !errors.Is(err, client.ErrUnavailable) || !errors.As(err, &e) || e.RetryAfter < time.Second {
		t.Errorf("a failing store: %v (%+v)", err, e)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := c.Check(cancelled, "global", "k"); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled context: %v", err)
	}
	for _, bad := range []string{"", "127.0.0.1:8080", "ftp://x", "http://"} {
		if _, err := client.New(bad); err == nil {
			t.Errorf("New(%q) succeeded", bad)
		}
	}
	// A server that is not floodgate.
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "teapot", http.StatusTeapot)
	}))
	defer other.Close()
	_, err = newClient(t, other.URL).Check(ctx, "global", "k")
	if !errors.As(err, &e) || e.StatusCode != http.StatusTeapot || e.Message != "teapot" {
		t.Errorf("a teapot: %v", err)
	}
}

func writeFile(path, text string) error { return os.WriteFile(path, []byte(text), 0o600) }

// newFailsafe is failsafe.New with options that are right.
func newFailsafe(s store.Store, o failsafe.Options) *failsafe.Store {
	f, err := failsafe.New(s, o)
	if err != nil {
		panic(err)
	}
	return f
}
