package floodgate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/floodgate/floodgate/store"
)

// AllowEach checks several limits independently, each as its Limiter's
// AllowN would alone, in order: a request of many independent checks, as
// a batch of floodgate serve's HTTP API in mode "each". Checks on one
// store are decided in one call of ApplyEach, so that on Redis the whole
// request costs one round trip where AllowN would cost one per check; on
// a store in memory (store.Local), which a batch saves nothing, each is
// decided as by AllowN. Each limiter reads its own clock once.
//
// It returns each check's decision, in the order of the checks, and errs,
// nil when no check failed, else each check's error (nil for those that
// did not fail): a store that fails fails all its checks, as their AllowN
// would, but for a store that fails some only (a Redis Cluster with one
// master down, store.ErrPartialFailure), whose other checks are decided;
// and a cost above a limit's burst is a denial with an error wrapping
// algo.ErrCostExceedsBurst.
func AllowEach(ctx context.Context, checks ...Check) (ds []Decision, errs []error) {
	return allowEach(ctx, checks, (*Limiter).now)
}

// AllowEachAt is AllowEach at time t instead of each limiter's clock, for
// a caller that reads its clock once and decides several batches at that
// instant (package envoyrls decides a request's descriptors, then spends
// what is left of the windows they went over). A time that AllowAt
// refuses fails every check, with an error wrapping algo.ErrInvalidTime, and
// decides nothing.
func AllowEachAt(ctx context.Context, t time.Time, checks ...Check) (ds []Decision, errs []error) {
	ns, err := unixNano(t)
	if err != nil {
		ds, errs = make([]Decision, len(checks)), make([]error, len(checks))
		for i, c := range checks {
			if c.Limiter != nil {
				ds[i].policy = &c.Limiter.policy
			}
			errs[i] = err
		}
		return ds, errs
	}
	return allowEach(ctx, checks, func(*Limiter) int64 { return ns })
}

// allowEach is AllowEach with each check's time from now.
func allowEach(ctx context.Context, checks []Check, now func(*Limiter) int64) (ds []Decision, errs []error) {
	ds = make([]Decision, len(checks))
	fail := func(i int, err error) {
		if errs == nil {
			errs = make([]error, len(checks))
		}
		errs[i] = err
	}
	var groups []*group
	for i, c := range checks {
		if c.Limiter == nil {
			fail(i, fmt.Errorf("floodgate: check %d has no Limiter", i))
			continue
		}
		if _, local := c.Limiter.store.(store.Local); local {
			// A batch saves a store in memory nothing: the fast path.
			d, err := c.Limiter.decide(ctx, c.Key, now(c.Limiter), c.cost())
			if ds[i] = d; err != nil {
				fail(i, err)
			}
			continue
		}
		groups = addCheck(groups, checks, i, now(c.Limiter))
	}
	for _, g := range groups {
		err := g.store.ApplyEach(ctx, g.ops)
		partial := errors.Is(err, store.ErrPartialFailure)
		for j, op := range g.ops {
			i := g.idx[j]
			opErr := op.Result.Err
			if err != nil && !partial {
				opErr = err
			}
			var d Decision
			d, opErr = checks[i].Limiter.decision(op.Result.Decision, opErr)
			ds[i] = d
			if opErr != nil {
				fail(i, opErr)
			}
		}
	}
	return ds, errs
}
