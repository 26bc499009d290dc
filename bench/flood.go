package bench

import (
	"fmt"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/floodgate/floodgate/redisstore"
	"github.com/floodgate/floodgate/server"
	"github.com/go-redis/redis_rate/v10"
)

// The flood scenarios (BenchmarkFloodRedis, BenchmarkFloodService):
// FloodCallers callers flood keys that are all over their limit, so that
// every timed call is denied, through a Redis store and through a
// rate-limit service on Redis, counting decisions per second and the
// commands Redis processed meanwhile.

// FloodLimit units per FloodPeriod is the policy of the library flood
// (FloodRedisPeers): a token bucket, or GCRA for redis_rate, with a burst
// of FloodLimit, so that a drained key gains one unit each FloodRetry.
const (
	FloodLimit  = 10
	FloodPeriod = time.Hour
)

// FloodRetry is how long a key of the library flood stays denied after a
// denial, at most: the retry window of its commands per key.
const FloodRetry = FloodPeriod / FloodLimit

// FloodServiceWindow is the fixed window of the service flood: FloodLimit
// checks per day (floodServiceConfig), envoyproxy/ratelimit's only
// algorithm, so that a day's end, rather than an hour's, is the only
// moment at which the keys are admitted again. A denial holds until the
// window ends: at most FloodServiceWindow, the retry window of its
// commands per key.
const FloodServiceWindow = 24 * time.Hour

// FloodCallers is the number of concurrent callers of the flood scenarios.
const FloodCallers = 64

// FloodKeys are the numbers of keys flooded.
var FloodKeys = []int{1, 1000}

// floodPolicy is floodgate's policy in the library flood.
var floodPolicy = fmt.Sprintf("token-bucket %d/%s", FloodLimit, FloodPeriod)

// FloodRedisPeers are floodgate's limiter on package redisstore and its
// peers that keep state in Redis, each deciding FloodLimit per FloodPeriod.
// A variant of floodgate's is one more line: a name and the redisstore
// options it adds to floodgateOnRedis(floodPolicy). cmd/ratios divides
// the figures of the peer named "floodgate" by the others'.
//
// "floodgate" is the limiter with redisstore's deny cache
// (WithDenyCache, of serve's default size), which floodgate serve has on
// by default, and
// "floodgate-nocache" the same without it.
var FloodRedisPeers = []RedisPeer{
	{Name: "floodgate", New: floodgateOnRedis(floodPolicy, redisstore.WithDenyCache(server.DefaultDenyCacheBytes))},
	{Name: "floodgate-nocache", New: floodgateOnRedis(floodPolicy)},
	{Name: "redis_rate", New: redisRate(redis_rate.Limit{Rate: FloodLimit, Burst: FloodLimit, Period: FloodPeriod})},
}

// A FloodServicePeer starts one instance of a rate-limit service on
// loopback, keeping its state in the Redis at network ("tcp" or "unix")
// and addr, that reads floodServiceConfig, and returns a client of its
// Envoy service and a function that stops the client and what Start
// started. Done, when not nil, stops what the peer keeps running between
// runs on the same Redis; it is called before the Redis goes.
type FloodServicePeer struct {
	Name, Note string
	Start      func(network, addr string) (rlsv3.RateLimitServiceClient, func(), error)
	Done       func()
}

// EnvoyLocalCacheBytes is the size of envoyproxy/ratelimit's local cache of
// over-limit keys (LOCAL_CACHE_SIZE_IN_BYTES) in its peer that has one:
// room for every key of the flood scenarios.
const EnvoyLocalCacheBytes = 1 << 20

// FloodServicePeers are floodgate serve on Redis and envoyproxy/ratelimit on
// the same Redis, without and with its local cache, and grpc-noop, a
// service that decides nothing: the ceiling gRPC sets. A variant of
// floodgate's is one more line: a name and the serve options that
// floodgateFloodService sets.
var FloodServicePeers = []FloodServicePeer{
	{Name: "floodgate", Start: floodgateFloodService()},
	{Name: "floodgate-nocache", Start: floodgateFloodService(func(o *server.Options) { o.DenyCacheBytes = -1 }),
		Note: "floodgate serve with --deny-cache 0: the Redis store without its deny cache; the Envoy service still " +
			"answers over-limit fixed-window hits from memory (flood scenarios only)"},
	{Name: "envoy-ratelimit", Start: envoyFloodService(0), Done: stopEnvoyRateLimit},
	{Name: "envoy-ratelimit-cache", Start: envoyFloodService(EnvoyLocalCacheBytes), Done: stopEnvoyRateLimit,
		Note: fmt.Sprintf("envoy-ratelimit with its local cache of over-limit keys on (LOCAL_CACHE_SIZE_IN_BYTES=%d): "+
			"a key found over its limit is denied from memory until its window ends", EnvoyLocalCacheBytes)},
	{Name: "grpc-noop", Start: startNoopRLS,
		Note: "an Envoy rate-limit service that decides nothing and answers OVER_LIMIT, on gRPC's default server: " +
			"the ceiling of every service on this machine (flood scenarios only)"},
}

// floodDomain is the Envoy domain of floodServiceConfig.
const floodDomain = "flood"

// floodServiceConfig gives every value of the descriptor key "user" of the
// domain floodDomain its own fixed window of FloodLimit per day; both
// floodgate and envoyproxy/ratelimit read it.
var floodServiceConfig = fmt.Sprintf(`domain: %s
descriptors:
  - key: user
    rate_limit: {unit: day, requests_per_unit: %d}
`, floodDomain, FloodLimit)

// floodgateFloodService returns the Start of floodgate serve on Redis
// reading floodServiceConfig, with serve's options changed by set.
func floodgateFloodService(set ...func(*server.Options)) func(network, addr string) (rlsv3.RateLimitServiceClient, func(), error) {
	return func(network, addr string) (rlsv3.RateLimitServiceClient, func(), error) {
		return startFloodgateRLS(redisURL(network, addr), floodServiceConfig, set...)
	}
}

// envoyFloodService returns the Start of envoyproxy/ratelimit on Redis with
// a local cache of cacheBytes (0: none).
func envoyFloodService(cacheBytes int) func(network, addr string) (rlsv3.RateLimitServiceClient, func(), error) {
	return func(network, addr string) (rlsv3.RateLimitServiceClient, func(), error) {
		return startEnvoyRLS(network, addr, cacheBytes)
	}
}

// An rlsLimiter asks an Envoy rate-limit service about one key a request,
// each request built ahead (floodRequests), so that a call allocates only
// what gRPC does.
type rlsLimiter struct {
	c    rlsv3.RateLimitServiceClient
	reqs map[string]*rlsv3.RateLimitRequest
	stop func()
}

// floodRequests returns a request of domain floodDomain for each key,
// with one descriptor: "user" and the key.
func floodRequests(keys []string) map[string]*rlsv3.RateLimitRequest {
	reqs := make(map[string]*rlsv3.RateLimitRequest, len(keys))
	for _, k := range keys {
		reqs[k] = &rlsv3.RateLimitRequest{Domain: floodDomain, Descriptors: []*rlcommon.RateLimitDescriptor{
			{Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: "user", Value: k}}},
		}}
	}
	return reqs
}

func (l rlsLimiter) Allow(key string) (bool, error) {
	resp, err := l.c.ShouldRateLimit(ctx, l.reqs[key])
	if err != nil {
		return false, err
	}
	return resp.OverallCode == rlsv3.RateLimitResponse_OK, nil
}

func (l rlsLimiter) Close() { l.stop() }
