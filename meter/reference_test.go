package meter

import (
	"errors"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"
)

// refBucket is a reference model of LeakyBucket in exact rational
// arithmetic: water is the exact amount in the bucket, draining
// continuously and never below 0. UnitsInBucket is its ceiling.
type refBucket struct {
	rate              Rate
	capacity          uint64
	water             *big.Rat
	reserved          uint64
	last, statsStart  time.Time
	submitted         uint64
	submittedAtUpdate uint64
}

func (r *refBucket) level() *big.Int {
	q, m := new(big.Int).QuoRem(r.water.Num(), r.water.Denom(), new(big.Int))
	if m.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	return q
}

func (r *refBucket) update(now time.Time) {
	r.submittedAtUpdate = r.submitted
	if !now.After(r.last) {
		return
	}
	drained := new(big.Rat).SetFrac(
		new(big.Int).Mul(big.NewInt(int64(now.Sub(r.last))), new(big.Int).SetUint64(r.rate.Units)),
		big.NewInt(int64(r.rate.Per)))
	r.water.Sub(r.water, drained)
	if r.water.Sign() < 0 {
		r.water.SetInt64(0)
	}
	r.last = now
}

// room is capacity - reserved - 1, the most units the bucket may hold for
// one more to fit, or -1 when none can.
func (r *refBucket) room() *big.Int {
	room := new(big.Int).SetUint64(r.capacity)
	room.Sub(room, new(big.Int).SetUint64(r.reserved))
	return room.Sub(room, big.NewInt(1))
}

func (r *refBucket) fits() bool { return r.level().Cmp(r.room()) <= 0 }

func (r *refBucket) timeToSubmit(now time.Time) time.Duration {
	if r.fits() {
		return 0
	}
	r.update(now)
	room := r.room()
	switch {
	case r.fits():
		return 0
	case room.Sign() < 0:
		return Never
	}
	// Smallest whole dt with water - dt*Units/Per <= room.
	need := new(big.Rat).Sub(r.water, new(big.Rat).SetInt(room))
	need.Mul(need, big.NewRat(int64(r.rate.Per), 1))
	need.Quo(need, new(big.Rat).SetInt(new(big.Int).SetUint64(r.rate.Units)))
	d, m := new(big.Int).QuoRem(need.Num(), need.Denom(), new(big.Int))
	if m.Sign() > 0 {
		d.Add(d, big.NewInt(1))
	}
	if behind := r.last.Sub(now); behind > 0 {
		d.Add(d, big.NewInt(int64(behind)))
	}
	if !d.IsInt64() {
		return Never
	}
	return time.Duration(d.Int64())
}

// checkInvariants checks what must hold of every bucket.
func checkInvariants(t *testing.T, b *LeakyBucket) {
	t.Helper()
	if b.carry >= uint64(b.rate.Per) || (b.level == 0 && b.carry != 0) {
		t.Fatalf("level %d, carry %d at Per %d", b.level, b.carry, b.rate.Per)
	}
	if b.last.Before(b.statsStart) {
		t.Fatalf("last update %v before statistics start %v", b.last, b.statsStart)
	}
}

// exactWater returns the exact amount in b, level - carry/Per.
func exactWater(b *LeakyBucket) *big.Rat {
	w := new(big.Rat).SetFrac(new(big.Int).SetUint64(b.carry), big.NewInt(int64(b.rate.Per)))
	return w.Sub(new(big.Rat).SetInt(new(big.Int).SetUint64(b.level)), w)
}

var refRates = []Rate{
	{1, time.Second}, {3, time.Second}, {7, 2 * time.Second}, {1, time.Hour},
	{512, time.Second}, {1_000_000_007, time.Second}, {5, 3}, {2, 7},
	{1 << 40, time.Millisecond}, {13, 10 * time.Millisecond},
}

var refCapacities = []uint64{1, 2, 5, 7, 100, 2560, 1 << 40}

// runAgainstReference drives a LeakyBucket and the reference with the
// operations encoded in ops, three bytes each, and compares them after
// every step. The two agree exactly until the rate changes; from then on
// the bucket may hold more (never less) than the reference, because the
// carry is rescaled rounding down.
func runAgainstReference(t *testing.T, ops []byte) {
	rate, capacity := refRates[0], refCapacities[2]
	now := time.Unix(1_700_000_000, 0)
	b, err := NewLeakyBucket(rate, capacity, now)
	if err != nil {
		t.Fatal(err)
	}
	ref := &refBucket{rate: rate, capacity: capacity, water: new(big.Rat), last: now, statsStart: now}
	rateChanged := false
	for len(ops) >= 3 {
		op, x, y := ops[0]%10, ops[1], ops[2]
		ops = ops[3:]
		// units: small, or scaled by y, below 2^40 so that no input a
		// fuzzer makes can saturate the bucket (the reference does not)
		n := uint64(x % 16)
		if x >= 128 {
			n = uint64(x) << (y % 32)
		}
		// times: up to 255 ns, ms, s or hours, forwards or (1 in 8) back
		dt := time.Duration(x) * [...]time.Duration{1, time.Millisecond, time.Second, time.Hour}[y%4]
		if y%8 == 7 {
			dt = -dt
		}
		switch op {
		case 0:
			b.Submit(n)
			ref.water.Add(ref.water, new(big.Rat).SetInt(new(big.Int).SetUint64(n)))
			ref.submitted = addSat(ref.submitted, n)
		case 1:
			b.Reserve(n)
			ref.reserved = addSat(ref.reserved, n)
		case 2, 3:
			var err error
			if op == 2 {
				err = b.SubmitReserved(n)
			} else {
				err = b.CancelReserved(n)
			}
			if (n > ref.reserved) != errors.Is(err, ErrNotReserved) {
				t.Fatalf("op %d(%d) with %d reserved: %v", op, n, ref.reserved, err)
			}
			if err == nil {
				ref.reserved -= n
				if op == 2 {
					ref.water.Add(ref.water, new(big.Rat).SetInt(new(big.Int).SetUint64(n)))
					ref.submitted = addSat(ref.submitted, n)
				}
			}
		case 4:
			now = now.Add(dt)
			b.UpdateState(now)
			ref.update(now)
		case 5:
			now = now.Add(dt)
			got := b.WouldOverflow(now)
			ref.update(now)
			if want := !ref.fits(); got != want && !rateChanged {
				t.Fatalf("WouldOverflow = %v, reference %v", got, want)
			}
		case 6:
			now = now.Add(dt)
			got := b.TimeToSubmit(now)
			want := ref.timeToSubmit(now)
			if rateChanged {
				if got < want {
					t.Fatalf("TimeToSubmit = %v after a rate change, below the exact %v", got, want)
				}
				ref.update(now) // keep the last update times together
				b.UpdateState(now)
			} else if got != want {
				t.Fatalf("TimeToSubmit = %v, reference %v", got, want)
			}
		case 7, 8:
			if op == 7 {
				rate = refRates[int(x)%len(refRates)]
				capacity = refCapacities[int(y)%len(refCapacities)]
				if err := b.SetRateAndCapacity(rate, capacity); err != nil {
					t.Fatal(err)
				}
				rateChanged = rateChanged || rate.Per != ref.rate.Per
				ref.rate, ref.capacity = rate, capacity
			} else {
				b.ResetStatistics()
				ref.statsStart = ref.last
				ref.submitted, ref.submittedAtUpdate = 0, 0
			}
		case 9:
			now = now.Add(dt)
			b.Reset(now)
			ref.water.SetInt64(0)
			ref.reserved, ref.last = 0, now
			ref.statsStart, ref.submitted, ref.submittedAtUpdate = now, 0, 0
			rateChanged = false
		}
		checkInvariants(t, b)
		if w := exactWater(b); rateChanged && w.Cmp(ref.water) < 0 || !rateChanged && w.Cmp(ref.water) != 0 {
			t.Fatalf("water %v, reference %v (rate changed: %v)", w, ref.water, rateChanged)
		}
		if b.UnitsReserved() != ref.reserved || !b.LastUpdateTime().Equal(ref.last) || !b.StatisticsStartTime().Equal(ref.statsStart) {
			t.Fatalf("reserved %d, last %v, start %v; reference %d, %v, %v",
				b.UnitsReserved(), b.LastUpdateTime(), b.StatisticsStartTime(), ref.reserved, ref.last, ref.statsStart)
		}
		if !rateChanged {
			if lvl := ref.level(); !lvl.IsUint64() || b.UnitsInBucket() != lvl.Uint64() {
				t.Fatalf("UnitsInBucket = %d, reference %v", b.UnitsInBucket(), lvl)
			}
		}
		submitted, unused := b.Statistics()
		drained := new(big.Int).Mul(big.NewInt(int64(ref.last.Sub(ref.statsStart))), new(big.Int).SetUint64(rate.Units))
		drained.Quo(drained, big.NewInt(int64(rate.Per)))
		drained.Sub(drained, new(big.Int).SetUint64(ref.submittedAtUpdate))
		if drained.Sign() < 0 {
			drained.SetInt64(0)
		}
		if !drained.IsUint64() {
			drained.SetUint64(math.MaxUint64)
		}
		if submitted != ref.submittedAtUpdate || unused != drained.Uint64() {
			t.Fatalf("Statistics() = %d, %d; reference %d, %v", submitted, unused, ref.submittedAtUpdate, drained)
		}
	}
}

func TestAgainstReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for range 300 {
		ops := make([]byte, 3*400)
		for i := range ops {
			ops[i] = byte(rng.Uint32())
		}
		runAgainstReference(t, ops)
	}
}

func FuzzAgainstReference(f *testing.F) {
	f.Add([]byte{0, 5, 0, 5, 3, 2, 6, 0, 0, 4, 200, 1})
	f.Add([]byte{1, 4, 0, 2, 3, 0, 6, 1, 2, 3, 1, 0, 5, 9, 7})
	f.Add([]byte{0, 200, 40, 7, 3, 3, 4, 17, 6, 6, 2, 2, 9, 1, 1})
	f.Fuzz(runAgainstReference)
}

// TestRescale checks the carry conversion on a Per change: rounded down,
// below the new Per, exact when the new Per is a multiple of the old.
func TestRescale(t *testing.T) {
	for _, tc := range []struct {
		carry    uint64
		from, to time.Duration
		want     uint64
	}{
		{1, 2, 4, 2},
		{2, 3, 2, 1}, // 4/3 rounded down
		{1_000_000_000, 2 * time.Second, 3 * time.Second, 1_500_000_000},
		{math.MaxInt64 - 1, math.MaxInt64, 1, 0},
		{math.MaxInt64 - 1, math.MaxInt64, math.MaxInt64 - 1, math.MaxInt64 - 2},
		{5, 7, 7, 5},
	} {
		got := rescale(tc.carry, tc.from, tc.to)
		if got != tc.want || got >= uint64(tc.to) {
			t.Errorf("rescale(%d, %d, %d) = %d, want %d", tc.carry, tc.from, tc.to, got, tc.want)
		}
	}
}

// TestDrainSaturates checks the 128-bit drain at its extremes.
func TestDrainSaturates(t *testing.T) {
	r := Rate{math.MaxUint64, 1}
	if u, _, ok := r.drain(Never, 0); ok || u != math.MaxUint64 {
		t.Errorf("drain(Never) at MaxUint64/ns = %d, %v", u, ok)
	}
	r = Rate{math.MaxUint64, math.MaxInt64}
	u, rem, ok := r.drain(Never, math.MaxInt64-1)
	// (MaxInt64-1 + MaxInt64*MaxUint64) / MaxInt64 = MaxUint64 rem MaxInt64-1
	if !ok || u != math.MaxUint64 || rem != math.MaxInt64-1 {
		t.Errorf("drain = %d, %d, %v", u, rem, ok)
	}
}

// FuzzSpan checks span against big-integer arithmetic.
func FuzzSpan(f *testing.F) {
	f.Add(uint64(1), uint64(3), int64(1_000_000_000), uint64(0), true)
	f.Add(uint64(math.MaxUint64), uint64(1), int64(math.MaxInt64), uint64(5), false)
	f.Fuzz(func(t *testing.T, n, units uint64, per int64, carry uint64, roundUp bool) {
		if units == 0 || per <= 0 || n == 0 {
			return
		}
		carry %= uint64(per)
		r := Rate{units, time.Duration(per)}
		got := r.span(n, carry, roundUp)
		num := new(big.Int).Mul(new(big.Int).SetUint64(n), big.NewInt(per))
		num.Sub(num, new(big.Int).SetUint64(carry))
		q, m := num.QuoRem(num, new(big.Int).SetUint64(units), new(big.Int))
		if roundUp && m.Sign() > 0 {
			q.Add(q, big.NewInt(1))
		}
		want := Never
		if q.IsInt64() {
			want = time.Duration(q.Int64())
		}
		if got != want {
			t.Errorf("span(%d, %d) at %v = %v, want %v", n, carry, r, got, want)
		}
	})
}
