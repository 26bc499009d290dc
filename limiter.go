package floodgate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/floodgate/floodgate/memstore"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/clock"
	"github.com/floodgate/floodgate/store"
)

// A Limiter applies one Policy to many keys: each key (a user, an address,
// an event name) has its own state, kept in a Store, initially the
// policy's initial state (a full bucket, an empty window or log).
//
// Each call decides one request of cost n (1 for Allow and Wait) on one key
// at the current time, read once from the limiter's clock, and returns a
// Decision: admitted or not, how many units remain, how long to wait before
// a retry. A denial consumes nothing and is not an error; errors are for
// bad input (a negative cost, a cost above the burst) and broken stores.
// The methods most callers want are Allow, for a request that is refused
// when over the limit, and Wait, for one that may wait its turn.
//
// A Limiter made by NewLimiter with no options keeps its state in a memory
// store of its own, bounded to memstore.DefaultMaxKeys keys. Its methods
// are safe for concurrent use by many goroutines, and hold no lock while
// they call the store. There is no zero value: use NewLimiter.
type Limiter struct {
	policy   algo.Policy
	name     string
	store    store.Store
	table    store.Table
	clock    clock.Clock   // nil: the real clock, read without an interface call
	coarse   *clock.Coarse // set when clock is one: read without an interface call
	dryRun   bool
	maxWait  time.Duration
	maxQueue int
	obs      Observer // nil: none

	dryRunDenied, errs atomic.Uint64

	mu     sync.Mutex
	queues map[string]*waitQueue
}

// NewLimiter returns a Limiter applying p to every key. Without WithStore
// it keeps state in a new memory store of its own. It fails when p is the
// zero Policy or the store refuses the limiter's table (a name a store
// cannot hold).
func NewLimiter(p algo.Policy, opts ...Option) (*Limiter, error) {
	var c config
	for _, o := range opts {
		o.apply(&c)
	}
	if c.store == nil {
		c.store = memstore.New(c.maxKeys)
	}
	if c.name == "" {
		c.name = p.String()
	}
	if _, real := c.clock.(clock.Real); real {
		c.clock = nil
	}
	t, err := c.store.Table(c.name, p)
	if err != nil {
		return nil, fmt.Errorf("floodgate: limiter %q: %w", c.name, err)
	}
	l := &Limiter{policy: p, name: c.name, store: c.store, table: t, clock: c.clock, dryRun: c.dryRun,
		maxWait: c.maxWait, maxQueue: c.maxQueue, obs: c.observer, queues: make(map[string]*waitQueue)}
	l.coarse, _ = c.clock.(*clock.Coarse)
	return l, nil
}

// Must returns l, and panics if err is not nil: it is for limiters made
// from policies written in the program, as in
//
//	var api = floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("token-bucket 100/1m")))
func Must(l *Limiter, err error) *Limiter {
	if err != nil {
		panic(err)
	}
	return l
}

// Policy returns the limiter's policy.
func (l *Limiter) Policy() algo.Policy { return l.policy }

// Name returns the name under which the limiter keeps its keys.
func (l *Limiter) Name() string { return l.name }

// DryRun reports whether the limiter is in dry-run mode (WithDryRun):
// front-ends do not advertise such a limit to clients.
func (l *Limiter) DryRun() bool { return l.dryRun }

// Store returns the store holding the limiter's state.
func (l *Limiter) Store() store.Store { return l.store }

// now reads the clock once, in nanoseconds since the Unix epoch.
func (l *Limiter) now() int64 {
	switch {
	case l.clock == nil:
		return clock.UnixNano()
	case l.coarse != nil:
		return l.coarse.UnixNano()
	}
	return l.clock.Now().UnixNano()
}

func (l *Limiter) newTimer(d time.Duration) clock.Timer {
	if l.clock == nil {
		return clock.Real{}.NewTimer(d)
	}
	return l.clock.NewTimer(d)
}

// Allow is shorthand for AllowN(ctx, key, 1).
func (l *Limiter) Allow(ctx context.Context, key string) (Decision, error) {
	// decision, inlined by hand, which the compiler does not do: the
	// hottest path saves a call and a copy of the Decision
	// (docs/benchmarks.md has the figures).
	ad, err := l.table.Decide(ctx, key, l.now(), 1)
	if l.obs != nil {
		return l.observed(ad, err)
	}
	switch {
	case ad.Allowed && err == nil:
		return l.admitted(ad), nil
	case err == nil && !l.dryRun:
		return l.plainDenial(ad), nil
	}
	return l.denial(ad, err)
}

// AllowN decides whether key may spend n units now, and spends them if so.
// A denied request changes nothing. n == 0 is a peek: always admitted, it
// reports the key's headroom and changes nothing (Peek says so by name). n above the policy's
// burst is denied with RetryAfter algo.Never and an error wrapping
// algo.ErrCostExceedsBurst; a negative n is an error wrapping
// algo.ErrInvalidCost.
func (l *Limiter) AllowN(ctx context.Context, key string, n int64) (Decision, error) {
	return l.decide(ctx, key, l.now(), n)
}

// Peek reports key's headroom now without spending anything: the
// decision is always admitted, with the units key would admit in
// Remaining. It is the explicit form of AllowN with n == 0, and of a
// Check with Peek set; a Check's N of 0 means 1, not a peek.
func (l *Limiter) Peek(ctx context.Context, key string) (Decision, error) {
	return l.decide(ctx, key, l.now(), 0)
}

// AllowAt is AllowN at time t instead of the limiter's clock, for callers
// that carry their own time (a trace, a timestamp from a request). Times
// may go backwards; see algo.Decide for how each algorithm treats that.
// A time before the Unix epoch or after the year 2116 is an error wrapping
// algo.ErrInvalidTime.
func (l *Limiter) AllowAt(ctx context.Context, key string, t time.Time, n int64) (Decision, error) {
	ns, err := unixNano(t)
	if err != nil {
		return Decision{policy: &l.policy}, err
	}
	return l.decide(ctx, key, ns, n)
}

func unixNano(t time.Time) (int64, error) {
	const maxUnixSec = algo.MaxTime / int64(time.Second)
	if s := t.Unix(); s < 0 || s >= maxUnixSec {
		return 0, fmt.Errorf("floodgate: %w: %v", algo.ErrInvalidTime, t)
	}
	return t.UnixNano(), nil
}

func (l *Limiter) decide(ctx context.Context, key string, now, n int64) (Decision, error) {
	return l.decision(l.table.Decide(ctx, key, now, n))
}

// decision turns a store's decision and error into the limiter's, with
// dry-run mode applied and dry-run denials and errors counted.
func (l *Limiter) decision(ad algo.Decision, err error) (Decision, error) {
	switch {
	case l.obs != nil:
		return l.observed(ad, err)
	case ad.Allowed && err == nil:
		return l.admitted(ad), nil
	case err == nil && !l.dryRun:
		return l.plainDenial(ad), nil
	}
	return l.denial(ad, err)
}

// observed is decision for a limiter with an Observer, which it tells. It
// is apart, and out of line, so that the paths without one stay as short
// as before (docs/benchmarks.md has the figures).
//
//go:noinline
func (l *Limiter) observed(ad algo.Decision, err error) (d Decision, _ error) {
	if ad.Allowed && err == nil {
		d = l.admitted(ad)
	} else {
		d, err = l.denial(ad, err)
	}
	l.obs.Observe(d, err)
	return d, err
}

// admitted is report for an admission, whose RetryAfter is always 0: the
// hottest path, which building the Decision from constants keeps faster
// (docs/benchmarks.md has the figures).
func (l *Limiter) admitted(ad algo.Decision) Decision {
	return Decision{Allowed: true, Remaining: ad.Remaining, ResetAfter: ad.ResetAfter, policy: &l.policy}
}

// plainDenial is the Decision of a denial without an error, outside
// dry-run mode: built in place, as admitted is, since going through
// denial costs a flood of denials a quarter of its time, and report,
// which copies Allowed rather than building it false, 14% (the commit
// that added it has the figures).
func (l *Limiter) plainDenial(ad algo.Decision) Decision {
	return Decision{Remaining: ad.Remaining, RetryAfter: ad.RetryAfter, ResetAfter: ad.ResetAfter, policy: &l.policy}
}

// report is the store's decision as the limiter's, as it stands: the one
// conversion of an algo.Decision, with no dry-run mode and nothing
// counted.
func (l *Limiter) report(ad algo.Decision) Decision {
	return Decision{Allowed: ad.Allowed, Remaining: ad.Remaining, RetryAfter: ad.RetryAfter, ResetAfter: ad.ResetAfter, policy: &l.policy}
}

// denial is decision for a denial or an error.
func (l *Limiter) denial(ad algo.Decision, err error) (d Decision, _ error) {
	d = l.report(ad)
	switch {
	case d.Allowed: // admitted, with an error: not from a conforming store
		return d, err
	case err != nil && !errors.Is(err, algo.ErrCostExceedsBurst):
		l.errs.Add(1)
		if l.dryRun {
			d.Allowed = true
		}
		return d, err
	case l.dryRun:
		l.dryRunDenied.Add(1)
		d.Allowed, d.DryRun = true, true
		return d, nil
	}
	// Plain denials are not counted here: a counter shared by every
	// goroutine would cost more than the decision under contention.
	return d, err
}

// Reset forgets key's state: its next request is decided as the first.
func (l *Limiter) Reset(ctx context.Context, key string) error {
	return l.apply(ctx, []store.Op{{Kind: store.OpReset, Table: l.table, Key: key, Now: l.now()}})
}

// Stats counts what a limiter did since it was made that its callers could
// not see for themselves: the denials it did not make in dry-run mode, and
// its errors. (Callers see every denial in its Decision; a counter of them
// shared by every goroutine would cost more than the decision.)
type Stats struct {
	DryRunDenied uint64 // requests that would have been denied, admitted in dry-run mode
	Errors       uint64 // calls that failed with an error other than algo.ErrCostExceedsBurst
}

// Stats returns the limiter's counts.
func (l *Limiter) Stats() Stats {
	return Stats{DryRunDenied: l.dryRunDenied.Load(), Errors: l.errs.Load()}
}

// apply runs ops on the limiter's store.
func (l *Limiter) apply(ctx context.Context, ops []store.Op) error {
	return l.store.Apply(ctx, ops)
}
