package failsafe

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/clock"
	"github.com/floodgate/floodgate/store"
)

// breaker is the state of one partition of the store: up or down.
type breaker struct {
	// gen counts the transitions: even while the partition is up, odd
	// while it is down. A call that fails changes the state only if gen
	// has not changed since it began, so a slow call from before a
	// recovery cannot undo it.
	gen     atomic.Uint64
	fails   atomic.Int64          // while up: failures since the last success
	probing atomic.Bool           // a probe is under way
	probeAt atomic.Int64          // when the probe under way began, ns on clock
	retryAt atomic.Int64          // while down: when the next probe may go, ns on clock
	lastErr atomic.Pointer[error] // FailClosed's error, wrapping the last failure

	mu        sync.Mutex    // serializes transitions
	firstFail int64         // while up: when the first of fails ended, ns on clock
	backoff   time.Duration // the current cooldown
	downAt    int64         // when the partition went down, ns on clock
}

// state returns the generation b is in, and whether b is down in it.
func (b *breaker) state() (g uint64, down bool) {
	g = b.gen.Load()
	return g, g&1 == 1
}

// succeeded records a call that succeeded while b was up: the failures
// in a row start again from zero.
func (b *breaker) succeeded() {
	if b.fails.Load() != 0 {
		b.fails.Store(0)
	}
}

// breakerOf returns the breaker of key in t's partition, making it the
// first time.
func (f *Store) breakerOf(t *table, key string) *breaker {
	if f.parts == nil {
		return &f.one
	}
	return f.breakerAt(f.parts.Partition(t.inner, key))
}

// breakerAt returns the breaker of partition i, making it the first time;
// f.parts is not nil.
func (f *Store) breakerAt(i int) *breaker {
	if i < 0 || i >= len(f.breakers) {
		i = 0 // a store's bug; one breaker for what it cannot name
	}
	p := &f.breakers[i]
	if b := p.Load(); b != nil {
		return b
	}
	p.CompareAndSwap(nil, new(breaker))
	return p.Load()
}

// breakerOfOp returns the breaker of op's partition, op an op on a table
// of f.
func (f *Store) breakerOfOp(op *store.Op) *breaker {
	return f.breakerOf(op.Table.(*table), op.Key)
}

// errTimeout is the cause of the Timeout's context when it expires.
var errTimeout = errors.New("failsafe: the Timeout expired")

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
	return context.WithTimeoutCause(ctx, f.timeout, errTimeout)
}

// badInput lists the errors of bad input, which are not failures.
var badInput = [...]error{algo.ErrInvalidCost, algo.ErrInvalidTime, algo.ErrInvalidPolicy, store.ErrInvalidKey, store.ErrForeignTable, store.ErrInvalidOp, algo.ErrCostExceedsBurst}

// isFailure reports whether err, returned by the store for a call on ctx
// bounded as c (by bound), is a failure of the store: not bad input, and
// not cut short by the caller's context. A call that outlasted the
// Timeout is a failure even if the caller's context is done by now: the
// Timeout expired first.
func isFailure(ctx, c context.Context, err error) bool {
	for _, bad := range badInput {
		if errors.Is(err, bad) {
			return false
		}
	}
	return ctx.Err() == nil || context.Cause(c) == errTimeout
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

// acquireProbe reports whether the caller may probe b's partition: it is
// down, its cooldown has passed and no other probe is under way. The
// caller must then end with up, fail(probe true), or b.probing.Store(false).
func (f *Store) acquireProbe(b *breaker) bool {
	now := f.now()
	if now < b.retryAt.Load() || !b.probing.CompareAndSwap(false, true) {
		return false
	}
	// The probe that held the flag may have failed since retryAt was
	// loaded, moving it on: look again now that no probe can change it.
	if now < b.retryAt.Load() {
		b.probing.Store(false)
		return false
	}
	b.probeAt.Store(now)
	return true
}

// fail records a failed call to b's partition that began in generation
// g, a probe or not (the caller counts the call in Stats.Failures, once
// for a batch of several partitions). A call while up counts towards the threshold, and
// takes the partition down when it is met; a failed probe keeps it down
// for the cooldown from the probe's start, doubled (up to MaxCooldown).
func (f *Store) fail(b *breaker, g uint64, err error, probe bool) {
	if f.mode == FailClosed {
		e := fmt.Errorf("failsafe: %w: %w", ErrUnavailable, err)
		b.lastErr.Store(&e)
	}
	now := f.now()
	b.mu.Lock()
	wentDown := false
	if b.gen.Load() == g {
		if g&1 == 0 {
			wentDown = f.thresholdMet(b, now)
		} else if probe {
			b.backoff = min(b.backoff*2, f.maxCooldown)
			if b.backoff <= 0 { // overflow
				b.backoff = f.maxCooldown
			}
			b.retryAt.Store(addSat(b.probeAt.Load(), b.backoff))
		}
		if wentDown {
			b.fails.Store(0)
			b.backoff, b.downAt = f.cooldown, now
			// retryAt before gen: whoever sees the partition down sees
			// when to probe.
			b.retryAt.Store(addSat(now, b.backoff))
			b.gen.Store(g + 1)
		}
	}
	if probe {
		b.probing.Store(false)
	}
	b.mu.Unlock()
	if wentDown {
		f.stats[countTrips].Add(1)
		if f.downParts.Add(1) == 1 && f.log != nil {
			f.log.Warn("floodgate: store failing", "mode", f.mode.String(), "cooldown", f.cooldown, "err", err)
		}
	}
}

// thresholdMet counts a failure at now of b, up, and reports whether the
// threshold is met: Threshold failures in a row, the first FailFor or more
// before now. b.mu is held.
func (f *Store) thresholdMet(b *breaker, now int64) bool {
	n := b.fails.Add(1)
	if n == 1 {
		b.firstFail = now
	}
	return n >= f.threshold && now-b.firstFail >= int64(f.failFor)
}

// up records a successful probe of b's partition that began in generation
// g: the partition is up again, if it was down in g and still is.
func (f *Store) up(b *breaker, g uint64) {
	now := f.now()
	b.mu.Lock()
	recovered := g&1 == 1 && b.gen.Load() == g
	if recovered {
		b.fails.Store(0)
		b.gen.Store(g + 1)
	}
	downFor := time.Duration(now - b.downAt)
	b.probing.Store(false)
	b.mu.Unlock()
	if recovered {
		f.stats[countRecoveries].Add(1)
		if f.downParts.Add(-1) == 0 && f.log != nil {
			f.log.Info("floodgate: store recovered", "mode", f.mode.String(), "down", downFor)
		}
	}
}

// retryAfter is FailClosed's RetryAfter for b's partition: the time until
// the next probe, or while one is under way, the time within which it
// ends.
func (f *Store) retryAfter(b *breaker) time.Duration {
	if d := time.Duration(b.retryAt.Load() - f.now()); d > 0 {
		return d
	}
	if f.timeout > 0 {
		return f.timeout
	}
	return f.cooldown
}

// unavailable returns FailClosed's error for b's partition.
func unavailable(b *breaker) error {
	if e := b.lastErr.Load(); e != nil {
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
