package floodgate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/store"
)

// Check is one limit of AllowAll and AllowEach: Limiter's policy applied
// to Key at cost N.
type Check struct {
	Limiter *Limiter
	Key     string
	// N is the units the request costs; 0 means 1, as for Allow, so that
	// a Check left without one spends like a request rather than peeking.
	N int64
	// Peek, if true, asks without spending anything, whatever N: like
	// AllowN with a cost of 0.
	Peek bool
}

// cost returns the units c spends.
func (c *Check) cost() int64 {
	switch {
	case c.Peek:
		return 0
	case c.N == 0:
		return 1
	}
	return c.N
}

// MultiDecision is the outcome of AllowAll.
type MultiDecision struct {
	// Allowed reports whether every limit admitted the request, so that
	// each spent its units.
	Allowed bool
	// RetryAfter is 0 when admitted; otherwise the longest RetryAfter of
	// the limits that denied, or algo.Never.
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
// units spent for an instant, and on a bucket they stay spent if such a
// caller was admitted on the key in between (algo.Policy.Refund). A limiter in dry-run mode is decided after
// the others, and only reports.
//
// A cost above a limit's burst denies the whole request with RetryAfter
// algo.Never and an error wrapping algo.ErrCostExceedsBurst; so do checks
// naming one key of one limiter more than once, whose costs are summed
// (the other checks' Decisions are then the zero Decision: not decided). Any other
// error admits nothing: bad input spends nothing, and when a store fails,
// what earlier stores spent is given back, while the failing store's own
// checks may have been spent if they were on their way (see
// store.Store.Apply). When a store fails but says when to try again (a
// failsafe store failing closed), RetryAfter and Denied carry that wait
// and the check it came from.
func AllowAll(ctx context.Context, checks ...Check) (MultiDecision, error) {
	md, err := allowAll(ctx, checks)
	observeAll(checks, &md, err)
	return md, err
}

// allowAll is AllowAll, unobserved.
func allowAll(ctx context.Context, checks []Check) (MultiDecision, error) {
	// md.Allowed is set only once every limit has admitted, so that no
	// error return can carry an admission.
	md := MultiDecision{Denied: -1, Decisions: make([]Decision, len(checks))}
	groups, err := groupChecks(checks)
	if err != nil {
		return md, err
	}
	if err := md.overBurst(checks, groups); err != nil {
		return md, err
	}
	var done []*group // groups that admitted and spent
	for _, g := range groups {
		if err := g.store.Apply(ctx, g.ops); err != nil {
			refundAll(ctx, done)
			md.storeWait(g)
			return md, err
		}
		if md.record(checks, g) {
			done = append(done, g)
		}
	}
	if len(done) < len(groups) {
		// The stores that admitted spent their units: give them back.
		if err := refundAll(ctx, done); err != nil {
			return md, err
		}
		// Their decisions stand as what they reported, but nothing is spent.
		return md, firstResultErr(groups)
	}
	md.Allowed = true
	md.decideDryRuns(ctx, checks)
	return md, nil
}

// groupChecks returns the checks of limiters not in dry-run mode grouped
// by their limiter's store (addCheck), reading each limiter's clock. It
// fails on a check without a Limiter.
func groupChecks(checks []Check) ([]*group, error) {
	var groups []*group
	for i, c := range checks {
		if c.Limiter == nil {
			return nil, fmt.Errorf("floodgate: check %d has no Limiter", i)
		}
		if !c.Limiter.dryRun {
			groups = addCheck(groups, checks, i, c.Limiter.now())
		}
	}
	return groups, nil
}

// overBurst denies md when checks name one key of one table more than
// once, at costs that sum to more than its policy's burst: all or nothing,
// they could never be admitted together, whatever the wait. It returns an
// error wrapping algo.ErrCostExceedsBurst, with md denied by the check
// that went over, at RetryAfter algo.Never; or nil, changing nothing.
func (md *MultiDecision) overBurst(checks []Check, groups []*group) error {
	for _, g := range groups {
		burst := func(j int) int64 { return checks[g.idx[j]].Limiter.policy.Burst() }
		j, total, times := overBurstOp(g.ops, burst)
		if j < 0 {
			continue
		}
		for k, c := range checks {
			md.Decisions[k] = c.Limiter.report(algo.Decision{})
		}
		i := g.idx[j]
		md.Decisions[i].RetryAfter = algo.Never
		md.Denied, md.RetryAfter = i, algo.Never
		return fmt.Errorf("floodgate: check %d: key %q is checked %d times under %s, at a total cost of %d: %w (%d)",
			i, checks[i].Key, times, checks[i].Limiter.policy, total, algo.ErrCostExceedsBurst, burst(j))
	}
	return nil
}

// overBurstOp returns the index of the first of ops that, with the ops
// before it on the same table and key, costs more than burst(index) in
// all, with that total and the number of those ops; or -1 when none does.
// A few ops are compared pairwise; many, through a map.
func overBurstOp(ops []store.Op, burst func(int) int64) (j int, total int64, times int) {
	type tableKey struct {
		t store.Table
		k string
	}
	var sums map[tableKey][2]int64 // total, times
	if len(ops) > 16 {
		sums = make(map[tableKey][2]int64, len(ops))
	}
	for j := range ops {
		op := &ops[j]
		if sums == nil {
			total, times = op.N, 1
			for k := range ops[:j] {
				if ops[k].Key == op.Key && ops[k].Table == op.Table {
					total, times = total+ops[k].N, times+1
				}
			}
		} else {
			tk := tableKey{op.Table, op.Key}
			s := sums[tk]
			s[0], s[1] = s[0]+op.N, s[1]+1
			sums[tk] = s
			total, times = s[0], int(s[1])
		}
		if times > 1 && total > burst(j) {
			return j, total, times
		}
	}
	return -1, 0, 0
}

// record sets in md the decisions of g's applied ops, as their limiters
// report them, and makes the denial among them with the longest wait
// md's, if md has none yet or a shorter one. It reports whether every op
// of g was admitted.
func (md *MultiDecision) record(checks []Check, g *group) (admitted bool) {
	admitted = true
	for j, op := range g.ops {
		i := g.idx[j]
		d := op.Result.Decision
		md.Decisions[i] = checks[i].Limiter.report(d)
		if !d.Allowed {
			admitted = false
			if md.Denied < 0 || d.RetryAfter > md.RetryAfter {
				md.Denied, md.RetryAfter = i, d.RetryAfter
			}
		}
	}
	return admitted
}

// storeWait passes on in md the longest wait that g's store, failing,
// reported for a denied op (a failsafe store failing closed says when to try
// again), and the check it came from, if longer than md's.
func (md *MultiDecision) storeWait(g *group) {
	for j, op := range g.ops {
		if d := op.Result.Decision; !d.Allowed && d.RetryAfter > md.RetryAfter {
			md.Denied, md.RetryAfter = g.idx[j], d.RetryAfter
		}
	}
}

// firstResultErr returns the first error in the results of the applied
// ops of groups, in order (a cost past the burst), or nil.
func firstResultErr(groups []*group) error {
	for _, g := range groups {
		for _, op := range g.ops {
			if op.Result.Err != nil {
				return op.Result.Err
			}
		}
	}
	return nil
}

// decideDryRuns decides into md the checks whose limiters are in dry-run
// mode, in order. They only report: one that fails (and counts the error
// in its Stats) does not fail the request.
func (md *MultiDecision) decideDryRuns(ctx context.Context, checks []Check) {
	for i, c := range checks {
		if c.Limiter.dryRun {
			md.Decisions[i], _ = c.Limiter.AllowN(ctx, c.Key, c.cost())
		}
	}
}

// addCheck adds checks[i], at now, to the group of its limiter's store,
// or to a new group at the end. The first group has room for all the
// checks left: most calls are on one store.
func addCheck(groups []*group, checks []Check, i int, now int64) []*group {
	c := checks[i]
	op := store.Op{Kind: store.OpDecide, Table: c.Limiter.table, Key: c.Key, Now: now, N: c.cost()}
	for _, g := range groups {
		if g.store == c.Limiter.store {
			g.idx, g.ops = append(g.idx, i), append(g.ops, op)
			return groups
		}
	}
	size := 1
	if len(groups) == 0 {
		size = len(checks) - i
	}
	g := &group{store: c.Limiter.store, idx: make([]int, 1, size), ops: make([]store.Op, 1, size)}
	g.idx[0], g.ops[0] = i, op
	return append(groups, g)
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
