package bench

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate/floodgate/clock"
)

// benchKeys returns the keyed scenarios' keys, "user:0" to "user:999999",
// made once per process so that neither their making nor their memory is
// measured.
var benchKeys = sync.OnceValue(func() []string {
	keys := make([]string, NumKeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("user:%d", i)
	}
	return keys
})

// oneKey is the key of the one-key scenarios.
var oneKey = []string{"user:1"}

var modes = []string{"serial", "parallel"}

// rng is splitmix64: a cheap generator, one per goroutine.
type rng uint64

var seeds atomic.Uint64

// newRNG returns a generator whose sequence starts at a point unrelated to
// any other's: its seed, a counter, goes through the mixing function.
// (Seeded with the counter times the step, as it once was, each caller
// drew the sequence of the one before, one step on.)
func newRNG() rng {
	seed := rng(seeds.Add(1))
	return rng(seed.next())
}

func (r *rng) next() uint64 {
	*r += 0x9e3779b97f4a7c15
	z := uint64(*r)
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// intn returns a number in [0, n), n < 2^32, by multiply and shift.
func (r *rng) intn(n uint64) uint64 { return (r.next() >> 32) * n >> 32 }

// run calls l.Allow b.N times, serially or from b.RunParallel's
// goroutines (GOMAXPROCS of them), on keys[0] if there is one key and on
// keys picked at random otherwise, and reports the fraction admitted.
func run(b *testing.B, l Limiter, parallel bool, keys []string) {
	b.ReportAllocs()
	var allowed, errs atomic.Int64
	var firstErr atomic.Value
	n := uint64(len(keys))
	b.ResetTimer()
	if parallel {
		b.RunParallel(func(pb *testing.PB) {
			r := newRNG()
			var a, e int64
			for pb.Next() {
				k := keys[0]
				if n > 1 {
					k = keys[r.intn(n)]
				}
				ok, err := l.Allow(k)
				if ok {
					a++
				}
				if err != nil {
					firstErr.CompareAndSwap(nil, err.Error())
					e++
				}
			}
			allowed.Add(a)
			errs.Add(e)
		})
	} else {
		r := newRNG()
		var a, e int64
		for range b.N {
			k := keys[0]
			if n > 1 {
				k = keys[r.intn(n)]
			}
			ok, err := l.Allow(k)
			if ok {
				a++
			}
			if err != nil {
				firstErr.CompareAndSwap(nil, err.Error())
				e++
			}
		}
		allowed.Add(a)
		errs.Add(e)
	}
	b.StopTimer()
	report(b, allowed.Load(), errs.Load(), int64(b.N), firstErr.Load())
}

// report reports the fraction of calls admitted (admit/op) and, when there
// were errors, their fraction (err/op) and the first one.
func report(b *testing.B, allowed, errs, calls int64, firstErr any) {
	b.ReportMetric(float64(allowed)/float64(calls), "admit/op")
	if errs > 0 {
		b.ReportMetric(float64(errs)/float64(calls), "err/op")
		b.Logf("%d errors in %d calls; the first: %v", errs, calls, firstErr)
	}
}

// checkEvictions reports floodgate's evictions, which the keyed scenarios
// are sized to avoid.
func checkEvictions(b *testing.B, l Limiter) {
	if e, ok := l.(interface{ Evictions() uint64 }); ok {
		if n := e.Evictions(); n > 0 {
			b.ReportMetric(float64(n), "evictions")
			b.Logf("floodgate evicted %d keys", n)
		}
	}
}

// BenchmarkOneKey: every call on one key, serially and from GOMAXPROCS
// goroutines; allowed: a quota so high that nearly every call is admitted;
// denied: 10 per hour, so nearly every call is denied. A new limiter for
// each b.N.
func BenchmarkOneKey(b *testing.B) {
	for _, sc := range []struct {
		name string
		q    Quota
	}{{"allowed", High}, {"denied", Low}} {
		for _, mode := range modes {
			for _, p := range Peers {
				if sc.q != High && !p.Denies {
					continue
				}
				b.Run(sc.name+"/"+mode+"/"+p.Name, func(b *testing.B) {
					l := p.New(sc.q)
					defer l.Close()
					run(b, l, mode == "parallel", oneKey)
				})
			}
		}
	}
}

// BenchmarkClock: the clock reads under the one-key figures, measured in
// the same run: time.Now, which x/time/rate and uber read on each
// decision, and floodgate's default clock (clock.UnixNano). cmd/ratios
// subtracts each from the serial one-key figures of the peers that read it
// (ClockReads).
func BenchmarkClock(b *testing.B) {
	var sink int64
	b.Run("time.Now", func(b *testing.B) {
		for b.Loop() {
			sink += time.Now().UnixNano()
		}
	})
	b.Run("floodgate", func(b *testing.B) {
		for b.Loop() {
			sink += clock.UnixNano()
		}
	})
	runtime.KeepAlive(sink)
}

// BenchmarkKeys1M: calls on keys picked at random among 1,000,000, all of
// them touched once beforehand (untimed) so that every call finds its key
// among 1,000,000 held; the PerUser quota (1000 per day) admits nearly
// every call. One limiter per peer and mode, kept across b.N.
func BenchmarkKeys1M(b *testing.B) {
	keys := benchKeys()
	for _, mode := range modes {
		for _, p := range Peers {
			if !p.Keyed {
				continue
			}
			var l Limiter
			b.Run(mode+"/"+p.Name, func(b *testing.B) {
				if l == nil {
					l = p.New(PerUser)
					for _, k := range keys {
						if _, err := l.Allow(k); err != nil {
							b.Fatal(err)
						}
					}
				}
				run(b, l, mode == "parallel", keys)
				checkEvictions(b, l)
			})
			if l != nil {
				l.Close()
			}
			l = nil
			settledHeap() // free it before the next peer's run
		}
	}
}

// settledHeap returns the heap in use once garbage collection has freed
// all it can: it collects until the heap stops shrinking, pausing between
// collections so that finalizers run (ulule's memory store stops its
// cleaner goroutine, which holds the store, from a finalizer, so a store
// dropped by the previous iteration is freed only by a later collection).
func settledHeap() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	for range 10 {
		prev := ms.HeapAlloc
		time.Sleep(10 * time.Millisecond)
		runtime.GC()
		runtime.ReadMemStats(&ms)
		if ms.HeapAlloc+1<<20 > prev { // shrank by less than 1 MiB
			break
		}
	}
	return ms.HeapAlloc
}

// BenchmarkMemory: the heap a new limiter retains after one call on each of
// 1,000,000 keys (PerUser quota), per key (B/key), measured by settledHeap
// before and after; the key strings exist before and after, so are not
// counted (a peer that copies them is charged for its copies). ns/op is the
// time to make the limiter and touch the 1,000,000 keys. Every keyed peer
// but the floor (Peer.Floor).
func BenchmarkMemory(b *testing.B) {
	keys := benchKeys()
	for _, p := range Peers {
		if !p.Keyed || p.Floor {
			continue
		}
		b.Run(p.Name, func(b *testing.B) {
			b.ReportAllocs()
			var retained float64
			var allowed, errs int64
			var firstErr any
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				before := settledHeap()
				b.StartTimer()
				l := p.New(PerUser)
				for _, k := range keys {
					ok, err := l.Allow(k)
					if ok {
						allowed++
					}
					if err != nil {
						if errs == 0 {
							firstErr = err
						}
						errs++
					}
				}
				b.StopTimer()
				retained += float64(settledHeap()) - float64(before)
				checkEvictions(b, l)
				runtime.KeepAlive(l)
				runtime.KeepAlive(keys)
				l.Close()
				b.StartTimer()
			}
			b.StopTimer()
			b.ReportMetric(retained/float64(b.N)/NumKeys, "B/key")
			report(b, allowed, errs, int64(b.N)*NumKeys, firstErr)
		})
		settledHeap()
	}
}
