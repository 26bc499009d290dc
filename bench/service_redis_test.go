package bench

import (
	"fmt"
	"testing"

	"github.com/floodgate/floodgate/internal/redistest"
)

// BenchmarkServiceRedis: as BenchmarkService, but each service peer keeps
// its counters in one redis-server on loopback TCP, started for the
// benchmark (skipped when redis-server is not installed) and flushed before
// each run, and every check is a fixed window of ServiceRate per second
// (envoyFixedConfig). The Redis and CPU figures are per check, as in
// BenchmarkRedis. floodgate starts anew for each run;
// envoyproxy/ratelimit runs once per redis-server and local cache size
// (see envoyRL).
func BenchmarkServiceRedis(b *testing.B) {
	srv := redistest.NewServer(b)
	for _, p := range ServiceRedisPeers {
		if p.Done != nil {
			b.Cleanup(p.Done) // before the redis-server stops: cleanups run last first
		}
	}
	for _, batch := range ServiceBatches {
		for _, callers := range ServiceCallers {
			for _, p := range ServiceRedisPeers {
				b.Run(fmt.Sprintf("batch=%d/callers=%d/%s", batch, callers, p.Name), func(b *testing.B) {
					srv.Flush(b)
					c, stop, err := p.Start(srv.Network(), srv.Addr())
					if err != nil {
						b.Fatal(err)
					}
					defer stop()
					runService(b, c, callers, batch, usageMeter{m: redistest.NewMeter(srv), perCall: batch})
				})
			}
		}
	}
}
