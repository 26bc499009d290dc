package bench

import (
	"hash/maphash"
	"math/bits"
	"sync/atomic"

	"github.com/floodgate/floodgate/clock"
)

// floor is not a rate limiter: it is the least work that any exact keyed
// limiter does per decision, timed beside the limiters so that every run
// shows how far above it each one is. It reads floodgate's default clock
// once (clock.UnixNano), hashes the key with hash/maphash, and advances
// one 8-byte word, the bucket's theoretical arrival time (GCRA's TAT), with
// an atomic load and a compare-and-swap, as a token bucket of floodgate's
// policy for the quota would; a denial only loads the word.
//
// There is one word per hash bucket, in an array of the power of two at or
// above NumKeys: no key is stored or compared, keys that share a bucket
// share its quota, nothing is ever evicted. It is therefore wrong for any
// two keys that collide, and its bytes per key mean nothing (Peer.Floor
// keeps it out of BenchmarkMemory).
//
// Why it is a floor: the clock read orders execution (the vDSO's rdtsc
// behind a fence), so the cache misses of one decision (the key's string
// header, its bytes, its state) cannot overlap the next decision's. With
// 1,000,000 keys that is about three dependent misses to memory per
// decision, which any limiter that reads the clock per decision and keeps
// per-key state in memory pays; on one key, what is left above the clock
// read is the hash and the compare-and-swap.
type floor struct {
	seed  maphash.Seed
	mask  uint64
	words []atomic.Int64
	t     int64 // the emission interval, PERIOD/LIMIT, in ns
	tau   int64 // burst * t: how far ahead of now the TAT may run
}

func newFloor(q Quota) Limiter {
	p := floodgatePolicy(q)
	n := 1 << bits.Len(NumKeys-1)
	t := int64(p.Period()) / p.Limit()
	return &floor{seed: maphash.MakeSeed(), mask: uint64(n - 1), words: make([]atomic.Int64, n), t: t, tau: p.Burst() * t}
}

// Allow admits a request when the bucket's TAT, advanced by one emission
// interval, is at most tau ahead of now.
func (f *floor) Allow(key string) (bool, error) {
	now := clock.UnixNano()
	w := &f.words[maphash.String(f.seed, key)&f.mask]
	for {
		tat := w.Load()
		next := max(tat, now) + f.t
		if next-now > f.tau {
			return false, nil
		}
		if w.CompareAndSwap(tat, next) {
			return true, nil
		}
	}
}

func (f *floor) Close() {}
