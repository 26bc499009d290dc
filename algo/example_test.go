package algo_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/floodgate/floodgate/algo"
)

// A token bucket of 3 per second with bursts of 5: the burst goes through,
// the sixth request is told exactly how long to wait.
func ExamplePolicy_Decide() {
	p, err := algo.ParsePolicy("token-bucket 3/1s burst=5")
	if err != nil {
		panic(err)
	}
	var s algo.State // one key's state; the zero State is a full bucket
	now := int64(0)  // nanoseconds since any origin; the core never reads a clock
	for i := 1; i <= 6; i++ {
		d, _ := p.Decide(&s, now, 1)
		fmt.Printf("request %d: allowed=%v remaining=%d retry after %v\n", i, d.Allowed, d.Remaining, d.RetryAfter)
	}
	// Output:
	// request 1: allowed=true remaining=4 retry after 0s
	// request 2: allowed=true remaining=3 retry after 0s
	// request 3: allowed=true remaining=2 retry after 0s
	// request 4: allowed=true remaining=1 retry after 0s
	// request 5: allowed=true remaining=0 retry after 0s
	// request 6: allowed=false remaining=0 retry after 333.333334ms
}

// Algorithm::FloodControl's question, "how long until the next event is
// allowed?", answered by a sliding log of 5 events per minute.
func ExamplePolicy_Decide_floodControl() {
	p, _ := algo.ParsePolicy("sliding-log 5/60")
	var s algo.State
	for _, at := range []int64{0, 3, 8, 10, 13, 17, 34, 56, 67} {
		d, _ := p.Decide(&s, at*int64(time.Second), 1)
		if d.Allowed {
			fmt.Printf("%2ds: OK\n", at)
		} else {
			fmt.Printf("%2ds: next event allowed in %v\n", at, d.RetryAfter)
		}
	}
	// Output:
	//  0s: OK
	//  3s: OK
	//  8s: OK
	// 10s: OK
	// 13s: OK
	// 17s: next event allowed in 43s
	// 34s: next event allowed in 26s
	// 56s: next event allowed in 4s
	// 67s: OK
}

// A cost greater than the burst can never be admitted: Decide says so with
// an error, rather than a wait.
func ExamplePolicy_Decide_neverAdmissible() {
	p, _ := algo.ParsePolicy("leaky-bucket 1/1h capacity=20")
	var s algo.State
	d, err := p.Decide(&s, 0, 21)
	fmt.Println(d.Allowed, d.RetryAfter == algo.Never, err)
	// Output:
	// false true cost exceeds burst, never admissible: cost 21, burst 20
}

func ExampleParsePolicy() {
	for _, s := range []string{"leaky-bucket 1/3600 capacity=20", "sliding-window 100/60", "token-bucket 0/1s"} {
		p, err := algo.ParsePolicy(s)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Printf("%v: %v, %d per %v, bursts of %d\n", p, p.Algorithm(), p.Limit(), p.Period(), p.Burst())
	}
	// Output:
	// leaky-bucket 1/1h capacity=20: leaky-bucket, 1 per 1h0m0s, bursts of 20
	// sliding-window 100/1m: sliding-window, 100 per 1m0s, bursts of 100
	// invalid policy "token-bucket 0/1s": limit 0 is less than 1
}

// A 10 Gbit/s link's bytes: 1.25*10^9 bytes per second with bursts of
// 4 GiB. Each event is a packet or a transfer whose cost is its size in
// bytes; times are supplied, so the arithmetic is the same in a test, a
// trace or a service, exact to the byte and the nanosecond.
func ExamplePolicy_Decide_bytes() {
	p, err := algo.ParsePolicy("token-bucket 1250000000/1s burst=4294967296")
	if err != nil {
		panic(err)
	}
	var s algo.State
	sec := int64(time.Second)
	for _, e := range []struct{ at, bytes int64 }{
		{0, 4 << 30},               // a 4 GiB burst: the whole bucket
		{0, 1500},                  // one more packet: wait for 1500 bytes to drain
		{sec, 1_250_000_000},       // a second later, a second's worth
		{sec, 1},                   // and not a byte more
		{5 * sec, 3_000_000_000},   // four seconds on: 3 GB fit again
		{5 * sec, 3_000_000_000},   // twice does not
		{100 * sec, 5_000_000_000}, // more than the burst, never
	} {
		d, err := p.Decide(&s, e.at, e.bytes)
		retry := d.RetryAfter.String()
		if errors.Is(err, algo.ErrCostExceedsBurst) {
			retry = "never"
		}
		fmt.Printf("%4v %10d bytes: allowed=%-5v remaining=%10d retry after %v\n",
			time.Duration(e.at), e.bytes, d.Allowed, d.Remaining, retry)
	}
	// Output:
	//   0s 4294967296 bytes: allowed=true  remaining=         0 retry after 0s
	//   0s       1500 bytes: allowed=false remaining=         0 retry after 1.2µs
	//   1s 1250000000 bytes: allowed=true  remaining=         0 retry after 0s
	//   1s          1 bytes: allowed=false remaining=         0 retry after 1ns
	//   5s 3000000000 bytes: allowed=true  remaining=1294967296 retry after 0s
	//   5s 3000000000 bytes: allowed=false remaining=1294967296 retry after 1.364026164s
	// 1m40s 5000000000 bytes: allowed=false remaining=4294967296 retry after never
}
