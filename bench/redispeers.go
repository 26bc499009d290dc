package bench

import (
	"fmt"
	"time"

	"github.com/floodgate/floodgate/algo"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/redisstore"
	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
)

// RedisRate is the rate of every Redis peer, per second, with a burst of
// as many: far more than one Redis decides in a second, so nearly every
// call is admitted and each call costs a full decision.
const RedisRate = 1_000_000

// A RedisPeer is a rate limiter that keeps its state in Redis. In one
// benchmark, every peer decides the same policy on the same redis-server,
// through the same client: RedisRate (RedisPeers), or FloodLimit per
// FloodPeriod (FloodRedisPeers).
type RedisPeer struct {
	Name string
	// Note is printed beside the peer's figures.
	Note string
	// New returns the peer deciding through c. prefix differs on each call:
	// a peer that can start its Redis keys with it does, so that no run
	// sees the keys of another.
	New func(c redis.UniversalClient, prefix string) (Limiter, error)
}

// RedisPeers lists floodgate first, then its peers.
var RedisPeers = []RedisPeer{
	{Name: "floodgate", New: floodgateOnRedis(fmt.Sprintf("token-bucket %d/1s", RedisRate))},
	{Name: "redis_rate", New: redisRate(redis_rate.PerSecond(RedisRate)),
		Note: "github.com/go-redis/redis_rate/v10: GCRA, one EVALSHA per call (Redis scenarios only)"},
}

// PerDayLimit per day is the policy of BenchmarkRedisPerDay: a per-user
// quota, whose state outlives the benchmark's calls, unlike RedisRate's.
const PerDayLimit = 1000

// RedisPerDayPeers are the Redis peers deciding PerDayLimit per day, with
// a burst of as many.
var RedisPerDayPeers = []RedisPeer{
	{Name: "floodgate", New: floodgateOnRedis(fmt.Sprintf("token-bucket %d/%s", PerDayLimit, 24*time.Hour))},
	{Name: "redis_rate", New: redisRate(redis_rate.Limit{Rate: PerDayLimit, Burst: PerDayLimit, Period: 24 * time.Hour})},
}

// floodgateOnRedis returns the constructor of floodgate with package
// redisstore deciding policy: Redis's clock and the store's defaults (calls
// that arrive together share one script call) but for opts.
func floodgateOnRedis(policy string, opts ...redisstore.Option) func(redis.UniversalClient, string) (Limiter, error) {
	p := algo.MustParsePolicy(policy)
	return func(c redis.UniversalClient, prefix string) (Limiter, error) {
		s, err := redisstore.New(c, append([]redisstore.Option{redisstore.WithPrefix(prefix)}, opts...)...)
		if err != nil {
			return nil, err
		}
		l, err := floodgate.NewLimiter(p, floodgate.WithStore(s))
		if err != nil {
			s.Close()
			return nil, err
		}
		return floodgateLimiter{l: l, stop: func() { s.Close() }}, nil
	}
}

// github.com/go-redis/redis_rate/v10, whose keys are always "rate:" + key.

type redisRateLimiter struct {
	l     *redis_rate.Limiter
	limit redis_rate.Limit
}

// redisRate returns the constructor of redis_rate deciding limit.
func redisRate(limit redis_rate.Limit) func(redis.UniversalClient, string) (Limiter, error) {
	return func(c redis.UniversalClient, _ string) (Limiter, error) {
		return redisRateLimiter{redis_rate.NewLimiter(c), limit}, nil
	}
}

func (r redisRateLimiter) Allow(key string) (bool, error) {
	res, err := r.l.Allow(ctx, key, r.limit)
	if err != nil {
		return false, err
	}
	return res.Allowed > 0, nil
}

func (r redisRateLimiter) Close() {}
