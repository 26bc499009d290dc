package meter_test

import (
	"errors"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/floodgate/floodgate/meter"
)

// exactRates are rates whose drain per nanosecond is not a whole number,
// or is more than one unit, or both.
var exactRates = []meter.Rate{
	meter.PerSecond(1),
	meter.PerSecond(3),
	{Units: 7, Per: 2 * time.Second},
	{Units: 1, Per: time.Hour},
	meter.PerSecond(512),
	meter.PerSecond(1_000_000_007), // more than one unit per ns
	{Units: 5, Per: 3},             // 5 units per 3ns
	{Units: 1, Per: 1},
	{Units: 1 << 40, Per: time.Millisecond},
	{Units: 2, Per: 7 * time.Nanosecond},
	{Units: math.MaxUint64, Per: time.Second},
	{Units: 1, Per: math.MaxInt64},
}

// randomRate returns one of exactRates or, half the time, a random rate.
func randomRate(rng *rand.Rand) meter.Rate {
	if rng.IntN(2) == 0 {
		return exactRates[rng.IntN(len(exactRates))]
	}
	return meter.Rate{Units: 1 + rng.Uint64N(1<<uint(rng.IntN(50))), Per: 1 + time.Duration(rng.Int64N(int64(48*time.Hour)))}
}

// randomSpan returns a random duration of at most about the time r takes
// to drain units units.
func randomSpan(rng *rand.Rand, r meter.Rate, units uint64) time.Duration {
	limit := min(meter.DrainTime(units, r, true), 1<<62)
	return time.Duration(rng.Int64N(int64(limit) + 1))
}

func TestNewLeakyBucketErrors(t *testing.T) {
	for _, tc := range []struct {
		name     string
		rate     meter.Rate
		capacity uint64
		want     error
	}{
		{"zero rate", meter.Rate{}, 1, meter.ErrInvalidRate},
		{"zero units", meter.Rate{Units: 0, Per: time.Second}, 1, meter.ErrInvalidRate},
		{"zero per", meter.Rate{Units: 1, Per: 0}, 1, meter.ErrInvalidRate},
		{"negative per", meter.Rate{Units: 1, Per: -time.Second}, 1, meter.ErrInvalidRate},
		{"zero capacity", meter.PerSecond(1), 0, meter.ErrInvalidCapacity},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := meter.NewLeakyBucket(tc.rate, tc.capacity, t0)
			if !errors.Is(err, tc.want) || b != nil {
				t.Errorf("NewLeakyBucket(%v, %d) = %v, %v; want nil, %v", tc.rate, tc.capacity, b, err, tc.want)
			}
			b = newBucket(t, meter.PerSecond(2), 3)
			b.Submit(4)
			b.Reserve(1)
			before := *b
			if err := b.SetRateAndCapacity(tc.rate, tc.capacity); !errors.Is(err, tc.want) {
				t.Errorf("SetRateAndCapacity(%v, %d) = %v, want %v", tc.rate, tc.capacity, err, tc.want)
			}
			if *b != before {
				t.Errorf("failed SetRateAndCapacity changed the bucket: %+v, was %+v", *b, before)
			}
		})
	}
}

func TestNotReserved(t *testing.T) {
	b := newBucket(t, meter.PerSecond(1), 10)
	b.Reserve(3)
	b.Submit(2)
	before := *b
	if err := b.SubmitReserved(4); !errors.Is(err, meter.ErrNotReserved) {
		t.Errorf("SubmitReserved(4) with 3 reserved = %v, want ErrNotReserved", err)
	}
	if err := b.CancelReserved(4); !errors.Is(err, meter.ErrNotReserved) {
		t.Errorf("CancelReserved(4) with 3 reserved = %v, want ErrNotReserved", err)
	}
	if *b != before {
		t.Errorf("failed calls changed the bucket: %+v, was %+v", *b, before)
	}
	if err := b.SubmitReserved(3); err != nil {
		t.Errorf("SubmitReserved(3) with 3 reserved = %v", err)
	}
	if err := b.CancelReserved(0); err != nil {
		t.Errorf("CancelReserved(0) with 0 reserved = %v", err)
	}
	if b.UnitsInBucket() != 5 || b.UnitsReserved() != 0 {
		t.Errorf("after SubmitReserved(3): %d in bucket, %d reserved; want 5, 0", b.UnitsInBucket(), b.UnitsReserved())
	}
}

func TestWouldOverflowCountsReserved(t *testing.T) {
	b := newBucket(t, meter.PerSecond(1), 5)
	b.Submit(2)
	b.Reserve(2)
	if b.WouldOverflow(t0) { // 2 + 2 + 1 = 5 fits
		t.Error("WouldOverflow with 2 submitted, 2 reserved of 5 = true")
	}
	b.Reserve(1)
	if !b.WouldOverflow(t0) { // 2 + 3 + 1 = 6
		t.Error("WouldOverflow with 2 submitted, 3 reserved of 5 = false")
	}
	if !b.WouldOverflow(at(time.Second - 1)) {
		t.Error("WouldOverflow at t0+1s-1ns = false, want true")
	}
	if b.WouldOverflow(at(time.Second)) {
		t.Error("WouldOverflow at t0+1s = true, want false")
	}
}

// TestTimeToSubmitExact checks, over random rates and states, that
// waiting exactly the returned duration is enough and one nanosecond less
// is not.
func TestTimeToSubmitExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var never, zero, positive int
	for i := range 20000 {
		r := randomRate(rng)
		capacity := 1 + rng.Uint64N(1<<uint(rng.IntN(20)))
		start := time.Duration(rng.Int64N(int64(1000 * time.Hour)))
		b, err := meter.NewLeakyBucket(r, capacity, at(start))
		if err != nil {
			t.Fatal(err)
		}
		b.Submit(rng.Uint64N(3 * capacity))
		if rng.IntN(4) == 0 {
			b.Reserve(rng.Uint64N(capacity + 1))
		}
		now := start
		for range rng.IntN(4) { // leave a carry behind
			now += randomSpan(rng, r, 2)
			b.UpdateState(at(now))
		}
		now += randomSpan(rng, r, 2)
		b.Submit(rng.Uint64N(capacity + 1))
		d := b.TimeToSubmit(at(now))
		fits := func(d time.Duration) bool {
			c := *b
			return !c.WouldOverflow(at(now).Add(d))
		}
		switch {
		case d == meter.Never:
			never++
			// The reservations fill the capacity, or the wait saturates.
			if fits(meter.Never - 1) {
				t.Fatalf("case %d (%v, capacity %d): Never, yet a unit fits at Never-1ns", i, r, capacity)
			}
		case d == 0:
			zero++
			if !fits(0) {
				t.Fatalf("case %d (%v, capacity %d): TimeToSubmit = 0 but WouldOverflow is true", i, r, capacity)
			}
		case d < 0:
			t.Fatalf("case %d: TimeToSubmit = %v", i, d)
		default:
			positive++
			if !fits(d) {
				t.Fatalf("case %d (%v, capacity %d, %d in bucket, %d reserved): does not fit after TimeToSubmit = %v", i, r, capacity, b.UnitsInBucket(), b.UnitsReserved(), d)
			}
			if fits(d - 1) {
				t.Fatalf("case %d (%v, capacity %d, %d in bucket, %d reserved): fits at TimeToSubmit-1ns = %v", i, r, capacity, b.UnitsInBucket(), b.UnitsReserved(), d-1)
			}
		}
	}
	// Each outcome must be well represented, positive waits most.
	if positive < 10000 || zero < 1000 || never < 100 {
		t.Errorf("outcomes: %d positive, %d zero, %d Never", positive, zero, never)
	}
	t.Logf("outcomes: %d positive, %d zero, %d Never", positive, zero, never)
}

func TestTimeToSubmitNamedRates(t *testing.T) {
	for _, tc := range []struct {
		rate meter.Rate
		want time.Duration // to drain 1 of 2 units in a bucket of capacity 2
	}{
		{meter.PerSecond(3), 333333334},
		{meter.Rate{Units: 7, Per: 2 * time.Second}, 285714286},
		{meter.Rate{Units: 1, Per: time.Hour}, time.Hour},
		{meter.PerSecond(1_000_000_007), 1},
	} {
		t.Run(tc.rate.String(), func(t *testing.T) {
			b := newBucket(t, tc.rate, 2)
			b.Submit(2)
			if got := b.TimeToSubmit(t0); got != tc.want {
				t.Errorf("TimeToSubmit = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestTimeToSubmitWithCarry: after 0.4s at 1 unit/s, 0.6s remain.
func TestTimeToSubmitWithCarry(t *testing.T) {
	b := newBucket(t, meter.PerSecond(1), 3)
	b.Submit(3)
	b.UpdateState(at(400 * time.Millisecond))
	if got, want := b.TimeToSubmit(at(400*time.Millisecond)), 600*time.Millisecond; got != want {
		t.Errorf("TimeToSubmit = %v, want %v", got, want)
	}
}

func TestTimeToSubmitNoUpdateWhenFits(t *testing.T) {
	b := newBucket(t, meter.PerSecond(1), 5)
	b.Submit(3)
	if d := b.TimeToSubmit(at(2 * time.Second)); d != 0 {
		t.Errorf("TimeToSubmit = %v, want 0", d)
	}
	if !b.LastUpdateTime().Equal(t0) || b.UnitsInBucket() != 3 {
		t.Errorf("TimeToSubmit with room updated the bucket: last %v, %d units", b.LastUpdateTime(), b.UnitsInBucket())
	}
	b.Submit(2) // full at t0; at t0+2s 3 units remain
	if d := b.TimeToSubmit(at(2 * time.Second)); d != 0 {
		t.Errorf("TimeToSubmit = %v, want 0", d)
	}
	if !b.LastUpdateTime().Equal(at(2*time.Second)) || b.UnitsInBucket() != 3 {
		t.Errorf("TimeToSubmit without room did not update: last %v, %d units", b.LastUpdateTime(), b.UnitsInBucket())
	}
}

func TestTimeToSubmitNever(t *testing.T) {
	b := newBucket(t, meter.PerSecond(1000), 5)
	b.Reserve(5)
	if d := b.TimeToSubmit(t0); d != meter.Never {
		t.Errorf("TimeToSubmit with the capacity reserved = %v, want Never", d)
	}
	if !b.WouldOverflow(at(1000 * time.Hour)) {
		t.Error("WouldOverflow with the capacity reserved = false")
	}
	if err := b.CancelReserved(1); err != nil {
		t.Fatal(err)
	}
	if d := b.TimeToSubmit(t0); d != 0 {
		t.Errorf("TimeToSubmit after cancelling one = %v, want 0", d)
	}
}

// TestDrainExactManySmallUpdates updates buckets every 1ns to 1s and checks
// that they drain exactly floor(elapsed*Units/Per) units, and keep the same
// carry as a bucket updated once.
func TestDrainExactManySmallUpdates(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, r := range exactRates {
		t.Run(r.String(), func(t *testing.T) {
			const full = 1 << 62
			many := newBucket(t, r, 1)
			once := newBucket(t, r, 1)
			many.Submit(full)
			once.Submit(full)
			var elapsed time.Duration
			for range 5000 {
				if rng.IntN(2) == 0 {
					elapsed += 1 + time.Duration(rng.Int64N(1000))
				} else {
					elapsed += 1 + time.Duration(rng.Int64N(int64(time.Second)))
				}
				many.UpdateState(at(elapsed))
			}
			once.UpdateState(at(elapsed))
			want := new(big.Int).Mul(big.NewInt(int64(elapsed)), new(big.Int).SetUint64(r.Units))
			want.Quo(want, big.NewInt(int64(r.Per)))
			want.Sub(big.NewInt(full), want)
			if want.Sign() < 0 {
				want.SetInt64(0)
			}
			if got := many.UnitsInBucket(); got != want.Uint64() {
				t.Errorf("after %v in 5000 updates: %d units, want %d", elapsed, got, want)
			}
			if got := once.UnitsInBucket(); got != want.Uint64() {
				t.Errorf("after %v in one update: %d units, want %d", elapsed, got, want)
			}
			// Equal carries give equal times to submit.
			if a, b := many.TimeToSubmit(at(elapsed)), once.TimeToSubmit(at(elapsed)); a != b {
				t.Errorf("TimeToSubmit after many updates %v, after one %v", a, b)
			}
		})
	}
}

// TestEmptyBucketSavesNothing: idle time is not credited.
func TestEmptyBucketSavesNothing(t *testing.T) {
	b := newBucket(t, meter.Rate{Units: 1, Per: 2 * time.Second}, 1)
	b.Submit(1)
	b.UpdateState(at(3 * time.Second)) // drained 1.5 units' worth of time
	b.Submit(1)
	if d := b.TimeToSubmit(at(3 * time.Second)); d != 2*time.Second {
		t.Errorf("TimeToSubmit after an idle half unit = %v, want 2s", d)
	}
}

func TestStatistics(t *testing.T) {
	b := newBucket(t, meter.PerSecond(1), 10)
	stats := func(wantSubmitted, wantUnused uint64) {
		t.Helper()
		if s, u := b.Statistics(); s != wantSubmitted || u != wantUnused {
			t.Errorf("Statistics() = %d, %d; want %d, %d", s, u, wantSubmitted, wantUnused)
		}
	}
	b.Submit(3)
	stats(0, 0) // counted at the next update
	b.UpdateState(at(10 * time.Second))
	stats(3, 7)
	b.Submit(20)
	b.Reserve(5)
	stats(3, 7)
	b.UpdateState(at(12 * time.Second))
	stats(23, 0) // 12 could have drained, 23 were submitted
	if err := b.SubmitReserved(2); err != nil {
		t.Fatal(err)
	}
	b.UpdateState(at(30 * time.Second))
	stats(25, 5)
	b.ResetStatistics()
	if !b.StatisticsStartTime().Equal(at(30 * time.Second)) {
		t.Errorf("StatisticsStartTime after ResetStatistics = %v, want t0+30s", b.StatisticsStartTime())
	}
	stats(0, 0)
	b.UpdateState(at(38 * time.Second))
	stats(0, 8)
	if b.UnitsReserved() != 3 {
		t.Errorf("ResetStatistics changed the reservations: %d, want 3", b.UnitsReserved())
	}
}

func TestStatisticsFractionalRate(t *testing.T) {
	b := newBucket(t, meter.Rate{Units: 7, Per: 2 * time.Second}, 100)
	b.Submit(4)
	b.UpdateState(at(3 * time.Second)) // 10.5 could have drained
	if s, u := b.Statistics(); s != 4 || u != 6 {
		t.Errorf("Statistics() = %d, %d; want 4, 6", s, u)
	}
}

func TestReset(t *testing.T) {
	b := newBucket(t, meter.Rate{Units: 1, Per: 2 * time.Second}, 2)
	b.Submit(5)
	b.Reserve(1)
	b.UpdateState(at(time.Second)) // half a unit drained
	b.Reset(at(time.Second))
	if b.UnitsInBucket() != 0 || b.UnitsReserved() != 0 {
		t.Errorf("after Reset: %d in bucket, %d reserved", b.UnitsInBucket(), b.UnitsReserved())
	}
	if !b.LastUpdateTime().Equal(at(time.Second)) || !b.StatisticsStartTime().Equal(at(time.Second)) {
		t.Errorf("after Reset(t0+1s): last %v, statistics start %v", b.LastUpdateTime(), b.StatisticsStartTime())
	}
	if s, u := b.Statistics(); s != 0 || u != 0 {
		t.Errorf("Statistics after Reset = %d, %d", s, u)
	}
	b.Submit(2) // the half unit drained before Reset is gone
	if d := b.TimeToSubmit(at(time.Second)); d != 2*time.Second {
		t.Errorf("TimeToSubmit after Reset = %v, want 2s", d)
	}
	b.Reset(t0) // Reset may go back in time
	if !b.LastUpdateTime().Equal(t0) {
		t.Errorf("after Reset(t0): last %v", b.LastUpdateTime())
	}
}

func TestSetRateAndCapacity(t *testing.T) {
	b := newBucket(t, meter.PerSecond(1), 10)
	b.Submit(8)
	b.Reserve(2)
	b.UpdateState(at(time.Second)) // 7 units
	if err := b.SetRateAndCapacity(meter.PerSecond(2), 4); err != nil {
		t.Fatal(err)
	}
	if b.Capacity() != 4 || b.DrainRate() != meter.PerSecond(2) {
		t.Errorf("Capacity, DrainRate = %d, %v", b.Capacity(), b.DrainRate())
	}
	if b.UnitsInBucket() != 7 || b.UnitsReserved() != 2 {
		t.Errorf("units changed: %d in bucket, %d reserved", b.UnitsInBucket(), b.UnitsReserved())
	}
	// The new rate applies from the last update: 7 + 2 + 1 <= 4 needs 6
	// units drained at 2 per second.
	if d := b.TimeToSubmit(at(time.Second)); d != 3*time.Second {
		t.Errorf("TimeToSubmit = %v, want 3s", d)
	}
}

// TestSetRateAndCapacityCarry: a change of Per rescales the part of a unit
// drained so far, rounding down.
func TestSetRateAndCapacityCarry(t *testing.T) {
	b := newBucket(t, meter.Rate{Units: 1, Per: 2 * time.Second}, 1)
	b.Submit(2)
	b.UpdateState(at(time.Second)) // half a unit drained
	if err := b.SetRateAndCapacity(meter.Rate{Units: 1, Per: 3 * time.Second}, 1); err != nil {
		t.Fatal(err)
	}
	// 2 units in a bucket of 1: 1.5 units remain to drain at 1 per 3s.
	if d := b.TimeToSubmit(at(time.Second)); d != 4500*time.Millisecond {
		t.Errorf("TimeToSubmit = %v, want 4.5s", d)
	}

	// 2/3 of a unit drained is kept as 1/2 at a Per of 2ns (rounded
	// down): 3/2 units remain rather than 4/3. Units leave in steps of
	// 1/Per, so the whole units drained at every nanosecond are the same
	// as with the exact 2/3: here both empty the bucket after 1ns.
	b = newBucket(t, meter.Rate{Units: 1, Per: 3}, 1)
	b.Submit(2)
	b.UpdateState(at(2))
	if err := b.SetRateAndCapacity(meter.Rate{Units: 3, Per: 2}, 1); err != nil {
		t.Fatal(err)
	}
	if d := b.TimeToSubmit(at(2)); d != 1 {
		t.Errorf("TimeToSubmit = %v, want 1ns", d)
	}
	b.UpdateState(at(3))
	if b.UnitsInBucket() != 0 {
		t.Errorf("UnitsInBucket = %d, want 0", b.UnitsInBucket())
	}
}

func TestBackwardsTime(t *testing.T) {
	b := newBucket(t, meter.PerSecond(1), 5)
	b.Submit(5)
	b.UpdateState(at(4 * time.Second)) // 1 unit
	b.Submit(4)                        // 5 units
	b.UpdateState(at(2 * time.Second)) // the clock steps back 2s
	if b.UnitsInBucket() != 5 || !b.LastUpdateTime().Equal(at(4*time.Second)) {
		t.Errorf("after going back: %d units, last %v; want 5, t0+4s", b.UnitsInBucket(), b.LastUpdateTime())
	}
	if !b.WouldOverflow(at(3 * time.Second)) {
		t.Error("WouldOverflow at t0+3s = false")
	}
	// Counted from t0+2s: 2s to get back to t0+4s, then 1s to drain.
	if d := b.TimeToSubmit(at(2 * time.Second)); d != 3*time.Second {
		t.Errorf("TimeToSubmit at t0+2s = %v, want 3s", d)
	}
	// The interval from t0+2s to t0+4s is not drained a second time:
	// BDE would hold 2 units here.
	b.UpdateState(at(5 * time.Second))
	if b.UnitsInBucket() != 4 {
		t.Errorf("at t0+5s: %d units, want 4", b.UnitsInBucket())
	}
	if !b.StatisticsStartTime().Equal(t0) {
		t.Errorf("StatisticsStartTime = %v, want t0", b.StatisticsStartTime())
	}
}

func TestSaturation(t *testing.T) {
	b := newBucket(t, meter.Rate{Units: 1, Per: time.Hour}, 10)
	b.Submit(math.MaxUint64)
	b.Submit(math.MaxUint64)
	b.Reserve(math.MaxUint64)
	b.Reserve(1)
	if b.UnitsInBucket() != math.MaxUint64 || b.UnitsReserved() != math.MaxUint64 {
		t.Errorf("after overflowing submits: %d in bucket, %d reserved", b.UnitsInBucket(), b.UnitsReserved())
	}
	if !b.WouldOverflow(t0) {
		t.Error("WouldOverflow = false")
	}
	if err := b.CancelReserved(math.MaxUint64); err != nil {
		t.Fatal(err)
	}
	if d := b.TimeToSubmit(t0); d != meter.Never { // 2^64 hours
		t.Errorf("TimeToSubmit = %v, want Never", d)
	}
	b.UpdateState(at(time.Hour))
	if b.UnitsInBucket() != math.MaxUint64-1 {
		t.Errorf("after an hour: %d units, want MaxUint64-1", b.UnitsInBucket())
	}
	b.UpdateState(t0.AddDate(300, 0, 0)) // longer than Never
	if b.UnitsInBucket() != math.MaxUint64-1-uint64(meter.Never/time.Hour) {
		t.Errorf("after 300 years: %d units, want %d", b.UnitsInBucket(), math.MaxUint64-1-uint64(meter.Never/time.Hour))
	}
	if s, _ := b.Statistics(); s != math.MaxUint64 {
		t.Errorf("submitted = %d, want MaxUint64", s)
	}

	fast := newBucket(t, meter.Rate{Units: math.MaxUint64, Per: 1}, 1)
	fast.Submit(math.MaxUint64)
	fast.UpdateState(at(time.Hour)) // drains far more than 2^64 units
	if fast.UnitsInBucket() != 0 {
		t.Errorf("fast bucket after an hour: %d units", fast.UnitsInBucket())
	}
	fast.ResetStatistics()
	fast.UpdateState(at(2 * time.Hour))
	if _, u := fast.Statistics(); u != math.MaxUint64 {
		t.Errorf("fast bucket unused = %d, want MaxUint64", u)
	}
}

func TestAccessors(t *testing.T) {
	r := meter.Rate{Units: 7, Per: 2 * time.Second}
	b, err := meter.NewLeakyBucket(r, 9, at(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if b.DrainRate() != r || b.Capacity() != 9 || b.UnitsInBucket() != 0 || b.UnitsReserved() != 0 ||
		!b.LastUpdateTime().Equal(at(time.Minute)) || !b.StatisticsStartTime().Equal(at(time.Minute)) {
		t.Errorf("new bucket: %v %d %d %d %v %v", b.DrainRate(), b.Capacity(), b.UnitsInBucket(), b.UnitsReserved(), b.LastUpdateTime(), b.StatisticsStartTime())
	}
}

func BenchmarkWouldOverflowSubmit(b *testing.B) {
	bucket, err := meter.NewLeakyBucket(meter.Rate{Units: 7, Per: 2 * time.Second}, 1000, t0)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	now := t0
	for b.Loop() {
		now = now.Add(time.Millisecond)
		if !bucket.WouldOverflow(now) {
			bucket.Submit(3)
		} else {
			_ = bucket.TimeToSubmit(now)
		}
	}
}

func TestZeroValue(t *testing.T) {
	var b meter.LeakyBucket
	b.Submit(3)
	b.Reserve(1)
	b.UpdateState(at(time.Second))
	if !b.WouldOverflow(at(time.Second)) || b.TimeToSubmit(at(time.Second)) != meter.Never {
		t.Error("the zero LeakyBucket has room")
	}
	if s, u := b.Statistics(); s != 3 || u != 0 {
		t.Errorf("Statistics = %d, %d; want 3, 0", s, u)
	}
	if err := b.SetRateAndCapacity(meter.PerSecond(1), 5); err != nil {
		t.Fatal(err)
	}
	if b.WouldOverflow(at(time.Second)) {
		t.Error("the configured zero LeakyBucket has no room")
	}

	var l meter.RateLimiter
	l.Submit(1)
	if !l.WouldExceedBandwidth(t0) || l.TimeToSubmit(t0) != meter.Never {
		t.Error("the zero RateLimiter has room")
	}
	if err := l.SetRateLimits(meter.PerSecond(1), time.Second, meter.PerSecond(2), time.Second); err != nil {
		t.Fatal(err)
	}
	if l.WouldExceedBandwidth(at(time.Second)) {
		t.Error("the configured zero RateLimiter has no room")
	}
}
