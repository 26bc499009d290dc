package floodgate

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/floodgate/floodgate/algo"
)

// An EachStore is a Store that carries out many independent ops in one
// step: for a store over the network, one round trip instead of one per op.
// ApplyEach uses it when a store has it.
type EachStore interface {
	Store
	// ApplyEach carries out ops as the function ApplyEach documents.
	ApplyEach(ctx context.Context, ops []Op) error
}

// ApplyEach carries out ops on s, in order, each as if alone: as an Apply
// of that op alone would, so that a denied op changes nothing and leaves
// the others be, and an op sees the effects of the earlier ops on its key.
// It suits a request that checks many limits independently, such as
// Envoy's descriptors, where Apply would check them all or nothing.
//
// An EachStore takes the ops in one step (redisstore: one script call, or
// one per hash slot on a Redis Cluster; a FailsafeStore passes them on).
// The memory store takes them one after another. Any other store gets the
// ops of distinct keys at once, up to 8 at a time, each key's in order, so
// that a store that sends concurrent calls together (filestore) does.
//
// ApplyEach returns an error when some op could not be carried out (a
// broken store, a done context, bad input): the ops' outcomes are then
// unknown, and some may have taken effect.
func ApplyEach(ctx context.Context, s Store, ops []Op) error {
	if es, ok := s.(EachStore); ok {
		return es.ApplyEach(ctx, ops)
	}
	if _, mem := s.(*MemoryStore); mem || len(ops) < 2 {
		for i := range ops {
			if err := s.Apply(ctx, ops[i:i+1]); err != nil {
				return err
			}
		}
		return nil
	}
	return applyByKey(ctx, s, ops)
}

// eachParallel bounds the calls ApplyEach has under way at once on a store
// that is not an EachStore, so that many requests of many ops do not queue
// thousands of calls ahead of the store's timeouts.
const eachParallel = 8

// applyByKey carries out ops on s, the ops of distinct keys at once (up to
// eachParallel at a time), each key's in order: distinct keys are
// independent, so the outcome is that of carrying them out in order.
func applyByKey(ctx context.Context, s Store, ops []Op) error {
	type counter struct {
		t   Table
		key string
	}
	groups := make(map[counter][]int, len(ops))
	var order []counter
	for i := range ops {
		k := counter{ops[i].Table, ops[i].Key}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], i)
	}
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		firstErr atomic.Pointer[error] // the first op's error; a store that is down fails them all
	)
	for range min(len(order), eachParallel) {
		wg.Go(func() {
			for g := next.Add(1) - 1; g < int64(len(order)); g = next.Add(1) - 1 {
				for _, i := range groups[order[g]] {
					if err := s.Apply(ctx, ops[i:i+1]); err != nil {
						firstErr.CompareAndSwap(nil, &err)
						break // the key's later ops depend on this one
					}
				}
			}
		})
	}
	wg.Wait()
	if err := firstErr.Load(); err != nil {
		return *err
	}
	return nil
}

// AllowEach checks several limits independently, each as its Limiter's
// AllowN would alone, in order: a request of many independent checks, as
// a batch of floodgate serve's HTTP API in mode "each". Checks on one
// store are decided in one call of ApplyEach, so that on Redis the whole
// request costs one round trip where AllowN would cost one per check.
// Each limiter reads its own clock once.
//
// It returns each check's decision, in the order of the checks, and errs,
// nil when no check failed, else each check's error (nil for those that
// did not fail): a store that fails fails all its checks, as their AllowN
// would, and a cost above a limit's burst is a denial with an error
// wrapping ErrCostExceedsBurst.
func AllowEach(ctx context.Context, checks ...Check) (ds []Decision, errs []error) {
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
		if t, refused := c.Limiter.table.(errTable); refused { // the store refused the limiter's table
			ds[i], _ = c.Limiter.denial(algo.Decision{}, t.err)
			fail(i, t.err)
			continue
		}
		groups = addCheck(groups, i, c)
	}
	for _, g := range groups {
		err := ApplyEach(ctx, g.store, g.ops)
		for j, op := range g.ops {
			i := g.idx[j]
			var d Decision
			var opErr error
			switch l := checks[i].Limiter; {
			case err != nil:
				d, opErr = l.denial(op.Decision, err)
			case !op.Decision.Allowed || op.Err != nil:
				d, opErr = l.denial(op.Decision, op.Err)
			default:
				d = Decision{Allowed: true, Remaining: op.Decision.Remaining, ResetAfter: op.Decision.ResetAfter, policy: &l.policy}
			}
			ds[i] = d
			if opErr != nil {
				fail(i, opErr)
			}
		}
	}
	return ds, errs
}
