package envoyrls

import (
	"path/filepath"
	"testing"
	"time"
)

// The configurations of testdata/upstream follow the examples of
// envoyproxy/ratelimit's README, one file each; each step below is what
// the README says the service answers.
func TestUpstreamExamples(t *testing.T) {
	cfg, err := LoadConfig(filepath.Join("testdata", "upstream"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"1: one limit per value", []step{
			{0, "warehouse_qps database=orders", "OK: OK 3/SECOND r=2 t=1s"},
			{0, "warehouse_qps database=orders", "OK: OK 3/SECOND r=1 t=1s"},
			{0, "warehouse_qps database=orders", "OK: OK 3/SECOND t=1s"},
			{0, "warehouse_qps database=orders", "OVER_LIMIT: OVER_LIMIT 3/SECOND t=1s"},
			{0, "warehouse_qps database=billing", "OK: OK 3/SECOND r=2 t=1s"},
			{0, "warehouse_qps database=analytics", "OK: OK"}, // no rule
			{time.Second, "warehouse_qps database=orders", "OK: OK 3/SECOND r=2 t=1s"},
		}},
		{"2: nested and flat limits in one request, OR-ed", []step{
			{0, "notifications kind=promo,recipient=555-0100 ; recipient=555-0100", "OK: OK 2/DAY r=1 t=24h0m0s | OK 4/DAY r=3 t=24h0m0s"},
			{0, "notifications kind=promo,recipient=555-0100 ; recipient=555-0100", "OK: OK 2/DAY t=24h0m0s | OK 4/DAY r=2 t=24h0m0s"},
			{0, "notifications kind=promo,recipient=555-0100 ; recipient=555-0100", "OVER_LIMIT: OVER_LIMIT 2/DAY t=24h0m0s | OK 4/DAY r=1 t=24h0m0s"},
			{0, "notifications kind=promo,recipient=555-0199", "OK: OK 2/DAY r=1 t=24h0m0s"}, // each number its own
			{0, "notifications recipient=555-0100", "OK: OK 4/DAY t=24h0m0s"},
			{0, "notifications recipient=555-0100", "OVER_LIMIT: OVER_LIMIT 4/DAY t=24h0m0s"},
			{0, "notifications kind=transactional,recipient=555-0100", "OK: OK"},
		}},
		{"3: the most specific match", []step{
			{0, "edge_per_address remote_address=203.0.113.1", "OK: OK 3/SECOND r=2 t=1s"},
			{0, "edge_per_address remote_address=198.51.100.7", "OVER_LIMIT: OVER_LIMIT 0/SECOND t=1s"},
			{time.Hour, "edge_per_address remote_address=198.51.100.7", "OVER_LIMIT: OVER_LIMIT 0/SECOND t=1s"},
		}},
		{"4: matching at the request's depth", []step{
			{0, "depth client=mobile", "OK: OK 2/SECOND r=1 t=1s"},
			{0, "depth client=mobile,page=home", "OK: OK"}, // deeper than the rule
			{0, "depth client=web,page=home", "OK: OK 2/SECOND r=1 t=1s"},
			{0, "depth client=web", "OK: OK"}, // no rule at depth 1
		}},
		{"5: unlimited", []step{
			{0, "backoffice directory=lookup", "OK: OK r=4294967295"},
			{0, "backoffice directory=lookup", "OK: OK r=4294967295"},
			{0, "backoffice reporting=daily", "OK: OK 3/MINUTE r=2 t=1m0s"},
		}},
		{"6: shadow mode", []step{
			{0, "login service=auth,user=carol", "OK: OK 2/SECOND r=1 t=1s"},
			{0, "login service=auth,user=carol", "OK: OK 2/SECOND t=1s"},
			{0, "login service=auth,user=carol", "OK: OK 2/SECOND t=1s"}, // over, never limited
			{0, "login service=auth,user=carol", "OK: OK 2/SECOND t=1s"},
			{0, "login service=auth,user=dave", "OK: OK 3/SECOND r=2 t=1s"},
			{0, "login service=auth,user=dave", "OK: OK 3/SECOND r=1 t=1s"},
			{0, "login service=auth,user=dave", "OK: OK 3/SECOND t=1s"},
			{0, "login service=auth,user=dave", "OVER_LIMIT: OVER_LIMIT 3/SECOND t=1s"},
		}},
		{"7: replaces", []step{
			{0, "grants plan=basic,user=erin", "OK: OK 2/SECOND r=1 t=1s"},
			{0, "grants plan=premium,user=erin", "OK: OK 5/SECOND r=4 t=1s"},
			// Both: only the replacing limit applies, and the replaced
			// one is not touched.
			{0, "grants plan=basic,user=erin ; plan=premium,user=erin", "OK: OK | OK 5/SECOND r=3 t=1s"},
			{0, "grants plan=basic,user=erin ; plan=premium,user=erin", "OK: OK | OK 5/SECOND r=2 t=1s"},
			{0, "grants plan=basic,user=erin", "OK: OK 2/SECOND t=1s"},
		}},
		{"8: detailed_metric changes no limit", []step{
			{0, "metrics tier=silver", "OK: OK 2/MINUTE r=1 t=1m0s"},
			{0, "metrics tier=bronze", "OK: OK 2/MINUTE r=1 t=1m0s"},
			{0, "metrics tier=gold", "OK: OK 4/MINUTE r=3 t=1m0s"},
		}},
		{"9: wildcards, each value its own limit", []step{
			{0, "wildcard endpoint=/reports/a", "OK: OK 2/MINUTE r=1 t=1m0s"},
			{0, "wildcard endpoint=/reports/a", "OK: OK 2/MINUTE t=1m0s"},
			{0, "wildcard endpoint=/reports/a", "OVER_LIMIT: OVER_LIMIT 2/MINUTE t=1m0s"},
			{0, "wildcard endpoint=/reports/b", "OK: OK 2/MINUTE r=1 t=1m0s"},
			{0, "wildcard endpoint=/other", "OK: OK"},
		}},
		{"the /json example's answer", []step{
			{0, "demo one_per_minute=something", "OK: OK 1/MINUTE t=1m0s"},
			{0, "demo one_per_minute=something ; two_per_minute=something", "OVER_LIMIT: OVER_LIMIT 1/MINUTE t=1m0s | OK 2/MINUTE r=1 t=1m0s"},
		}},
		{"floodgate's algorithms", []step{
			{0, "api api_key=k1", "OK: OK 60/MINUTE r=4 t=1s"},
			{0, "api api_key=k1 ; api_key=k1 ; api_key=k1 ; api_key=k1", "OK: OK 60/MINUTE r=3 t=2s | OK 60/MINUTE r=2 t=3s | OK 60/MINUTE r=1 t=4s | OK 60/MINUTE t=5s"},
			{0, "api api_key=k1", "OVER_LIMIT: OVER_LIMIT 60/MINUTE t=1s"},
			{time.Second, "api api_key=k1", "OK: OK 60/MINUTE t=5s"},
			{0, "api upload=u", "OK: OK 3/HOUR r=2 t=1h0m0s"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { runSteps(t, cfg, tc.steps) })
	}
}
