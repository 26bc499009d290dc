package meter_test

import (
	"errors"
	"testing"
	"time"

	"github.com/floodgate/floodgate/meter"
)

func newLimiter(t *testing.T, sustained meter.Rate, sw time.Duration, peak meter.Rate, pw time.Duration) *meter.RateLimiter {
	t.Helper()
	l, err := meter.NewRateLimiter(sustained, sw, peak, pw, t0)
	if err != nil {
		t.Fatalf("NewRateLimiter: %v", err)
	}
	return l
}

// TestRateLimiterScenario follows the sequence of BDE's balb_ratelimiter
// figure, Rp = 2 units/s over Wp = 2s (capacity 4) and Rs = 1 unit/s over
// Ws = 7s (capacity 7), with the levels computed from the model: BDE's
// drawing shows 7 sustained and 3 peak units at t0+4s, and 3 peak units
// after submitting 2 at t0+6s, which do not follow from its own text.
func TestRateLimiterScenario(t *testing.T) {
	l := newLimiter(t, meter.PerSecond(1), 7*time.Second, meter.PerSecond(2), 2*time.Second)
	if l.SustainedCapacity() != 7 || l.PeakCapacity() != 4 {
		t.Fatalf("capacities %d, %d; want 7, 4", l.SustainedCapacity(), l.PeakCapacity())
	}
	for _, step := range []struct {
		at                 time.Duration
		submit             uint64
		sustained, peak    uint64 // levels after the update and submit
		exceed             bool   // WouldExceedBandwidth after the submit
		wait, waitS, waitP time.Duration
	}{
		// 5 in both: the peak bucket (5 > 4) is exceeded; 2 units must
		// drain from it at 2/s.
		{0, 5, 5, 5, true, time.Second, 0, time.Second},
		// 2s drain 2 sustained and 4 peak units: 3 and 1, room in both.
		// Then 7 more: 10 > 7 and 8 > 4.
		{2 * time.Second, 7, 10, 8, true, 4 * time.Second, 4 * time.Second, 2500 * time.Millisecond},
		// 8 sustained (over 7) and 4 peak (at capacity: one more unit
		// would exceed it).
		{4 * time.Second, 0, 8, 4, true, 2 * time.Second, 2 * time.Second, 500 * time.Millisecond},
		// 6 and 0: room in both. Then 2 more: 8 > 7, 2 <= 4.
		{6 * time.Second, 2, 8, 2, true, 2 * time.Second, 2 * time.Second, 0},
		// 6 and 0.
		{8 * time.Second, 0, 6, 0, false, 0, 0, 0},
	} {
		now := at(step.at)
		if step.submit > 0 {
			if step.at > 0 && l.WouldExceedBandwidth(now) {
				t.Fatalf("t0+%v: WouldExceedBandwidth before submitting = true", step.at)
			}
			l.Submit(step.submit)
		}
		l.UpdateState(now)
		if s, p := l.SustainedUnitsInBucket(), l.PeakUnitsInBucket(); s != step.sustained || p != step.peak {
			t.Errorf("t0+%v: sustained %d, peak %d; want %d, %d", step.at, s, p, step.sustained, step.peak)
		}
		if got := l.WouldExceedBandwidth(now); got != step.exceed {
			t.Errorf("t0+%v: WouldExceedBandwidth = %v, want %v", step.at, got, step.exceed)
		}
		// TimeToSubmit is the larger of the two buckets' waits.
		s := newBucket(t, meter.PerSecond(1), 7)
		p := newBucket(t, meter.PerSecond(2), 4)
		s.Submit(step.sustained)
		p.Submit(step.peak)
		if gs, gp := s.TimeToSubmit(t0), p.TimeToSubmit(t0); gs != step.waitS || gp != step.waitP {
			t.Errorf("t0+%v: bucket waits %v, %v; want %v, %v", step.at, gs, gp, step.waitS, step.waitP)
		}
		if got := l.TimeToSubmit(now); got != step.wait || got != max(step.waitS, step.waitP) {
			t.Errorf("t0+%v: TimeToSubmit = %v, want %v", step.at, got, step.wait)
		}
	}
}

func TestNewRateLimiterErrors(t *testing.T) {
	good := meter.PerSecond(1)
	for _, tc := range []struct {
		name string
		s    meter.Rate
		sw   time.Duration
		p    meter.Rate
		pw   time.Duration
		want error
	}{
		{"zero sustained rate", meter.Rate{}, time.Second, good, time.Second, meter.ErrInvalidRate},
		{"zero peak per", good, time.Second, meter.Rate{Units: 1}, time.Second, meter.ErrInvalidRate},
		{"zero sustained window", good, 0, good, time.Second, meter.ErrInvalidWindow},
		{"negative peak window", good, time.Second, good, -time.Second, meter.ErrInvalidWindow},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := meter.NewRateLimiter(tc.s, tc.sw, tc.p, tc.pw, t0)
			if !errors.Is(err, tc.want) || l != nil {
				t.Errorf("NewRateLimiter = %v, %v; want nil, %v", l, err, tc.want)
			}
			l = newLimiter(t, meter.PerSecond(10), time.Second, meter.PerSecond(20), 100*time.Millisecond)
			if err := l.SetRateLimits(tc.s, tc.sw, tc.p, tc.pw); !errors.Is(err, tc.want) {
				t.Errorf("SetRateLimits = %v, want %v", err, tc.want)
			}
			if l.SustainedRate() != meter.PerSecond(10) || l.SustainedCapacity() != 10 || l.PeakRate() != meter.PerSecond(20) || l.PeakCapacity() != 2 {
				t.Errorf("failed SetRateLimits changed the limits: %v %d %v %d", l.SustainedRate(), l.SustainedCapacity(), l.PeakRate(), l.PeakCapacity())
			}
		})
	}
}

func TestRateLimiterReserved(t *testing.T) {
	l := newLimiter(t, meter.PerSecond(1), 10*time.Second, meter.PerSecond(2), 2*time.Second)
	l.Reserve(3)
	if l.UnitsReserved() != 3 {
		t.Fatalf("UnitsReserved = %d, want 3", l.UnitsReserved())
	}
	if l.WouldExceedBandwidth(t0) { // 3 + 1 <= 4 in the peak bucket
		t.Error("WouldExceedBandwidth with 3 of 4 reserved = true")
	}
	l.Reserve(1)
	if d := l.TimeToSubmit(t0); d != meter.Never {
		t.Errorf("TimeToSubmit with the peak capacity reserved = %v, want Never", d)
	}
	if err := l.SubmitReserved(5); !errors.Is(err, meter.ErrNotReserved) {
		t.Errorf("SubmitReserved(5) with 4 reserved = %v", err)
	}
	if err := l.CancelReserved(5); !errors.Is(err, meter.ErrNotReserved) {
		t.Errorf("CancelReserved(5) with 4 reserved = %v", err)
	}
	if err := l.SubmitReserved(2); err != nil {
		t.Fatal(err)
	}
	if err := l.CancelReserved(1); err != nil {
		t.Fatal(err)
	}
	if l.UnitsReserved() != 1 || l.SustainedUnitsInBucket() != 2 || l.PeakUnitsInBucket() != 2 {
		t.Errorf("reserved %d, sustained %d, peak %d; want 1, 2, 2", l.UnitsReserved(), l.SustainedUnitsInBucket(), l.PeakUnitsInBucket())
	}
	// 2 + 1 + 1 <= 4: fits in the peak bucket again.
	if l.WouldExceedBandwidth(t0) {
		t.Error("WouldExceedBandwidth = true")
	}
}

func TestRateLimiterStatisticsAndReset(t *testing.T) {
	l := newLimiter(t, meter.PerSecond(1), 20*time.Second, meter.PerSecond(4), time.Second)
	l.Submit(3)
	l.UpdateState(at(5 * time.Second))
	if s, u := l.Statistics(); s != 3 || u != 2 { // 5 at the sustained rate
		t.Errorf("Statistics = %d, %d; want 3, 2", s, u)
	}
	l.ResetStatistics()
	if !l.StatisticsStartTime().Equal(at(5 * time.Second)) {
		t.Errorf("StatisticsStartTime = %v", l.StatisticsStartTime())
	}
	l.Submit(10)
	l.Reserve(1)
	// The sustained bucket has room (10 + 1 + 1 <= 20) and is not
	// updated; the peak bucket drains to 6 at t0+6s, and 4 more units
	// must drain for 6 + 1 + 1 <= 4.
	if d := l.TimeToSubmit(at(6 * time.Second)); d != time.Second {
		t.Errorf("TimeToSubmit = %v, want 1s", d)
	}
	if !l.LastUpdateTime().Equal(at(6 * time.Second)) {
		t.Errorf("LastUpdateTime = %v, want the later of the buckets', t0+6s", l.LastUpdateTime())
	}
	if s, u := l.Statistics(); s != 0 || u != 0 { // the sustained bucket is still at t0+5s
		t.Errorf("Statistics = %d, %d; want 0, 0", s, u)
	}
	l.Reset(at(7 * time.Second))
	if l.UnitsReserved() != 0 || l.SustainedUnitsInBucket() != 0 || l.PeakUnitsInBucket() != 0 ||
		!l.LastUpdateTime().Equal(at(7*time.Second)) || !l.StatisticsStartTime().Equal(at(7*time.Second)) {
		t.Errorf("after Reset: %d reserved, %d and %d units, last %v, start %v",
			l.UnitsReserved(), l.SustainedUnitsInBucket(), l.PeakUnitsInBucket(), l.LastUpdateTime(), l.StatisticsStartTime())
	}
	if s, u := l.Statistics(); s != 0 || u != 0 {
		t.Errorf("Statistics after Reset = %d, %d", s, u)
	}
}

func TestRateLimiterWindows(t *testing.T) {
	l := newLimiter(t, meter.PerSecond(1024), 500*time.Millisecond, meter.PerSecond(2048), 62500*time.Microsecond)
	if l.SustainedCapacity() != 512 || l.PeakCapacity() != 128 {
		t.Errorf("capacities %d, %d; want 512, 128", l.SustainedCapacity(), l.PeakCapacity())
	}
	if l.SustainedWindow() != 500*time.Millisecond || l.PeakWindow() != 62500*time.Microsecond {
		t.Errorf("windows %v, %v", l.SustainedWindow(), l.PeakWindow())
	}
	// 3 units/s over 1.5s rounds to 4 units, a window of 4/3 s.
	if err := l.SetRateLimits(meter.PerSecond(3), 1500*time.Millisecond, meter.PerSecond(3), time.Second); err != nil {
		t.Fatal(err)
	}
	if l.SustainedCapacity() != 4 || l.SustainedWindow() != 1333333334 || l.PeakWindow() != time.Second {
		t.Errorf("capacity %d, windows %v, %v", l.SustainedCapacity(), l.SustainedWindow(), l.PeakWindow())
	}
}

// TestRateLimiterBothUpdated: WouldExceedBandwidth updates both buckets
// even when the first one is exceeded.
func TestRateLimiterBothUpdated(t *testing.T) {
	l := newLimiter(t, meter.PerSecond(1), time.Second, meter.PerSecond(100), 10*time.Second)
	l.Submit(5)
	if !l.WouldExceedBandwidth(at(time.Second)) {
		t.Fatal("WouldExceedBandwidth = false")
	}
	if l.SustainedUnitsInBucket() != 4 || l.PeakUnitsInBucket() != 0 {
		t.Errorf("sustained %d, peak %d; want 4, 0", l.SustainedUnitsInBucket(), l.PeakUnitsInBucket())
	}
}
