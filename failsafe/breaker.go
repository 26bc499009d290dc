package failsafe

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/clock"
	"github.com/floodgate/floodgate/store"
)

// bound returns ctx bounded by the Timeout, and its cancel function; ctx
// itself and a nil function when there is no Timeout or ctx's deadline is
// sooner.
func (f *Store) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if f.timeout == 0 {
		return ctx, nil
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= f.timeout {
		return ctx, nil
	}
	return context.WithTimeout(ctx, f.timeout)
}

// isFailure reports whether err, returned by the store for a call on ctx,
// is a failure of the store: not bad input, and not the caller's context
// being done (the Timeout's is a failure).
func (f *Store) isFailure(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	for _, bad := range [...]error{algo.ErrInvalidCost, algo.ErrInvalidTime, algo.ErrInvalidPolicy, store.ErrInvalidKey, store.ErrForeignTable, store.ErrInvalidOp, algo.ErrCostExceedsBurst} {
		if errors.Is(err, bad) {
			return false
		}
	}
	return true
}

// callerErr returns err, the store's error on a call on ctx that was not a
// failure, making sure that it wraps ctx's error when ctx is done.
func callerErr(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w (the store said: %w)", cerr, err)
	}
	return err
}

// now returns the time on f's clock, in ns.
func (f *Store) now() int64 {
	if f.clock == nil {
		return clock.UnixNano()
	}
	return f.clock.Now().UnixNano()
}

// acquireProbe reports whether the caller may probe the store: the store
// is down, its cooldown has passed and no other probe is under way. The
// caller must then end with up, fail(probe true), or clear probing.
func (f *Store) acquireProbe() bool {
	now := f.now()
	if now < f.retryAt.Load() || !f.probing.CompareAndSwap(false, true) {
		return false
	}
	// The probe that held the flag may have failed since retryAt was
	// loaded, moving it on: look again now that no probe can change it.
	if now < f.retryAt.Load() {
		f.probing.Store(false)
		return false
	}
	return true
}

// fail records a failed call to the store that began in generation g, a
// probe or not: the store goes down if it was up in g and still is, and a
// failed probe doubles the cooldown.
func (f *Store) fail(g uint64, err error, probe bool) {
	f.stats[countFailures].Add(1)
	if f.mode == FailClosed {
		e := fmt.Errorf("failsafe: %w: %w", ErrUnavailable, err)
		f.lastErr.Store(&e)
	}
	now := f.now()
	f.mu.Lock()
	wentDown := false
	if f.gen.Load() == g {
		if g&1 == 0 {
			f.backoff, f.downAt, wentDown = f.cooldown, now, true
		} else if f.backoff > f.maxCooldown/2 {
			f.backoff = f.maxCooldown
		} else {
			f.backoff *= 2
		}
		// retryAt before gen: whoever sees the store down sees when to probe.
		f.retryAt.Store(addSat(now, f.backoff))
		if wentDown {
			f.gen.Store(g + 1)
		}
	}
	backoff := f.backoff
	if probe {
		f.probing.Store(false)
	}
	f.mu.Unlock()
	if wentDown && f.log != nil {
		f.log.Warn("floodgate: store failing", "mode", f.mode.String(), "cooldown", backoff, "err", err)
	}
}

// up records a successful probe that began in generation g: the store is
// up again, if it was down in g and still is.
func (f *Store) up(g uint64) {
	now := f.now()
	f.mu.Lock()
	recovered := g&1 == 1 && f.gen.Load() == g
	if recovered {
		f.gen.Store(g + 1)
		f.stats[countRecoveries].Add(1)
	}
	downFor := time.Duration(now - f.downAt)
	f.probing.Store(false)
	f.mu.Unlock()
	if recovered && f.log != nil {
		f.log.Info("floodgate: store recovered", "mode", f.mode.String(), "down", downFor)
	}
}

// retryAfter is FailClosed's RetryAfter: the time until the next probe,
// or while one is under way, the time within which it ends.
func (f *Store) retryAfter() time.Duration {
	if d := time.Duration(f.retryAt.Load() - f.now()); d > 0 {
		return d
	}
	if f.timeout > 0 {
		return f.timeout
	}
	return f.cooldown
}

// unavailable returns FailClosed's error.
func (f *Store) unavailable() error {
	if e := f.lastErr.Load(); e != nil {
		return *e
	}
	return fmt.Errorf("failsafe: %w", ErrUnavailable)
}

// addSat returns t+d, or the largest time when that overflows.
func addSat(t int64, d time.Duration) int64 {
	if t > math.MaxInt64-int64(d) {
		return math.MaxInt64
	}
	return t + int64(d)
}
