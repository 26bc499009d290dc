package server

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate/envoyrls"
)

// grpcServer is Envoy's rate-limit service over gRPC, as Run serves it:
// behind the Server's metrics and bearer tokens, over its TLS when the
// configuration has TLS, with gRPC's health service beside it.
type grpcServer struct {
	srv    *grpc.Server
	health *healthServer
}

// newGRPCServer returns the gRPC server of envoy, counted and
// authenticated by s.
func newGRPCServer(s *Server, envoy *envoyrls.Service) *grpcServer {
	opts := []grpc.ServerOption{grpc.ChainUnaryInterceptor(s.grpcMetrics, s.grpcAuth)}
	if tc := s.TLSConfig("h2"); tc != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(tc)))
	}
	g := &grpcServer{srv: grpc.NewServer(opts...), health: newHealthServer(s)}
	rlsv3.RegisterRateLimitServiceServer(g.srv, envoy)
	healthpb.RegisterHealthServer(g.srv, g.health)
	return g
}

// serve serves on ln until stop, after which it returns nil.
func (g *grpcServer) serve(ln net.Listener) error { return g.srv.Serve(ln) }

// stop stops the server gracefully: it takes no more requests and waits
// for those under way, cut off when ctx is done.
func (g *grpcServer) stop(ctx context.Context, log *slog.Logger) {
	done := make(chan struct{})
	go func() { g.srv.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		log.Warn("requests under way at the shutdown timeout were cut off", "api", "grpc")
		g.srv.Stop()
		<-done
	}
}

// grpcAuth is the gRPC form of the bearer-token check: metadata
// "authorization: Bearer TOKEN", as Envoy's grpc_service initial_metadata
// sends it.
// The health service is open, as /healthcheck and /readyz are: probes
// carry no token.
func (s *Server) grpcAuth(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	l := s.cur.Load()
	if len(l.tokens) == 0 || strings.HasPrefix(info.FullMethod, "/"+healthpb.Health_ServiceDesc.ServiceName+"/") {
		return h(ctx, req)
	}
	md, _ := metadata.FromIncomingContext(ctx)
	for _, v := range md.Get("authorization") {
		if token, ok := bearer(v); ok && l.accepts(token) {
			return h(ctx, req)
		}
	}
	return nil, status.Error(codes.Unauthenticated, "this server wants metadata authorization: Bearer TOKEN, with a valid token")
}

// grpcMetrics counts and times gRPC requests.
func (s *Server) grpcMetrics(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	start := time.Now()
	inFlight := s.metrics.inFlight.WithLabelValues("grpc")
	inFlight.Inc()
	resp, err := h(ctx, req)
	inFlight.Dec()
	method := info.FullMethod[strings.LastIndexByte(info.FullMethod, '/')+1:]
	s.metrics.latency.WithLabelValues("grpc", method).Observe(time.Since(start).Seconds())
	s.metrics.requests.WithLabelValues("grpc", method, status.Code(err).String()).Inc()
	return resp, err
}
