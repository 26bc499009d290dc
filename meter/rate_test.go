package meter_test

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/floodgate/floodgate/meter"
)

func TestRateString(t *testing.T) {
	for _, tc := range []struct {
		rate meter.Rate
		want string
	}{
		{meter.PerSecond(512), "512/1s"},
		{meter.Rate{Units: 1, Per: time.Hour}, "1/1h"},
		{meter.Rate{Units: 7, Per: 2 * time.Second}, "7/2s"},
		{meter.Rate{Units: 3, Per: 1500 * time.Millisecond}, "3/1500ms"},
		{meter.Rate{Units: 5, Per: 3}, "5/3ns"},
		{meter.Rate{Units: 1, Per: 90 * time.Minute}, "1/90m"},
		{meter.Rate{}, "0/0s"},
	} {
		if got := tc.rate.String(); got != tc.want {
			t.Errorf("%#v.String() = %q, want %q", tc.rate, got, tc.want)
		}
	}
}

func TestDrainTime(t *testing.T) {
	for _, tc := range []struct {
		units   uint64
		rate    meter.Rate
		roundUp bool
		want    time.Duration
		note    string
	}{
		{0, meter.PerSecond(1), true, 0, ""},
		{0, meter.Rate{}, true, 0, "zero units at an invalid rate"},
		{1, meter.Rate{}, true, meter.Never, "invalid rate"},
		{5, meter.PerSecond(1), false, 5 * time.Second, ""},
		{1, meter.PerSecond(3), false, 333333333, ""},
		{1, meter.PerSecond(3), true, 333333334, ""},
		{3, meter.PerSecond(3), true, time.Second, ""},
		{2, meter.Rate{Units: 7, Per: 2 * time.Second}, false, 571428571, ""},
		{2, meter.Rate{Units: 7, Per: 2 * time.Second}, true, 571428572, ""},
		{1, meter.Rate{Units: 1, Per: time.Hour}, true, time.Hour, ""},
		{1, meter.PerSecond(2_000_000_000), false, 0, ""},
		{1, meter.PerSecond(2_000_000_000), true, 1, ""},
		{math.MaxUint64, meter.PerSecond(1), true, meter.Never, "saturates"},
		{math.MaxInt64, meter.Rate{Units: 1, Per: 1}, true, meter.Never, "exactly Never"},
		{1 << 62, meter.Rate{Units: 2, Per: 1}, true, 1 << 61, ""},
	} {
		if got := meter.DrainTime(tc.units, tc.rate, tc.roundUp); got != tc.want {
			t.Errorf("DrainTime(%d, %v, %v) = %v, want %v %s", tc.units, tc.rate, tc.roundUp, got, tc.want, tc.note)
		}
	}
}

func TestTimeWindow(t *testing.T) {
	for _, tc := range []struct {
		rate     meter.Rate
		capacity uint64
		want     time.Duration
	}{
		{meter.PerSecond(512), 2560, 5 * time.Second},
		{meter.PerSecond(1), 7, 7 * time.Second},
		{meter.PerSecond(3), 1, 333333334}, // rounded up
		{meter.PerSecond(3), 2, 666666667},
		{meter.PerSecond(2_000_000_000), 1, 1}, // at least 1ns
		{meter.PerSecond(1), 0, 1},
		{meter.Rate{Units: 1, Per: time.Hour}, 24, 24 * time.Hour},
		{meter.PerSecond(1), math.MaxUint64, meter.Never},
		{meter.Rate{}, 5, meter.Never},
	} {
		if got := meter.TimeWindow(tc.rate, tc.capacity); got != tc.want {
			t.Errorf("TimeWindow(%v, %d) = %v, want %v", tc.rate, tc.capacity, got, tc.want)
		}
	}
}

func TestCapacityFor(t *testing.T) {
	for _, tc := range []struct {
		rate   meter.Rate
		window time.Duration
		want   uint64
	}{
		{meter.PerSecond(2), 2 * time.Second, 4},
		{meter.PerSecond(1), 7 * time.Second, 7},
		{meter.PerSecond(3), 1500 * time.Millisecond, 4}, // 4.5 rounded down
		{meter.PerSecond(1), time.Millisecond, 1},        // at least 1
		{meter.Rate{Units: 1, Per: time.Hour}, 24 * time.Hour, 24},
		{meter.Rate{Units: 7, Per: 2 * time.Second}, 3 * time.Second, 10},
		{meter.Rate{Units: math.MaxUint64, Per: 1}, meter.Never, math.MaxUint64}, // saturates
		{meter.PerSecond(1), 0, 1},
		{meter.PerSecond(1), -time.Second, 1},
		{meter.Rate{}, time.Second, 1},
	} {
		if got := meter.CapacityFor(tc.rate, tc.window); got != tc.want {
			t.Errorf("CapacityFor(%v, %v) = %d, want %d", tc.rate, tc.window, got, tc.want)
		}
	}
}

// TestTimeWindowRoundTrip: for rates of at most one unit per nanosecond,
// CapacityFor undoes TimeWindow.
func TestTimeWindowRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 20000 {
		per := 1 + time.Duration(rng.Int64N(int64(48*time.Hour)))
		r := meter.Rate{Units: 1 + rng.Uint64N(uint64(per)), Per: per}
		c := 1 + rng.Uint64N(1<<uint(rng.IntN(40)))
		w := meter.TimeWindow(r, c)
		if w == meter.Never {
			continue
		}
		if got := meter.CapacityFor(r, w); got != c {
			t.Fatalf("CapacityFor(%v, TimeWindow(%v, %d) = %v) = %d", r, r, c, w, got)
		}
	}
}

func TestSupportsRateLimitsExactly(t *testing.T) {
	s, p := meter.PerSecond(1), meter.PerSecond(2)
	for _, tc := range []struct {
		sw, pw time.Duration
		want   bool
	}{
		{7 * time.Second, 2 * time.Second, true},
		{7 * time.Second, 1500 * time.Millisecond, true}, // 3 units at 2/s
		{7 * time.Second, 1200 * time.Millisecond, false},
		{7500 * time.Millisecond, 2 * time.Second, false},
		{0, 2 * time.Second, false},
	} {
		if got := meter.SupportsRateLimitsExactly(s, tc.sw, p, tc.pw); got != tc.want {
			t.Errorf("SupportsRateLimitsExactly(%v, %v, %v, %v) = %v, want %v", s, tc.sw, p, tc.pw, got, tc.want)
		}
	}
	if meter.SupportsRateLimitsExactly(meter.Rate{}, time.Second, p, time.Second) {
		t.Error("SupportsRateLimitsExactly with a zero rate = true")
	}
}
