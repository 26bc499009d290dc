package server

import (
	"io"
	"net/http"
	"testing"

	"github.com/floodgate/floodgate/clock"
	"github.com/floodgate/floodgate/failsafe"
)

// getHealthcheck asks url's /healthcheck with method and returns the
// status, the body and the Content-Type.
func getHealthcheck(t *testing.T, method, url string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(method, url+"/healthcheck", nil)
	if err != nil {
		t.Fatal(err)
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
	return resp.StatusCode, string(b), resp.Header.Get("Content-Type")
}

// /healthcheck answers as envoyproxy/ratelimit's: 200 "OK" when ready,
// to any method and without the API's token; 500 with no body when
// shutting down or when the store does not answer.
func TestHealthcheck(t *testing.T) {
	ts := newTestServer(t, "", WithToken("s3cret"))
	for _, method := range []string{"GET", "HEAD", "POST"} {
		code, body, ct := getHealthcheck(t, method, ts.url)
		want := "OK"
		if method == "HEAD" {
			want = ""
		}
		if code != 200 || body != want || ct != "text/plain; charset=utf-8" {
			t.Errorf("%s /healthcheck: %d %q %q, want 200 %q text/plain", method, code, body, ct, want)
		}
	}
	if a := do(t, "POST", ts.url+"/v1/check", `{"policy":"default","key":"k"}`); a.code != 401 {
		t.Errorf("the API without the token: %d", a.code)
	}
	ts.SetReady(false)
	if code, body, _ := getHealthcheck(t, "GET", ts.url); code != 500 || body != "" {
		t.Errorf("/healthcheck while shutting down: %d %q, want 500 and no body", code, body)
	}

	down := newTestServerOn(t, newFailsafe(brokenStore{}, failsafe.Options{Clock: clock.NewFake(t0)}), "")
	if code, body, _ := getHealthcheck(t, "GET", down.url); code != 500 || body != "" {
		t.Errorf("/healthcheck on a failing store: %d %q, want 500 and no body", code, body)
	}
}
