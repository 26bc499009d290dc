package seconds_test

import (
	"fmt"
	"time"

	"github.com/floodgate/floodgate/internal/seconds"
)

func ExampleParse() {
	for _, s := range []string{"12.345", "1.5e3", "0.0000000005", "-1"} {
		ns, err := seconds.Parse(s)
		fmt.Println(ns, err)
	}
	// Output:
	// 12345000000 <nil>
	// 1500000000000 <nil>
	// 0 "0.0000000005": invalid number (more than nine decimals: times are whole nanoseconds)
	// 0 "-1": out of range (want 0 to 4611686018.427387904 seconds)
}

func ExampleAppend() {
	for _, ns := range []int64{43_000_000_000, 500_000_000, 1, 0} {
		fmt.Println(string(seconds.Append(nil, ns)))
	}
	// Output:
	// 43
	// 0.5
	// 0.000000001
	// 0
}

func ExampleCeil() {
	for _, d := range []time.Duration{0, time.Millisecond, time.Second, 1500 * time.Millisecond} {
		fmt.Println(d, seconds.Ceil(d))
	}
	// A Retry-After field is at least 1.
	fmt.Println(max(seconds.Ceil(0), 1))
	// Output:
	// 0s 0
	// 1ms 1
	// 1s 1
	// 1.5s 2
	// 1
}
