package floodgate_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/floodgate/floodgate/algo"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/clock"
)

// A limiter of 3 requests a second per user, with bursts of up to 3.
func Example() {
	ctx := context.Background()
	fc := clock.NewFake(time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)) // omit WithClock in production
	limiter := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("token-bucket 3/1s"), floodgate.WithClock(fc)))

	for i := range 4 {
		d, err := limiter.Allow(ctx, "alice")
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		if d.Allowed {
			fmt.Printf("request %d: ok, %d left\n", i, d.Remaining)
		} else {
			fmt.Printf("request %d: busy, try again in %v\n", i, d.RetryAfter)
		}
	}
	// Output:
	// request 0: ok, 2 left
	// request 1: ok, 1 left
	// request 2: ok, 0 left
	// request 3: busy, try again in 333.333334ms
}

// Seed 000: an embedded device may send at most 20 SMS in a burst, and one
// more each hour after that.
func ExampleLimiter_Allow_sms() {
	ctx := context.Background()
	fc := clock.NewFake(time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC))
	sms := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("leaky-bucket 1/1h capacity=20"), floodgate.WithClock(fc)))
	sent := 0
	for range 25 {
		if d, _ := sms.Allow(ctx, "modem"); d.Allowed {
			sent++
		}
	}
	d, _ := sms.Allow(ctx, "modem")
	fmt.Println("sent", sent, "of 25; next in", d.RetryAfter)
	// Output: sent 20 of 25; next in 1h0m0s
}

// Wait delays a request until it fits instead of refusing it: the
// leaky bucket with a queue.
func ExampleLimiter_Wait() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	limiter := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("token-bucket 1000/1s burst=10")))
	for range 15 {
		if err := limiter.Wait(ctx, "backend"); err != nil {
			fmt.Println(err)
			return
		}
	}
	fmt.Println("15 requests sent, 5 of them paced at 1ms")
	// Output: 15 requests sent, 5 of them paced at 1ms
}

// Several limits at once, all or nothing: a per-user limit and a global
// one, as seed 001 wished for. A denial spends nothing anywhere.
func ExampleAllowAll() {
	ctx := context.Background()
	fc := clock.NewFake(time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC))
	perUser := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("sliding-log 2/1m"), floodgate.WithClock(fc)))
	global := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("sliding-log 3/1m"), floodgate.WithClock(fc)))
	for _, user := range []string{"alice", "alice", "alice", "bob", "carol"} {
		md, _ := floodgate.AllowAll(ctx,
			floodgate.Check{Limiter: perUser, Key: user, N: 1},
			floodgate.Check{Limiter: global, Key: "all", N: 1})
		switch {
		case md.Allowed:
			fmt.Println(user, "ok")
		case md.Denied == 0:
			fmt.Println(user, "busy (per user), wait", md.RetryAfter)
		default:
			fmt.Println(user, "busy (global), wait", md.RetryAfter)
		}
		fc.Advance(time.Second)
	}
	// Output:
	// alice ok
	// alice ok
	// alice busy (per user), wait 58s
	// bob ok
	// carol busy (global), wait 56s
}

// Reserve holds units that can be given back: BDE's reserve and
// cancelReserved.
func ExampleLimiter_Reserve() {
	ctx := context.Background()
	limiter := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("fixed-window 10/1m")))
	r, _ := limiter.Reserve(ctx, "upload", 8)
	fmt.Println("reserved:", r.OK(), "remaining:", r.Decision().Remaining)
	_ = r.Cancel(ctx) // the upload did not happen
	d, _ := limiter.AllowN(ctx, "upload", 0)
	fmt.Println("after cancel, remaining:", d.Remaining)
	// Output:
	// reserved: true remaining: 2
	// after cancel, remaining: 10
}

// Dry-run mode: measure what a policy would deny before enforcing it.
func ExampleWithDryRun() {
	ctx := context.Background()
	limiter := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("fixed-window 2/1h"), floodgate.WithDryRun(true)))
	for range 3 {
		d, _ := limiter.Allow(ctx, "k")
		fmt.Println(d.Allowed, d.DryRun)
	}
	fmt.Println("would have denied:", limiter.Stats().DryRunDenied)
	// Output:
	// true false
	// true false
	// true true
	// would have denied: 1
}

func ExampleParsePolicy() {
	p, err := algo.ParsePolicy("leaky-bucket 1/1h capacity=20")
	if err != nil {
		panic(err)
	}
	fmt.Println(p, p.Limit(), p.Period(), p.Burst())
	_, err = algo.ParsePolicy("token-bucket 10/1s burst=-1")
	fmt.Println(errors.Is(err, algo.ErrInvalidPolicy))
	// Output:
	// leaky-bucket 1/1h capacity=20 1 1h0m0s 20
	// true
}
