package envoyrls

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

const headersConfig = `
domain: d
descriptors:
  - key: a
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: b
    rate_limit: {unit: minute, requests_per_unit: 2, name: bee}
  - key: c
    rate_limit: {unlimited: true}
  - key: ten
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: hour
    rate_limit: {unit: hour, requests_per_unit: 3}
  - key: zero
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: shadow
    rate_limit: {unit: minute, requests_per_unit: 1}
    shadow_mode: true
  - key: tb
    rate_limit: {unit: minute, requests_per_unit: 60, algorithm: token-bucket, burst: 5}
  - key: quota
    rate_limit: {unit: minute, requests_per_unit: 2}
    quota_mode: true
`

// headersOf writes a response's response_headers_to_add as
// "K: V; K: V", "" for none.
func headersOf(resp *rlsv3.RateLimitResponse) string {
	var out []string
	for _, h := range resp.GetResponseHeadersToAdd() {
		out = append(out, h.GetKey()+": "+h.GetValue())
	}
	return strings.Join(out, "; ")
}

// withCost returns d costing n hits (its own hits_addend).
func withCost(d *ratelimitv3.RateLimitDescriptor, n uint64) *ratelimitv3.RateLimitDescriptor {
	d.HitsAddend = wrapperspb.UInt64(n)
	return d
}

// The headers describe the descriptor upstream's do: the last one over
// its limit, else the first with the least limit_remaining, among those
// with a limit; none when no descriptor has one.
func TestResponseHeadersDescribeUpstreamsDescriptor(t *testing.T) {
	for _, tc := range []struct {
		name  string
		prime *rlsv3.RateLimitRequest // asked first, its answer ignored
		req   *rlsv3.RateLimitRequest
		want  string // the upstream form
	}{
		{"one", nil, request("d", descriptor("ten", "x")),
			"RateLimit-Limit: 10; RateLimit-Remaining: 9; RateLimit-Reset: 45"},
		{"least remaining", nil, request("d", descriptor("ten", "x"), descriptor("hour", "x")),
			"RateLimit-Limit: 3; RateLimit-Remaining: 2; RateLimit-Reset: 3585"},
		{"the first of the least", nil, request("d", descriptor("hour", "x"), withCost(descriptor("ten", "x"), 8)),
			"RateLimit-Limit: 3; RateLimit-Remaining: 2; RateLimit-Reset: 3585"},
		{"the first of the least, reversed", nil, request("d", withCost(descriptor("ten", "x"), 8), descriptor("hour", "x")),
			"RateLimit-Limit: 10; RateLimit-Remaining: 2; RateLimit-Reset: 45"},
		{"over beats a later 0 remaining", nil, request("d", descriptor("zero", "x"), descriptor("a", "x")),
			"RateLimit-Limit: 0; RateLimit-Remaining: 0; RateLimit-Reset: 1"},
		{"the last over", request("d", descriptor("a", "y")), request("d", descriptor("zero", "x"), descriptor("a", "y"), descriptor("ten", "x")),
			"RateLimit-Limit: 1; RateLimit-Remaining: 0; RateLimit-Reset: 45"},
		{"shadow mode over: OK with 0 remaining", request("d", descriptor("shadow", "x")), request("d", descriptor("ten", "x"), descriptor("shadow", "x")),
			"RateLimit-Limit: 1; RateLimit-Remaining: 0; RateLimit-Reset: 45"},
		{"quota mode over: not the last over", request("d", descriptor("a", "y"), withCost(descriptor("quota", "x"), 2)), request("d", descriptor("a", "y"), descriptor("quota", "x")),
			"RateLimit-Limit: 1; RateLimit-Remaining: 0; RateLimit-Reset: 45"},
		{"no limit, unlimited: none", nil, request("d", descriptor("none", "x"), descriptor("c", "x")), ""},
		{"unknown domain: none", nil, request("elsewhere", descriptor("ten", "x")), ""},
		{"algorithm", nil, request("d", descriptor("tb", "x")),
			"RateLimit-Limit: 60; RateLimit-Remaining: 4; RateLimit-Reset: 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, clk := newService(t, headersConfig, WithResponseHeaders(UpstreamHeaders))
			clk.Advance(15 * time.Second)
			if tc.prime != nil {
				call(t, s, tc.prime)
			}
			resp, err := s.ShouldRateLimit(context.Background(), tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if got := headersOf(resp); got != tc.want {
				t.Errorf("got  %s\nwant %s\n(%s)", got, tc.want, summary(resp))
			}
		})
	}
}

// Each form writes the same descriptor's values under its names; the IETF
// form names the rule (else the domain) and gives its quota policy.
func TestResponseHeadersForms(t *testing.T) {
	for _, tc := range []struct {
		h    Headers
		req  *rlsv3.RateLimitRequest
		want string
	}{
		{NoHeaders, request("d", descriptor("ten", "x")), ""},
		{RateLimitHeaders, request("d", descriptor("ten", "x")),
			`RateLimit-Policy: "d";q=10;w=60; RateLimit: "d";r=9;t=45`},
		{RateLimitHeaders, request("d", descriptor("b", "x")),
			`RateLimit-Policy: "bee";q=2;w=60; RateLimit: "bee";r=1;t=45`},
		{RateLimitHeaders, request("d", descriptor("zero", "x")),
			`RateLimit-Policy: "d";q=0;w=1; RateLimit: "d";r=0;t=1`},
		{RateLimitHeaders, request("d", descriptor("tb", "x")),
			`RateLimit-Policy: "d";q=60;w=60; RateLimit: "d";r=4;t=1`},
		{UpstreamHeaders, request("d", descriptor("b", "x")),
			"RateLimit-Limit: 2; RateLimit-Remaining: 1; RateLimit-Reset: 45"},
		{LegacyHeaders, request("d", descriptor("b", "x")),
			"X-RateLimit-Limit: 2; X-RateLimit-Remaining: 1; X-RateLimit-Reset: 45"},
	} {
		s, clk := newService(t, headersConfig, WithResponseHeaders(tc.h))
		clk.Advance(15 * time.Second)
		resp, err := s.ShouldRateLimit(context.Background(), tc.req)
		if err != nil {
			t.Fatal(err)
		}
		if got := headersOf(resp); got != tc.want {
			t.Errorf("%v %s:\ngot  %s\nwant %s", tc.h, summary(resp), got, tc.want)
		}
	}
}

// Under WithShadowMode the statuses stay OVER_LIMIT, so the headers say
// so, though the overall code is OK: as upstream's.
func TestResponseHeadersShadowMode(t *testing.T) {
	s, clk := newService(t, headersConfig, WithShadowMode(true), WithResponseHeaders(LegacyHeaders))
	clk.Advance(15 * time.Second)
	resp, err := s.ShouldRateLimit(context.Background(), request("d", descriptor("zero", "x"), descriptor("ten", "x")))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := headersOf(resp), "X-RateLimit-Limit: 0; X-RateLimit-Remaining: 0; X-RateLimit-Reset: 1"; resp.OverallCode != rlsv3.RateLimitResponse_OK || got != want {
		t.Errorf("%s: %s, want %s", summary(resp), got, want)
	}
}

// The headers arrive over gRPC and in POST /json's body, as upstream's.
func TestResponseHeadersOverTheWire(t *testing.T) {
	s, clk := newService(t, headersConfig, WithResponseHeaders(RateLimitHeaders))
	clk.Advance(15 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := serveGRPC(t, s).ShouldRateLimit(ctx, request("d", descriptor("b", "x")))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := headersOf(resp), `RateLimit-Policy: "bee";q=2;w=60; RateLimit: "bee";r=1;t=45`; got != want {
		t.Errorf("over gRPC: %s, want %s", got, want)
	}
	srv := httptest.NewServer(s.JSONHandler())
	defer srv.Close()
	hr, err := http.Post(srv.URL, "application/json", strings.NewReader(`{"domain":"d","descriptors":[{"entries":[{"key":"b","value":"x"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer hr.Body.Close()
	body, err := io.ReadAll(hr.Body)
	if err != nil {
		t.Fatal(err)
	}
	if want := `"responseHeadersToAdd":[{"key":"RateLimit-Policy","value":"\"bee\";q=2;w=60"},{"key":"RateLimit","value":"\"bee\";r=0;t=45"}]`; !strings.Contains(strings.ReplaceAll(string(body), " ", ""), want) {
		t.Errorf("POST /json: %s\nwant it to hold %s", body, want)
	}
}

func TestHeadersText(t *testing.T) {
	for _, h := range []Headers{NoHeaders, RateLimitHeaders, UpstreamHeaders, LegacyHeaders} {
		text, _ := h.MarshalText()
		var back Headers
		if err := back.UnmarshalText(text); err != nil || back != h {
			t.Errorf("%v: %s read back as %v, %v", h, text, back, err)
		}
	}
	var h Headers
	if err := h.UnmarshalText([]byte("IETF")); !errors.Is(err, ErrInvalidHeaders) || !strings.Contains(err.Error(), "want none, ietf, upstream or x-ratelimit") {
		t.Errorf("UnmarshalText(IETF): %v", err)
	}
	if got := Headers(9).String(); got != "Headers(9)" {
		t.Errorf("Headers(9).String() = %s", got)
	}
}
