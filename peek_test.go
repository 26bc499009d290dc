package floodgate_test

import (
	"context"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/clock"
)

// Peek spends nothing, like AllowN with 0 and a Check with Peek, while a
// Check with N 0 spends one unit.
func TestPeekIsExplicit(t *testing.T) {
	ctx := context.Background()
	l := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("token-bucket 3/1s"), floodgate.WithClock(clock.NewFake(time.Unix(1e9, 0)))))
	for range 2 {
		if d, err := l.Peek(ctx, "k"); err != nil || !d.Allowed || d.Remaining != 3 {
			t.Fatalf("Peek = %v, %v; want allowed, remaining 3", d, err)
		}
	}
	if md, err := floodgate.AllowAll(ctx, floodgate.Check{Limiter: l, Key: "k", Peek: true}); err != nil || md.Decisions[0].Remaining != 3 {
		t.Fatalf("Check{Peek: true}: %v, %v; want remaining 3", md, err)
	}
	if md, err := floodgate.AllowAll(ctx, floodgate.Check{Limiter: l, Key: "k"}); err != nil || md.Decisions[0].Remaining != 2 {
		t.Fatalf("Check{N: 0}: %v, %v; want one unit spent, remaining 2", md, err)
	}
	if d, err := l.Peek(ctx, "k"); err != nil || d.Remaining != 2 {
		t.Errorf("Peek after one unit = %v, %v; want remaining 2", d, err)
	}
}
