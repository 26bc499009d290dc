package failsafe

import (
	"context"
	"fmt"

	"github.com/floodgate/floodgate/algo"
)

// Decide implements Table.
func (t *table) Decide(ctx context.Context, key string, now, n int64) (algo.Decision, error) {
	f := t.f
	b := f.breakerOf(t, key)
	if g, down := b.state(); !down {
		d, failed, err := t.decideInner(ctx, key, now, n)
		switch {
		case err == nil:
			b.succeeded()
			return d, nil
		case !failed:
			return d, callerErr(ctx, err)
		}
		f.stats[countFailures].Add(1)
		f.fail(b, g, err, false)
		return t.fallback(ctx, b, key, now, n)
	}
	if err := t.p.CheckEvent(now, n); err != nil {
		return algo.Decision{}, err
	}
	if n <= t.p.Burst() && f.acquireProbe(b) {
		g := b.gen.Load()
		d, failed, err := t.decideInner(ctx, key, now, n)
		switch {
		case err == nil:
			f.up(b, g)
			return d, nil
		case !failed:
			b.probing.Store(false)
			return d, callerErr(ctx, err)
		}
		f.stats[countFailures].Add(1)
		f.fail(b, g, err, true)
	}
	return t.fallback(ctx, b, key, now, n)
}

// decideInner decides on the store, within the Timeout, and reports
// whether an error is a failure of the store.
func (t *table) decideInner(ctx context.Context, key string, now, n int64) (d algo.Decision, failed bool, err error) {
	c, cancel := t.f.bound(ctx)
	d, err = t.inner.Decide(c, key, now, n)
	if cancel != nil {
		cancel()
	}
	return d, err != nil && isFailure(ctx, c, err), err
}

// fallback decides by the mode, b's partition having failed; the input
// has been checked but for a cost above the burst.
func (t *table) fallback(ctx context.Context, b *breaker, key string, now, n int64) (algo.Decision, error) {
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
	return algo.Decision{RetryAfter: f.retryAfter(b)}, unavailable(b)
}

func costExceedsBurst(n int64, p algo.Policy) error {
	return fmt.Errorf("%w: cost %d, burst %d", algo.ErrCostExceedsBurst, n, p.Burst())
}
