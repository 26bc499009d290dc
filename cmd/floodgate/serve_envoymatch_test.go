package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Upstream's quota-based service selection, on the real binary: a
// configuration file in a subdirectory, a wildcard in the middle of a
// value, --envoy-quota-mode and, from its environment variable,
// --envoy-dynamic-metadata.
func TestServeEnvoyQuotaAndMetadata(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "teams"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "teams", "backends.yaml"), []byte(`domain: backends
descriptors:
  - key: backend
    value: primary-*-eu
    rate_limit: {unit: hour, requests_per_unit: 1}
    metadata: {cluster: primary}
  - key: backend
    value: fallback
    rate_limit: {unit: hour, requests_per_unit: 2}
    metadata: {cluster: fallback}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startServe(t, []string{"FLOODGATE_ENVOY_DYNAMIC_METADATA=true"}, "--envoy-config", dir, "--envoy-quota-mode", "--snapshot", "off")
	conn, err := grpc.NewClient(p.addrs["grpc"], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	entry := func(v string) *ratelimitv3.RateLimitDescriptor {
		return &ratelimitv3.RateLimitDescriptor{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "backend", Value: v}}}
	}
	req := &rlsv3.RateLimitRequest{Domain: "backends", Descriptors: []*ratelimitv3.RateLimitDescriptor{entry("primary-1-eu"), entry("fallback")}}
	rls := rlsv3.NewRateLimitServiceClient(conn)
	for i, want := range []string{
		`OK OK OK {"cluster":"primary"}`,
		`OK OVER_LIMIT OK {"cluster":"fallback"}`, // a quota left: OK
		`OVER_LIMIT OVER_LIMIT OVER_LIMIT {}`,     // no metadata
	} {
		resp, err := rls.ShouldRateLimit(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		md, _ := json.Marshal(resp.GetDynamicMetadata().GetFields()["metadata"].GetStructValue().AsMap())
		got := strings.Join([]string{resp.GetOverallCode().String(), resp.GetStatuses()[0].GetCode().String(),
			resp.GetStatuses()[1].GetCode().String(), string(md)}, " ")
		if got != want {
			t.Errorf("call %d: %s, want %s", i+1, got, want)
		}
		if d := resp.GetDynamicMetadata().GetFields()["domain"].GetStringValue(); d != "backends" {
			t.Errorf("call %d: dynamic metadata's domain %q", i+1, d)
		}
	}
}
