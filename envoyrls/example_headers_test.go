package envoyrls_test

import (
	"context"
	"fmt"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/floodgate/floodgate/envoyrls"
	"github.com/floodgate/floodgate/memstore"
)

// Rate-limit header fields for Envoy to add to the client's response: of
// a request's two descriptors, they describe the one closer to its limit,
// as envoyproxy/ratelimit's do.
func ExampleWithResponseHeaders() {
	cfg, err := envoyrls.ParseConfig(map[string][]byte{"api.yaml": []byte(`
domain: api
descriptors:
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 100}
  - key: tenant
    rate_limit: {unit: hour, requests_per_unit: 5, name: per-tenant}
`)})
	if err != nil {
		panic(err)
	}
	req := &rlsv3.RateLimitRequest{Domain: "api", Descriptors: []*ratelimitv3.RateLimitDescriptor{
		descriptor("remote_address", "10.0.0.1"), descriptor("tenant", "acme")}}
	for _, h := range []envoyrls.Headers{envoyrls.UpstreamHeaders, envoyrls.RateLimitHeaders} {
		svc := envoyrls.NewService(cfg, memstore.New(0), fakeClock(), envoyrls.WithResponseHeaders(h))
		resp, err := svc.ShouldRateLimit(context.Background(), req)
		if err != nil {
			panic(err)
		}
		for _, f := range resp.GetResponseHeadersToAdd() {
			fmt.Printf("%s: %s\n", f.GetKey(), f.GetValue())
		}
	}
	// Output:
	// RateLimit-Limit: 5
	// RateLimit-Remaining: 4
	// RateLimit-Reset: 3585
	// RateLimit-Policy: "per-tenant";q=5;w=3600
	// RateLimit: "per-tenant";r=4;t=3585
}
