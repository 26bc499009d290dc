package meter

import (
	"fmt"
	"time"
)

// LeakyBucket monitors the rate at which a resource is consumed: a bucket
// of the given capacity, in units, that drains at a Rate. Consumed units are
// submitted after the fact and drain; reserved units count toward the
// capacity but do not drain until they are submitted. The level may exceed
// the capacity. See the package documentation for the model.
//
// Most callers want WouldOverflow(now) before consuming, Submit(n) after
// consuming n units, and TimeToSubmit(now) to learn how long to wait when
// WouldOverflow reports true.
//
// A LeakyBucket never reads a clock: every method that depends on time takes
// the current time, and the times passed to one bucket must come from one
// clock (any origin). A time earlier than the last update drains nothing
// and leaves the last update time where it is; see UpdateState.
//
// Create a LeakyBucket with NewLeakyBucket. The zero LeakyBucket has no
// rate and a capacity of 0, so it never has room: WouldOverflow always
// reports true and TimeToSubmit returns Never, until SetRateAndCapacity
// configures it. A LeakyBucket is not safe for concurrent use: callers that
// share one guard it with a mutex. Copying a LeakyBucket copies its state.
type LeakyBucket struct {
	rate     Rate
	capacity uint64
	// level is the units in the bucket, counting a partly drained unit as
	// whole; carry (0 <= carry < rate.Per, and 0 when level is 0) is how
	// much of that unit has drained, in 1/rate.Per units. The exact amount
	// of water is level - carry/rate.Per.
	level    uint64
	carry    uint64
	reserved uint64
	last     time.Time // last update
	// Statistics: units submitted since statsStart, and the same count as
	// it was at the last update.
	statsStart        time.Time
	submitted         uint64
	submittedAtUpdate uint64
}

// NewLeakyBucket returns an empty bucket of capacity units draining at
// drain, whose last update and statistics start are now. It fails with an
// error wrapping ErrInvalidRate for a rate with zero Units or a Per that is
// not positive, and ErrInvalidCapacity for a zero capacity.
func NewLeakyBucket(drain Rate, capacity uint64, now time.Time) (*LeakyBucket, error) {
	if err := checkBucket(drain, capacity); err != nil {
		return nil, fmt.Errorf("meter: %w", err)
	}
	return &LeakyBucket{rate: drain, capacity: capacity, last: now, statsStart: now}, nil
}

func checkRate(r Rate) error {
	if !r.valid() {
		return fmt.Errorf("%w %v: units and period must be positive", ErrInvalidRate, r)
	}
	return nil
}

func checkBucket(r Rate, capacity uint64) error {
	if err := checkRate(r); err != nil {
		return err
	}
	if capacity == 0 {
		return fmt.Errorf("%w 0: must be at least 1 unit", ErrInvalidCapacity)
	}
	return nil
}

// Submit adds units consumed units to the bucket, where they start to drain
// from the last update time. The level may exceed the capacity afterwards;
// it saturates at math.MaxUint64 rather than wrapping. Submit takes no time:
// call it after WouldOverflow(now) or UpdateState(now), as the recommended
// use does, so that the units do not drain over time that passed before they
// were consumed.
func (b *LeakyBucket) Submit(units uint64) {
	b.level = addSat(b.level, units)
	b.submitted = addSat(b.submitted, units)
}

// Reserve sets aside units units that count toward the capacity but do not
// drain until SubmitReserved submits them or CancelReserved drops them. The
// bucket may overflow afterwards; the reserved count saturates at
// math.MaxUint64. Reserving effectively shrinks the capacity, so keep
// reservations short.
func (b *LeakyBucket) Reserve(units uint64) {
	b.reserved = addSat(b.reserved, units)
}

// SubmitReserved moves units reserved units into the bucket, where they
// start to drain as if submitted by Submit. It fails with an error wrapping
// ErrNotReserved, changing nothing, when units exceeds UnitsReserved.
func (b *LeakyBucket) SubmitReserved(units uint64) error {
	if err := b.checkReserved(units); err != nil {
		return err
	}
	b.reserved -= units
	b.Submit(units)
	return nil
}

// CancelReserved drops units reserved units. It fails with an error
// wrapping ErrNotReserved, changing nothing, when units exceeds
// UnitsReserved.
func (b *LeakyBucket) CancelReserved(units uint64) error {
	if err := b.checkReserved(units); err != nil {
		return err
	}
	b.reserved -= units
	return nil
}

func (b *LeakyBucket) checkReserved(units uint64) error {
	if units > b.reserved {
		return fmt.Errorf("meter: %w: %d units, %d reserved", ErrNotReserved, units, b.reserved)
	}
	return nil
}

// UpdateState drains the bucket from the last update time to now and makes
// now the last update time. Only whole units leave the bucket; the part of a
// unit drained so far is carried, exactly, to the next update, so many small
// updates drain exactly as much as one large one. An empty bucket stays
// empty and carries nothing: idle time is not saved up.
//
// A now earlier than the last update time drains nothing and leaves the
// last update time unchanged, so the same interval is never drained twice
// when the clock steps back. (BDE moves the last update time back instead,
// which lets a later update drain that interval again and admit more than
// the rate.) An interval longer than Never counts as Never.
//
// UpdateState also closes the statistics interval at the last update time:
// Statistics counts the units submitted before the latest call.
func (b *LeakyBucket) UpdateState(now time.Time) {
	b.submittedAtUpdate = b.submitted
	if !now.After(b.last) {
		return
	}
	units, rem, ok := b.rate.drain(now.Sub(b.last), b.carry)
	if ok && units < b.level {
		b.level -= units
		b.carry = rem
	} else {
		b.level, b.carry = 0, 0
	}
	b.last = now
}

// fits reports whether one more unit fits: whether level + reserved + 1 <=
// capacity, computed without overflow.
func (b *LeakyBucket) fits() bool {
	return b.reserved < b.capacity && b.level < b.capacity-b.reserved
}

// WouldOverflow updates the bucket to now (see UpdateState) and reports
// whether adding one more unit would make the units in the bucket plus the
// units reserved exceed the capacity. It reports true whenever the reserved
// units alone fill the capacity.
func (b *LeakyBucket) WouldOverflow(now time.Time) bool {
	b.UpdateState(now)
	return !b.fits()
}

// TimeToSubmit returns how long after now one more unit fits in the bucket
// (see WouldOverflow), in whole nanoseconds rounded up, so that
// WouldOverflow(now + d) is false and, for d > 0, WouldOverflow(now + d -
// 1ns) is true, if nothing else changes the bucket meanwhile.
//
// When one more unit fits at the last update time it returns 0 without
// updating the bucket. Otherwise it updates the bucket to now first (see
// UpdateState) and returns 0 if the unit fits then. It returns Never when
// the reserved units alone fill the capacity, because no amount of draining
// makes room then, and saturates at Never. When now is earlier than the last
// update time the result still counts from now.
func (b *LeakyBucket) TimeToSubmit(now time.Time) time.Duration {
	if b.fits() {
		return 0
	}
	b.UpdateState(now)
	switch {
	case b.fits():
		return 0
	case b.reserved >= b.capacity:
		return Never
	}
	// level + reserved >= capacity > reserved: the backlog that must drain
	// before one more unit fits is level + reserved - capacity + 1 >= 1,
	// and the carry has drained part of it already.
	backlog := b.level - (b.capacity - b.reserved) + 1
	d := b.rate.span(backlog, b.carry, true)
	if behind := b.last.Sub(now); behind > 0 { // the clock stepped back
		d = addDurationSat(d, behind)
	}
	return d
}

func addDurationSat(a, b time.Duration) time.Duration {
	if a > Never-b {
		return Never
	}
	return a + b
}

// Reset empties the bucket, drops every reservation and any carried part of
// a unit, zeroes the statistics, and makes now both the last update time
// and the statistics start time. Unlike UpdateState it accepts any now,
// earlier times included: it starts the bucket afresh.
func (b *LeakyBucket) Reset(now time.Time) {
	b.level, b.carry, b.reserved = 0, 0, 0
	b.last = now
	b.ResetStatistics()
}

// ResetStatistics zeroes the submitted-units count and starts a new
// statistics interval at the last update time.
func (b *LeakyBucket) ResetStatistics() {
	b.statsStart = b.last
	b.submitted, b.submittedAtUpdate = 0, 0
}

// SetRateAndCapacity sets the drain rate and the capacity. The units in the
// bucket and the reservations stay, so the level may exceed the new
// capacity. The time since the last update will drain at the new rate; to
// drain it at the old one call UpdateState(now) first. The drained part of
// the next unit is carried over rounded down to the new rate's resolution
// (1/Per of a unit), so a change of rate never drains more than the exact
// amount. It fails with an error wrapping ErrInvalidRate or
// ErrInvalidCapacity, changing nothing, for the arguments NewLeakyBucket
// rejects.
func (b *LeakyBucket) SetRateAndCapacity(drain Rate, capacity uint64) error {
	if err := checkBucket(drain, capacity); err != nil {
		return fmt.Errorf("meter: %w", err)
	}
	b.carry = rescale(b.carry, b.rate.Per, drain.Per)
	b.rate, b.capacity = drain, capacity
	return nil
}

// Statistics returns the units submitted from the statistics start time to
// the last update time (units submitted since the last update are counted
// at the next one), and the units that could have been consumed but were
// not over that interval: the whole units the current drain rate drains
// over it, less submitted, and at least 0. Units submitted from reserved
// units count as submitted; reservations do not. Both results saturate at
// math.MaxUint64 (unused is computed exactly first).
func (b *LeakyBucket) Statistics() (submitted, unused uint64) {
	return b.submittedAtUpdate, b.rate.unusedIn(b.last.Sub(b.statsStart), b.submittedAtUpdate)
}

// Capacity returns the capacity in units.
func (b *LeakyBucket) Capacity() uint64 { return b.capacity }

// DrainRate returns the drain rate, as given to NewLeakyBucket or
// SetRateAndCapacity.
func (b *LeakyBucket) DrainRate() Rate { return b.rate }

// UnitsInBucket returns the submitted units still in the bucket as of the
// last update time, counting a partly drained unit as a whole one. It does
// not include reserved units.
func (b *LeakyBucket) UnitsInBucket() uint64 { return b.level }

// UnitsReserved returns the reserved units.
func (b *LeakyBucket) UnitsReserved() uint64 { return b.reserved }

// LastUpdateTime returns the time the bucket has drained to. NewLeakyBucket
// and Reset set it; UpdateState, and WouldOverflow and TimeToSubmit when
// they update, advance it and never move it back.
func (b *LeakyBucket) LastUpdateTime() time.Time { return b.last }

// StatisticsStartTime returns the start of the interval Statistics reports
// on: the time given to NewLeakyBucket or Reset, or the last update time
// when ResetStatistics was called, whichever happened last.
func (b *LeakyBucket) StatisticsStartTime() time.Time { return b.statsStart }
