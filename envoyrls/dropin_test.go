package envoyrls

import (
	"path/filepath"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The configurations of testdata/dropin pin what envoyproxy/ratelimit
// decides for the constructs it gained in 2026 (wildcards anywhere,
// quota_mode, metadata, files in subdirectories); each step is
// upstream's answer.
func TestDropIn(t *testing.T) {
	cfg, err := LoadConfig(filepath.Join("testdata", "dropin"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"a '*' in the middle", []step{
			{0, "routes path=/api/42/action", "OK: OK 2/MINUTE r=1 t=1m0s"},
			{0, "routes path=/api/42/action", "OK: OK 2/MINUTE t=1m0s"},
			{0, "routes path=/api/42/action", "OVER_LIMIT: OVER_LIMIT 2/MINUTE t=1m0s"},
			{0, "routes path=/api/7/action", "OK: OK 2/MINUTE r=1 t=1m0s"}, // each value its own
			{0, "routes path=/api//action", "OK: OK 2/MINUTE r=1 t=1m0s"},  // '*' matches nothing too
			{0, "routes path=/api/42/other", "OK: OK 5/MINUTE r=4 t=1m0s"}, // the key alone
			{time.Minute, "routes path=/api/42/action", "OK: OK 2/MINUTE r=1 t=1m0s"},
		}},
		{"several '*'", []step{
			{0, "routes path=/api/1/item/2/view", "OK: OK 3/MINUTE r=2 t=1m0s"},
			{0, "routes path=/api/1/item/2/views", "OK: OK 5/MINUTE r=4 t=1m0s"},
			{0, "routes path=/api/x/item/y/action", "OK: OK 2/MINUTE r=1 t=1m0s"}, // the first in file order
		}},
		{"the exact value wins", []step{
			{0, "routes path=/api/admin/action", "OK: OK 1/MINUTE t=1m0s"},
			{0, "routes path=/api/admin/action", "OVER_LIMIT: OVER_LIMIT 1/MINUTE t=1m0s"},
		}},
		{"a '*' first", []step{
			{0, "routes file=logo.png", "OK: OK 1/HOUR t=1h0m0s"},
			{0, "routes file=logo.png", "OVER_LIMIT: OVER_LIMIT 1/HOUR t=1h0m0s"},
			{0, "routes file=.png", "OK: OK 1/HOUR t=1h0m0s"},
			{0, "routes file=logo.png.bak", "OK: OK"},
		}},
		{"share_threshold on a '*' in the middle", []step{
			{0, "routes host=shard-1.internal", "OK: OK 2/MINUTE r=1 t=1m0s"},
			{0, "routes host=shard-22.internal", "OK: OK 2/MINUTE t=1m0s"},
			{0, "routes host=shard-.internal", "OVER_LIMIT: OVER_LIMIT 2/MINUTE t=1m0s"},
			{0, "routes host=shard-1.example", "OK: OK"},
		}},
		{"a '*' in a key", []step{
			{0, "routes x-tenant-acme=gold", "OK: OK 1/SECOND t=1s"},
			{0, "routes x-tenant-acme=gold", "OVER_LIMIT: OVER_LIMIT 1/SECOND t=1s"},
			{0, "routes x-tenant-acme=silver", "OK: OK 1/SECOND t=1s"},
			{0, "routes x-tenant=gold", "OK: OK"},
		}},
		{"quota mode: over when every quota is", []step{
			{0, "backends backend=primary ; backend=fallback", "OK: OK 1/MINUTE t=1m0s | OK 2/MINUTE r=1 t=1m0s"},
			{0, "backends backend=primary ; backend=fallback", "OK: OVER_LIMIT 1/MINUTE t=1m0s | OK 2/MINUTE t=1m0s"},
			{0, "backends backend=primary ; backend=fallback", "OVER_LIMIT: OVER_LIMIT 1/MINUTE t=1m0s | OVER_LIMIT 2/MINUTE t=1m0s"},
			{time.Minute, "backends backend=primary ; backend=fallback", "OK: OK 1/MINUTE t=1m0s | OK 2/MINUTE r=1 t=1m0s"},
		}},
		{"quota mode: one quota alone is a limit", []step{
			{0, "backends backend=primary ; client=c1", "OK: OK 1/MINUTE t=1m0s | OK 3/MINUTE r=2 t=1m0s"},
			{0, "backends backend=primary ; client=c1", "OVER_LIMIT: OVER_LIMIT 1/MINUTE t=1m0s | OK 3/MINUTE r=1 t=1m0s"},
		}},
		{"quota mode: a rule outside it does not count as a quota", []step{
			{0, "backends client=c2 ; backend=fallback", "OK: OK 3/MINUTE r=2 t=1m0s | OK 2/MINUTE r=1 t=1m0s"},
			{0, "backends client=c2 ; backend=fallback", "OK: OK 3/MINUTE r=1 t=1m0s | OK 2/MINUTE t=1m0s"},
			{0, "backends client=c2 ; backend=fallback", "OVER_LIMIT: OK 3/MINUTE t=1m0s | OVER_LIMIT 2/MINUTE t=1m0s"},
			{0, "backends client=c2 ; backend=fallback", "OVER_LIMIT: OVER_LIMIT 3/MINUTE t=1m0s | OVER_LIMIT 2/MINUTE t=1m0s"},
		}},
		{"a file in a subdirectory", []step{
			{0, "payments card=4111", "OK: OK 2/HOUR r=1 t=1h0m0s"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { runSteps(t, cfg, tc.steps) })
	}
}

// WithQuotaMode puts every descriptor in quota mode, as upstream's
// QUOTA_MODE; a rule's shadow_mode still answers OK.
func TestQuotaModeOption(t *testing.T) {
	cfg := mustParse(t, `
domain: q
descriptors:
  - key: a
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: b
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: s
    shadow_mode: true
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
`)
	t.Run("every quota over", func(t *testing.T) {
		runSteps(t, cfg, []step{
			{0, "q a=1 ; b=1", "OK: OK 1/MINUTE t=1m0s | OK 1/MINUTE t=1m0s"},
			{0, "q a=1 ; b=2", "OK: OVER_LIMIT 1/MINUTE t=1m0s | OK 1/MINUTE t=1m0s"},
			{0, "q a=1 ; b=2", "OVER_LIMIT: OVER_LIMIT 1/MINUTE t=1m0s | OVER_LIMIT 1/MINUTE t=1m0s"},
			{0, "q a=1 ; nomatch=x", "OK: OVER_LIMIT 1/MINUTE t=1m0s | OK"},
		}, WithQuotaMode(true))
	})
	t.Run("shadow mode", func(t *testing.T) {
		runSteps(t, cfg, []step{
			{0, "q s=1", "OK: OK 1/MINUTE t=1m0s"},
			{0, "q s=1", "OK: OK 1/MINUTE t=1m0s"}, // over, in shadow mode
			{0, "q s=1 ; a=1", "OK: OK 1/MINUTE t=1m0s | OK 1/MINUTE t=1m0s"},
			{0, "q s=1 ; a=1", "OVER_LIMIT: OK 1/MINUTE t=1m0s | OVER_LIMIT 1/MINUTE t=1m0s"},
		})
	})
}

// A limit of 0 is a fixed window like another, counted as upstream
// counts it: every hit is over, and a check of 0 hits is OK until a hit
// was counted.
func TestZeroLimitCounts(t *testing.T) {
	cfg := mustParse(t, `
domain: z
descriptors:
  - key: banned
    rate_limit: {unit: minute, requests_per_unit: 0}
`)
	check := descriptor("banned", "x")
	check.HitsAddend = wrapperspb.UInt64(0)
	s, _ := newServiceWith(t, cfg)
	for i, st := range []struct {
		req  *rlsv3.RateLimitRequest
		want string
	}{
		{request("z", check), "OK: OK 0/MINUTE t=1m0s"},
		{request("z", descriptor("banned", "x")), "OVER_LIMIT: OVER_LIMIT 0/MINUTE t=1m0s"},
		{request("z", check), "OVER_LIMIT: OVER_LIMIT 0/MINUTE t=1m0s"},
	} {
		if got := call(t, s, st.req); got != st.want {
			t.Errorf("step %d: %s, want %s", i, got, st.want)
		}
	}
}
