package seconds

import (
	"math"
	"testing"
	"time"
)

func TestCeil(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want int64
	}{
		{math.MinInt64, 0},
		{-time.Second - 1, 0},
		{-1, 0},
		{0, 0},
		{1, 1},
		{time.Second / 2, 1},
		{time.Second - 1, 1},
		{time.Second, 1},
		{time.Second + 1, 2},
		{90 * time.Second, 90},
		{time.Hour + 1, 3601},
		{math.MaxInt64, 9_223_372_037},
	}
	for _, tt := range tests {
		t.Run(tt.d.String(), func(t *testing.T) {
			if got := Ceil(tt.d); got != tt.want {
				t.Errorf("Ceil(%d) = %d, want %d", int64(tt.d), got, tt.want)
			}
		})
	}
}

// FuzzCeil checks that Ceil(d) is the least whole number of seconds that
// is not shorter than d.
func FuzzCeil(f *testing.F) {
	for _, d := range []int64{0, 1, 1e9 - 1, 1e9, 1e9 + 1, -1, math.MaxInt64, math.MinInt64} {
		f.Add(d)
	}
	f.Fuzz(func(t *testing.T, d int64) {
		s := Ceil(time.Duration(d))
		if d <= 0 {
			if s != 0 {
				t.Fatalf("Ceil(%d) = %d, want 0", d, s)
			}
			return
		}
		// s*1e9 fits in a uint64: s is at most 9223372037.
		if s < 1 || uint64(s)*1e9 < uint64(d) || (s-1)*1e9 >= d {
			t.Fatalf("Ceil(%d) = %d, not the least whole seconds from d", d, s)
		}
	})
}
