package grpclimit_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"net/netip"
	"time"

	"github.com/floodgate/floodgate/algo"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/clock"
	"github.com/floodgate/floodgate/grpclimit"
	"github.com/floodgate/floodgate/httplimit"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// fakeClock keeps the examples' output the same on every run: omit
// WithClock in production.
func fakeClock() floodgate.Option {
	return floodgate.WithClock(clock.NewFake(time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)))
}

// serve starts a gRPC server with the health service and i's
// interceptors, and returns a connection to it and a function stopping it.
func serve(i *grpclimit.Interceptor) (*grpc.ClientConn, func()) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(i.Unary()), grpc.ChainStreamInterceptor(i.Stream()))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go srv.Serve(lis)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	return conn, func() { conn.Close(); srv.Stop() }
}

// Two calls a minute per client address; the third fails with
// ResourceExhausted and a RetryInfo.
func Example() {
	limiter := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("fixed-window 2/1m"), fakeClock()))
	conn, stop := serve(grpclimit.New(limiter))
	defer stop()
	client := healthpb.NewHealthClient(conn)

	for range 3 {
		_, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{})
		st := status.Convert(err)
		fmt.Print(st.Code())
		for _, d := range st.Details() {
			if ri, ok := d.(*errdetails.RetryInfo); ok {
				fmt.Print(": ", st.Message(), "; RetryInfo ", ri.RetryDelay.AsDuration())
			}
		}
		fmt.Println()
	}
	// Output:
	// OK
	// OK
	// ResourceExhausted: rate limit exceeded: retry in 60s; RetryInfo 1m0s
}

// A limit on one costly method, and one on every method of the service,
// checked together, all or nothing.
func ExampleNewAll() {
	checks := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("fixed-window 1/1m"), floodgate.WithName("checks"), fakeClock()))
	service := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("fixed-window 100/1m"), floodgate.WithName("service"), fakeClock()))
	i := grpclimit.NewAll([]grpclimit.Limit{
		{Limiter: checks, Methods: []string{"/grpc.health.v1.Health/Check"}},
		{Limiter: service, Methods: []string{"/grpc.health.v1.Health/"}},
	}, grpclimit.WithQuotaFailure())
	conn, stop := serve(i)
	defer stop()
	client := healthpb.NewHealthClient(conn)

	for range 2 {
		_, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{})
		st := status.Convert(err)
		fmt.Print(st.Code())
		for _, d := range st.Details() {
			if qf, ok := d.(*errdetails.QuotaFailure); ok {
				fmt.Print(": ", qf.Violations[0].Subject)
			}
		}
		fmt.Println()
	}
	// Output:
	// OK
	// ResourceExhausted: limit:checks
}

// Behind Envoy (here in 10.0.0.0/8), which passes the client's address in
// x-forwarded-for: the key is that address, read from the right; a client
// connecting directly is keyed on its own address whatever it sends.
func ExampleByPeer() {
	key := grpclimit.ByPeer(httplimit.ClientIP{
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
	})
	for _, call := range []struct{ peer, xff string }{
		{"10.1.2.3:5000", "198.51.100.1, 203.0.113.9"},
		{"192.0.2.1:5000", "203.0.113.9"},
	} {
		ctx := peer.NewContext(context.Background(), &peer.Peer{
			Addr: net.TCPAddrFromAddrPort(netip.MustParseAddrPort(call.peer)),
		})
		ctx = metadata.NewIncomingContext(ctx, metadata.Pairs("x-forwarded-for", call.xff))
		k, _ := key(ctx, "/pkg.Service/Method")
		fmt.Println(call.peer, "->", k)
	}
	// Output:
	// 10.1.2.3:5000 -> 203.0.113.9
	// 192.0.2.1:5000 -> 192.0.2.1
}
