package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// What envoyproxy/ratelimit's users script against, on the real binary:
// GET /healthcheck on the HTTP port, gRPC health for "ratelimit", and the
// response headers of --envoy-response-headers (here from its
// environment variable).
func TestServeEnvoyOperations(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "edge.yaml"), []byte(`domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: hour, requests_per_unit: 2}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startServe(t, []string{"FLOODGATE_ENVOY_RESPONSE_HEADERS=upstream"}, "--envoy-config", dir, "--snapshot", "off")
	resp, err := http.Get(p.url("/healthcheck"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "OK" {
		t.Errorf("GET /healthcheck: %d %q, want 200 OK", resp.StatusCode, body)
	}

	conn, err := grpc.NewClient(p.addrs["grpc"], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hc, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: "ratelimit"})
	if err != nil || hc.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("gRPC health of \"ratelimit\": %v %v, want SERVING", hc.GetStatus(), err)
	}

	req := &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{
		{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "192.0.2.7"}}}}}
	rls := rlsv3.NewRateLimitServiceClient(conn)
	for i, want := range []string{"RateLimit-Limit: 2; RateLimit-Remaining: 1", "RateLimit-Limit: 2; RateLimit-Remaining: 0"} {
		resp, err := rls.ShouldRateLimit(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, h := range resp.GetResponseHeadersToAdd() {
			got = append(got, h.GetKey()+": "+h.GetValue())
		}
		if len(got) != 3 || strings.Join(got[:2], "; ") != want || !strings.HasPrefix(got[2], "RateLimit-Reset: ") {
			t.Errorf("call %d: response_headers_to_add %q, want %s; RateLimit-Reset: ...", i+1, got, want)
		}
	}

	r := runBinary(t, serveEnvClean(), "serve", "--envoy-response-headers", "IETF")
	if r.code != exitUsage || !strings.Contains(r.stderr, "want none, ietf, upstream or x-ratelimit") {
		t.Errorf("--envoy-response-headers IETF: exit %d, stderr %q", r.code, r.stderr)
	}
}
