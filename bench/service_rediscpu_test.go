package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/server"
)

// BenchmarkServiceRedisCPU: BenchmarkServiceRedis's fixed windows at 100
// descriptors a request on keys picked at random among ServiceKeys, each
// caller drawing its own random sequence (a PCG seeded by the run and the
// caller), with what the redis-server spent per descriptor (redistest.Meter:
// redis-µs/op, redis-cmds/op, redis-bytes/op; cpu-ns/op is this process,
// peers included) and checks/s. envoy-ratelimit-cache is upstream with its
// local cache on (LOCAL_CACHE_SIZE_IN_BYTES, 64 MiB).
func BenchmarkServiceRedisCPU(b *testing.B) {
	srv := redistest.NewServer(b)
	peers := append(ServiceRedisPeers[:len(ServiceRedisPeers):len(ServiceRedisPeers)], ServiceRedisPeer{
		Name: "floodgate-no-deny-cache",
		Start: func(network, addr string) (ServiceClient, func(), error) {
			c, stop, err := startFloodgateRLS(redisURL(network, addr), envoyFixedConfig, func(o *server.Options) { o.DenyCacheBytes = -1 })
			return floodgateService{c}, stop, err
		},
	}, ServiceRedisPeer{
		Name: "envoy-ratelimit-cache", Done: stopEnvoyRateLimit,
		Start: func(network, addr string) (ServiceClient, func(), error) {
			c, stop, err := startEnvoyRLS(network, addr, 64<<20)
			return floodgateService{c}, stop, err
		},
	})
	for _, p := range peers {
		if p.Done != nil {
			b.Cleanup(p.Done)
		}
	}
	const batch, callers = 100, 4
	for _, p := range peers {
		b.Run(fmt.Sprintf("batch=%d/callers=%d/%s", batch, callers, p.Name), func(b *testing.B) {
			srv.Flush(b)
			c, stop, err := p.Start(srv.Network(), srv.Addr())
			if err != nil {
				b.Fatal(err)
			}
			defer stop()
			runServiceCPU(b, srv, c, callers, batch)
		})
	}
}

// runServiceCPU sends b.N requests of batch checks from callers
// goroutines, each with its own random sequence, after one untimed request
// each, and reports the Meter's usage per check and checks/s.
func runServiceCPU(b *testing.B, srv *redistest.Server, c ServiceClient, callers, batch int) {
	ctx := context.Background()
	keys := make([]string, ServiceKeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("user:%d", i)
	}
	var firstErr error
	var mu sync.Mutex
	fail := func(err error) {
		mu.Lock()
		firstErr = err
		mu.Unlock()
	}
	m := redistest.NewMeter(srv)
	var warm, done sync.WaitGroup
	warm.Add(callers)
	start := make(chan struct{})
	for i := range callers {
		calls := b.N / callers
		if i < b.N%callers {
			calls++
		}
		done.Go(func() {
			r := rand.New(rand.NewPCG(uint64(b.N), uint64(i)))
			req := make([]string, batch)
			send := func() {
				for j := range req {
					req[j] = keys[r.IntN(len(keys))]
				}
				if _, err := c.Check(ctx, req); err != nil {
					fail(err)
				}
			}
			send()
			warm.Done()
			<-start
			for range calls {
				send()
			}
		})
	}
	warm.Wait()
	m.Start(b)
	b.ResetTimer()
	close(start)
	done.Wait()
	b.StopTimer()
	u := m.Stop(b)
	if firstErr != nil {
		b.Fatal(firstErr)
	}
	u.Report(b, b.N*batch)
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "checks/s")
}
