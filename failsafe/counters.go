package failsafe

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/floodgate/floodgate/store"
)

// Counters implements store.Counting when the wrapped store does: its
// counters, kept up by the breakers of their partitions as ApplyEach's
// ops are (see "Counters" in the package documentation). It returns an
// error wrapping errors.ErrUnsupported when the wrapped store is not
// Counting: store.CountersOf then counts on a table of this store.
func (f *Store) Counters(name string, period time.Duration) (store.Counters, error) {
	c, ok := f.store.(store.Counting)
	if !ok {
		return nil, fmt.Errorf("failsafe: the store has no counters: %w", errors.ErrUnsupported)
	}
	inner, err := c.Counters(name, period)
	if err != nil {
		return nil, err
	}
	return &counters{f: f, inner: inner, name: name, period: period}, nil
}

// counters are the wrapped store's counters, and the local store's for
// FailLocal, made the first time they are needed.
type counters struct {
	f      *Store
	inner  store.Counters
	name   string
	period time.Duration

	once     sync.Once
	local    store.Counters
	localErr error
}

// Partition implements store.Counters: the wrapped store's.
func (c *counters) Partition(key string, now int64) int { return c.inner.Partition(key, now) }

// AddEach implements store.Counters as ApplyEach does ops: the additions
// of partitions that are up (or due for a probe) go to the store's
// AddEach together, the others' are counted by the mode, as are those
// the store failed on.
func (c *counters) AddEach(ctx context.Context, hs []store.Hits) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := store.CheckHits(hs); err != nil {
		return fmt.Errorf("failsafe: %w", err)
	}
	if len(hs) == 0 {
		return nil
	}
	e := &eachCall{of: make([]int, len(hs)), mode: make([]bool, len(hs))}
	c.partition(hs, e)
	if err := c.send(ctx, hs, e); err != nil {
		return err
	}
	return c.fallback(ctx, hs, e)
}

// partition sets e's partitions of hs, each with whether its additions go
// to the store, and each addition's.
func (c *counters) partition(hs []store.Hits, e *eachCall) {
	f := c.f
	for i := range hs {
		b := &f.one
		if f.parts != nil {
			b = f.breakerAt(c.inner.Partition(hs[i].Key, hs[i].Now))
		}
		j := 0
		for j < len(e.parts) && e.parts[j].b != b {
			j++
		}
		if j == len(e.parts) {
			e.parts = append(e.parts, part{b: b})
		}
		e.of[i] = j
	}
	for j := range e.parts {
		p := &e.parts[j]
		g, down := p.b.state()
		switch {
		case !down:
			p.g, p.send = g, true
		case f.acquireProbe(p.b):
			p.g, p.send, p.probe = p.b.gen.Load(), true, true
		}
	}
	for i := range hs {
		e.mode[i] = !e.parts[e.of[i]].send
	}
}

// send sends the additions of the partitions to send to the store, within
// the Timeout, and records each partition's outcome, as sendEach does.
func (c *counters) send(ctx context.Context, hs []store.Hits, e *eachCall) error {
	var inner []store.Hits
	var idx []int
	for i := range hs {
		if !e.mode[i] {
			inner, idx = append(inner, store.Hits{Key: hs[i].Key, Now: hs[i].Now, N: hs[i].N}), append(idx, i)
		}
	}
	if len(inner) == 0 {
		return nil
	}
	f := c.f
	cc, cancel := f.bound(ctx)
	if cancel != nil {
		defer cancel()
	}
	err := c.inner.AddEach(cc, inner)
	if err != nil && !errors.Is(err, store.ErrPartialFailure) {
		return f.wholeFailed(ctx, cc, e, err)
	}
	var first error
	for j, i := range idx {
		h := &inner[j]
		cause := h.Err
		if cause != nil {
			cause = (&store.Result{Err: cause}).Failure()
		}
		switch {
		case cause == nil:
			hs[i] = *h
		case !isFailure(ctx, cc, cause):
			hs[i].Err = store.PartialFailure(callerErr(ctx, cause))
			e.parts[e.of[i]].cut = true
		default:
			e.parts[e.of[i]].failed, e.mode[i] = true, true
			first = cmp.Or(first, cause)
		}
	}
	f.record(e, first)
	return nil
}

// fallback counts by the mode the additions of the partitions not sent
// and those the store failed on, and returns AddEach's error, as
// fallbackEach does.
func (c *counters) fallback(ctx context.Context, hs []store.Hits, e *eachCall) error {
	var first error
	for j := range e.parts {
		p := &e.parts[j]
		if p.send && !p.failed {
			continue
		}
		var idx []int
		for i := range hs {
			if e.of[i] == j && e.mode[i] {
				idx = append(idx, i)
			}
		}
		if err := c.byMode(ctx, p.b, hs, idx); err != nil {
			for _, i := range idx {
				hs[i].Count, hs[i].Unknown, hs[i].Err = 0, false, store.PartialFailure(err)
			}
		}
	}
	failed := 0
	for i := range hs {
		if hs[i].Err != nil {
			failed++
			first = cmp.Or(first, (&store.Result{Err: hs[i].Err}).Failure())
		}
	}
	switch {
	case failed == 0:
		return nil
	case failed == len(hs):
		for i := range hs {
			hs[i].Err = nil
		}
		return first
	}
	return fmt.Errorf("failsafe: %w: %d of %d additions failed: %w", store.ErrPartialFailure, failed, len(hs), first)
}

// byMode counts the additions hs[idx] by the mode, b's partition having
// failed: FailOpen knows no count, FailClosed fails them, FailLocal adds
// them to the local store's counters.
func (c *counters) byMode(ctx context.Context, b *breaker, hs []store.Hits, idx []int) error {
	f := c.f
	switch f.mode {
	case FailOpen:
		f.stats[countOpen].Add(1)
		for _, i := range idx {
			hs[i].Count, hs[i].Unknown, hs[i].Err = 0, true, nil
		}
		return nil
	case FailClosed:
		f.stats[countClosed].Add(1)
		return unavailable(b)
	}
	c.once.Do(func() { c.local, c.localErr = store.CountersOf(f.local, c.name, c.period) })
	if c.localErr != nil {
		return c.localErr
	}
	f.stats[countLocal].Add(1)
	local := make([]store.Hits, len(idx))
	for j, i := range idx {
		local[j] = store.Hits{Key: hs[i].Key, Now: hs[i].Now, N: hs[i].N}
	}
	if err := c.local.AddEach(ctx, local); err != nil {
		return err
	}
	for j, i := range idx {
		hs[i] = local[j]
	}
	return nil
}
