package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate/floodgate/internal/redistest"
)

// ServiceCallers are the numbers of concurrent callers of the service
// scenarios, and ServiceBatches the numbers of checks per request.
var (
	ServiceCallers = []int{1, 16, 64}
	ServiceBatches = []int{1, 100}
)

// BenchmarkService: each service peer runs one instance in this process on
// loopback; callers=N goroutines share b.N requests of batch=M checks on
// keys picked at random among ServiceKeys, each check decided on its own.
// decisions/s counts checks; p99-µs is the 99th percentile of a request's
// latency; cpu-ns/op is this process's CPU time per check.
func BenchmarkService(b *testing.B) {
	for _, batch := range ServiceBatches {
		for _, callers := range ServiceCallers {
			for _, p := range ServicePeers {
				b.Run(fmt.Sprintf("batch=%d/callers=%d/%s", batch, callers, p.Name), func(b *testing.B) {
					c, stop, err := p.Start()
					if err != nil {
						b.Fatal(err)
					}
					defer stop()
					runService(b, c, callers, batch, usageMeter{m: redistest.NewMeter(), perCall: batch})
				})
			}
		}
	}
}

// runService sends b.N requests of batch checks from callers goroutines,
// after a few untimed ones each, and reports decisions/s (of the requests
// answered without error), p99-µs, the fraction admitted and what meters
// measure. It fails b on an error in the warm-up; errors in the timed part
// (a store call that outlasts floodgate serve's store timeout on a loaded
// machine) are reported in err/op, which cmd/ratios warns of, and logged.
func runService(b *testing.B, c ServiceClient, callers, batch int, meters ...meter) {
	ctx := context.Background()
	keys := make([]string, ServiceKeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("user:%d", i)
	}
	var admitted, errs atomic.Int64
	var firstErr atomic.Value
	lat := make([][]time.Duration, callers)
	var warm, done sync.WaitGroup
	warm.Add(callers)
	start := make(chan struct{})
	for i := range callers {
		calls := b.N / callers
		if i < b.N%callers {
			calls++
		}
		lat[i] = make([]time.Duration, 0, calls)
		done.Go(func() {
			r := newRNG()
			req := make([]string, batch)
			send := func() (time.Duration, error) {
				for j := range req {
					req[j] = keys[r.intn(ServiceKeys)]
				}
				t := time.Now()
				n, err := c.Check(ctx, req)
				admitted.Add(int64(n))
				return time.Since(t), err
			}
			for range 3 {
				if _, err := send(); err != nil {
					firstErr.CompareAndSwap(nil, err.Error())
				}
			}
			warm.Done()
			<-start
			for range calls {
				d, err := send()
				if err != nil {
					firstErr.CompareAndSwap(nil, err.Error())
					errs.Add(1)
				}
				lat[i] = append(lat[i], d)
			}
		})
	}
	warm.Wait()
	if e := firstErr.Load(); e != nil {
		b.Fatalf("warming up: %v", e)
	}
	admitted.Store(0)
	for _, m := range meters {
		m.start(b)
	}
	b.ResetTimer()
	close(start)
	done.Wait()
	b.StopTimer()
	for _, m := range meters {
		m.stop(b)
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	b.ReportMetric(float64((int64(b.N)-errs.Load())*int64(batch))/b.Elapsed().Seconds(), "decisions/s")
	if e := errs.Load(); e > 0 {
		b.ReportMetric(float64(e)/float64(b.N), "err/op")
		b.Logf("%d errors in %d requests; the first: %v", e, b.N, firstErr.Load())
	}
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(float64(admitted.Load())/float64(b.N*batch), "admit/op")
}
