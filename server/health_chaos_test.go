package server

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/floodgate/floodgate/internal/redistest"
)

// Redis stopped (SIGSTOP) under a running serve: gRPC health for
// "ratelimit" turns NOT_SERVING and /healthcheck 500, each answering
// within the readiness probe's second (before, "ratelimit" was NotFound
// whatever the store did), while "" (the process) stays SERVING, as
// upstream's; once Redis goes on
// (SIGCONT), both say healthy again within a second, and no goroutine is
// left behind.
func TestChaosHealthStalledRedis(t *testing.T) {
	srv := redistest.NewServer(t)
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "envoy"), 0o700)
	writeFile(t, filepath.Join(dir, "envoy", "edge.yaml"), "domain: edge\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 2}\n")
	r := startRun(t, Options{Store: srv.URL(), EnvoyConfigDir: filepath.Join(dir, "envoy"), SnapshotFile: "off"})
	conn, err := grpc.NewClient(r.addrs["grpc"], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	healthy := func() (grpcOK, httpOK bool, took time.Duration) {
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		st, err := healthOf(ctx, hc, "ratelimit")
		grpcOK = err == nil && st == healthpb.HealthCheckResponse_SERVING
		if err == nil && st != healthpb.HealthCheckResponse_SERVING && st != healthpb.HealthCheckResponse_NOT_SERVING {
			t.Errorf("Check(\"ratelimit\") = %v", st)
		}
		resp, err := http.Get(r.url("/healthcheck"))
		if err == nil {
			resp.Body.Close()
			httpOK = resp.StatusCode == 200
		}
		return grpcOK, httpOK, time.Since(start)
	}
	if g, h, _ := healthy(); !g || !h {
		t.Fatalf("before the stall: gRPC SERVING %v, /healthcheck 200 %v", g, h)
	}
	goroutines := runtime.NumGoroutine()

	srv.Pause()
	g, h, took := healthy()
	t.Logf("stalled: gRPC health and /healthcheck answered in %v", took)
	if g || h {
		t.Errorf("Redis stopped: gRPC SERVING %v, /healthcheck 200 %v; want NOT_SERVING and 500", g, h)
	}
	if took > 3*readyTimeout { // two probes of at most readyTimeout each
		t.Errorf("Redis stopped: health answered in %v, want at most %v", took, 3*readyTimeout)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if st, err := healthOf(ctx, hc, ""); err != nil || st != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("Redis stopped: Check(\"\") = %v %v, want SERVING: the process serves", st, err)
	}
	srv.Resume()
	resumed := time.Now()
	for {
		g, h, _ := healthy()
		if g && h {
			break
		}
		if time.Since(resumed) > 3*time.Second {
			t.Fatalf("Redis resumed %v ago: gRPC SERVING %v, /healthcheck 200 %v", time.Since(resumed), g, h)
		}
		time.Sleep(20 * time.Millisecond) // polling a real process's recovery
	}
	recovered := time.Since(resumed)
	t.Logf("healthy again %v after Redis resumed", recovered)
	if recovered > time.Second {
		t.Errorf("healthy again %v after Redis resumed, want within 1s", recovered)
	}
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > goroutines+2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond) // letting timed-out calls' goroutines end
	}
	if n := runtime.NumGoroutine(); n > goroutines+2 {
		t.Errorf("%d goroutines after the stall, %d before", n, goroutines)
	}
}
