package floodgate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/floodgate/floodgate/store"
)

// Check is one limit of AllowAll: Limiter's policy applied to Key at cost N.
type Check struct {
	Limiter *Limiter
	Key     string
	N       int64
}

// MultiDecision is the outcome of AllowAll.
type MultiDecision struct {
	// Allowed reports whether every limit admitted the request, so that
	// each spent its units.
	Allowed bool
	// RetryAfter is 0 when admitted; otherwise the longest RetryAfter of
	// the limits that denied, or Never.
	RetryAfter time.Duration
	// Denied is the index in the checks of the limit that denied with
	// that longest RetryAfter, or -1 when admitted.
	Denied int
	// Decisions holds each limit's decision, in the order of the checks.
	Decisions []Decision
}

// AllowAll checks several limits at once, all or nothing: a per-user and a
// global limit, a sustained and a peak rate, one request costing units of
// several kinds. The request is admitted only if every limit admits it, and
// then each spends its units; if any limit denies, none spends anything.
// Each limiter reads its own clock once.
//
// Limits on one store are decided in one atomic step of that store
// (Store.Apply). Limits on different stores are decided store by store,
// and when a later store denies, the units already spent on earlier ones
// are refunded (algo.Policy.Refund), so the combined check never admits
// more than a limit allows; a concurrent caller may meanwhile see those
// units spent for an instant. A limiter in dry-run mode is decided after
// the others, and only reports.
//
// A cost above a limit's burst denies the whole request with RetryAfter
// Never and an error wrapping ErrCostExceedsBurst; other errors (bad input,
// a broken store) mean nothing was spent. When a store fails but says when
// to try again (a Failsafe failing closed), RetryAfter and Denied carry
// that wait and the check it came from.
func AllowAll(ctx context.Context, checks ...Check) (MultiDecision, error) {
	// md.Allowed is set only once every limit has admitted, so that no
	// error return can carry an admission.
	md := MultiDecision{Denied: -1, Decisions: make([]Decision, len(checks))}
	allowed := true
	var groups []*group
	var shadows []int
	for i, c := range checks {
		if c.Limiter == nil {
			return md, fmt.Errorf("floodgate: check %d has no Limiter", i)
		}
		if c.Limiter.dryRun {
			shadows = append(shadows, i)
			continue
		}
		groups = addCheck(groups, i, c)
	}
	var reason error
	var done []*group // groups that admitted and spent
	for _, g := range groups {
		if err := g.store.Apply(ctx, g.ops); err != nil {
			refundAll(ctx, done)
			// A store that fails may still say when to try again (a
			// Failsafe failing closed): pass on the longest wait.
			for j, op := range g.ops {
				if d := op.Result.Decision; !d.Allowed && d.RetryAfter > md.RetryAfter {
					md.Denied, md.RetryAfter = g.idx[j], d.RetryAfter
				}
			}
			return md, err
		}
		admitted := true
		for j, op := range g.ops {
			i := g.idx[j]
			d := op.Result.Decision
			md.Decisions[i] = checks[i].Limiter.report(d)
			if op.Result.Err != nil && reason == nil {
				reason = op.Result.Err
			}
			if !d.Allowed {
				admitted = false
				if md.Denied < 0 || d.RetryAfter > md.RetryAfter {
					md.Denied, md.RetryAfter = i, d.RetryAfter
				}
			}
		}
		if admitted {
			done = append(done, g)
		} else {
			allowed = false
		}
	}
	if !allowed {
		// The stores that admitted spent their units: give them back.
		if err := refundAll(ctx, done); err != nil {
			return md, err
		}
		// Their decisions stand as what they reported, but nothing is spent.
		return md, reason
	}
	md.Allowed = true
	// Dry-run limiters only report: one that fails (and counts the error
	// in its Stats) does not fail the request.
	for _, i := range shadows {
		c := checks[i]
		md.Decisions[i], _ = c.Limiter.AllowN(ctx, c.Key, c.N)
	}
	return md, nil
}

// addCheck adds check i, c, to the group of its limiter's store, or to a
// new group at the end, reading the limiter's clock.
func addCheck(groups []*group, i int, c Check) []*group {
	op := store.Op{Kind: store.OpDecide, Table: c.Limiter.table, Key: c.Key, Now: c.Limiter.now(), N: c.N}
	for _, g := range groups {
		if g.store == c.Limiter.store {
			g.idx, g.ops = append(g.idx, i), append(g.ops, op)
			return groups
		}
	}
	return append(groups, &group{store: c.Limiter.store, idx: []int{i}, ops: []store.Op{op}})
}

// group is the checks of AllowAll or AllowEach on one store, in order of
// first appearance: the indexes of the checks and their ops.
type group struct {
	store store.Store
	idx   []int
	ops   []store.Op
}

// refundAll gives back the units of every admitted op of groups, each
// store in one step.
func refundAll(ctx context.Context, groups []*group) error {
	ctx = context.WithoutCancel(ctx)
	var errs []error
	for _, g := range groups {
		refunds := make([]store.Op, 0, len(g.ops))
		for _, op := range g.ops {
			if r, ok := op.Refund(op.Now); ok {
				refunds = append(refunds, r)
			}
		}
		if len(refunds) > 0 {
			if err := g.store.Apply(ctx, refunds); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("floodgate: refunding a denied AllowAll: %w", errors.Join(errs...))
	}
	return nil
}
