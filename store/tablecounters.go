package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/floodgate/floodgate/algo"
)

// TableCounters returns the counters named name of the windows of length
// period kept in s's table of that name and policy CounterPolicy(period):
// the counters of a store that is not Counting, which package algo
// decides. A hit that would take a counter to MaxCount is refused by the
// policy; AddEach then fills the counter, and reports MaxCount (a later
// read of 0 hits reports MaxCount-1, what the table holds).
func TableCounters(s Store, name string, period time.Duration) (Counters, error) {
	p, err := CounterPolicy(period)
	if err != nil {
		return nil, err
	}
	t, err := s.Table(counterTable(name, period), p)
	if err != nil {
		return nil, err
	}
	_, local := s.(Local)
	parts, _ := s.(Partitioned)
	return &tableCounters{s: s, t: t, local: local, parts: parts}, nil
}

// counterTable is the table name of TableCounters of name and period: a
// name per window length, since one name under two policies is a policy
// change, whose keys a store converts (see the package doc), and the
// counters of two window lengths are apart.
func counterTable(name string, period time.Duration) string {
	return name + "@" + period.String()
}

// CounterPolicy is the policy of the table of TableCounters: a fixed
// window of length period admitting MaxCount-1 hits, a compact policy
// (algo.Policy.Compact).
func CounterPolicy(period time.Duration) (algo.Policy, error) {
	return algo.New(algo.FixedWindow, MaxCount-1, period, 0)
}

type tableCounters struct {
	s     Store
	t     Table
	local bool        // s is Local: decide hit by hit
	parts Partitioned // nil: one partition
}

// Partition implements Counters: the partition of key in the table.
func (c *tableCounters) Partition(key string, _ int64) int {
	if c.parts == nil {
		return 0
	}
	return c.parts.Partition(c.t, key)
}

// AddEach implements Counters: one OpDecide of each addition, in one
// ApplyEach (or Table.Decide, on a Local store or for one addition, which
// a store that batches concurrent calls joins), then one more for each
// counter that refused its hits, to fill it: at once on a Local store,
// else after the ApplyEach, so that a later addition of the call on that
// counter does not see it filled.
func (c *tableCounters) AddEach(ctx context.Context, hs []Hits) error {
	if err := CheckHits(hs); err != nil {
		return err
	}
	ops := make([]Op, len(hs))
	for i := range hs {
		h := &hs[i]
		*h = Hits{Key: h.Key, Now: h.Now, N: h.N}
		ops[i] = Op{Kind: OpDecide, Table: c.t, Key: h.Key, Now: h.Now, N: h.N}
	}
	var err error
	if c.local || len(ops) == 1 {
		err = c.oneByOne(ctx, hs, ops)
	} else {
		err = c.s.ApplyEach(ctx, ops)
		if err == nil || errors.Is(err, ErrPartialFailure) {
			err = c.countEach(ctx, hs, ops)
		}
	}
	return err
}

// oneByOne decides ops with Table.Decide, and counts each before the next.
func (c *tableCounters) oneByOne(ctx context.Context, hs []Hits, ops []Op) error {
	for i := range ops {
		op := &ops[i]
		d, err := c.t.Decide(ctx, op.Key, op.Now, op.N)
		if err != nil && !errors.Is(err, algo.ErrCostExceedsBurst) {
			return err
		}
		op.Result = Result{Decision: d, Err: err}
		if err := c.counted(ctx, &hs[i], op); err != nil {
			return err
		}
	}
	return nil
}

// countEach sets the counts of hs from the results of ops, and returns
// AddEach's error.
func (c *tableCounters) countEach(ctx context.Context, hs []Hits, ops []Op) error {
	failed := 0
	for i := range hs {
		if err := c.counted(ctx, &hs[i], &ops[i]); err != nil {
			hs[i].Err = PartialFailure(err)
			failed++
		}
	}
	if failed > 0 {
		return fmt.Errorf("%w: %d of %d additions failed", ErrPartialFailure, failed, len(hs))
	}
	return nil
}

// counted sets h's count from the decision of its op, filling the counter
// when it refused the hits, and returns the error of the addition.
func (c *tableCounters) counted(ctx context.Context, h *Hits, op *Op) error {
	if err := op.Result.Failure(); err != nil {
		return err
	}
	switch d := op.Result.Decision; {
	case d.Allowed && d.Remaining == 0 && d.ResetAfter == 0:
		// Admitted with no count known: a failsafe.Store failing open
		// (a counter that counted has the rest of its window to reset).
		h.Unknown = true
	case d.Allowed:
		h.Count = MaxCount - 1 - d.Remaining
	default:
		h.Count = MaxCount
		return c.fill(ctx, op.Key, op.Now, d.Remaining, op.Result.Err != nil)
	}
	return nil
}

// fill spends what the counter of key has left, rest, so that it is full,
// as it would be had it taken the hits it refused; it tries again
// when a concurrent call spent some of it first. When the refusal was of
// a cost above the burst, which says nothing of what is left, it reads
// that first.
func (c *tableCounters) fill(ctx context.Context, key string, now, rest int64, overBurst bool) error {
	if overBurst {
		d, err := c.t.Decide(ctx, key, now, 0)
		if err != nil {
			return err
		}
		rest = d.Remaining
	}
	for range 4 {
		if rest <= 0 {
			return nil
		}
		d, err := c.t.Decide(ctx, key, now, rest)
		if err != nil && !errors.Is(err, algo.ErrCostExceedsBurst) {
			return err
		}
		if d.Allowed {
			return nil
		}
		rest = d.Remaining
	}
	return nil
}
