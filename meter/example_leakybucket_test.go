package meter_test

import (
	"fmt"
	"time"

	"github.com/floodgate/floodgate/meter"
)

// Send 20 chunks of 256 bytes at 512 bytes/s on average, in bursts of at
// most a 2560-byte bucketful: check that one byte fits, send, then submit
// what was sent. The clock is simulated; real code reads time.Now and
// sleeps for TimeToSubmit.
func ExampleLeakyBucket() {
	start := time.Unix(0, 0)
	now := start
	bucket, err := meter.NewLeakyBucket(meter.PerSecond(512), 2560, now)
	if err != nil {
		panic(err)
	}
	for sent := 0; sent < 20*256; {
		if bucket.WouldOverflow(now) {
			now = now.Add(bucket.TimeToSubmit(now)) // time.Sleep
			continue
		}
		// send(chunk)
		bucket.Submit(256)
		sent += 256
		if sent%1280 == 0 {
			fmt.Printf("%4d bytes sent by %v\n", sent, now.Sub(start))
		}
	}
	// Output:
	// 1280 bytes sent by 0s
	// 2560 bytes sent by 0s
	// 3840 bytes sent by 2.001953125s
	// 5120 bytes sent by 4.501953125s
}

// A guard that lets a service send at most one text message per hour on
// average, and three in a row: a Rate need not be a whole number of units
// per second.
func ExampleRate() {
	now := time.Unix(0, 0)
	guard, err := meter.NewLeakyBucket(meter.Rate{Units: 1, Per: time.Hour}, 3, now)
	if err != nil {
		panic(err)
	}
	for i := 1; i <= 4; i++ {
		if guard.WouldOverflow(now) {
			fmt.Printf("text %d: wait %v\n", i, guard.TimeToSubmit(now))
			continue
		}
		guard.Submit(1)
		fmt.Printf("text %d: sent\n", i)
	}
	fmt.Println(guard.DrainRate(), "window", meter.TimeWindow(guard.DrainRate(), guard.Capacity()))
	// Output:
	// text 1: sent
	// text 2: sent
	// text 3: sent
	// text 4: wait 1h0m0s
	// 1/1h window 3h0m0s
}

func ExampleLeakyBucket_Reserve() {
	now := time.Unix(0, 0)
	b, err := meter.NewLeakyBucket(meter.PerSecond(1), 5, now)
	if err != nil {
		panic(err)
	}
	b.Reserve(4) // room for a 4-unit job that has not run yet
	fmt.Println("overflow:", b.WouldOverflow(now), "reserved:", b.UnitsReserved())
	b.Reserve(1)
	fmt.Println("overflow:", b.WouldOverflow(now), "wait:", b.TimeToSubmit(now) == meter.Never)
	// The job ran and used 3 units; the rest of the reservation is freed.
	if err := b.SubmitReserved(3); err != nil {
		panic(err)
	}
	if err := b.CancelReserved(2); err != nil {
		panic(err)
	}
	fmt.Println("in bucket:", b.UnitsInBucket(), "reserved:", b.UnitsReserved())
	if err := b.CancelReserved(1); err != nil {
		fmt.Println(err)
	}
	// Output:
	// overflow: false reserved: 4
	// overflow: true wait: true
	// in bucket: 3 reserved: 0
	// meter: more units than reserved: 1 units, 0 reserved
}
