package bench

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/floodgate/floodgate/server"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// The service scenarios (BenchmarkService): a rate-limit service running in
// this process on loopback, asked over gRPC by callers that share one
// connection, with one check or a batch of checks per request, each on a
// key picked at random among ServiceKeys, decided on its own. Gubernator,
// whose module cannot build beside this one (its tracing library needs an
// older OpenTelemetry than gRPC does), is measured by the same harness in
// the module bench/gubernator, in the same make bench run.

// ServiceRate is the limit of every service peer, per second, with a burst
// of as many: far more than one service decides in a second, so nearly
// every check is admitted and each costs a full decision.
const ServiceRate = 1_000_000_000

// ServiceKeys is the number of keys the service scenarios pick from.
const ServiceKeys = 10_000

// A ServiceClient asks a service to decide a batch of checks, one per key,
// independently, in one request, and reports how many were admitted.
type ServiceClient interface {
	Check(ctx context.Context, keys []string) (admitted int, err error)
}

// A ServicePeer starts one instance of a service on loopback, and returns
// a client of it and a function that stops both.
type ServicePeer struct {
	Name, Note string
	Start      func() (ServiceClient, func(), error)
}

// ServicePeers lists floodgate's service; bench/gubernator has its peer.
var ServicePeers = []ServicePeer{
	{Name: "floodgate", Start: startFloodgateService},
}

// OtherModulePeers notes the peers measured by the modules beside this one
// (make bench runs them into the same file), by name.
var OtherModulePeers = map[string]string{
	"gubernator": "github.com/mailgun/gubernator/v2 v2.4.0: one daemon in process, its gRPC client, token bucket (module bench/gubernator)",
}

// envoyBenchConfig gives every value of the descriptor key "user" its own
// token bucket of ServiceRate per second.
var envoyBenchConfig = fmt.Sprintf(`domain: bench
descriptors:
  - key: user
    rate_limit: {unit: second, requests_per_unit: %d, algorithm: token-bucket, burst: %d}
`, ServiceRate, ServiceRate)

func startFloodgateService() (ServiceClient, func(), error) {
	return startFloodgate("", envoyBenchConfig)
}

// startFloodgate starts floodgate serve on the store URL store ("" means
// memory) with the Envoy configuration config, and returns a gRPC client
// of its Envoy service.
func startFloodgate(store, config string) (ServiceClient, func(), error) {
	c, stop, err := startFloodgateRLS(store, config)
	if err != nil {
		return nil, nil, err
	}
	return floodgateService{c}, stop, nil
}

// startFloodgateRLS is startFloodgate returning the Envoy client itself,
// each of set changing serve's options first.
func startFloodgateRLS(store, config string, set ...func(*server.Options)) (rlsv3.RateLimitServiceClient, func(), error) {
	dir, err := os.MkdirTemp("", "floodgate-bench-envoy")
	if err != nil {
		return nil, nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "bench.yaml"), []byte(config), 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	var grpcAddr net.Addr
	var once sync.Once
	ready := make(chan struct{})
	errc := make(chan error, 1)
	o := server.Options{
		Store: store, HTTPAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0", EnvoyConfigDir: dir,
		SnapshotFile: "off", WatchInterval: -1,
		Listening: func(name string, addr net.Addr) {
			if name == "grpc" {
				grpcAddr = addr
			}
			if name == "ready" {
				once.Do(func() { close(ready) })
			}
		},
	}
	for _, f := range set {
		f(&o)
	}
	go func() { errc <- server.Run(ctx, o) }()
	stop := func() {
		cancel()
		<-errc
		os.RemoveAll(dir)
	}
	select {
	case <-ready:
	case err := <-errc:
		cancel()
		os.RemoveAll(dir)
		return nil, nil, fmt.Errorf("floodgate serve: %w", err)
	}
	conn, err := grpc.NewClient(grpcAddr.String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		stop()
		return nil, nil, err
	}
	return rlsv3.NewRateLimitServiceClient(conn), func() { conn.Close(); stop() }, nil
}

type floodgateService struct{ c rlsv3.RateLimitServiceClient }

func (f floodgateService) Check(ctx context.Context, keys []string) (int, error) {
	req := &rlsv3.RateLimitRequest{Domain: "bench", Descriptors: make([]*rlcommon.RateLimitDescriptor, len(keys))}
	for i, k := range keys {
		req.Descriptors[i] = &rlcommon.RateLimitDescriptor{Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: "user", Value: k}}}
	}
	resp, err := f.c.ShouldRateLimit(ctx, req)
	if err != nil {
		return 0, err
	}
	admitted := 0
	for _, s := range resp.Statuses {
		if s.Code == rlsv3.RateLimitResponse_OK {
			admitted++
		}
	}
	return admitted, nil
}
