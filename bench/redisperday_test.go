package bench

import (
	"fmt"
	"testing"

	"github.com/floodgate/floodgate/internal/redistest"
)

// BenchmarkRedisPerDay: as BenchmarkRedis on RedisKeys keys, but each peer
// decides PerDayLimit per day (RedisPerDayPeers) on keys whose state Redis
// holds: before a peer's first run, untimed, it decides once on every key,
// and it keeps its limiter, and so its keys, through its runs, so that
// every timed decision reads and writes a state that exists, as a
// per-user quota does. (Under RedisRate a key's state expires a
// microsecond after its decision, and every call starts a key afresh.)
// The state of a key decided once lasts a PerDayLimit-th of a day, 86 s:
// longer than a peer's runs at short settings.
func BenchmarkRedisPerDay(b *testing.B) {
	srv := redistest.NewServer(b)
	c := benchClient(b, srv)
	keys := benchKeys()[:RedisKeys]
	for _, p := range RedisPerDayPeers {
		var l Limiter
		for _, callers := range RedisCallers {
			b.Run(fmt.Sprintf("keys=%d/callers=%d/%s", len(keys), callers, p.Name), func(b *testing.B) {
				if l == nil {
					var err error
					if l, err = p.New(c, fmt.Sprintf("bench%d:", prefixes.Add(1))); err != nil {
						b.Fatal(err)
					}
					warmKeys(b, l, keys)
				}
				runCallers(b, l, callers, keys, redisMeter(srv))
			})
		}
		if l != nil {
			l.Close()
		}
	}
}

// warmKeys decides once on every key, from up to FloodCallers goroutines,
// failing b on a denial or when a key's calls fail floodErrors times.
func warmKeys(b *testing.B, l Limiter, keys []string) {
	err := eachKey(keys, func(k string) error {
		for errs := 1; ; errs++ {
			ok, err := l.Allow(k)
			switch {
			case err == nil && !ok:
				return fmt.Errorf("%s: denied its first call", k)
			case err == nil:
				return nil
			case errs == floodErrors:
				return fmt.Errorf("%s: %w", k, err)
			}
		}
	})
	if err != nil {
		b.Fatalf("warming the keys: %v", err)
	}
}
