package floodgate_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/clock"
)

// A Decision prints as what it says, not as a struct with a pointer.
func ExampleDecision_String() {
	ctx := context.Background()
	fc := clock.NewFake(time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC))
	limiter := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("token-bucket 2/1s"), floodgate.WithClock(fc)))
	for range 3 {
		d, _ := limiter.Allow(ctx, "alice")
		fmt.Println(d)
	}
	d, _ := limiter.AllowN(ctx, "alice", 5)
	fmt.Printf("%v\n", d)
	// Output:
	// allowed, remaining 1, reset in 500ms (token-bucket 2/1s)
	// allowed, remaining 0, reset in 1s (token-bucket 2/1s)
	// denied, retry in 500ms, reset in 1s (token-bucket 2/1s)
	// denied, retry never, reset in 1s (token-bucket 2/1s)
}

func TestDecisionStringDryRun(t *testing.T) {
	fc := clock.NewFake(time.Unix(1e9, 0))
	l := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("fixed-window 1/1m"), floodgate.WithClock(fc), floodgate.WithDryRun(true)))
	l.Allow(context.Background(), "k")
	d, _ := l.Allow(context.Background(), "k")
	if got, want := d.String(), "allowed (dry run: denied), retry in 20s, reset in 20s (fixed-window 1/1m)"; got != want {
		t.Errorf("a dry-run denial: %q, want %q", got, want)
	}
	if got, want := (floodgate.Decision{}).String(), "denied, retry in 0s, reset in 0s"; got != want {
		t.Errorf("the zero Decision: %q, want %q", got, want)
	}
}
