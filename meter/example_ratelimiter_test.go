package meter_test

import (
	"fmt"
	"time"

	"github.com/floodgate/floodgate/meter"
)

// Send 10 KiB in 64-byte chunks at a sustained 1024 bytes/s over any half
// second and a peak of 2048 bytes/s over any 62.5ms, on a simulated clock.
func ExampleRateLimiter() {
	start := time.Unix(0, 0)
	now := start
	limiter, err := meter.NewRateLimiter(
		meter.PerSecond(1024), 500*time.Millisecond, // 512 bytes
		meter.PerSecond(2048), 62500*time.Microsecond, // 128 bytes
		now)
	if err != nil {
		panic(err)
	}
	fmt.Println("capacities:", limiter.SustainedCapacity(), limiter.PeakCapacity())
	for sent := 0; sent < 10*1024; {
		if limiter.WouldExceedBandwidth(now) {
			now = now.Add(limiter.TimeToSubmit(now)) // time.Sleep
			continue
		}
		// send(chunk)
		limiter.Submit(64)
		sent += 64
		if sent%2048 == 0 {
			fmt.Printf("%5d bytes sent by %v\n", sent, now.Sub(start))
		}
	}
	// Statistics cover the time up to the last update. After an idle
	// second, 10.438s at 1024 bytes/s could have carried 449 bytes more.
	limiter.UpdateState(now.Add(time.Second))
	submitted, unused := limiter.Statistics()
	fmt.Println("submitted:", submitted, "unused:", unused)
	// Output:
	// capacities: 512 128
	//  2048 bytes sent by 1.438476563s
	//  4096 bytes sent by 3.438476563s
	//  6144 bytes sent by 5.438476563s
	//  8192 bytes sent by 7.438476563s
	// 10240 bytes sent by 9.438476563s
	// submitted: 10240 unused: 449
}
