package meter

import (
	"math"
	"math/bits"
	"strconv"
	"time"
)

// Never is the longest time.Duration. TimeToSubmit returns it when waiting
// can never make room for one more unit (the reserved units alone fill the
// capacity), and every function of this package that returns a Duration
// saturates at Never instead of overflowing. Code that sleeps for the result
// without checking waits forever rather than spinning.
const Never = time.Duration(math.MaxInt64)

// Rate is a drain rate: Units units every Per.
//
// BDE expresses rates as whole units per second; Rate generalises that so
// that rates such as 1 unit per hour or 7 units per 2 seconds are exact.
// Rates are compared by value: Rate{3, time.Second} and
// Rate{6, 2 * time.Second} drain identically but are not ==.
//
// A valid Rate has Units > 0 and Per > 0. The zero Rate is not valid;
// constructors reject it with an error wrapping ErrInvalidRate.
type Rate struct {
	// Units is the number of units drained every Per.
	Units uint64
	// Per is the period over which Units drain.
	Per time.Duration
}

// PerSecond returns the rate of units units per second, the only kind of
// rate BDE's balb::LeakyBucket knows.
func PerSecond(units uint64) Rate { return Rate{Units: units, Per: time.Second} }

// String returns the rate as UNITS/PERIOD with the period in its largest
// whole unit, such as "512/1s", "1/1h" or "7/2s".
func (r Rate) String() string {
	return strconv.FormatUint(r.Units, 10) + "/" + formatPeriod(r.Per)
}

// valid reports whether r can drain a bucket.
func (r Rate) valid() bool { return r.Units > 0 && r.Per > 0 }

// drain returns how many whole units r drains in dt (dt >= 0) when carry
// (in 1/Per units, less than Per) has been drained already, and the new
// carry: floor((carry + dt*Units) / Per) and its remainder. ok is false when
// the quotient does not fit in a uint64; units is then math.MaxUint64.
//
// dt*Units is below 2^127, so the 128-bit sum cannot overflow.
func (r Rate) drain(dt time.Duration, carry uint64) (units, rem uint64, ok bool) {
	hi, lo := bits.Mul64(uint64(dt), r.Units)
	lo, c := bits.Add64(lo, carry, 0)
	hi += c
	per := uint64(r.Per)
	if hi >= per {
		return math.MaxUint64, 0, false
	}
	units, rem = bits.Div64(hi, lo, per)
	return units, rem, true
}

// unusedIn returns floor(dt*Units/Per) - used for dt >= 0, computed
// exactly and clamped to [0, math.MaxUint64].
func (r Rate) unusedIn(dt time.Duration, used uint64) uint64 {
	if !r.valid() {
		return 0
	}
	hi, lo := bits.Mul64(uint64(dt), r.Units)
	per := uint64(r.Per)
	qhi, rhi := hi/per, hi%per
	qlo, _ := bits.Div64(rhi, lo, per)
	qlo, borrow := bits.Sub64(qlo, used, 0)
	switch {
	case borrow > qhi: // below 0
		return 0
	case qhi-borrow > 0:
		return math.MaxUint64
	}
	return qlo
}

// span returns the time r takes to drain n units of which carry (in 1/Per
// units, at most n*Per) have drained already: (n*Per - carry) / Units
// nanoseconds, rounded up or down, saturating at Never.
func (r Rate) span(n, carry uint64, roundUp bool) time.Duration {
	hi, lo := bits.Mul64(n, uint64(r.Per))
	lo, b := bits.Sub64(lo, carry, 0)
	hi -= b
	if hi >= r.Units {
		return Never
	}
	q, rem := bits.Div64(hi, lo, r.Units)
	if roundUp && rem != 0 {
		q++
	}
	if q > math.MaxInt64 {
		return Never
	}
	return time.Duration(q)
}

// rescale converts carry, a fraction of a unit in 1/from units (carry <
// from), to 1/to units, rounding down: floor(carry*to/from) < to.
func rescale(carry uint64, from, to time.Duration) uint64 {
	switch {
	case from == to:
		return carry
	case from <= 0: // the zero LeakyBucket, which has no carry
		return 0
	}
	hi, lo := bits.Mul64(carry, uint64(to))
	q, _ := bits.Div64(hi, lo, uint64(from)) // hi < from because carry < from
	return q
}

// DrainTime returns the time rate r takes to drain units units, in whole
// nanoseconds rounded up when roundUp is true and down otherwise. It
// returns 0 for zero units and saturates at Never, which it also returns
// for units > 0 at a rate that is not valid (such a rate never drains).
func DrainTime(units uint64, r Rate, roundUp bool) time.Duration {
	switch {
	case units == 0:
		return 0
	case !r.valid():
		return Never
	}
	return r.span(units, 0, roundUp)
}

// TimeWindow returns the time window over which a bucket of the given
// capacity draining at r approximates a moving total: the time r takes to
// drain capacity units, rounded up to a whole nanosecond and at least 1ns.
// It saturates at Never, which it also returns for a rate that is not
// valid.
//
// Rounding up (as BDE's implementation does, though its documentation says
// "rounded down") makes the window round-trip: CapacityFor(r,
// TimeWindow(r, c)) == c for every capacity c >= 1 whose window is less than
// Never, when r is at most one unit per nanosecond.
func TimeWindow(r Rate, capacity uint64) time.Duration {
	if !r.valid() {
		return Never
	}
	return max(r.span(capacity, 0, true), 1)
}

// CapacityFor returns the capacity of a bucket draining at r that
// approximates a moving total over window: the whole units r drains in
// window, rounded down, and at least 1. It saturates at math.MaxUint64, and
// returns 1 for a rate that is not valid or a window that is not positive.
func CapacityFor(r Rate, window time.Duration) uint64 {
	if !r.valid() || window <= 0 {
		return 1
	}
	units, _, _ := r.drain(window, 0)
	return max(units, 1)
}

// SupportsRateLimitsExactly reports whether a RateLimiter built with these
// arguments would report back the same windows from SustainedWindow and
// PeakWindow: whether both rates and windows are valid and each window is
// exactly the TimeWindow of the capacity CapacityFor gives it. A window that
// is not a whole number of the rate's unit intervals is rounded by the
// capacity, for example 3 units per second over 1.5s gives capacity 4 and a
// window of 1.333333334s.
func SupportsRateLimitsExactly(sustained Rate, sustainedWindow time.Duration, peak Rate, peakWindow time.Duration) bool {
	return windowExact(sustained, sustainedWindow) && windowExact(peak, peakWindow)
}

func windowExact(r Rate, window time.Duration) bool {
	return r.valid() && window > 0 && TimeWindow(r, CapacityFor(r, window)) == window
}

// addSat returns a+b, or math.MaxUint64 when the sum overflows.
func addSat(a, b uint64) uint64 {
	s, c := bits.Add64(a, b, 0)
	if c != 0 {
		return math.MaxUint64
	}
	return s
}

// formatPeriod writes d in its largest whole unit, so that an hour reads
// "1h" rather than "1h0m0s"; other durations use time.Duration's form.
func formatPeriod(d time.Duration) string {
	if d <= 0 {
		return d.String()
	}
	for _, u := range [...]struct {
		d    time.Duration
		name string
	}{{time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}, {time.Millisecond, "ms"}, {time.Microsecond, "us"}, {1, "ns"}} {
		if d%u.d == 0 {
			return strconv.FormatInt(int64(d/u.d), 10) + u.name
		}
	}
	return d.String() // unreachable: every d is a whole number of ns
}
