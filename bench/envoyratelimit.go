package bench

import (
	"errors"
	"fmt"
	"github.com/floodgate/floodgate/server"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/envoyproxy/ratelimit/src/service_cmd/runner"
	"github.com/envoyproxy/ratelimit/src/settings"
	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// The service scenarios on Redis (BenchmarkServiceRedis): as
// BenchmarkService, but each service keeps its counters in one
// redis-server on loopback, flushed before each run, and every check is a
// fixed window of ServiceRate per second, envoyproxy/ratelimit's only
// algorithm, so that floodgate and envoyproxy/ratelimit do the same work.

// EnvoyRateLimitVersion is the version of github.com/envoyproxy/ratelimit
// measured: the module proxy has only pseudo-versions of its main branch.
const EnvoyRateLimitVersion = "v1.4.1-0.20260122083618-3fb702589d36"

// A ServiceRedisPeer starts one instance of a service on loopback that
// keeps its state in the Redis at network ("tcp" or "unix") and addr, and
// returns a client of it and a function that stops the client and what
// Start started. Done, when not nil, stops what the peer keeps running
// between runs on the same Redis; it is called before the Redis goes.
type ServiceRedisPeer struct {
	Name, Note string
	Start      func(network, addr string) (ServiceClient, func(), error)
	Done       func()
}

// ServiceRedisPeers are floodgate's service on Redis and envoyproxy/ratelimit,
// without its local cache (its default) and with it (the like-for-like
// peer of floodgate serve, whose deny cache is on by default).
var ServiceRedisPeers = []ServiceRedisPeer{
	{Name: "floodgate", Start: startFloodgateRedis},
	{Name: "floodgate-table-counters", Start: startFloodgateRedisTables,
		Note: "floodgate with EnvoyTableCounters: fixed windows on the Redis store's tables, through its decisions' script"},
	{Name: "envoy-ratelimit", Start: envoyRateLimitService(0), Done: stopEnvoyRateLimit,
		Note: "github.com/envoyproxy/ratelimit " + EnvoyRateLimitVersion + ": its runner in process (stats off, " +
			"upstream's Redis defaults: radix pool of 10, no pipeline window), fixed window, one instance per redis-server, " +
			"Redis flushed before each run"},
	{Name: "envoy-ratelimit-cache", Start: envoyRateLimitService(EnvoyLocalCacheBytes), Done: stopEnvoyRateLimit},
}

// envoyFixedConfig gives every value of the descriptor key "user" its own
// fixed window of ServiceRate per second; both floodgate and
// envoyproxy/ratelimit read it.
var envoyFixedConfig = fmt.Sprintf(`domain: bench
descriptors:
  - key: user
    rate_limit: {unit: second, requests_per_unit: %d}
`, ServiceRate)

func startFloodgateRedis(network, addr string) (ServiceClient, func(), error) {
	return startFloodgate(redisURL(network, addr), envoyFixedConfig)
}

func startFloodgateRedisTables(network, addr string) (ServiceClient, func(), error) {
	c, stop, err := startFloodgateRLS(redisURL(network, addr), envoyFixedConfig, func(o *server.Options) { o.EnvoyTableCounters = true })
	return floodgateService{c}, stop, err
}

// redisURL returns the store URL of the Redis at network and addr.
func redisURL(network, addr string) string {
	if network == "unix" {
		return "unix://" + addr
	}
	return "redis://" + addr
}

// envoyRL holds the running envoyproxy/ratelimit instances, one per size
// of its local cache, kept between runs on the same Redis: its runner
// cannot be stopped whole (its configuration loader's inotify watcher and
// a few goroutines outlive Stop), so starting one per run would use up the
// user's inotify instances (128 by default) in a full make bench.
var envoyRL struct {
	sync.Mutex
	redis string                  // network and address of inst's Redis
	inst  map[int]*envoyRateLimit // by local cache size in bytes
}

// An envoyRateLimit is envoyproxy/ratelimit's service running in this
// process, as its ratelimit command runs it.
type envoyRateLimit struct {
	r        *runner.Runner
	grpcAddr string
	dir      string
	done     chan struct{} // closed when Run returns
}

// envoyRateLimitService returns the Start of envoyproxy/ratelimit with a local
// cache of cacheBytes (0: none).
func envoyRateLimitService(cacheBytes int) func(network, addr string) (ServiceClient, func(), error) {
	return func(network, addr string) (ServiceClient, func(), error) {
		c, stop, err := startEnvoyRLS(network, addr, cacheBytes)
		if err != nil {
			return nil, nil, err
		}
		// The same Envoy client as floodgate's.
		return floodgateService{c}, stop, nil
	}
}

// startEnvoyRLS returns a client of the envoyproxy/ratelimit instance on
// the Redis at network and addr with a local cache of cacheBytes (0: none),
// starting it if need be, and a function that closes the client.
func startEnvoyRLS(network, addr string, cacheBytes int) (rlsv3.RateLimitServiceClient, func(), error) {
	envoyRL.Lock()
	defer envoyRL.Unlock()
	if envoyRL.redis != network+" "+addr {
		stopEnvoyRateLimitLocked()
		envoyRL.redis = network + " " + addr
	}
	e := envoyRL.inst[cacheBytes]
	if e == nil {
		var err error
		if e, err = newEnvoyRateLimit(network, addr, cacheBytes); err != nil {
			return nil, nil, fmt.Errorf("envoy-ratelimit: %w", err)
		}
		if envoyRL.inst == nil {
			envoyRL.inst = make(map[int]*envoyRateLimit)
		}
		envoyRL.inst[cacheBytes] = e
	}
	conn, err := grpc.NewClient(e.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, nil, err
	}
	return rlsv3.NewRateLimitServiceClient(conn), func() { conn.Close() }, nil
}

// stopEnvoyRateLimit stops the running instances, if any.
func stopEnvoyRateLimit() {
	envoyRL.Lock()
	defer envoyRL.Unlock()
	stopEnvoyRateLimitLocked()
}

func stopEnvoyRateLimitLocked() {
	for _, e := range envoyRL.inst {
		e.stop()
	}
	envoyRL.inst, envoyRL.redis = nil, ""
}

// newEnvoyRateLimit starts envoyproxy/ratelimit with its Redis backend on
// the Redis at network and addr and a local cache of cacheBytes (0: none),
// its configuration envoyFixedConfig and floodServiceConfig in a temporary
// RUNTIME_ROOT, listening on loopback ports, and waits until it serves.
// Its settings are those of its environment variables (as its command
// reads them) but for the ones set here.
//
// Upstream's runner ends the process (logrus Fatal) when it cannot listen
// or its Redis cannot be reached, and panics on a bad configuration.
func newEnvoyRateLimit(network, addr string, cacheBytes int) (*envoyRateLimit, error) {
	dir, err := os.MkdirTemp("", "floodgate-bench-envoy-ratelimit")
	if err != nil {
		return nil, err
	}
	conf := filepath.Join(dir, "ratelimit", "config")
	if err := os.MkdirAll(conf, 0o755); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	for name, config := range map[string]string{"bench.yaml": envoyFixedConfig, "flood.yaml": floodServiceConfig} {
		if err := os.WriteFile(filepath.Join(conf, name), []byte(config), 0o644); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	ports, err := freeLoopbackPorts(2)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}

	s := settings.NewSettings()
	s.Host, s.Port = "127.0.0.1", ports[0]
	s.GrpcHost, s.GrpcPort, s.GrpcUds = "127.0.0.1", ports[1], ""
	s.DebugHost, s.DebugPort = "127.0.0.1", 0
	s.GrpcServerUseTLS = false
	s.LogLevel, s.LogFormat = "error", "text"
	s.ConfigType = "FILE"
	s.RuntimePath, s.RuntimeSubdirectory, s.RuntimeAppDirectory = dir, "ratelimit", "config"
	s.RuntimeWatchRoot = false
	s.UseStatsd, s.UseDogStatsd, s.UsePrometheus, s.DisableStats = false, false, false, true
	s.TracingEnabled = false
	s.GlobalShadowMode = false
	s.BackendType = "redis"
	s.RedisSocketType, s.RedisType, s.RedisUrl = network, "SINGLE", addr
	s.RedisAuth, s.RedisTls, s.RedisPerSecond = "", false, false
	s.LocalCacheSizeInBytes = cacheBytes

	// Its runner logs at info until Run sets LogLevel: quiet it before.
	// Nothing else in this binary logs with logrus.
	logrus.SetLevel(logrus.ErrorLevel)
	r := runner.NewRunner(s)
	e := &envoyRateLimit{r: &r, grpcAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1])), dir: dir, done: make(chan struct{})}
	go func() {
		defer close(e.done)
		e.r.Run()
	}()
	if err := e.waitServing("http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])) + "/healthcheck"); err != nil {
		e.stop()
		return nil, err
	}
	// Its server traps SIGINT, SIGTERM and SIGHUP to exit 0 (and its
	// health checker SIGTERM): give them back their default, so that an
	// interrupted benchmark does not end as a success. Nothing else in
	// this test binary traps them.
	signal.Reset(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	return e, nil
}

// waitServing polls the HTTP health check until it answers 200 and the
// gRPC port accepts, for up to 10 s. The HTTP server starts last, after
// the configuration is loaded, so that Stop then stops it.
func (e *envoyRateLimit) waitServing(url string) error {
	c := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(10 * time.Second)
	healthy := func() error {
		resp, err := c.Get(url)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s", url, resp.Status)
		}
		// The gRPC listener opens beside the HTTP one: see that it
		// accepts too.
		conn, err := net.DialTimeout("tcp", e.grpcAddr, time.Second)
		if err != nil {
			return err
		}
		return conn.Close()
	}
	for {
		select {
		case <-e.done:
			return errors.New("its runner returned before serving")
		default:
		}
		err := healthy()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not serving after 10s: %w", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop stops the servers and the Redis client, and waits for Run to return.
func (e *envoyRateLimit) stop() {
	e.r.Stop()
	select {
	case <-e.done:
	case <-time.After(10 * time.Second):
	}
	os.RemoveAll(e.dir)
}

// freeLoopbackPorts returns n TCP ports on 127.0.0.1 that were free a
// moment ago: envoyproxy/ratelimit takes port numbers, not listeners, and
// does not tell which port it got for port 0.
func freeLoopbackPorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
