package envoyrls

import (
	"context"
	"net"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// serveGRPC serves s on a loopback port and returns a client of it, as
// Envoy would call it.
func serveGRPC(t *testing.T, s *Service) rlsv3.RateLimitServiceClient {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	rlsv3.RegisterRateLimitServiceServer(srv, s)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return rlsv3.NewRateLimitServiceClient(conn)
}

func TestGRPC(t *testing.T) {
	s, clk := newService(t, basics)
	client := serveGRPC(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	clk.Advance(20 * time.Second)

	req := request("d", descriptor("b", "10.0.0.1"), descriptor("none", "x"), descriptor("c", "x"))
	for i, want := range []string{
		"OK: OK 2/MINUTE r=1 t=40s | OK | OK r=4294967295",
		"OK: OK 2/MINUTE t=40s | OK | OK r=4294967295",
		"OVER_LIMIT: OVER_LIMIT 2/MINUTE t=40s | OK | OK r=4294967295",
	} {
		resp, err := client.ShouldRateLimit(ctx, req)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if got := summary(resp); got != want {
			t.Errorf("call %d: %s, want %s", i, got, want)
		}
	}
	// The answer over the wire is the answer in process.
	direct, err := s.ShouldRateLimit(ctx, request("d", descriptor("a", "y")))
	if err != nil {
		t.Fatal(err)
	}
	remote, err := client.ShouldRateLimit(ctx, request("d", descriptor("a", "z")))
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(direct, remote) {
		t.Errorf("in process %v, over gRPC %v", direct, remote)
	}
	// Errors arrive with their codes.
	_, err = client.ShouldRateLimit(ctx, request("", descriptor("a", "x")))
	if st, _ := status.FromError(err); st.Code() != codes.InvalidArgument || st.Message() != "rate limit domain must not be empty" {
		t.Errorf("empty domain: %v", err)
	}
	_, err = client.ShouldRateLimit(ctx, request("d"))
	if st, _ := status.FromError(err); st.Code() != codes.InvalidArgument {
		t.Errorf("no descriptor: %v", err)
	}
	if st := s.Stats(); st.OK != 4 || st.OverLimit != 1 || st.Errors != 2 {
		t.Errorf("Stats() = %+v", st)
	}
}
