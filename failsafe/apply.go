package failsafe

import (
	"context"
	"fmt"
	"time"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/store"
)

// Apply implements Store.
func (f *Store) Apply(ctx context.Context, ops []store.Op) error {
	return f.apply(ctx, ops, false)
}

// ApplyEach implements store.Store: the ops, each as if alone, go to the
// store's ApplyEach, or are decided by the mode while it is down, as
// Apply's are.
func (f *Store) ApplyEach(ctx context.Context, ops []store.Op) error {
	return f.apply(ctx, ops, true)
}

// apply carries out ops all or nothing, or each as if alone.
func (f *Store) apply(ctx context.Context, ops []store.Op, each bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	// Bad input is answered the same, up or down.
	if err := store.Check(ops, f.policy); err != nil {
		return fmt.Errorf("failsafe: %w", err)
	}
	g := f.gen.Load()
	if g&1 == 0 { // up
		err := f.applyInner(ctx, ops, each)
		if err == nil {
			return nil
		}
		if !f.isFailure(ctx, err) {
			return callerErr(ctx, err)
		}
		f.fail(g, err, false)
		return f.applyFallback(ctx, ops, each)
	}
	if probeable(ops) && f.acquireProbe() {
		g := f.gen.Load()
		err := f.applyInner(ctx, ops, each)
		switch {
		case err == nil:
			f.up(g)
			return nil
		case !f.isFailure(ctx, err):
			f.probing.Store(false)
			return callerErr(ctx, err)
		}
		f.fail(g, err, true)
	}
	return f.applyFallback(ctx, ops, each)
}

// probeable reports whether ops may probe the store: some op would reach
// it, and none is denied before it would be (a store may answer those
// without calling out, which would prove nothing).
func probeable(ops []store.Op) bool {
	reaches := false
	for i := range ops {
		op := &ops[i]
		switch op.Kind {
		case store.OpDecide, store.OpSchedule:
			if op.N > op.Table.(*table).p.Burst() {
				return false
			}
		case store.OpRefund:
			if isLocalStamp(op.Stamp) {
				continue
			}
		}
		reaches = true
	}
	return reaches
}

// applyInner runs ops on the store, within the Timeout, leaving out the
// refunds of units the local store admitted.
func (f *Store) applyInner(ctx context.Context, ops []store.Op, each bool) error {
	inner := make([]store.Op, 0, len(ops))
	idx := make([]int, 0, len(ops))
	for i := range ops {
		op := ops[i]
		if op.Kind == store.OpRefund && isLocalStamp(op.Stamp) {
			continue
		}
		op.Table = op.Table.(*table).inner
		inner = append(inner, op)
		idx = append(idx, i)
	}
	if len(inner) == 0 {
		return nil
	}
	c, cancel := f.bound(ctx)
	if cancel != nil {
		defer cancel()
	}
	if err := applyOn(f.store, each)(c, inner); err != nil {
		return err
	}
	for j, i := range idx {
		ops[i].Result = inner[j].Result
	}
	return nil
}

// applyOn returns s's Apply, or with each ApplyEach on s.
func applyOn(s store.Store, each bool) func(context.Context, []store.Op) error {
	if each {
		return s.ApplyEach
	}
	return s.Apply
}

// applyFallback runs ops by the mode, the store having failed; the ops have
// been checked but for costs above the burst.
func (f *Store) applyFallback(ctx context.Context, ops []store.Op, each bool) error {
	if f.mode == FailLocal {
		return f.applyLocal(ctx, ops, each)
	}
	var retry time.Duration
	if f.mode == FailClosed {
		retry = f.retryAfter()
	}
	decided, denied := false, false
	for i := range ops {
		op := &ops[i]
		op.Result = store.Result{}
		if op.Kind != store.OpDecide && op.Kind != store.OpSchedule {
			continue // a refund or reset: dropped
		}
		decided = true
		switch p := op.Table.(*table).p; {
		case op.N > p.Burst():
			op.Result.Decision.RetryAfter, op.Result.Err = algo.Never, costExceedsBurst(op.N, p)
			denied = true
		case f.mode == FailOpen:
			op.Result.Decision.Allowed, op.Result.At = true, op.Now
		default:
			op.Result.Decision.RetryAfter = retry
		}
	}
	if f.mode == FailClosed {
		f.stats[countClosed].Add(1)
		return f.unavailable()
	}
	if decided && !denied {
		f.stats[countOpen].Add(1)
	}
	return nil
}

// applyLocal runs ops on the local store, leaving out the refunds of units
// it did not admit, and marks the stamps of what it admits.
func (f *Store) applyLocal(ctx context.Context, ops []store.Op, each bool) error {
	local := make([]store.Op, 0, len(ops))
	idx := make([]int, 0, len(ops))
	for i := range ops {
		op := ops[i]
		if op.Kind == store.OpRefund {
			if !isLocalStamp(op.Stamp) {
				continue
			}
			op.Stamp = localStamp(op.Stamp)
		}
		lt, err := op.Table.(*table).localTable()
		if err != nil {
			return err
		}
		op.Table = lt
		local = append(local, op)
		idx = append(idx, i)
	}
	if len(local) == 0 {
		return nil
	}
	f.stats[countLocal].Add(1)
	if err := applyOn(f.local, each)(ctx, local); err != nil {
		return err
	}
	for j, i := range idx {
		op, lop := &ops[i], &local[j]
		op.Result = lop.Result
		if (op.Kind == store.OpDecide || op.Kind == store.OpSchedule) && op.Result.Decision.Allowed && op.N > 0 {
			op.Result.Stamp = localStamp(op.Result.Stamp)
		}
	}
	return nil
}

// The stamps of the local store's admissions are marked by complementing
// their TAT, which every store leaves non-negative (algo.Policy.Refund
// ignores a stamp with a negative TAT), so that a refund goes back to the
// store that admitted the units and to no other. localStamp marks a stamp
// and unmarks a marked one.
func localStamp(s algo.Stamp) algo.Stamp { s.TAT = ^s.TAT; return s }

func isLocalStamp(s algo.Stamp) bool { return s.TAT < 0 }
