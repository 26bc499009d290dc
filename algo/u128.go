package algo

import "math/bits"

// u128 is an unsigned 128-bit integer, enough for every product in this
// package: a count (at most MaxLimit, below 2^50) times a span in
// nanoseconds (below 2^63) stays below 2^113.
type u128 struct{ hi, lo uint64 }

func mul64(a, b uint64) u128 {
	hi, lo := bits.Mul64(a, b)
	return u128{hi, lo}
}

func (x u128) add(y u128) u128 {
	lo, c := bits.Add64(x.lo, y.lo, 0)
	return u128{x.hi + y.hi + c, lo}
}

// sub returns x-y; the caller guarantees x >= y.
func (x u128) sub(y u128) u128 {
	lo, b := bits.Sub64(x.lo, y.lo, 0)
	return u128{x.hi - y.hi - b, lo}
}

func (x u128) less(y u128) bool {
	return x.hi < y.hi || x.hi == y.hi && x.lo < y.lo
}

// div64 returns x/d and x%d. A quotient that does not fit in 64 bits
// saturates to MaxUint64 (with remainder 0) instead of panicking; callers
// only divide where the bounds on policies and times rule that out.
func (x u128) div64(d uint64) (q, r uint64) {
	if x.hi >= d {
		return ^uint64(0), 0
	}
	return bits.Div64(x.hi, x.lo, d)
}

// ceilDiv64 returns x/d rounded up.
func (x u128) ceilDiv64(d uint64) uint64 {
	q, r := x.div64(d)
	if r != 0 {
		q++
	}
	return q
}
