package failsafe_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/floodgate/floodgate/failsafe"

	"github.com/floodgate/floodgate/memstore"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/clock"
	"github.com/floodgate/floodgate/store"
)

// A limiter on a shared store that keeps deciding, on this process's
// memory, while the store is failing. The shared store here is a memory
// store, which never fails, so that the example runs anywhere; in
// production it would be a Redis store.
func ExampleNew() {
	ctx := context.Background()
	shared := memstore.New(0) // in production: a Redis store
	fs, err := failsafe.New(shared, failsafe.Options{
		Mode:    failsafe.FailLocal,    // or FailClosed (the default), FailOpen
		Timeout: 50 * time.Millisecond, // a call taking longer is a failure
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	limiter := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("token-bucket 2/1s"),
		floodgate.WithStore(fs), floodgate.WithName("api")))

	for i := range 3 {
		d, err := limiter.Allow(ctx, "alice")
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		fmt.Printf("request %d: allowed %v\n", i, d.Allowed)
	}
	fmt.Printf("%+v\n", fs.Stats())
	// Output:
	// request 0: allowed true
	// request 1: allowed true
	// request 2: allowed false
	// {Down:false Failures:0 Open:0 Closed:0 Local:0 Trips:0 Recoveries:0}
}

// unreachable is a shared store whose server cannot be reached: every call
// fails.
type unreachable struct{}

var errUnreachable = errors.New("dial tcp 10.0.0.7:6379: connection refused")

func (unreachable) Table(string, algo.Policy) (store.Table, error) {
	return unreachable{}, nil
}
func (unreachable) Apply(context.Context, []store.Op) error     { return errUnreachable }
func (unreachable) ApplyEach(context.Context, []store.Op) error { return errUnreachable }
func (unreachable) Decide(context.Context, string, int64, int64) (algo.Decision, error) {
	return algo.Decision{}, errUnreachable
}

// What each mode decides while the store is failing: three requests on a
// limit of two a second. Three failures do not take the store down (see
// Options.Threshold), so FailClosed's RetryAfter is the Timeout, after
// which a retry goes to the store again.
func ExampleMode() {
	ctx := context.Background()
	fc := clock.NewFake(time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)) // omit Clock and WithClock in production
	for _, mode := range []failsafe.Mode{failsafe.FailClosed, failsafe.FailOpen, failsafe.FailLocal} {
		fs, err := failsafe.New(unreachable{}, failsafe.Options{Mode: mode, Clock: fc})
		if err != nil {
			fmt.Println(err)
			return
		}
		limiter := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("token-bucket 2/1s"),
			floodgate.WithStore(fs), floodgate.WithClock(fc)))
		fmt.Printf("%s:", mode)
		for range 3 {
			d, err := limiter.Allow(ctx, "alice")
			fmt.Printf(" %v", d.Allowed)
			if errors.Is(err, failsafe.ErrUnavailable) {
				fmt.Printf(" (unavailable, retry in %v)", d.RetryAfter)
			}
		}
		fmt.Println()
	}
	// Output:
	// closed: false (unavailable, retry in 100ms) false (unavailable, retry in 100ms) false (unavailable, retry in 100ms)
	// open: true true true
	// local: true true false
}
