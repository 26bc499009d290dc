package envoyrls

import (
	"math"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// TestLargestRequestsPerUnit checks requests_per_unit up to 2^32-1, the
// most a uint32 holds, as upstream's, in a configuration and a limit
// override, and a token-bucket burst past it: byte counts.
func TestLargestRequestsPerUnit(t *testing.T) {
	s, _ := newService(t, "domain: d\ndescriptors:\n"+
		"  - key: big\n    rate_limit: {unit: second, requests_per_unit: 4294967295}\n"+
		"  - key: bytes\n    rate_limit: {unit: second, requests_per_unit: 1250000000, algorithm: token-bucket, burst: 4294967296}\n")
	hits := func(n uint64, kv ...string) *ratelimitv3.RateLimitDescriptor {
		d := descriptor(kv...)
		d.HitsAddend = wrapperspb.UInt64(n)
		return d
	}
	steps := []struct {
		d    *ratelimitv3.RateLimitDescriptor
		want string
	}{
		{hits(math.MaxUint32-1, "big", "x"), "OK: OK 4294967295/SECOND r=1 t=1s"},
		{hits(1, "big", "x"), "OK: OK 4294967295/SECOND t=1s"},
		{hits(1, "big", "x"), "OVER_LIMIT: OVER_LIMIT 4294967295/SECOND t=1s"},
		{hits(1<<32, "bytes", "x"), "OK: OK 1250000000/SECOND t=4s"},
		{hits(1, "bytes", "x"), "OVER_LIMIT: OVER_LIMIT 1250000000/SECOND t=1s"},
	}
	for i, st := range steps {
		if got := call(t, s, request("d", st.d)); got != st.want {
			t.Errorf("step %d: %s, want %s", i, got, st.want)
		}
	}
	o := hits(3_000_000_000, "free", "x")
	o.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: math.MaxUint32, Unit: typev3.RateLimitUnit_DAY}
	if got, want := call(t, s, request("d", o)), "OK: OK 4294967295/DAY r=1294967295 t=24h0m0s"; got != want {
		t.Errorf("override: %s, want %s", got, want)
	}
}
