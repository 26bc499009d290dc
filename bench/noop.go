package bench

import (
	"context"
	"fmt"
	"net"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// noopRLS is an Envoy rate-limit service that decides nothing: it answers
// every request with one status OVER_LIMIT per descriptor and nothing else,
// so that the flood scenarios (which want every call denied) can measure
// what gRPC alone costs on this machine, the ceiling of every service.
type noopRLS struct {
	rlsv3.UnimplementedRateLimitServiceServer
}

func (noopRLS) ShouldRateLimit(_ context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	resp := &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OVER_LIMIT,
		Statuses: make([]*rlsv3.RateLimitResponse_DescriptorStatus, len(req.Descriptors))}
	for i := range resp.Statuses {
		resp.Statuses[i] = &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OVER_LIMIT}
	}
	return resp, nil
}

// startNoopRLS serves noopRLS on a loopback port with gRPC's default
// server, as floodgate serve's (less its metrics and token interceptors),
// and returns a client of it over one connection, as the other peers'.
// The Redis at network and addr is not used.
func startNoopRLS(_, _ string) (rlsv3.RateLimitServiceClient, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	srv := grpc.NewServer()
	rlsv3.RegisterRateLimitServiceServer(srv, noopRLS{})
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(ln) }()
	stop := func() { srv.Stop(); <-done }
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		stop()
		return nil, nil, fmt.Errorf("grpc-noop: %w", err)
	}
	return rlsv3.NewRateLimitServiceClient(conn), func() { conn.Close(); stop() }, nil
}
