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

// healthRun is a Run with Envoy's service on a Redis of its own, and a
// gRPC health client of it.
type healthRun struct {
	*running
	redis *redistest.Server
	hc    healthpb.HealthClient
}

func startHealthRun(t *testing.T) *healthRun {
	t.Helper()
	srv := redistest.NewServer(t)
	dir := filepath.Join(t.TempDir(), "envoy")
	os.Mkdir(dir, 0o700)
	writeFile(t, filepath.Join(dir, "edge.yaml"), "domain: edge\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 2}\n")
	r := startRun(t, Options{Store: srv.URL(), EnvoyConfigDir: dir, SnapshotFile: "off"})
	conn, err := grpc.NewClient(r.addrs["grpc"], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &healthRun{running: r, redis: srv, hc: healthpb.NewHealthClient(conn)}
}

// healthy asks gRPC health of "ratelimit" and GET /healthcheck, and
// returns whether each said healthy, whether "" said SERVING, and how
// long the two took.
func (h *healthRun) healthy(t *testing.T) (grpcOK, httpOK, processOK bool, took time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	st, err := healthOf(ctx, h.hc, "ratelimit")
	grpcOK = err == nil && st == healthpb.HealthCheckResponse_SERVING
	if err != nil || (!grpcOK && st != healthpb.HealthCheckResponse_NOT_SERVING) {
		t.Errorf("Check(\"ratelimit\") = %v %v", st, err)
	}
	if resp, err := http.Get(h.url("/healthcheck")); err == nil {
		resp.Body.Close()
		httpOK = resp.StatusCode == 200
	}
	took = time.Since(start)
	st, err = healthOf(ctx, h.hc, "")
	return grpcOK, httpOK, err == nil && st == healthpb.HealthCheckResponse_SERVING, took
}

// fault checks that while the fault is on, the health checks say so
// within bound (two probes of at most readyTimeout each, and a margin for
// a loaded machine), "" staying SERVING; and that once end has ended it they
// say healthy again within a second; and that no goroutine is left.
func (h *healthRun) fault(t *testing.T, bound time.Duration, start, end func()) {
	t.Helper()
	if g, hh, p, _ := h.healthy(t); !g || !hh || !p {
		t.Fatalf("before the fault: gRPC SERVING %v, /healthcheck 200 %v, \"\" SERVING %v", g, hh, p)
	}
	goroutines := runtime.NumGoroutine()
	start()
	g, hh, p, took := h.healthy(t)
	t.Logf("fault: gRPC health and /healthcheck answered in %v", took)
	if g || hh || !p {
		t.Errorf("fault: gRPC SERVING %v, /healthcheck 200 %v, \"\" SERVING %v; want false, false, true", g, hh, p)
	}
	if took > bound {
		t.Errorf("fault: health answered in %v, want at most %v", took, bound)
	}
	end()
	ended := time.Now()
	for g, hh, _, _ := h.healthy(t); !g || !hh; g, hh, _, _ = h.healthy(t) {
		if time.Since(ended) > 5*time.Second {
			t.Fatalf("the fault ended %v ago: gRPC SERVING %v, /healthcheck 200 %v", time.Since(ended), g, hh)
		}
		time.Sleep(20 * time.Millisecond) // polling a real process's recovery
	}
	recovered := time.Since(ended)
	t.Logf("healthy again %v after the fault ended", recovered)
	if recovered > time.Second {
		t.Errorf("healthy again %v after the fault ended, want within 1s", recovered)
	}
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > goroutines+2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond) // letting timed-out calls' goroutines end
	}
	if n := runtime.NumGoroutine(); n > goroutines+2 {
		t.Errorf("%d goroutines after the fault, %d before", n, goroutines)
	}
}

// Redis stopped (SIGSTOP) under a running serve: gRPC health for
// "ratelimit" turns NOT_SERVING and /healthcheck 500, each answering
// within the readiness probe's second (before, "ratelimit" was NotFound
// whatever the store did), while "" (the process) stays SERVING, as
// upstream's; once Redis goes on (SIGCONT), both say healthy again within
// a second.
func TestChaosHealthStalledRedis(t *testing.T) {
	h := startHealthRun(t)
	h.fault(t, 3*readyTimeout, h.redis.Pause, h.redis.Resume)
}

// Redis killed (SIGKILL) under a running serve: the health checks say so
// within the probe's second each (the Redis client retries its dials
// until the deadline), and healthy again within a second of Redis's
// restart.
func TestChaosHealthKilledRedis(t *testing.T) {
	h := startHealthRun(t)
	h.fault(t, 3*readyTimeout, h.redis.Kill, func() { h.redis.Restart(t) })
}
