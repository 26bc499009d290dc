package meter

import (
	"fmt"
	"time"
)

// RateLimiter monitors a resource against two limits at once: a sustained
// rate averaged over a long window and a peak rate averaged over a short
// one. It is two LeakyBuckets fed the same units: the sustained bucket
// drains at the sustained rate and holds CapacityFor(sustained,
// sustainedWindow) units, the peak bucket likewise for the peak rate and
// window. One more unit is allowed when it fits in both.
//
// Use it as a LeakyBucket: WouldExceedBandwidth(now) before consuming,
// Submit(n) after, TimeToSubmit(now) for how long to wait. Everything said
// of LeakyBucket about time (no clock is read; a time earlier than the last
// update drains nothing), saturation and errors holds here too.
//
// Create a RateLimiter with NewRateLimiter. The zero RateLimiter never has
// room, like the zero LeakyBucket, until SetRateLimits configures it. A
// RateLimiter is not safe for concurrent use: callers that share one guard
// it with a mutex.
type RateLimiter struct {
	sustained LeakyBucket
	peak      LeakyBucket
}

// NewRateLimiter returns a rate limiter allowing sustained units over any
// sustainedWindow and peak units over any peakWindow (approximately: see
// the package documentation), with both buckets empty and last updated at
// now. It fails with an error wrapping ErrInvalidRate for a rate with zero
// Units or a Per that is not positive, and ErrInvalidWindow for a window that
// is not positive. Nothing requires the peak rate to exceed the sustained
// one.
func NewRateLimiter(sustained Rate, sustainedWindow time.Duration, peak Rate, peakWindow time.Duration, now time.Time) (*RateLimiter, error) {
	if err := checkLimits(sustained, sustainedWindow, peak, peakWindow); err != nil {
		return nil, err
	}
	return &RateLimiter{
		sustained: LeakyBucket{rate: sustained, capacity: CapacityFor(sustained, sustainedWindow), last: now, statsStart: now},
		peak:      LeakyBucket{rate: peak, capacity: CapacityFor(peak, peakWindow), last: now, statsStart: now},
	}, nil
}

// SetRateLimits sets both rates and windows, keeping the units in the
// buckets and the reservations (see LeakyBucket.SetRateAndCapacity). It
// fails, changing nothing, for the arguments NewRateLimiter rejects.
func (l *RateLimiter) SetRateLimits(sustained Rate, sustainedWindow time.Duration, peak Rate, peakWindow time.Duration) error {
	if err := checkLimits(sustained, sustainedWindow, peak, peakWindow); err != nil {
		return err
	}
	// Both are valid, so neither call can fail.
	_ = l.sustained.SetRateAndCapacity(sustained, CapacityFor(sustained, sustainedWindow))
	_ = l.peak.SetRateAndCapacity(peak, CapacityFor(peak, peakWindow))
	return nil
}

func checkLimits(sustained Rate, sustainedWindow time.Duration, peak Rate, peakWindow time.Duration) error {
	for _, lim := range [...]struct {
		name   string
		rate   Rate
		window time.Duration
	}{{"sustained", sustained, sustainedWindow}, {"peak", peak, peakWindow}} {
		if err := checkRate(lim.rate); err != nil {
			return fmt.Errorf("meter: %s limit: %w", lim.name, err)
		}
		if lim.window <= 0 {
			return fmt.Errorf("meter: %s limit: %w %v: must be positive", lim.name, ErrInvalidWindow, lim.window)
		}
	}
	return nil
}

// WouldExceedBandwidth updates both buckets to now and reports whether one
// more unit would overflow either of them.
func (l *RateLimiter) WouldExceedBandwidth(now time.Time) bool {
	// Not short-circuited, so that both buckets are always updated.
	s := l.sustained.WouldOverflow(now)
	p := l.peak.WouldOverflow(now)
	return s || p
}

// TimeToSubmit returns how long after now one more unit fits in both
// buckets: the larger of the two buckets' LeakyBucket.TimeToSubmit, each of
// which updates its bucket to now only when the unit does not fit at its last
// update. It returns Never when the reservations alone fill either capacity.
func (l *RateLimiter) TimeToSubmit(now time.Time) time.Duration {
	return max(l.sustained.TimeToSubmit(now), l.peak.TimeToSubmit(now))
}

// Submit adds units consumed units to both buckets (see
// LeakyBucket.Submit).
func (l *RateLimiter) Submit(units uint64) {
	l.sustained.Submit(units)
	l.peak.Submit(units)
}

// Reserve reserves units units in both buckets (see LeakyBucket.Reserve).
func (l *RateLimiter) Reserve(units uint64) {
	l.sustained.Reserve(units)
	l.peak.Reserve(units)
}

// SubmitReserved submits units reserved units to both buckets. It fails
// with an error wrapping ErrNotReserved, changing nothing, when units
// exceeds UnitsReserved.
func (l *RateLimiter) SubmitReserved(units uint64) error {
	if err := l.sustained.checkReserved(units); err != nil {
		return err
	}
	_ = l.sustained.SubmitReserved(units) // both hold the same reservations
	_ = l.peak.SubmitReserved(units)
	return nil
}

// CancelReserved drops units reserved units from both buckets. It fails
// with an error wrapping ErrNotReserved, changing nothing, when units
// exceeds UnitsReserved.
func (l *RateLimiter) CancelReserved(units uint64) error {
	if err := l.sustained.checkReserved(units); err != nil {
		return err
	}
	_ = l.sustained.CancelReserved(units)
	_ = l.peak.CancelReserved(units)
	return nil
}

// UpdateState updates both buckets to now (see LeakyBucket.UpdateState).
func (l *RateLimiter) UpdateState(now time.Time) {
	l.sustained.UpdateState(now)
	l.peak.UpdateState(now)
}

// Reset empties both buckets, drops every reservation, zeroes the
// statistics and makes now the last update and statistics start time (see
// LeakyBucket.Reset).
func (l *RateLimiter) Reset(now time.Time) {
	l.sustained.Reset(now)
	l.peak.Reset(now)
}

// ResetStatistics zeroes the statistics and starts a new statistics
// interval at the sustained bucket's last update time.
func (l *RateLimiter) ResetStatistics() { l.sustained.ResetStatistics() }

// Statistics returns the sustained bucket's statistics (see
// LeakyBucket.Statistics): the units submitted between StatisticsStartTime
// and the sustained bucket's last update, and the units that could have
// been consumed at the sustained rate over that interval but were not.
func (l *RateLimiter) Statistics() (submitted, unused uint64) { return l.sustained.Statistics() }

// StatisticsStartTime returns the start of the interval Statistics reports
// on.
func (l *RateLimiter) StatisticsStartTime() time.Time { return l.sustained.StatisticsStartTime() }

// LastUpdateTime returns the later of the two buckets' last update times
// (TimeToSubmit may update one bucket and not the other).
func (l *RateLimiter) LastUpdateTime() time.Time {
	s, p := l.sustained.LastUpdateTime(), l.peak.LastUpdateTime()
	if p.After(s) {
		return p
	}
	return s
}

// SustainedRate returns the sustained rate.
func (l *RateLimiter) SustainedRate() Rate { return l.sustained.DrainRate() }

// SustainedWindow returns the window the sustained bucket approximates,
// TimeWindow(SustainedRate(), SustainedCapacity()). It equals the window
// given when SupportsRateLimitsExactly holds and differs by the capacity's
// rounding otherwise.
func (l *RateLimiter) SustainedWindow() time.Duration {
	return TimeWindow(l.sustained.DrainRate(), l.sustained.Capacity())
}

// SustainedCapacity returns the sustained bucket's capacity in units.
func (l *RateLimiter) SustainedCapacity() uint64 { return l.sustained.Capacity() }

// SustainedUnitsInBucket returns the submitted units in the sustained
// bucket as of its last update (see LeakyBucket.UnitsInBucket).
func (l *RateLimiter) SustainedUnitsInBucket() uint64 { return l.sustained.UnitsInBucket() }

// PeakRate returns the peak rate.
func (l *RateLimiter) PeakRate() Rate { return l.peak.DrainRate() }

// PeakWindow returns the window the peak bucket approximates,
// TimeWindow(PeakRate(), PeakCapacity()); see SustainedWindow.
func (l *RateLimiter) PeakWindow() time.Duration {
	return TimeWindow(l.peak.DrainRate(), l.peak.Capacity())
}

// PeakCapacity returns the peak bucket's capacity in units.
func (l *RateLimiter) PeakCapacity() uint64 { return l.peak.Capacity() }

// PeakUnitsInBucket returns the submitted units in the peak bucket as of its
// last update (see LeakyBucket.UnitsInBucket).
func (l *RateLimiter) PeakUnitsInBucket() uint64 { return l.peak.UnitsInBucket() }

// UnitsReserved returns the reserved units, the same in both buckets.
func (l *RateLimiter) UnitsReserved() uint64 { return l.sustained.UnitsReserved() }
