package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/clock"
)

func testServer(t *testing.T, trusted ...netip.Prefix) *httptest.Server {
	t.Helper()
	fc := clock.NewFake(time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC))
	srv := httptest.NewServer(newHandler(config{
		policy:  algo.MustParsePolicy("fixed-window 5/1m"),
		trusted: trusted,
		opts:    []floodgate.Option{floodgate.WithClock(fc)},
	}))
	t.Cleanup(srv.Close)
	return srv
}

func do(t *testing.T, method, url, body string, header ...string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func codes(t *testing.T, n int, method, url, body string, header ...string) string {
	var cs []string
	for range n {
		c, _, _ := do(t, method, url, body, header...)
		cs = append(cs, http.StatusText(c))
	}
	return strings.Join(cs, ",")
}

func TestRoutes(t *testing.T) {
	srv := testServer(t)
	if got := codes(t, 6, "GET", srv.URL+"/", ""); got != "OK,OK,OK,OK,OK,Too Many Requests" {
		t.Errorf("/: %s", got)
	}
	c, h, _ := do(t, "GET", srv.URL+"/", "", "X-Forwarded-For", "203.0.113.9")
	if c != 429 || h.Get("Retry-After") != "60" || h.Get("X-Ratelimit-Limit") != "5" || h.Get("RateLimit-Policy") != `"per-address";q=5;w=60` {
		t.Errorf("spoofed X-Forwarded-For: %d %v", c, h)
	}
	if got := codes(t, 8, "GET", srv.URL+"/healthz", ""); strings.Contains(got, "Many") {
		t.Errorf("/healthz: %s", got)
	}
	if got := codes(t, 4, "GET", srv.URL+"/api/", "", "X-Demo-User", "alice"); got != "OK,OK,OK,Too Many Requests" {
		t.Errorf("/api/ alice: %s", got)
	}
	if c, h, body := do(t, "GET", srv.URL+"/api/", "", "X-Demo-User", "bob"); c != 200 || body != "api for \"bob\"\n" ||
		h.Get("RateLimit") != `"per-user";r=2;t=30, "global";r=96;t=60` {
		t.Errorf("/api/ bob: %d %q %q", c, body, h.Get("RateLimit"))
	}
	big := strings.Repeat("x", 600000)
	if got := codes(t, 2, "POST", srv.URL+"/upload", big); got != "OK,Too Many Requests" {
		t.Errorf("/upload: %s", got)
	}
	if c, h, body := do(t, "POST", srv.URL+"/upload", "small"); c != 200 || body != "received 5 bytes\n" ||
		!strings.Contains(h.Get("RateLimit-Policy"), `qu="content-bytes"`) {
		t.Errorf("/upload small: %d %q %v", c, body, h)
	}
}

func TestStreamRoute(t *testing.T) {
	srv := testServer(t)
	c, _, body := do(t, "GET", srv.URL+"/stream", "")
	if c != 200 || body != "line 0\nline 1\nline 2\n" {
		t.Errorf("/stream: %d %q", c, body)
	}
}

func TestTrustedProxy(t *testing.T) {
	srv := testServer(t, netip.MustParsePrefix("127.0.0.0/8"))
	for _, client := range []string{"203.0.113.1", "203.0.113.2"} {
		if got := codes(t, 6, "GET", srv.URL+"/", "", "X-Forwarded-For", client); got != "OK,OK,OK,OK,OK,Too Many Requests" {
			t.Errorf("client %s: %s", client, got)
		}
	}
}

func TestRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-addr", "127.0.0.1:0", "-trust", "10.0.0.0/8, 192.168.0.0/16"}, pw)
		pw.Close()
	}()
	br := bufio.NewReader(pr)
	line, err := br.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	base, ok := strings.CutPrefix(strings.TrimSpace(line), "listening on ")
	if !ok {
		t.Fatalf("first line %q", line)
	}
	go io.Copy(io.Discard, br)
	if c, _, body := do(t, "GET", base+"/healthz", ""); c != 200 || body != "ok\n" {
		t.Errorf("/healthz: %d %q", c, body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("run: %v", err)
	}
}

func TestRunBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-policy", "token-bucket 5"},
		{"-trust", "10.0.0.0/33"},
		{"-addr", "256.0.0.1:0"},
		{"-nope"},
	} {
		if err := run(context.Background(), args, io.Discard); err == nil {
			t.Errorf("run %q: no error", args)
		}
	}
}
