package failsafe

import (
	"context"
	"fmt"

	"github.com/floodgate/floodgate/algo"
)

// Decide implements Table.
func (t *table) Decide(ctx context.Context, key string, now, n int64) (algo.Decision, error) {
	f := t.f
	g := f.gen.Load()
	if g&1 == 0 { // up
		d, err := t.decideInner(ctx, key, now, n)
		if err == nil {
			return d, nil
		}
		if !f.isFailure(ctx, err) {
			return d, callerErr(ctx, err)
		}
		f.fail(g, err, false)
		return t.fallback(ctx, key, now, n)
	}
	if err := t.p.CheckEvent(now, n); err != nil {
		return algo.Decision{}, err
	}
	if n <= t.p.Burst() && f.acquireProbe() {
		g := f.gen.Load()
		d, err := t.decideInner(ctx, key, now, n)
		switch {
		case err == nil:
			f.up(g)
			return d, nil
		case !f.isFailure(ctx, err):
			f.probing.Store(false)
			return d, callerErr(ctx, err)
		}
		f.fail(g, err, true)
	}
	return t.fallback(ctx, key, now, n)
}

// decideInner decides on the store, within the Timeout.
func (t *table) decideInner(ctx context.Context, key string, now, n int64) (algo.Decision, error) {
	c, cancel := t.f.bound(ctx)
	d, err := t.inner.Decide(c, key, now, n)
	if cancel != nil {
		cancel()
	}
	return d, err
}

// fallback decides by the mode, the store having failed; the input has
// been checked but for a cost above the burst.
func (t *table) fallback(ctx context.Context, key string, now, n int64) (algo.Decision, error) {
	f := t.f
	if f.mode == FailLocal {
		lt, err := t.localTable()
		if err != nil {
			return algo.Decision{}, err
		}
		f.stats[countLocal].Add(1)
		return lt.Decide(ctx, key, now, n)
	}
	if n > t.p.Burst() {
		return algo.Decision{RetryAfter: algo.Never}, costExceedsBurst(n, t.p)
	}
	if f.mode == FailOpen {
		f.stats[countOpen].Add(1)
		return algo.Decision{Allowed: true}, nil
	}
	f.stats[countClosed].Add(1)
	return algo.Decision{RetryAfter: f.retryAfter()}, f.unavailable()
}

func costExceedsBurst(n int64, p algo.Policy) error {
	return fmt.Errorf("%w: cost %d, burst %d", algo.ErrCostExceedsBurst, n, p.Burst())
}
