package envoyrls_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"time"

	"github.com/floodgate/floodgate/memstore"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/floodgate/floodgate/clock"
	"github.com/floodgate/floodgate/envoyrls"
)

// fakeClock stands in for the real clock, so that the examples' output is
// always the same: omit WithClock in production.
func fakeClock() envoyrls.Option {
	return envoyrls.WithClock(clock.NewFake(time.Date(2026, 11, 22, 12, 0, 15, 0, time.UTC)))
}

// print writes a response: the overall code, then each status.
func print(resp *rlsv3.RateLimitResponse) {
	fmt.Print(resp.GetOverallCode())
	for _, st := range resp.GetStatuses() {
		fmt.Printf(" | %v", st.GetCode())
		if l := st.GetCurrentLimit(); l != nil {
			fmt.Printf(" %d/%v remaining=%d reset=%v", l.GetRequestsPerUnit(), l.GetUnit(), st.GetLimitRemaining(), st.GetDurationUntilReset().AsDuration())
		}
	}
	fmt.Println()
}

func descriptor(kv ...string) *ratelimitv3.RateLimitDescriptor {
	d := &ratelimitv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

// A per-address limit of 2 requests a minute, and an address blocked
// outright: the third request from 10.0.0.1 is over the limit, as is
// every request from 192.0.2.66. Register the service on a gRPC server
// with rlsv3.RegisterRateLimitServiceServer for Envoy to call.
func Example() {
	cfg, err := envoyrls.ParseConfig(map[string][]byte{"edge.yaml": []byte(`
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: remote_address
    value: 192.0.2.66
    rate_limit: {unit: minute, requests_per_unit: 0}
`)})
	if err != nil {
		panic(err)
	}
	svc := envoyrls.NewService(cfg, memstore.New(0), fakeClock())
	for _, addr := range []string{"10.0.0.1", "10.0.0.1", "10.0.0.1", "192.0.2.66"} {
		resp, err := svc.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{
			Domain:      "edge",
			Descriptors: []*ratelimitv3.RateLimitDescriptor{descriptor("remote_address", addr)},
		})
		if err != nil {
			panic(err)
		}
		print(resp)
	}
	fmt.Printf("%+v\n", svc.Stats())
	// Output:
	// OK | OK 2/MINUTE remaining=1 reset=45s
	// OK | OK 2/MINUTE remaining=0 reset=45s
	// OVER_LIMIT | OVER_LIMIT 2/MINUTE remaining=0 reset=45s
	// OVER_LIMIT | OVER_LIMIT 0/MINUTE remaining=0 reset=45s
	// {OK:2 OverLimit:2 Shadow:0 UnknownDomain:0 Errors:0 FromMemory:0}
}

// Nested descriptors, and several descriptors in one request: each is
// decided and counted, and the request is over the limit if any is. The
// most specific descriptor matches, and only it: (tenant, acme) gets
// acme's rule, never the rule for every tenant.
func Example_nested() {
	cfg, err := envoyrls.ParseConfig(map[string][]byte{"api.yaml": []byte(`
domain: api
descriptors:
  - key: tenant
    value: acme
    rate_limit: {unit: second, requests_per_unit: 100}
    descriptors:
      - key: path
        value: /upload/*           # any path with this prefix
        rate_limit: {unit: hour, requests_per_unit: 1}
  - key: tenant                    # every other tenant
    rate_limit: {unit: second, requests_per_unit: 10}
`)})
	if err != nil {
		panic(err)
	}
	svc := envoyrls.NewService(cfg, nil, fakeClock())
	req := &rlsv3.RateLimitRequest{Domain: "api", Descriptors: []*ratelimitv3.RateLimitDescriptor{
		descriptor("tenant", "acme", "path", "/upload/photo.jpg"),
		descriptor("tenant", "acme"),
		descriptor("tenant", "globex"),
		descriptor("user", "alice"), // no rule: no limit
	}}
	for range 2 {
		resp, err := svc.ShouldRateLimit(context.Background(), req)
		if err != nil {
			panic(err)
		}
		print(resp)
	}
	// Output:
	// OK | OK 1/HOUR remaining=0 reset=59m45s | OK 100/SECOND remaining=99 reset=1s | OK 10/SECOND remaining=9 reset=1s | OK
	// OVER_LIMIT | OVER_LIMIT 1/HOUR remaining=0 reset=59m45s | OK 100/SECOND remaining=98 reset=1s | OK 10/SECOND remaining=8 reset=1s | OK
}

// floodgate's extension: a token bucket of 60 a minute admitting bursts of
// 3, in place of the fixed window.
func Example_tokenBucket() {
	cfg, err := envoyrls.ParseConfig(map[string][]byte{"keys.yaml": []byte(`
domain: keys
descriptors:
  - key: api_key
    rate_limit: {unit: minute, requests_per_unit: 60, algorithm: token-bucket, burst: 3}
`)})
	if err != nil {
		panic(err)
	}
	svc := envoyrls.NewService(cfg, nil, fakeClock())
	req := &rlsv3.RateLimitRequest{Domain: "keys", Descriptors: []*ratelimitv3.RateLimitDescriptor{descriptor("api_key", "k1")}}
	for range 4 {
		resp, err := svc.ShouldRateLimit(context.Background(), req)
		if err != nil {
			panic(err)
		}
		print(resp)
	}
	// Output:
	// OK | OK 60/MINUTE remaining=2 reset=1s
	// OK | OK 60/MINUTE remaining=1 reset=2s
	// OK | OK 60/MINUTE remaining=0 reset=3s
	// OVER_LIMIT | OVER_LIMIT 60/MINUTE remaining=0 reset=1s
}

// A typo is an error naming the file, the line and the likely intended key.
func ExampleParseConfig_typo() {
	_, err := envoyrls.ParseConfig(map[string][]byte{"edge.yaml": []byte(`domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 2}
    shadowmode: true
`)})
	fmt.Println(err)
	fmt.Println(errors.Is(err, envoyrls.ErrInvalidConfig))
	// Output:
	// envoyrls: edge.yaml:5: config error, unknown key 'shadowmode' in a descriptor (did you mean 'shadow_mode'?)
	// true
}

// LoadConfig reads a directory of configuration files, as
// envoyproxy/ratelimit does.
func ExampleLoadConfig() {
	cfg, err := envoyrls.LoadConfig(filepath.Join("testdata", "upstream"))
	if err != nil {
		panic(err)
	}
	fmt.Println(cfg.Domains())
	// Output:
	// [api backoffice demo depth edge_per_address grants login metrics notifications warehouse_qps wildcard]
}

// envoyproxy/ratelimit's POST /json: 200 when the request is within its
// limits, 429 when it is over.
func ExampleService_JSONHandler() {
	cfg, err := envoyrls.ParseConfig(map[string][]byte{"demo.yaml": []byte(`
domain: demo
descriptors:
  - key: one_per_minute
    rate_limit: {unit: minute, requests_per_unit: 1}
`)})
	if err != nil {
		panic(err)
	}
	svc := envoyrls.NewService(cfg, nil, fakeClock())
	mux := http.NewServeMux()
	mux.Handle("POST /json", svc.JSONHandler())

	body := `{"domain": "demo", "descriptors": [{"entries": [{"key": "one_per_minute", "value": "x"}]}]}`
	for range 2 {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("POST", "/json", strings.NewReader(body)))
		var resp rlsv3.RateLimitResponse
		if err := protojson.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
			panic(err)
		}
		fmt.Print(rec.Code, " ")
		print(&resp)
	}
	// Output:
	// 200 OK | OK 1/MINUTE remaining=0 reset=45s
	// 429 OVER_LIMIT | OVER_LIMIT 1/MINUTE remaining=0 reset=45s
}

// quota_mode: a request asks about two backends' quotas at once and is
// over only when both are; with WithDynamicMetadata, the answer carries
// the metadata of the backends that still have quota, for Envoy to route
// on.
func ExampleWithDynamicMetadata() {
	cfg, err := envoyrls.ParseConfig(map[string][]byte{"backends.yaml": []byte(`
domain: backends
descriptors:
  - key: backend
    value: primary
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
    metadata: {cluster: primary}
  - key: backend
    value: "fallback-*"
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 2}
    metadata: {cluster: fallback}
`)})
	if err != nil {
		panic(err)
	}
	svc := envoyrls.NewService(cfg, nil, fakeClock(), envoyrls.WithDynamicMetadata(true))
	req := &rlsv3.RateLimitRequest{Domain: "backends", Descriptors: []*ratelimitv3.RateLimitDescriptor{
		descriptor("backend", "primary"), descriptor("backend", "fallback-eu"),
	}}
	for range 3 {
		resp, err := svc.ShouldRateLimit(context.Background(), req)
		if err != nil {
			panic(err)
		}
		print(resp)
		fmt.Println("  metadata:", resp.GetDynamicMetadata().GetFields()["metadata"].GetStructValue().AsMap())
	}
	// Output:
	// OK | OK 1/MINUTE remaining=0 reset=45s | OK 2/MINUTE remaining=1 reset=45s
	//   metadata: map[cluster:primary]
	// OK | OVER_LIMIT 1/MINUTE remaining=0 reset=45s | OK 2/MINUTE remaining=0 reset=45s
	//   metadata: map[cluster:fallback]
	// OVER_LIMIT | OVER_LIMIT 1/MINUTE remaining=0 reset=45s | OVER_LIMIT 2/MINUTE remaining=0 reset=45s
	//   metadata: map[]
}
