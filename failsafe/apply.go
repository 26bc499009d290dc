package failsafe

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/store"
)

// Apply implements Store: all or nothing, the batch goes to the store
// while every partition it touches is up; it probes them when some are
// down and due for a probe; else the mode decides it. A failure counts
// against the partitions of the ops the store failed on, when it says
// which (store.Result.Failure), else against every partition of the
// batch.
func (f *Store) Apply(ctx context.Context, ops []store.Op) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	// Bad input is answered the same, up or down.
	if err := store.Check(ops, f.policy); err != nil {
		return fmt.Errorf("failsafe: %w", err)
	}
	var bsBuf [4]*breaker // most batches touch a partition or two: no allocation
	var gsBuf [4]uint64
	var blamedBuf [4]bool
	bs := f.breakersOfOps(bsBuf[:0], ops)
	gs, down := gens(gsBuf[:0], bs)
	var probing []bool
	if down >= 0 {
		if probing = f.acquireProbes(bs, probeable(ops)); probing == nil {
			return f.applyFallback(ctx, bs[down], ops, false)
		}
		gs, _ = gens(gs[:0], bs)
	}
	blamed := blamedBuf[:0]
	for range bs {
		blamed = append(blamed, false)
	}
	failed, err := f.applyInner(ctx, ops, bs, blamed)
	if failed {
		f.stats[countFailures].Add(1)
	}
	first := f.recordApply(bs, gs, probing, blamed, failed, err)
	switch {
	case err == nil:
		return nil
	case !failed:
		return callerErr(ctx, err)
	}
	return f.applyFallback(ctx, bs[first], ops, false)
}

// recordApply moves the breakers bs of a batch, of generations gs, after
// the store's call (probing says which were probes): up on success, a
// failure where the store was blamed, nothing when the caller cut the
// call short. It returns the index of the first breaker blamed, or -1.
func (f *Store) recordApply(bs []*breaker, gs []uint64, probing, blamed []bool, failed bool, err error) int {
	first := -1
	for i, b := range bs {
		probe := probing != nil && probing[i]
		switch {
		case err != nil && !failed: // cut short by the caller: says nothing
			if probe {
				b.probing.Store(false)
			}
		case failed && blamed[i]:
			f.fail(b, gs[i], err, probe)
			if first < 0 {
				first = i
			}
		case probe:
			f.up(b, gs[i])
		default:
			b.succeeded()
		}
	}
	return first
}

// breakersOfOps appends to bs the breakers of the partitions of ops, each
// once.
func (f *Store) breakersOfOps(bs []*breaker, ops []store.Op) []*breaker {
	if f.parts == nil || len(ops) == 0 {
		return append(bs, &f.one)
	}
	for i := range ops {
		b := f.breakerOfOp(&ops[i])
		if !slices.Contains(bs, b) {
			bs = append(bs, b)
		}
	}
	return bs
}

// gens appends to gs the generations of bs, and returns the index of one
// that is down, or -1 when all are up.
func gens(gs []uint64, bs []*breaker) ([]uint64, int) {
	down := -1
	for i, b := range bs {
		g, isDown := b.state()
		gs = append(gs, g)
		if isDown && down < 0 {
			down = i
		}
	}
	return gs, down
}

// acquireProbes acquires a probe (acquireProbe) of every partition of bs
// that is down, if ok, and says which it acquired; nil if it could not
// acquire them all, and then it holds none.
func (f *Store) acquireProbes(bs []*breaker, ok bool) []bool {
	if !ok {
		return nil
	}
	probing := make([]bool, len(bs))
	for i, b := range bs {
		if _, down := b.state(); !down {
			continue
		}
		if !f.acquireProbe(b) {
			for j, a := range bs[:i] {
				if probing[j] {
					a.probing.Store(false)
				}
			}
			return nil
		}
		probing[i] = true
	}
	return probing
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
// refunds of units the local store admitted, and reports whether an error
// is a failure of the store; then blamed[i] says whether bs[i], one of
// the breakers of ops, failed: the partition of an op the store failed
// on (store.Result.Failure), or, when it names none, each.
func (f *Store) applyInner(ctx context.Context, ops []store.Op, bs []*breaker, blamed []bool) (failed bool, err error) {
	inner := make([]store.Op, 0, len(ops))
	idx := make([]int, 0, len(ops))
	for i := range ops {
		op := ops[i]
		op.Result = store.Result{} // a stale one would blame the wrong partition
		if op.Kind == store.OpRefund && isLocalStamp(op.Stamp) {
			continue
		}
		op.Table = op.Table.(*table).inner
		inner = append(inner, op)
		idx = append(idx, i)
	}
	if len(inner) == 0 {
		return false, nil
	}
	c, cancel := f.bound(ctx)
	if cancel != nil {
		defer cancel()
	}
	if err := f.store.Apply(c, inner); err != nil {
		if !isFailure(ctx, c, err) {
			return false, err
		}
		f.blame(ops, inner, idx, bs, blamed)
		return true, err
	}
	for j, i := range idx {
		ops[i].Result = inner[j].Result
	}
	return false, nil
}

// blame sets blamed[i] for each breaker bs[i] of an op of inner, the ops
// of ops at idx, that the store failed on, or for every breaker when it
// names none.
func (f *Store) blame(ops, inner []store.Op, idx []int, bs []*breaker, blamed []bool) {
	named := false
	for j, i := range idx {
		if inner[j].Result.Failure() == nil {
			continue
		}
		if k := slices.Index(bs, f.breakerOfOp(&ops[i])); k >= 0 {
			blamed[k], named = true, true
		}
	}
	if !named {
		for k := range blamed {
			blamed[k] = true
		}
	}
}

// applyOn returns s's Apply, or with each ApplyEach on s.
func applyOn(s store.Store, each bool) func(context.Context, []store.Op) error {
	if each {
		return s.ApplyEach
	}
	return s.Apply
}

// applyFallback runs ops by the mode, b's partition having failed; the
// ops have been checked but for costs above the burst.
func (f *Store) applyFallback(ctx context.Context, b *breaker, ops []store.Op, each bool) error {
	if f.mode == FailLocal {
		return f.applyLocal(ctx, ops, each)
	}
	var retry time.Duration
	if f.mode == FailClosed {
		retry = f.retryAfter(b)
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
		return unavailable(b)
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
