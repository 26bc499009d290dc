package server

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate/envoyrls"

	"github.com/floodgate/floodgate/clock"
	"github.com/floodgate/floodgate/failsafe"
)

// getHealthcheck asks url's /healthcheck with method and returns the
// status, the body and the Content-Type.
func getHealthcheck(t *testing.T, method, url string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(method, url+"/healthcheck", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b), resp.Header.Get("Content-Type")
}

// /healthcheck answers as envoyproxy/ratelimit's: 200 "OK" when ready,
// to any method and without the API's token; 500 with no body when
// shutting down or when the store does not answer.
func TestHealthcheck(t *testing.T) {
	ts := newTestServer(t, "", WithToken("s3cret"))
	for _, method := range []string{"GET", "HEAD", "POST"} {
		code, body, ct := getHealthcheck(t, method, ts.url)
		want := "OK"
		if method == "HEAD" {
			want = ""
		}
		if code != 200 || body != want || ct != "text/plain; charset=utf-8" {
			t.Errorf("%s /healthcheck: %d %q %q, want 200 %q text/plain", method, code, body, ct, want)
		}
	}
	if a := do(t, "POST", ts.url+"/v1/check", `{"policy":"default","key":"k"}`); a.code != 401 {
		t.Errorf("the API without the token: %d", a.code)
	}
	ts.SetReady(false)
	if code, body, _ := getHealthcheck(t, "GET", ts.url); code != 500 || body != "" {
		t.Errorf("/healthcheck while shutting down: %d %q, want 500 and no body", code, body)
	}

	down := newTestServerOn(t, newFailsafe(brokenStore{}, failsafe.Options{Clock: clock.NewFake(t0)}), "")
	if code, body, _ := getHealthcheck(t, "GET", down.url); code != 500 || body != "" {
		t.Errorf("/healthcheck on a failing store: %d %q, want 500 and no body", code, body)
	}
}

// serveHealth serves s's gRPC API (Envoy's service, with no domain, and
// the health service) on a loopback port and returns a health client.
func serveHealth(t *testing.T, s *Server) (healthpb.HealthClient, *grpcServer) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := newGRPCServer(s, envoyrls.NewService(nil, nil))
	go g.serve(lis)
	t.Cleanup(g.srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return healthpb.NewHealthClient(conn), g
}

// healthOf asks hc the status of service.
func healthOf(ctx context.Context, hc healthpb.HealthClient, service string) (healthpb.HealthCheckResponse_ServingStatus, error) {
	resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	return resp.GetStatus(), err
}

// gRPC health reports SERVING for "", "ratelimit" (envoyproxy/ratelimit's
// name) and the service's full name, without a token; NotFound for other
// names; NOT_SERVING for all three while shutting down, and for all but
// "" (the process, a liveness probe's) when the store fails.
func TestGRPCHealth(t *testing.T) {
	ts := newTestServer(t, "", WithToken("s3cret"))
	hc, _ := serveHealth(t, ts.Server)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	names := []string{"", "ratelimit", "envoy.service.ratelimit.v3.RateLimitService"}
	for _, name := range names {
		if st, err := healthOf(ctx, hc, name); err != nil || st != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("Check(%q) = %v %v, want SERVING", name, st, err)
		}
	}
	if _, err := healthOf(ctx, hc, "other"); status.Code(err) != codes.NotFound {
		t.Errorf("Check(\"other\"): %v, want NotFound", err)
	}
	list, err := hc.List(ctx, &healthpb.HealthListRequest{})
	if err != nil || len(list.GetStatuses()) != len(names) || list.GetStatuses()["ratelimit"].GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("List: %v %v", list, err)
	}
	ts.SetReady(false)
	for _, name := range names {
		if st, err := healthOf(ctx, hc, name); err != nil || st != healthpb.HealthCheckResponse_NOT_SERVING {
			t.Errorf("Check(%q) while shutting down = %v %v, want NOT_SERVING", name, st, err)
		}
	}

	down := newTestServerOn(t, newFailsafe(brokenStore{}, failsafe.Options{Clock: clock.NewFake(t0)}), "")
	dhc, _ := serveHealth(t, down.Server)
	for name, want := range map[string]healthpb.HealthCheckResponse_ServingStatus{
		"":          healthpb.HealthCheckResponse_SERVING,
		"ratelimit": healthpb.HealthCheckResponse_NOT_SERVING,
		"envoy.service.ratelimit.v3.RateLimitService": healthpb.HealthCheckResponse_NOT_SERVING,
	} {
		if st, err := healthOf(ctx, dhc, name); err != nil || st != want {
			t.Errorf("Check(%q) on a failing store = %v %v, want %v", name, st, err, want)
		}
	}
}

// A Watch sends the status, then its changes as the clock passes
// watchInterval, and ends at shutdown after a last NOT_SERVING; an unknown
// name is SERVICE_UNKNOWN.
func TestGRPCHealthWatch(t *testing.T) {
	ts := newTestServer(t, "")
	hc, g := serveHealth(t, ts.Server)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	recv := func(w grpc.ServerStreamingClient[healthpb.HealthCheckResponse], want healthpb.HealthCheckResponse_ServingStatus) {
		t.Helper()
		resp, err := w.Recv()
		if err != nil || resp.GetStatus() != want {
			t.Fatalf("Watch: %v %v, want %v", resp.GetStatus(), err, want)
		}
	}
	w, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{Service: "ratelimit"})
	if err != nil {
		t.Fatal(err)
	}
	recv(w, healthpb.HealthCheckResponse_SERVING)
	unknown, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{Service: "other"})
	if err != nil {
		t.Fatal(err)
	}
	recv(unknown, healthpb.HealthCheckResponse_SERVICE_UNKNOWN)

	ts.clock.WaitTimers(2) // both watches wait
	ts.SetReady(false)
	ts.clock.Advance(watchInterval)
	recv(w, healthpb.HealthCheckResponse_NOT_SERVING)
	ts.SetReady(true)
	ts.clock.WaitTimers(2)
	ts.clock.Advance(watchInterval)
	recv(w, healthpb.HealthCheckResponse_SERVING)

	g.health.shutdown()
	recv(w, healthpb.HealthCheckResponse_NOT_SERVING)
	if _, err := w.Recv(); err != io.EOF {
		t.Errorf("Watch after shutdown: %v, want its end", err)
	}
	if _, err := unknown.Recv(); err != io.EOF {
		t.Errorf("Watch of an unknown name after shutdown: %v, want its end", err)
	}
}
