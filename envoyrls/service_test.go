package envoyrls

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/clock"

	"github.com/floodgate/floodgate/failsafe"

	"github.com/floodgate/floodgate/memstore"

	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/redisstore"
	"github.com/floodgate/floodgate/store"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

const basics = `
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
`

// One status per descriptor, in the request's order, each with its limit,
// what remains and when the window ends; OVER_LIMIT overall if any is.
func TestStatusesInRequestOrder(t *testing.T) {
	s, clk := newService(t, basics)
	clk.Advance(15 * time.Second)
	got := call(t, s, request("d", descriptor("b", "x"), descriptor("none", "x"), descriptor("a", "x"), descriptor("c", "x"), descriptor("a", "x"), descriptor("hour", "h")))
	want := "OVER_LIMIT: OK 2/MINUTE r=1 t=45s | OK | OK 1/MINUTE t=45s | OK r=4294967295 | OVER_LIMIT 1/MINUTE t=45s | OK 3/HOUR r=2 t=59m45s"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	// The fields themselves, beyond the summary.
	resp, err := s.ShouldRateLimit(context.Background(), request("d", descriptor("b", "x")))
	if err != nil {
		t.Fatal(err)
	}
	st := resp.Statuses[0]
	if l := st.CurrentLimit; l.Name != "bee" || l.RequestsPerUnit != 2 || l.Unit != rlsv3.RateLimitResponse_RateLimit_MINUTE || l.UnitMultiplier != nil {
		t.Errorf("current_limit = %v", l)
	}
	if st.DurationUntilReset.Nanos != 0 {
		t.Errorf("duration_until_reset = %v, want whole seconds", st.DurationUntilReset)
	}
}

// Fixed windows begin and end exactly at the unit's boundaries, and
// duration_until_reset is upstream's: the unit's seconds minus the whole
// seconds elapsed in the window.
func TestFixedWindowBoundaries(t *testing.T) {
	s, clk := newService(t, basics)
	a := request("d", descriptor("b", "x"))
	steps := []struct {
		at   time.Duration // since t0
		want string
	}{
		{0, "OK: OK 2/MINUTE r=1 t=1m0s"},
		{500 * time.Millisecond, "OK: OK 2/MINUTE t=1m0s"},
		{time.Second, "OVER_LIMIT: OVER_LIMIT 2/MINUTE t=59s"},
		{59*time.Second + 999999999, "OVER_LIMIT: OVER_LIMIT 2/MINUTE t=1s"},
		{time.Minute, "OK: OK 2/MINUTE r=1 t=1m0s"},
		{time.Minute + 1, "OK: OK 2/MINUTE t=1m0s"},
		{2*time.Minute - 1, "OVER_LIMIT: OVER_LIMIT 2/MINUTE t=1s"},
		{2 * time.Minute, "OK: OK 2/MINUTE r=1 t=1m0s"},
		{10 * time.Minute, "OK: OK 2/MINUTE r=1 t=1m0s"},
	}
	for _, step := range steps {
		clk.Set(t0.Add(step.at))
		if got := call(t, s, a); got != step.want {
			t.Errorf("at t0+%v: %s, want %s", step.at, got, step.want)
		}
	}
}

// Every unit upstream accepts: windows of 1s, 1m, 1h, 1d, 7d, 30d and
// 365d, aligned to the Unix epoch.
func TestUnitWindows(t *testing.T) {
	for _, tc := range []struct {
		unit   string
		period time.Duration
	}{
		{"second", time.Second},
		{"minute", time.Minute},
		{"hour", time.Hour},
		{"day", 24 * time.Hour},
		{"week", 7 * 24 * time.Hour},
		{"month", 30 * 24 * time.Hour},
		{"year", 365 * 24 * time.Hour},
	} {
		t.Run(tc.unit, func(t *testing.T) {
			s, clk := newService(t, "domain: u\ndescriptors:\n  - key: k\n    rate_limit: {unit: "+tc.unit+", requests_per_unit: 1}\n")
			start := t0.Add(tc.period / 3).Truncate(time.Second) // somewhere in a window
			clk.Set(start)
			end := time.Unix(0, start.UnixNano()-start.UnixNano()%int64(tc.period)+int64(tc.period))
			left := end.Sub(start)
			req := request("u", descriptor("k", "v"))
			unit := strings.ToUpper(tc.unit)
			if got, want := call(t, s, req), "OK: OK 1/"+unit+" t="+left.String(); got != want {
				t.Errorf("first: %s, want %s", got, want)
			}
			if got, want := call(t, s, req), "OVER_LIMIT: OVER_LIMIT 1/"+unit+" t="+left.String(); got != want {
				t.Errorf("second: %s, want %s", got, want)
			}
			clk.Set(end.Add(-time.Nanosecond))
			if got, want := call(t, s, req), "OVER_LIMIT: OVER_LIMIT 1/"+unit+" t=1s"; got != want {
				t.Errorf("just before the end: %s, want %s", got, want)
			}
			clk.Set(end)
			if got, want := call(t, s, req), "OK: OK 1/"+unit+" t="+tc.period.String(); got != want {
				t.Errorf("at the end: %s, want %s", got, want)
			}
		})
	}
}

// A request over a fixed window's limit counts, as upstream's counter
// does: later requests in that window are over too, even small ones.
func TestOverLimitSpendsTheWindow(t *testing.T) {
	s, clk := newService(t, basics)
	costs := func(n uint32) *rlsv3.RateLimitRequest {
		r := request("d", descriptor("ten", "x"))
		r.HitsAddend = n
		return r
	}
	for _, step := range []struct {
		req  *rlsv3.RateLimitRequest
		want string
	}{
		{costs(8), "OK: OK 10/MINUTE r=2 t=1m0s"},
		{costs(5), "OVER_LIMIT: OVER_LIMIT 10/MINUTE t=1m0s"},
		{costs(1), "OVER_LIMIT: OVER_LIMIT 10/MINUTE t=1m0s"}, // upstream's counter is at 13
	} {
		if got := call(t, s, step.req); got != step.want {
			t.Errorf("%d hits: %s, want %s", step.req.HitsAddend, got, step.want)
		}
	}
	clk.Advance(time.Minute)
	if got, want := call(t, s, costs(1)), "OK: OK 10/MINUTE r=9 t=1m0s"; got != want {
		t.Errorf("next window: %s, want %s", got, want)
	}
	// A request costing more than the whole limit is over it, and spends it.
	clk.Advance(time.Minute)
	if got, want := call(t, s, costs(11)), "OVER_LIMIT: OVER_LIMIT 10/MINUTE t=1m0s"; got != want {
		t.Errorf("11 hits of 10: %s, want %s", got, want)
	}
	if got, want := call(t, s, costs(1)), "OVER_LIMIT: OVER_LIMIT 10/MINUTE t=1m0s"; got != want {
		t.Errorf("after 11 hits of 10: %s, want %s", got, want)
	}
}

// floodgate's algorithms keep floodgate's semantics: a refused request
// spends nothing.
func TestExtensionAlgorithms(t *testing.T) {
	s, clk := newService(t, `
domain: x
descriptors:
  - key: bucket
    rate_limit: {unit: second, requests_per_unit: 2, algorithm: token-bucket, burst: 4}
  - key: log
    rate_limit: {unit: minute, requests_per_unit: 2, algorithm: sliding-log}
  - key: leaky
    rate_limit: {unit: minute, requests_per_unit: 1, algorithm: leaky-bucket}
  - key: window
    rate_limit: {unit: minute, requests_per_unit: 10, algorithm: sliding-window}
`)
	bucket := func(n uint32) *rlsv3.RateLimitRequest {
		r := request("x", descriptor("bucket", "b"))
		r.HitsAddend = n
		return r
	}
	for i, step := range []struct {
		after time.Duration
		req   *rlsv3.RateLimitRequest
		want  string
	}{
		{0, bucket(3), "OK: OK 2/SECOND r=1 t=2s"}, // 1.5s to refill 3, rounded up
		{0, bucket(2), "OVER_LIMIT: OVER_LIMIT 2/SECOND t=1s"},
		{0, bucket(1), "OK: OK 2/SECOND t=2s"}, // the refused 2 spent nothing
		{250 * time.Millisecond, bucket(1), "OVER_LIMIT: OVER_LIMIT 2/SECOND t=1s"},
		{250 * time.Millisecond, bucket(1), "OK: OK 2/SECOND t=2s"},
		{0, bucket(5), "OVER_LIMIT: OVER_LIMIT 2/SECOND t=2s"}, // more than the burst: never; until full
		{10 * time.Second, bucket(4), "OK: OK 2/SECOND t=2s"},
		{0, request("x", descriptor("log", "l")), "OK: OK 2/MINUTE r=1 t=1m0s"},
		{30 * time.Second, request("x", descriptor("log", "l")), "OK: OK 2/MINUTE t=1m0s"},
		{0, request("x", descriptor("log", "l")), "OVER_LIMIT: OVER_LIMIT 2/MINUTE t=30s"},
		{30 * time.Second, request("x", descriptor("log", "l")), "OK: OK 2/MINUTE t=1m0s"},
		{0, request("x", descriptor("leaky", "l")), "OK: OK 1/MINUTE t=1m0s"},
		{0, request("x", descriptor("leaky", "l")), "OVER_LIMIT: OVER_LIMIT 1/MINUTE t=1m0s"},
		{0, request("x", descriptor("window", "w")), "OK: OK 10/MINUTE r=9 t="},
	} {
		clk.Advance(step.after)
		got := call(t, s, step.req)
		if got != step.want && !(strings.HasSuffix(step.want, "t=") && strings.HasPrefix(got, step.want)) {
			t.Errorf("step %d: %s, want %s", i, got, step.want)
		}
	}
}

// Each descriptor is decided on its own, and counted even when another
// of the request is over its limit, as upstream counts them.
func TestDescriptorsCountedIndependently(t *testing.T) {
	s, _ := newService(t, basics)
	req := request("d", descriptor("a", "x"), descriptor("ten", "y"))
	if got, want := call(t, s, req), "OK: OK 1/MINUTE t=1m0s | OK 10/MINUTE r=9 t=1m0s"; got != want {
		t.Errorf("first: %s, want %s", got, want)
	}
	if got, want := call(t, s, req), "OVER_LIMIT: OVER_LIMIT 1/MINUTE t=1m0s | OK 10/MINUTE r=8 t=1m0s"; got != want {
		t.Errorf("second: %s, want %s", got, want)
	}
	if got, want := call(t, s, request("d", descriptor("ten", "y"))), "OK: OK 10/MINUTE r=7 t=1m0s"; got != want {
		t.Errorf("alone: %s, want %s", got, want)
	}
	// Distinct values are distinct counters.
	if got, want := call(t, s, request("d", descriptor("a", "other"))), "OK: OK 1/MINUTE t=1m0s"; got != want {
		t.Errorf("another value: %s, want %s", got, want)
	}
}

func TestHitsAddend(t *testing.T) {
	withHits := func(request uint32, descriptor *wrapperspb.UInt64Value) *rlsv3.RateLimitRequest {
		r := &rlsv3.RateLimitRequest{Domain: "d", HitsAddend: request,
			Descriptors: []*ratelimitv3.RateLimitDescriptor{{Entries: entries("ten", "x"), HitsAddend: descriptor}}}
		return r
	}
	for _, tc := range []struct {
		name       string
		req        *rlsv3.RateLimitRequest
		want, then string // the answer, and the next plain request's
	}{
		{"unset: 1", withHits(0, nil), "OK: OK 10/MINUTE r=9 t=1m0s", "OK: OK 10/MINUTE r=8 t=1m0s"},
		{"the request's", withHits(3, nil), "OK: OK 10/MINUTE r=7 t=1m0s", "OK: OK 10/MINUTE r=6 t=1m0s"},
		{"the descriptor's over the request's", withHits(2, wrapperspb.UInt64(5)), "OK: OK 10/MINUTE r=5 t=1m0s", "OK: OK 10/MINUTE r=4 t=1m0s"},
		{"the descriptor's 0: a check", withHits(3, wrapperspb.UInt64(0)), "OK: OK 10/MINUTE r=10 t=1m0s", "OK: OK 10/MINUTE r=9 t=1m0s"},
		{"exactly the limit", withHits(10, nil), "OK: OK 10/MINUTE t=1m0s", "OVER_LIMIT: OVER_LIMIT 10/MINUTE t=1m0s"},
		{"the most a request carries", withHits(math.MaxUint32, nil), "OVER_LIMIT: OVER_LIMIT 10/MINUTE t=1m0s", "OVER_LIMIT: OVER_LIMIT 10/MINUTE t=1m0s"},
		{"the most a descriptor carries", withHits(0, wrapperspb.UInt64(math.MaxUint64)), "OVER_LIMIT: OVER_LIMIT 10/MINUTE t=1m0s", "OVER_LIMIT: OVER_LIMIT 10/MINUTE t=1m0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newService(t, basics)
			if got := call(t, s, tc.req); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
			if got := call(t, s, request("d", descriptor("ten", "x"))); got != tc.then {
				t.Errorf("then %s, want %s", got, tc.then)
			}
		})
	}
	// A check of a window already over its limit: OVER_LIMIT, the
	// counter being past the limit, as upstream's.
	s, _ := newService(t, basics)
	call(t, s, withHits(11, nil))
	if got, want := call(t, s, withHits(0, wrapperspb.UInt64(0))), "OVER_LIMIT: OVER_LIMIT 10/MINUTE t=1m0s"; got != want {
		t.Errorf("a check of a spent window: %s, want %s", got, want)
	}
}

func TestUnlimited(t *testing.T) {
	s, _ := newService(t, `
domain: d
descriptors:
  - key: free
    rate_limit: {unlimited: true, replaces: [{name: paid}]}
  - key: paid
    rate_limit: {unit: minute, requests_per_unit: 1, name: paid}
`)
	for range 3 {
		if got, want := call(t, s, request("d", descriptor("free", "x"))), "OK: OK r=4294967295"; got != want {
			t.Fatalf("got %s, want %s", got, want)
		}
	}
	// An unlimited rule replaces others like any rule.
	for range 3 {
		if got, want := call(t, s, request("d", descriptor("paid", "x"), descriptor("free", "x"))), "OK: OK | OK r=4294967295"; got != want {
			t.Fatalf("got %s, want %s", got, want)
		}
	}
	if got, want := call(t, s, request("d", descriptor("paid", "x"))), "OK: OK 1/MINUTE t=1m0s"; got != want {
		t.Errorf("the replaced rule afterwards: %s, want %s (nothing counted)", got, want)
	}
}

// name and replaces, as upstream's Example 7.
func TestReplaces(t *testing.T) {
	s, _ := newService(t, `
domain: d
descriptors:
  - key: group
    value: g1
    descriptors:
      - key: user
        rate_limit: {unit: second, requests_per_unit: 2, name: specific}
  - key: group
    value: g2
    descriptors:
      - key: user
        rate_limit: {unit: second, requests_per_unit: 4, replaces: [{name: specific}, {name: nobody}]}
  - key: solo
    rate_limit: {unit: second, requests_per_unit: 1, name: specific}
`)
	g1, g2 := descriptor("group", "g1", "user", "u"), descriptor("group", "g2", "user", "u")
	if got, want := call(t, s, request("d", g1)), "OK: OK 2/SECOND r=1 t=1s"; got != want {
		t.Errorf("g1 alone: %s, want %s", got, want)
	}
	for i, want := range []string{
		"OK: OK | OK 4/SECOND r=3 t=1s",
		"OK: OK | OK 4/SECOND r=2 t=1s",
		"OK: OK | OK 4/SECOND r=1 t=1s",
		"OK: OK | OK 4/SECOND t=1s",
		"OVER_LIMIT: OK | OVER_LIMIT 4/SECOND t=1s",
	} {
		if got := call(t, s, request("d", g1, g2)); got != want {
			t.Errorf("together %d: %s, want %s", i, got, want)
		}
	}
	// The replaced limit was not touched; every rule of that name is
	// replaced, in any order of the descriptors.
	if got, want := call(t, s, request("d", g1)), "OK: OK 2/SECOND t=1s"; got != want {
		t.Errorf("g1 alone again: %s, want %s", got, want)
	}
	if got, want := call(t, s, request("d", g2, descriptor("solo", "x"))), "OVER_LIMIT: OVER_LIMIT 4/SECOND t=1s | OK"; got != want {
		t.Errorf("g2 and solo: %s, want %s", got, want)
	}
}

func TestShadowMode(t *testing.T) {
	s, _ := newService(t, `
domain: d
descriptors:
  - key: soft
    shadow_mode: true
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: hard
    rate_limit: {unit: second, requests_per_unit: 1}
`)
	soft, hard := descriptor("soft", "x"), descriptor("hard", "x")
	for i, step := range []struct {
		req  *rlsv3.RateLimitRequest
		want string
	}{
		{request("d", soft), "OK: OK 1/SECOND t=1s"},
		{request("d", soft), "OK: OK 1/SECOND t=1s"}, // over, but shadowed
		{request("d", soft), "OK: OK 1/SECOND t=1s"},
		{request("d", soft, hard), "OK: OK 1/SECOND t=1s | OK 1/SECOND t=1s"},
		{request("d", soft, hard), "OVER_LIMIT: OK 1/SECOND t=1s | OVER_LIMIT 1/SECOND t=1s"},
	} {
		if got := call(t, s, step.req); got != step.want {
			t.Errorf("step %d: %s, want %s", i, got, step.want)
		}
	}
	if st := s.Stats(); st.Shadow != 3 || st.OK != 4 || st.OverLimit != 1 {
		t.Errorf("Stats() = %+v, want 3 shadowed of 4 OK, 1 over", st)
	}
}

// WithShadowMode: the statuses tell the truth, the overall code is OK.
func TestGlobalShadowMode(t *testing.T) {
	s, _ := newService(t, basics, WithShadowMode(true))
	req := request("d", descriptor("a", "x"), descriptor("b", "x"))
	call(t, s, req)
	if got, want := call(t, s, req), "OK: OVER_LIMIT 1/MINUTE t=1m0s | OK 2/MINUTE t=1m0s"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	if st := s.Stats(); st.Shadow != 1 || st.OK != 2 || st.OverLimit != 0 {
		t.Errorf("Stats() = %+v", st)
	}
	// A limit of 0, over without the store, too.
	z, _ := newService(t, "domain: z\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 0}\n", WithShadowMode(true))
	if got, want := call(t, z, request("z", descriptor("k", "v"))), "OK: OVER_LIMIT 0/HOUR t=1h0m0s"; got != want {
		t.Errorf("a limit of 0: %s, want %s", got, want)
	}
	if st := z.Stats(); st.Shadow != 1 || st.OK != 1 || st.OverLimit != 0 {
		t.Errorf("a limit of 0: Stats() = %+v", st)
	}
}

// requests_per_unit: 0 blocks everything, as upstream's Example 3.
func TestZeroLimit(t *testing.T) {
	s, clk := newService(t, `
domain: d
descriptors:
  - key: banned
    rate_limit: {unit: hour, requests_per_unit: 0}
  - key: watched
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 0, algorithm: token-bucket}
`)
	clk.Advance(90 * time.Minute)
	if got, want := call(t, s, request("d", descriptor("banned", "x"))), "OVER_LIMIT: OVER_LIMIT 0/HOUR t=30m0s"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	check := request("d", &ratelimitv3.RateLimitDescriptor{Entries: entries("banned", "x"), HitsAddend: wrapperspb.UInt64(0)})
	if got, want := call(t, s, check), "OVER_LIMIT: OVER_LIMIT 0/HOUR t=30m0s"; got != want {
		t.Errorf("a check: %s, want %s", got, want)
	}
	if got, want := call(t, s, request("d", descriptor("watched", "x"))), "OK: OK 0/HOUR t=30m0s"; got != want {
		t.Errorf("shadowed: %s, want %s", got, want)
	}
}

// A domain the configuration lacks is answered OK, as upstream answers.
func TestUnknownDomain(t *testing.T) {
	s, _ := newService(t, basics)
	withLimit := &ratelimitv3.RateLimitDescriptor{Entries: entries("a", "x"),
		Limit: &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 0, Unit: typev3.RateLimitUnit_SECOND}}
	if got, want := call(t, s, request("elsewhere", descriptor("a", "x"), withLimit)), "OK: OK | OK"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	if st := s.Stats(); st.UnknownDomain != 1 || st.OK != 1 {
		t.Errorf("Stats() = %+v", st)
	}
	// No configuration at all: every domain is unknown.
	empty := NewService(nil, nil)
	if got, want := call(t, empty, request("d", descriptor("a", "x"))), "OK: OK"; got != want {
		t.Errorf("no configuration: %s, want %s", got, want)
	}
}

// Bad requests are errors, of codes.InvalidArgument, and count nothing.
func TestInvalidRequests(t *testing.T) {
	override := func(o *ratelimitv3.RateLimitDescriptor_RateLimitOverride) *rlsv3.RateLimitRequest {
		return request("d", &ratelimitv3.RateLimitDescriptor{Entries: entries("a", "x"), Limit: o})
	}
	many := request("d")
	for range MaxDescriptors + 1 {
		many.Descriptors = append(many.Descriptors, descriptor("a", "x"))
	}
	for _, tc := range []struct {
		name string
		req  *rlsv3.RateLimitRequest
		want string
	}{
		{"nil", nil, "rate limit domain must not be empty"},
		{"empty domain", request("", descriptor("a", "x")), "rate limit domain must not be empty"},
		{"no descriptor", request("d"), "rate limit descriptor list must not be empty"},
		{"too many descriptors", many, "1025 descriptors, more than the most, 1024"},
		{"negative hits", request("d", descriptor("ten", "x"), &ratelimitv3.RateLimitDescriptor{Entries: entries("a", "x"), HitsAddend: wrapperspb.UInt64(3), IsNegativeHits: true}),
			"descriptor 1: is_negative_hits is not supported"},
		{"override without unit", override(&ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 5}), "unit UNKNOWN is not a rate limit unit"},
		{"override with a bad unit", override(&ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 5, Unit: 99}), "unit 99 is not a rate limit unit"},
		{"override past 366 days", override(&ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 5, Unit: typev3.RateLimitUnit_DAY, UnitMultiplier: wrapperspb.UInt32(367)}), "longer than 366 days"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newService(t, basics)
			_, err := s.ShouldRateLimit(context.Background(), tc.req)
			if st, _ := status.FromError(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), tc.want) {
				t.Errorf("err = %v, want InvalidArgument %q", err, tc.want)
			}
			if st := s.Stats(); st.Errors != 1 || st.OK+st.OverLimit != 0 {
				t.Errorf("Stats() = %+v, want one error", st)
			}
			if got, want := call(t, s, request("d", descriptor("ten", "x"))), "OK: OK 10/MINUTE r=9 t=1m0s"; got != want {
				t.Errorf("afterwards: %s, want %s (nothing counted)", got, want)
			}
		})
	}
}

// A descriptor's limit override replaces the configuration's rule.
func TestLimitOverride(t *testing.T) {
	s, clk := newService(t, basics)
	over := func(kv []string, perUnit uint32, unit typev3.RateLimitUnit, mult uint32) *ratelimitv3.RateLimitDescriptor {
		o := &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: perUnit, Unit: unit}
		if mult > 0 {
			o.UnitMultiplier = wrapperspb.UInt32(mult)
		}
		return &ratelimitv3.RateLimitDescriptor{Entries: entries(kv...), Limit: o}
	}
	clk.Advance(30 * time.Second)
	for i, step := range []struct {
		req  *rlsv3.RateLimitRequest
		want string
	}{
		{request("d", over([]string{"ten", "x"}, 2, typev3.RateLimitUnit_HOUR, 0)), "OK: OK 2/HOUR r=1 t=59m30s"},
		{request("d", over([]string{"ten", "x"}, 2, typev3.RateLimitUnit_HOUR, 0)), "OK: OK 2/HOUR t=59m30s"},
		{request("d", over([]string{"ten", "x"}, 2, typev3.RateLimitUnit_HOUR, 0)), "OVER_LIMIT: OVER_LIMIT 2/HOUR t=59m30s"},
		{request("d", descriptor("ten", "x")), "OK: OK 10/MINUTE r=9 t=30s"}, // the rule's own counter
		{request("d", over([]string{"unmatched", "x"}, 1, typev3.RateLimitUnit_MINUTE, 5)), "OK: OK 1/MINUTEx5 t=4m30s"},
		{request("d", over([]string{"unmatched", "x"}, 1, typev3.RateLimitUnit_MINUTE, 5)), "OVER_LIMIT: OVER_LIMIT 1/MINUTEx5 t=4m30s"},
		{request("d", over([]string{"unmatched", "x"}, 1, typev3.RateLimitUnit_MINUTE, 1)), "OK: OK 1/MINUTE t=30s"},
		{request("d", over([]string{"c", "x"}, 0, typev3.RateLimitUnit_YEAR, 0)), "OVER_LIMIT: OVER_LIMIT 0/YEAR t=" + (365*24*time.Hour - t0.Add(30*time.Second).Sub(time.Unix(0, 0))%(365*24*time.Hour)).String()},
	} {
		if got := call(t, s, step.req); got != step.want {
			t.Errorf("step %d: %s, want %s", i, got, step.want)
		}
	}
}

// share_threshold: all the values a wildcard matches share one counter.
func TestShareThreshold(t *testing.T) {
	s, _ := newService(t, `
domain: d
descriptors:
  - key: shared
    value: /files/*
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: own
    value: /files/*
    rate_limit: {unit: minute, requests_per_unit: 2}
`)
	for i, want := range []string{"OK: OK 2/MINUTE r=1 t=1m0s", "OK: OK 2/MINUTE t=1m0s", "OVER_LIMIT: OVER_LIMIT 2/MINUTE t=1m0s"} {
		if got := call(t, s, request("d", descriptor("shared", "/files/"+string(rune('a'+i))))); got != want {
			t.Errorf("shared %d: %s, want %s", i, got, want)
		}
		if got, want := call(t, s, request("d", descriptor("own", "/files/"+string(rune('a'+i))))), "OK: OK 2/MINUTE r=1 t=1m0s"; got != want {
			t.Errorf("own %d: %s, want %s", i, got, want)
		}
	}
}

// Long values are limited like short ones, each its own counter.
func TestLongValues(t *testing.T) {
	s, _ := newService(t, basics)
	long := strings.Repeat("v", 1<<20)
	for i, want := range []string{"OK: OK 1/MINUTE t=1m0s", "OVER_LIMIT: OVER_LIMIT 1/MINUTE t=1m0s"} {
		if got := call(t, s, request("d", descriptor("a", long))); got != want {
			t.Errorf("%d: %s, want %s", i, got, want)
		}
	}
	if got, want := call(t, s, request("d", descriptor("a", long+"w"))), "OK: OK 1/MINUTE t=1m0s"; got != want {
		t.Errorf("another long value: %s, want %s", got, want)
	}
}

// A failing store fails the request, with codes.Unavailable.
func TestStoreFailure(t *testing.T) {
	cfg := mustParse(t, basics+"  - key: elsewhere\n    rate_limit: {unit: second, requests_per_unit: 1}\n")
	boom := errors.New("connection refused")
	s := NewService(cfg, brokenStore{err: boom})
	for _, req := range []*rlsv3.RateLimitRequest{
		request("d", descriptor("a", "x")),
		request("d", descriptor("c", "x"), descriptor("none", "x"), descriptor("b", "x")),
	} {
		_, err := s.ShouldRateLimit(context.Background(), req)
		if st, _ := status.FromError(err); st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "connection refused") {
			t.Errorf("err = %v, want Unavailable", err)
		}
	}
	// Requests that need no store are answered.
	if got, want := call(t, s, request("d", descriptor("c", "x"), descriptor("none", "x"))), "OK: OK r=4294967295 | OK"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	if st := s.Stats(); st.Errors != 2 || st.OK != 1 {
		t.Errorf("Stats() = %+v", st)
	}
	// A table the store refuses fails its rule's requests only.
	refusing := NewService(cfg, brokenStore{refused: "envoyrls/d"})
	_, err := refusing.ShouldRateLimit(context.Background(), request("d", descriptor("a", "x")))
	if st, _ := status.FromError(err); st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "cannot hold") {
		t.Errorf("refused table: err = %v, want Unavailable", err)
	}
	// A cancelled request reports the context's code.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = s.ShouldRateLimit(ctx, request("d", descriptor("a", "x")))
	if st, _ := status.FromError(err); st.Code() != codes.Canceled {
		t.Errorf("cancelled: err = %v, want Canceled", err)
	}
}

func TestNewServiceDefaults(t *testing.T) {
	s := NewService(mustParse(t, basics), nil, WithLogger(nil), WithClock(nil))
	if got, want := call(t, s, request("d", descriptor("a", "x"))), "OK: OK 1/MINUTE t="; !strings.HasPrefix(got, want) {
		t.Errorf("got %s, want %s...", got, want)
	}
	var _ rlsv3.RateLimitServiceServer = s
	_ = algo.Never
}

func TestObserver(t *testing.T) {
	var got []Outcome
	s, _ := newService(t, basics+`  - key: soft
    shadow_mode: true
    rate_limit: {unit: second, requests_per_unit: 1, name: softly}
`, WithObserver(func(_ context.Context, o Outcome) { got = append(got, o) }))
	call(t, s, request("d", descriptor("a", "x"), descriptor("none", "x"), descriptor("c", "x")))
	call(t, s, request("d", descriptor("a", "x"), descriptor("soft", "x")))
	call(t, s, request("d", descriptor("soft", "x")))
	fw := func(n int64, period time.Duration) algo.Policy {
		p, err := algo.New(algo.FixedWindow, n, period, 0)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	want := []Outcome{
		{Domain: "d", Rule: "d.a", Policy: fw(1, time.Minute), Hits: 1, Code: rlsv3.RateLimitResponse_OK},
		{Domain: "d", Rule: "d.a", Policy: fw(1, time.Minute), Hits: 1, Over: true, Code: rlsv3.RateLimitResponse_OVER_LIMIT},
		{Domain: "d", Rule: "d.soft", Name: "softly", Policy: fw(1, time.Second), Hits: 1, Code: rlsv3.RateLimitResponse_OK},
		{Domain: "d", Rule: "d.soft", Name: "softly", Policy: fw(1, time.Second), Hits: 1, Over: true, Code: rlsv3.RateLimitResponse_OK},
	}
	if len(got) != len(want) {
		t.Fatalf("observed %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("outcome %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestConfigAndLogs(t *testing.T) {
	var logs strings.Builder
	log := slog.New(slog.NewTextHandler(&logs, nil))
	cfg := mustParse(t, basics)
	s := NewService(cfg, brokenStore{err: errors.New("down")}, WithLogger(log))
	if s.Config() != cfg {
		t.Error("Config() is not the configuration given")
	}
	for range 5 {
		s.ShouldRateLimit(context.Background(), request("d", descriptor("a", "x")))
	}
	if n := strings.Count(logs.String(), "envoyrls: store failure"); n != 1 {
		t.Errorf("%d store failures logged of 5 in a second, want 1:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "rule=d.a") || !strings.Contains(logs.String(), "err=down") {
		t.Errorf("log: %s", logs.String())
	}
	logs.Reset()
	s.SetConfig(nil)
	if s.Config() != nil {
		t.Error("Config() after SetConfig(nil) is not nil")
	}
	if !strings.Contains(logs.String(), "envoyrls: configuration set") || !strings.Contains(logs.String(), "domains=0") {
		t.Errorf("log: %s", logs.String())
	}
	logs.Reset()
	NewService(cfg, brokenStore{refused: "envoyrls/d"}, WithLogger(log))
	if n := strings.Count(logs.String(), "the store refused a rule's table"); n != 4 {
		t.Errorf("%d refusals logged, want one per rule with a table (4):\n%s", n, logs.String())
	}
}

// A descriptor without entries (or nil, from a Go caller) matches nothing.
func TestEmptyDescriptors(t *testing.T) {
	s, _ := newService(t, basics)
	req := request("d", &ratelimitv3.RateLimitDescriptor{}, nil, descriptor("a", "x"))
	if got, want := call(t, s, req), "OK: OK | OK | OK 1/MINUTE t=1m0s"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

// A request's descriptors are answered exactly as they would be one after
// another, each a request of its own: on the memory store, and on Redis,
// where all those of distinct counters go in one script call (through a
// failsafe.Store, as floodgate serve has it, with a Timeout of 10s: the
// test is of exactness, and a loaded machine passes the default 100ms).
func TestManyDescriptorsOnASharedStore(t *testing.T) {
	const cfg = `domain: d
descriptors:
  - key: user
    rate_limit: {unit: second, requests_per_unit: 3}
  - key: team
    rate_limit: {unit: minute, requests_per_unit: 5, algorithm: token-bucket, burst: 2}
`
	rs, err := redisstore.New(redistest.NewServer(t).Client(t), redisstore.WithCallerTime())
	if err != nil {
		t.Fatal(err)
	}
	for name, store := range map[string]store.Store{
		"memory": memstore.New(0),
		"redis":  newFailsafe(rs, failsafe.Options{Timeout: 10 * time.Second}),
	} {
		t.Run(name, func(t *testing.T) {
			alone, clk := newService(t, cfg)
			together := NewService(mustParse(t, cfg), store, WithClock(clk))
			var descs []*ratelimitv3.RateLimitDescriptor
			for i := range 40 {
				// A user's descriptor costs 1 to 3: one that goes over leaves
				// some of the window, which upstream's rule spends before the
				// user's next descriptor.
				u := descriptor("user", fmt.Sprint("u", i%7))
				u.HitsAddend = wrapperspb.UInt64(uint64(1 + i%3))
				descs = append(descs, u, descriptor("team", fmt.Sprint("t", i%3)), descriptor("other", "x"))
			}
			req := request("d", descs...)
			for step := range 4 {
				if got, want := call(t, together, req), oneByOne(t, alone, req); got != want {
					t.Fatalf("step %d: together\n%s\nwant, as one by one,\n%s", step, got, want)
				}
				clk.Advance(700 * time.Millisecond)
			}
		})
	}
}

// oneByOne asks s about each descriptor of req, one request each, in
// order, and returns the summary of their answers as one.
func oneByOne(t *testing.T, s *Service, req *rlsv3.RateLimitRequest) string {
	t.Helper()
	all := &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK}
	for _, d := range req.Descriptors {
		resp, err := s.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: req.Domain, HitsAddend: req.HitsAddend, Descriptors: []*ratelimitv3.RateLimitDescriptor{d}})
		if err != nil {
			t.Fatal(err)
		}
		all.Statuses = append(all.Statuses, resp.Statuses[0])
		if resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT {
			all.OverallCode = resp.OverallCode
		}
	}
	return summary(all)
}

// A counter twice in a request: the second is decided after the first;
// on a fixed window every hit counts, the first's that went over too,
// as upstream's; on floodgate's algorithms a refusal spends nothing.
func TestCounterTwiceInARequest(t *testing.T) {
	rs, err := redisstore.New(redistest.NewServer(t).Client(t), redisstore.WithCallerTime())
	if err != nil {
		t.Fatal(err)
	}
	costs := func(key string, hits ...uint64) *rlsv3.RateLimitRequest {
		req := request("d")
		for _, h := range hits {
			d := descriptor(key, "x")
			d.HitsAddend = wrapperspb.UInt64(h)
			req.Descriptors = append(req.Descriptors, d)
		}
		return req
	}
	const cfg = basics + `  - key: bucket
    rate_limit: {unit: minute, requests_per_unit: 60, algorithm: token-bucket, burst: 4}
`
	for name, st := range map[string]store.Store{"memory": memstore.New(0), "redis": rs} {
		t.Run(name, func(t *testing.T) {
			s := NewService(mustParse(t, cfg), st, WithClock(clock.NewFake(t0)))
			for _, step := range []struct {
				req  *rlsv3.RateLimitRequest
				want string
			}{
				{costs("ten", 8, 5, 1, 0), "OVER_LIMIT: OK 10/MINUTE r=2 t=1m0s | OVER_LIMIT 10/MINUTE t=1m0s | OVER_LIMIT 10/MINUTE t=1m0s | OVER_LIMIT 10/MINUTE t=1m0s"},
				{costs("bucket", 3, 2, 1), "OVER_LIMIT: OK 60/MINUTE r=1 t=3s | OVER_LIMIT 60/MINUTE t=1s | OK 60/MINUTE t=4s"},
			} {
				if got := call(t, s, step.req); got != step.want {
					t.Errorf("got  %s\nwant %s", got, step.want)
				}
			}
		})
	}
}

// Past maxOverrides distinct windows of the limits carried by requests,
// the service remembers no more counters, and still decides the others,
// on the same counters.
func TestManyOverrides(t *testing.T) {
	s, _ := newService(t, basics)
	limit := func(multiplier uint32) *rlsv3.RateLimitRequest {
		return request("d", &ratelimitv3.RateLimitDescriptor{Entries: entries("k", "v"),
			Limit: &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 2, Unit: typev3.RateLimitUnit_SECOND,
				UnitMultiplier: wrapperspb.UInt32(multiplier)}})
	}
	for m := range uint32(maxOverrides + 10) {
		if got, want := call(t, s, limit(m+2)), fmt.Sprintf("OK: OK 2/SECONDx%d r=1 ", m+2); !strings.HasPrefix(got, want) {
			t.Fatalf("window of %d seconds: %s, want %s...", m+2, got, want)
		}
	}
	if len(s.overrides) != maxOverrides {
		t.Errorf("%d counters remembered, want %d", len(s.overrides), maxOverrides)
	}
	// A window past the bound, then one within it: each its own counter.
	for _, m := range []uint32{maxOverrides + 5, 2} {
		for _, want := range []string{"OK: OK 2/SECONDx%d t=", "OVER_LIMIT: OVER_LIMIT 2/SECONDx%d t="} {
			if got := call(t, s, limit(m)); !strings.HasPrefix(got, fmt.Sprintf(want, m)) {
				t.Errorf("window of %d seconds again: %s, want %s", m, got, fmt.Sprintf(want, m))
			}
		}
	}
}

// A limit carried by a request counts on the counter of the descriptor's
// window, whatever its size, as upstream's, whose counter key names no
// limit: the configured rule and the override share the count.
func TestOverrideSharesTheCounter(t *testing.T) {
	s, _ := newService(t, `
domain: d
descriptors:
  - key: k
    rate_limit: {unit: hour, requests_per_unit: 5}
`)
	override := func(perUnit uint32, unit typev3.RateLimitUnit) *rlsv3.RateLimitRequest {
		return request("d", &ratelimitv3.RateLimitDescriptor{Entries: entries("k", "v"),
			Limit: &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: perUnit, Unit: unit}})
	}
	for i, st := range []struct {
		req  *rlsv3.RateLimitRequest
		want string
	}{
		{request("d", descriptor("k", "v")), "OK: OK 5/HOUR r=4 t=1h0m0s"},
		{request("d", descriptor("k", "v")), "OK: OK 5/HOUR r=3 t=1h0m0s"},
		{override(10, typev3.RateLimitUnit_HOUR), "OK: OK 10/HOUR r=7 t=1h0m0s"}, // 3 counted
		{request("d", descriptor("k", "v")), "OK: OK 5/HOUR r=1 t=1h0m0s"},
		{override(0, typev3.RateLimitUnit_HOUR), "OVER_LIMIT: OVER_LIMIT 0/HOUR t=1h0m0s"}, // counted too
		{request("d", descriptor("k", "v")), "OVER_LIMIT: OVER_LIMIT 5/HOUR t=1h0m0s"},
		{override(10, typev3.RateLimitUnit_HOUR), "OK: OK 10/HOUR r=3 t=1h0m0s"},
		{override(10, typev3.RateLimitUnit_MINUTE), "OK: OK 10/MINUTE r=9 t=1m0s"}, // another window
		{request("d", descriptor("k", "other")), "OK: OK 5/HOUR r=4 t=1h0m0s"},     // another descriptor
	} {
		if got := call(t, s, st.req); got != st.want {
			t.Errorf("step %d: %s, want %s", i, got, st.want)
		}
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
