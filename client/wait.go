package client

import (
	"context"
	"time"

	"github.com/floodgate/floodgate/algo"
)

// Wait decides ch, which may wait up to ch.MaxWait (and the context's
// deadline) for its turn, and waits: it returns the admission once the
// server's Delay has passed, or the refusal at once when the wait would be
// longer. It is floodgate.Limiter.WaitN across the network: for a token or
// leaky bucket the server holds the units from its answer on, so callers
// are served in the order they asked; for a window or log policy nothing
// is held, and Wait asks again after each refusal's RetryAfter while that
// fits in what is left of MaxWait (others may go first). So it does too
// when the server's limits.max_wait, shorter than MaxWait, refused: the
// key's queue was full.
//
// With MaxWait 0, Wait is Decide. When ctx is done while Wait sleeps, it returns ctx's error; units the
// server holds for the caller stay spent. Wait sleeps on the client's
// clock (WithClock).
func (c *Client) Wait(ctx context.Context, ch Check) (Decision, error) {
	budget := ch.MaxWait
	if dl, ok := ctx.Deadline(); ok {
		budget = min(budget, time.Until(dl))
	}
	for {
		ch.MaxWait = max(budget, 0)
		d, err := c.Decide(ctx, ch)
		switch {
		case err != nil:
			return d, err
		case d.Allowed:
			return d, c.sleep(ctx, d.Delay)
		case d.RetryAfter == algo.Never || d.RetryAfter > budget:
			return d, nil
		}
		if err := c.sleep(ctx, d.RetryAfter); err != nil {
			return d, err
		}
		budget -= d.RetryAfter
	}
}

// sleep waits d on the client's clock, or until ctx is done.
func (c *Client) sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := c.clock.NewTimer(d)
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		t.Stop()
		return ctx.Err()
	}
}
