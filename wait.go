package floodgate

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/floodgate/floodgate/algo"

	"github.com/floodgate/floodgate/store"
)

// Wait is shorthand for WaitN(ctx, key, 1).
func (l *Limiter) Wait(ctx context.Context, key string) error { return l.WaitN(ctx, key, 1) }

// WaitN blocks until key may spend n units, spends them, and returns nil.
// Callers waiting on one key are served in the order they called: a
// request that waits is delayed, never overtaken by a later one (the
// leaky bucket with a queue).
//
// WaitN returns at once, consuming nothing, with an error wrapping
// algo.ErrCostExceedsBurst when n can never be admitted, ErrWaitTooLong
// when the wait needed would pass the context's deadline or the limiter's
// maximum wait (WithMaxWait), and ErrQueueFull when the key already has the
// limiter's maximum number of waiters (WithMaxQueue). When the context is
// done while it waits, WaitN returns the context's error and gives back
// what it held. In dry-run mode WaitN never waits.
//
// With token-bucket and leaky-bucket policies the units are held in the
// store from the moment WaitN is called (algo.Policy.Schedule), so the
// queue is kept by the store itself and holds across processes sharing it,
// and the wait is known at once. The window and log algorithms cannot hold
// units for a later window without hiding the current one's count, so for
// them the waiters of one key queue in this Limiter, the first one retrying
// when its RetryAfter has passed; they hold nothing while they wait, and
// requests from elsewhere (Allow, other processes) may go first.
func (l *Limiter) WaitN(ctx context.Context, key string, n int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if l.dryRun {
		_, err := l.AllowN(ctx, key, n) // observed there
		return err
	}
	err := l.waitN(ctx, key, n)
	l.observeWait(ctx, err)
	return err
}

// waitN is WaitN out of dry-run mode, unobserved.
func (l *Limiter) waitN(ctx context.Context, key string, n int64) error {
	q, err := l.join(key)
	if err != nil {
		return err
	}
	defer l.leave(key, q)
	budget := l.maxWait
	if budget <= 0 {
		budget = forever
	}
	if dl, ok := ctx.Deadline(); ok {
		budget = min(budget, time.Until(dl))
	}
	switch l.policy.Algorithm() {
	case algo.TokenBucket, algo.LeakyBucket:
		return l.waitScheduled(ctx, key, n, budget)
	default:
		return l.waitQueued(ctx, key, n, budget, q)
	}
}

// forever is a wait with no bound.
const forever = time.Duration(math.MaxInt64)

// waitScheduled holds n units in the store for the earliest time they fit,
// then sleeps until that time; on cancellation it refunds them.
func (l *Limiter) waitScheduled(ctx context.Context, key string, n int64, budget time.Duration) error {
	now := l.now()
	ops := []store.Op{{Kind: store.OpSchedule, Table: l.table, Key: key, Now: now, N: n, MaxWait: max(budget, 0)}}
	if err := l.apply(ctx, ops); err != nil {
		l.errs.Add(1)
		return err
	}
	op := &ops[0]
	if !op.Result.Decision.Allowed {
		return l.waitRefusal(n, op.Result.Decision.RetryAfter, op.Result.Err, budget)
	}
	if op.Result.At <= now {
		return nil
	}
	t := l.newTimer(time.Duration(op.Result.At - now))
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		t.Stop()
		// Give back what is still held. The caller's context is done, so
		// the refund runs without it.
		refund, _ := op.Refund(l.now())
		if err := l.apply(context.WithoutCancel(ctx), []store.Op{refund}); err != nil {
			l.errs.Add(1)
			return fmt.Errorf("%w (and the refund failed: %w)", ctx.Err(), err)
		}
		return ctx.Err()
	}
}

func (l *Limiter) waitRefusal(n int64, retry time.Duration, reason error, budget time.Duration) error {
	if retry == algo.Never {
		if reason == nil {
			reason = fmt.Errorf("floodgate: %w: cost %d, burst %d", algo.ErrCostExceedsBurst, n, l.policy.Burst())
		}
		return reason
	}
	return fmt.Errorf("floodgate: %w: %v needed, %v allowed", ErrWaitTooLong, retry, max(budget, 0))
}

// waitQueued waits for q's turn, then retries at each RetryAfter until the
// units are admitted.
func (l *Limiter) waitQueued(ctx context.Context, key string, n int64, budget time.Duration, q *waiter) error {
	select {
	case <-q.turn:
	case <-ctx.Done():
		return ctx.Err()
	}
	start := l.now()
	for {
		now := l.now()
		d, err := l.table.Decide(ctx, key, now, n)
		switch {
		case d.RetryAfter == algo.Never:
			return l.waitRefusal(n, d.RetryAfter, err, budget)
		case err != nil:
			l.errs.Add(1)
			return err
		case d.Allowed:
			return nil
		case time.Duration(now-start)+d.RetryAfter > budget:
			return l.waitRefusal(n, time.Duration(now-start)+d.RetryAfter, nil, budget)
		}
		t := l.newTimer(d.RetryAfter)
		select {
		case <-t.C():
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}

// waitQueue is the line of callers waiting on one key in this Limiter.
type waitQueue struct {
	line []*waiter
}

// waiter is one caller in a waitQueue; turn is closed when it is first.
type waiter struct {
	turn chan struct{}
}

// join puts a new waiter at the end of key's queue.
func (l *Limiter) join(key string) (*waiter, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	q := l.queues[key]
	if q == nil {
		q = &waitQueue{}
		l.queues[key] = q
	}
	if l.maxQueue > 0 && len(q.line) >= l.maxQueue {
		return nil, fmt.Errorf("floodgate: %w: %d waiting on %q", ErrQueueFull, len(q.line), key)
	}
	w := &waiter{turn: make(chan struct{})}
	if len(q.line) == 0 {
		close(w.turn)
	}
	q.line = append(q.line, w)
	return w, nil
}

// leave takes w out of key's queue and, if it was first, hands the turn on.
func (l *Limiter) leave(key string, w *waiter) {
	l.mu.Lock()
	defer l.mu.Unlock()
	q := l.queues[key]
	for i, x := range q.line {
		if x != w {
			continue
		}
		q.line = append(q.line[:i], q.line[i+1:]...)
		if i == 0 && len(q.line) > 0 {
			close(q.line[0].turn)
		}
		break
	}
	if len(q.line) == 0 {
		delete(l.queues, key)
	}
}
