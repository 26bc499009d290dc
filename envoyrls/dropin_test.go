package envoyrls

import (
	"path/filepath"
	"testing"
	"time"
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
	} {
		t.Run(tc.name, func(t *testing.T) { runSteps(t, cfg, tc.steps) })
	}
}
