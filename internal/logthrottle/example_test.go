package logthrottle_test

import (
	"fmt"
	"time"

	"github.com/floodgate/floodgate/internal/logthrottle"
)

func ExampleThrottle() {
	var th logthrottle.Throttle
	t0 := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	for _, at := range []time.Duration{0, 100 * time.Millisecond, 200 * time.Millisecond, 1100 * time.Millisecond} {
		if dropped, ok := th.AllowAt(t0.Add(at).UnixNano()); ok {
			fmt.Printf("%v: store failure (%d not logged)\n", at, dropped)
		}
	}
	// Output:
	// 0s: store failure (0 not logged)
	// 1.1s: store failure (2 not logged)
}
