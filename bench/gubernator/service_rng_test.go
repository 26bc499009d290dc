package gubernator

import "sync/atomic"

// rng is bench's splitmix64 generator, one per goroutine.
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
