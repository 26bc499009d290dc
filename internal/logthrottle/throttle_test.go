package logthrottle

import (
	"sync"
	"testing"
	"time"
)

// t0 is an instant the tests walk from.
var t0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC).UnixNano()

func TestAllowAt(t *testing.T) {
	type line struct {
		at      time.Duration // after t0
		ok      bool
		dropped uint64
	}
	tests := []struct {
		name  string
		lines []line
	}{
		{"first line", []line{{0, true, 0}}},
		{"first line at any time", []line{{-time.Hour, true, 0}}},
		{"one a second", []line{
			{0, true, 0},
			{time.Nanosecond, false, 0},
			{Interval - 1, false, 0},
			{Interval, true, 2},
			{Interval + time.Millisecond, false, 0},
			{2*Interval - 1, false, 0},
			{2 * Interval, true, 2},
		}},
		{"the count starts again", []line{
			{0, true, 0},
			{time.Millisecond, false, 0},
			{Interval, true, 1},
			{3 * Interval, true, 0},
		}},
		{"the second is from the last line let through", []line{
			{0, true, 0},
			{1500 * time.Millisecond, true, 0},
			{2 * Interval, false, 0},
			{2500 * time.Millisecond, true, 1},
		}},
		{"same instant", []line{
			{0, true, 0},
			{0, false, 0},
			{0, false, 0},
			{Interval, true, 2},
		}},
		{"clock stepped back", []line{
			{time.Hour, true, 0},
			{time.Hour + time.Millisecond, false, 0},
			{0, true, 1},
			{time.Millisecond, false, 0},
			{Interval, true, 1},
		}},
		{"long silence", []line{
			{0, true, 0},
			{100 * 24 * time.Hour, true, 0},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var th Throttle
			for i, l := range tt.lines {
				dropped, ok := th.AllowAt(t0 + int64(l.at))
				if ok != l.ok || dropped != l.dropped {
					t.Errorf("line %d at t0%+v: AllowAt = %d, %v; want %d, %v", i, l.at, dropped, ok, l.dropped, l.ok)
				}
			}
		})
	}
}

func TestAllow(t *testing.T) {
	var th Throttle
	if dropped, ok := th.Allow(); !ok || dropped != 0 {
		t.Errorf("first Allow = %d, %v; want 0, true", dropped, ok)
	}
}

// TestAllowAtConcurrent has many goroutines log at the same instant: one
// line goes through, and the next second's line counts all the others.
func TestAllowAtConcurrent(t *testing.T) {
	const goroutines, lines = 8, 1000
	var th Throttle
	var wg sync.WaitGroup
	var mu sync.Mutex
	let := 0
	for range goroutines {
		wg.Go(func() {
			n := 0
			for range lines {
				if dropped, ok := th.AllowAt(t0); ok {
					if dropped != 0 {
						t.Errorf("the first line let through reports %d dropped, want 0", dropped)
					}
					n++
				}
			}
			mu.Lock()
			let += n
			mu.Unlock()
		})
	}
	wg.Wait()
	if let != 1 {
		t.Errorf("%d lines let through at one instant, want 1", let)
	}
	if dropped, ok := th.AllowAt(t0 + int64(Interval)); !ok || dropped != goroutines*lines-1 {
		t.Errorf("AllowAt a second later = %d, %v; want %d, true", dropped, ok, goroutines*lines-1)
	}
}

// BenchmarkAllowHeldBack measures the path of a line held back, the one a
// failure on every request takes.
func BenchmarkAllowHeldBack(b *testing.B) {
	var th Throttle
	th.Allow()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			th.AllowAt(t0)
		}
	})
}
