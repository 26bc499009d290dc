package floodgate

import (
	"context"
	"errors"
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
// what it held as Reservation.Cancel does: on a bucket, nothing when
// others have queued behind it. In dry-run mode WaitN never waits.
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
	_, err := l.waitN(ctx, key, n, 0)
	l.observeWait(ctx, err)
	return err
}

// Delay is WaitN for front-ends that answer a request once it has waited
// its turn (packages httplimit and grpclimit shape requests with it): it
// waits like WaitN, bounded by maxWait as well as by the limiter's maximum
// wait and the context's deadline, and returns the Decision, so that the
// answer can say where the key stands. With maxWait 0 or less, and in
// dry-run mode, it is AllowN: nothing waits.
//
// Delay's queue is bounded. A bucket holds in its store the units of the
// requests that fit within maxWait, no more. A window or log policy, whose
// waiters queue in the Limiter, holds at most the requests it admits
// within maxWait (LIMIT for each PERIOD begun, at least 1) unless
// WithMaxQueue says otherwise; one more is refused at once, as by a full
// queue. Like nginx's burst, the bound keeps a flood from holding a
// goroutine per request for requests that could only be refused when
// maxWait ran out.
//
// An admitted request, at once or after its wait, gets an admission as of
// the moment Delay returns: Remaining and ResetAfter count from then, the
// requests queued behind it included (after a wait, Delay reads the key
// again), and a request that waited leaves Remaining 0, having been
// admitted at the first instant it fitted. A request refused at once
// because its wait would pass a bound (WaitN's ErrWaitTooLong) gets a
// denial whose RetryAfter is the shortest wait after which it would be
// admitted within the bounds; one refused because the key's queue is full
// (ErrQueueFull), or with a window or log policy still in line when its
// maximum wait has passed, a denial whose RetryAfter is the time until
// the key is back to its initial state. Both come with a nil error: a
// denial is a decision. The errors are WaitN's
// others: algo.ErrCostExceedsBurst, with a denial at algo.Never; a store's
// failure, with what the store decided; and the context's error, when it
// is done while the request waits, once the units are given back.
func (l *Limiter) Delay(ctx context.Context, key string, n int64, maxWait time.Duration) (Decision, error) {
	if maxWait <= 0 || l.dryRun {
		return l.AllowN(ctx, key, n) // observed there
	}
	return l.delay(ctx, key, n, maxWait)
}

// delay is Delay for a request that may wait.
func (l *Limiter) delay(ctx context.Context, key string, n int64, maxWait time.Duration) (Decision, error) {
	if err := ctx.Err(); err != nil {
		return l.report(algo.Decision{}), err
	}
	d, err := l.waitN(ctx, key, n, maxWait)
	if errors.Is(err, ErrWaitTooLong) || errors.Is(err, ErrQueueFull) {
		err = nil
	}
	if l.obs != nil && (ctx.Err() == nil || !errors.Is(err, ctx.Err())) {
		l.obs.Observe(d, err)
	}
	return d, err
}

// waitN is WaitN out of dry-run mode, unobserved, with maxWait as a bound
// of its own when positive; it returns the Decision Delay returns.
func (l *Limiter) waitN(ctx context.Context, key string, n int64, maxWait time.Duration) (Decision, error) {
	q, err := l.join(key, l.queueBound(maxWait))
	if err != nil {
		return l.lineDenial(ctx, key), err
	}
	defer l.leave(key, q)
	budget := forever
	for _, b := range []time.Duration{l.maxWait, maxWait} {
		if b > 0 {
			budget = min(budget, b)
		}
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

// lineDenial is the denial of a request refused before its turn came,
// key's queue being full or its budget spent in line: retry when the key
// is back to its initial state.
func (l *Limiter) lineDenial(ctx context.Context, key string) Decision {
	peek, _ := l.table.Decide(ctx, key, l.now(), 0)
	d := l.report(peek)
	d.Allowed, d.RetryAfter = false, max(peek.ResetAfter, time.Nanosecond)
	return d
}

// waitScheduled holds n units in the store for the earliest time they fit,
// then sleeps until that time; on cancellation it refunds them.
func (l *Limiter) waitScheduled(ctx context.Context, key string, n int64, budget time.Duration) (Decision, error) {
	now := l.now()
	op, err := l.schedule(ctx, key, now, n, budget)
	if err != nil {
		l.errs.Add(1)
		return l.report(op.Result.Decision), err
	}
	ad := op.Result.Decision
	if !ad.Allowed {
		return l.waitRefusal(ad, n, op.Result.Err, budget, 0)
	}
	if op.Result.At <= now {
		return l.report(ad), nil
	}
	t := l.newTimer(time.Duration(op.Result.At - now))
	select {
	case <-t.C():
		return l.afterWait(ctx, key, ad), nil
	case <-ctx.Done():
		t.Stop()
		// Give back what is still held. The caller's context is done, so
		// the refund runs without it.
		refund, _ := op.Refund(l.now())
		if err := l.apply(context.WithoutCancel(ctx), []store.Op{refund}); err != nil {
			l.errs.Add(1)
			return l.report(algo.Decision{}), fmt.Errorf("%w (and the refund failed: %w)", ctx.Err(), err)
		}
		return l.report(algo.Decision{}), ctx.Err()
	}
}

// afterWait is the admission of a request scheduled with ad, when its
// wait is over: where the key stands now, waiters behind it included (a
// peek), or if the peek fails, as the schedule said.
func (l *Limiter) afterWait(ctx context.Context, key string, ad algo.Decision) Decision {
	peek, err := l.table.Decide(ctx, key, l.now(), 0)
	if err != nil {
		peek = ad
		peek.ResetAfter = max(ad.ResetAfter-ad.RetryAfter, 0)
	}
	return l.admitted(peek)
}

// waitRefusal is the refusal of a request of n units denied with ad after
// waiting waited of its budget: never admissible (the reason, or
// algo.ErrCostExceedsBurst), or needing a wait past the budget
// (ErrWaitTooLong, with RetryAfter the time after which a new request,
// with a whole budget, would fit in it).
func (l *Limiter) waitRefusal(ad algo.Decision, n int64, reason error, budget, waited time.Duration) (Decision, error) {
	d := l.report(ad)
	if ad.RetryAfter == algo.Never {
		if reason == nil {
			reason = fmt.Errorf("floodgate: %w: cost %d, burst %d", algo.ErrCostExceedsBurst, n, l.policy.Burst())
		}
		return d, reason
	}
	d.RetryAfter = max(ad.RetryAfter-max(budget, 0), time.Nanosecond)
	return d, fmt.Errorf("floodgate: %w: %v needed, %v allowed", ErrWaitTooLong, waited+ad.RetryAfter, max(budget, 0))
}

// waitQueued waits for q's turn, then retries at each RetryAfter until the
// units are admitted; the time in line counts against the budget.
func (l *Limiter) waitQueued(ctx context.Context, key string, n int64, budget time.Duration, q *waiter) (Decision, error) {
	start := l.now()
	if err := l.waitTurn(ctx, q, budget); err != nil {
		if errors.Is(err, ErrWaitTooLong) {
			return l.lineDenial(ctx, key), err
		}
		return l.report(algo.Decision{}), err
	}
	for {
		now := l.now()
		ad, err := l.table.Decide(ctx, key, now, n)
		switch {
		case ad.RetryAfter == algo.Never:
			return l.waitRefusal(ad, n, err, budget, 0)
		case err != nil:
			l.errs.Add(1)
			return l.report(ad), err
		case ad.Allowed:
			return l.report(ad), nil
		case time.Duration(now-start)+ad.RetryAfter > budget:
			return l.waitRefusal(ad, n, nil, budget, time.Duration(now-start))
		}
		t := l.newTimer(ad.RetryAfter)
		select {
		case <-t.C():
		case <-ctx.Done():
			t.Stop()
			return l.report(algo.Decision{}), ctx.Err()
		}
	}
}

// waitTurn waits until q is first in line, the context is done, or the
// budget has passed (ErrWaitTooLong).
func (l *Limiter) waitTurn(ctx context.Context, q *waiter, budget time.Duration) error {
	select {
	case <-q.turn:
		return nil // first in line: no timer
	default:
	}
	var expired <-chan time.Time
	if budget < forever {
		t := l.newTimer(max(budget, 0))
		defer t.Stop()
		expired = t.C()
	}
	select {
	case <-q.turn:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-expired:
		return fmt.Errorf("floodgate: %w: still in line after %v", ErrWaitTooLong, budget)
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

// queueBound is the most callers that may wait on one key at a time:
// WithMaxQueue's n, else for Delay (maxWait > 0) on a window or log
// policy delayQueue's, else no bound (0). A bucket needs none of its own:
// maxWait bounds the units its store holds for waiters.
func (l *Limiter) queueBound(maxWait time.Duration) int {
	switch {
	case l.maxQueue > 0 || maxWait <= 0:
		return l.maxQueue
	case l.policy.Algorithm() == algo.TokenBucket || l.policy.Algorithm() == algo.LeakyBucket:
		return 0
	}
	return delayQueue(l.policy, maxWait)
}

// delayQueue is Delay's default bound on a key's waiters: the requests p
// can admit within maxWait, LIMIT for each PERIOD begun, at least 1. A
// request queued past them could only be refused when its wait ran out.
func delayQueue(p algo.Policy, maxWait time.Duration) int {
	periods := int64(maxWait / p.Period())
	if maxWait%p.Period() != 0 {
		periods++
	}
	if periods > math.MaxInt/p.Limit() {
		return math.MaxInt
	}
	return int(max(periods*p.Limit(), 1))
}

// join puts a new waiter at the end of key's queue, unless bound (when
// positive) callers already wait on it.
func (l *Limiter) join(key string, bound int) (*waiter, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	q := l.queues[key]
	if q == nil {
		q = &waitQueue{}
		l.queues[key] = q
	}
	if bound > 0 && len(q.line) >= bound {
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

// schedule applies the OpSchedule of n units of key at now, held for at
// most maxWait (a negative maxWait as 0): the one place WaitN, Delay and
// Schedule take a place in a bucket's queue. It returns the op with its
// Result.
func (l *Limiter) schedule(ctx context.Context, key string, now, n int64, maxWait time.Duration) (store.Op, error) {
	ops := []store.Op{{Kind: store.OpSchedule, Table: l.table, Key: key, Now: now, N: n, MaxWait: max(maxWait, 0)}}
	err := l.apply(ctx, ops)
	return ops[0], err
}
