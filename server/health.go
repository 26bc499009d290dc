package server

import (
	"context"
	"sync"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// healthNames are the services the gRPC health service knows: the process
// as a whole (""), the name envoyproxy/ratelimit reports ("ratelimit"),
// and the rate-limit service's full name.
var healthNames = map[string]bool{"": true, "ratelimit": true, rlsv3.RateLimitService_ServiceDesc.ServiceName: true}

// watchInterval is how often a Watch of the health service asks whether
// the Server is ready.
const watchInterval = time.Second

// healthServer is gRPC's health service (grpc.health.v1.Health) beside
// Envoy's rate-limit service, answering as envoyproxy/ratelimit's does:
// "" is the process, SERVING until shutdown (as /healthz: a liveness probe
// must not restart every instance when the store is down); "ratelimit" and
// the service's full name are SERVING when the Server is Ready (the test
// of /readyz and /healthcheck, asked at each call), NOT_SERVING otherwise;
// other names are unknown.
type healthServer struct {
	healthpb.UnimplementedHealthServer
	s       *Server
	stopped chan struct{} // closed by shutdown
	once    sync.Once
}

func newHealthServer(s *Server) *healthServer {
	return &healthServer{s: s, stopped: make(chan struct{})}
}

// status is the serving status of the service name.
func (h *healthServer) status(ctx context.Context, name string) healthpb.HealthCheckResponse_ServingStatus {
	switch {
	case !healthNames[name]:
		return healthpb.HealthCheckResponse_SERVICE_UNKNOWN
	case h.isStopped():
		return healthpb.HealthCheckResponse_NOT_SERVING
	case name == "" && h.s.ready.Load(), name != "" && h.s.Ready(ctx) == nil:
		return healthpb.HealthCheckResponse_SERVING
	}
	return healthpb.HealthCheckResponse_NOT_SERVING
}

// Check answers the status of req's service; NotFound for an unknown one.
func (h *healthServer) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	st := h.status(ctx, req.GetService())
	if st == healthpb.HealthCheckResponse_SERVICE_UNKNOWN {
		return nil, status.Errorf(codes.NotFound, "unknown service %q: ask \"\", \"ratelimit\" or %q",
			req.GetService(), rlsv3.RateLimitService_ServiceDesc.ServiceName)
	}
	return &healthpb.HealthCheckResponse{Status: st}, nil
}

// List answers the status of every name of healthNames.
func (h *healthServer) List(ctx context.Context, _ *healthpb.HealthListRequest) (*healthpb.HealthListResponse, error) {
	out := &healthpb.HealthListResponse{Statuses: make(map[string]*healthpb.HealthCheckResponse, len(healthNames))}
	for name := range healthNames {
		out.Statuses[name] = &healthpb.HealthCheckResponse{Status: h.status(ctx, name)}
	}
	return out, nil
}

// Watch sends the status of req's service, then each change of it, asking
// every watchInterval, until the client goes or the server shuts down,
// after a last NOT_SERVING (SERVICE_UNKNOWN for an unknown name, as the
// health protocol wants).
func (h *healthServer) Watch(req *healthpb.HealthCheckRequest, stream grpc.ServerStreamingServer[healthpb.HealthCheckResponse]) error {
	ctx := stream.Context()
	last := healthpb.HealthCheckResponse_ServingStatus(-1)
	for {
		stopped := h.isStopped()
		if st := h.status(ctx, req.GetService()); st != last {
			if err := stream.Send(&healthpb.HealthCheckResponse{Status: st}); err != nil {
				return err
			}
			last = st
		}
		if stopped {
			return nil
		}
		if err := h.wait(ctx); err != nil {
			return err
		}
	}
}

// wait waits watchInterval on the Server's clock, or until shutdown; it
// returns the status error of ctx when ctx ends first.
func (h *healthServer) wait(ctx context.Context) error {
	t := h.s.clock.NewTimer(watchInterval)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	case <-h.stopped:
	case <-t.C():
	}
	return nil
}

func (h *healthServer) isStopped() bool {
	select {
	case <-h.stopped:
		return true
	default:
		return false
	}
}

// shutdown ends the watches, each after a last NOT_SERVING, so that a
// graceful stop does not wait for them.
func (h *healthServer) shutdown() { h.once.Do(func() { close(h.stopped) }) }
