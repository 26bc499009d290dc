package redisstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/internal/batch"
	"github.com/floodgate/floodgate/internal/tablename"
	"github.com/floodgate/floodgate/store"
)

// Counters implements store.Counting, unless WithCounters(false) turned
// the counters off (then it answers errors.ErrUnsupported): the counter of
// key K in the window of index W (its start over period) is the Redis key
// "#" + PREFIX + name + "@" + period + "@" + W + ":" + K, name escaped as
// Table escapes it, outside the prefix that a deny cache tracks
// (WithDenyCache), since no counter is cached: each write there would
// cost Redis an invalidation. An integer that INCRBY adds to, with an
// expiry at the end of the next window (on the caller's clock), so that
// a process whose clock is behind by up to a window still finds it.
// Nothing is denied. The window is the one holding the caller's time,
// whatever the store's clock (WithCallerTime or not): every process
// names the window its own clock is in.
func (s *Store) Counters(name string, period time.Duration) (store.Counters, error) {
	if !s.cfg.counters {
		return nil, fmt.Errorf("redisstore: counters of its own are off (WithCounters): %w", errors.ErrUnsupported)
	}
	if period < time.Millisecond || period > algo.MaxPeriod {
		return nil, fmt.Errorf("redisstore: %w: a window of %v is outside [1ms, %v]", algo.ErrInvalidPolicy, period, algo.MaxPeriod)
	}
	return &counters{s: s, base: countersPrefix + s.cfg.prefix + tablename.Escape(name) + "@" + period.String() + "@", period: int64(period)}, nil
}

// countersPrefix starts the keys of the counters, before the store's prefix.
const countersPrefix = "#"

// counters are the counters of one name and window length.
type counters struct {
	s      *Store
	base   string // the keys' start, before the window's index
	period int64  // ns
}

// prefix returns the start of the Redis keys of the window that holds now,
// up to the counter's key.
func (c *counters) prefix(now int64) string {
	return c.base + strconv.FormatInt(now/c.period, 10) + ":"
}

// Partition implements store.Counters: the hash slot of the counter's
// Redis key on a Cluster, 0 on a single Redis.
func (c *counters) Partition(key string, now int64) int {
	if !c.s.cluster {
		return 0
	}
	return int(slot(c.prefix(now), key))
}

// AddEach implements store.Counters: the additions join those of other
// calls, of any counters, that go to Redis at that moment, in one call of
// the counters' function (lua/counters.lua; see carryAdds); on a Cluster,
// each master's share in a call of that master's batcher, the masters at
// once. It returns by the store's timeout or ctx's deadline, as every
// call does, however long Redis stalls.
func (c *counters) AddEach(ctx context.Context, hs []store.Hits) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := store.CheckHits(hs); err != nil {
		return fmt.Errorf("redisstore: %w", err)
	}
	if len(hs) == 0 {
		return nil
	}
	bounded, cancel := c.s.bound(ctx)
	defer cancel()
	gs := c.groups(hs)
	if len(gs) == 1 {
		c.s.doGroup(ctx, bounded, &gs[0])
	} else {
		var wg sync.WaitGroup
		for i := range gs {
			wg.Go(func() { c.s.doGroup(ctx, bounded, &gs[i]) })
		}
		wg.Wait()
	}
	return results(hs, gs)
}

// An addGroup is the additions of an AddEach that go through one batcher
// (on a Cluster, to one master), in one call, and its error.
type addGroup struct {
	b    *batch.Batcher[adds]
	call *addCall // nil once the call is no longer ours (err)
	hits []int    // the hit of each of the call's additions, in order
	err  error    // the call failed as a whole
}

// groups returns the additions of hs, by batcher.
func (c *counters) groups(hs []store.Hits) []addGroup {
	var gs []addGroup
	var last int64 = -1
	var prefix string
	for i := range hs {
		h := &hs[i]
		if w := h.Now / c.period; w != last {
			last, prefix = w, c.prefix(h.Now)
		}
		start := h.Now - h.Now%c.period
		// The end of the next window, in whole milliseconds, rounded up.
		ttl := (start + 2*c.period - h.Now + int64(time.Millisecond) - 1) / int64(time.Millisecond)
		// A count of MaxCount stays MaxCount: more units change no
		// answer, and cannot overflow Redis's integer.
		a := addition{key: prefix + h.Key, n: min(h.N, store.MaxCount), ttl: ttl}
		b := c.s.adder
		if c.s.cluster {
			a.slot = slot(prefix, h.Key)
			b = c.s.adderOf(a.key)
		}
		j := slices.IndexFunc(gs, func(g addGroup) bool { return g.b == b })
		if j < 0 {
			j = len(gs)
			gs = append(gs, addGroup{b: b, call: &addCall{}})
		}
		gs[j].call.Work.as = append(gs[j].call.Work.as, a)
		gs[j].hits = append(gs[j].hits, i)
	}
	return gs
}

// doGroup carries out g's call, and sets g.err when it failed as a
// whole: the error of a caller whose context is ctx, bounded by the
// store's timeout as bounded.
func (s *Store) doGroup(ctx, bounded context.Context, g *addGroup) {
	if err := g.b.Do(bounded, g.call); err != nil {
		g.err, g.call = s.batchErr(ctx, err), nil // the call is no longer ours
		return
	}
	g.err = s.doneErr(ctx, bounded, g.call.Err)
	for i := range g.call.Work.as {
		if a := &g.call.Work.as[i]; a.err != nil {
			a.err = s.doneErr(ctx, bounded, a.err)
		}
	}
}

// results sets the count of each of hs from the groups' outcomes, and
// returns AddEach's error: the first failure's, when every addition
// failed, and one wrapping store.ErrPartialFailure when some did.
func results(hs []store.Hits, gs []addGroup) error {
	var first error
	failed := 0
	for i := range hs {
		hs[i].Count, hs[i].Unknown, hs[i].Err = 0, false, nil
	}
	for _, g := range gs {
		for k, i := range g.hits {
			err := g.err
			if err == nil {
				a := &g.call.Work.as[k]
				if err = a.err; err == nil {
					hs[i].Count = min(a.count, store.MaxCount)
					continue
				}
			}
			first, hs[i].Err = cmp.Or(first, err), store.PartialFailure(err)
			failed++
		}
	}
	switch failed {
	case 0:
		return nil
	case len(hs):
		for i := range hs {
			hs[i].Err = nil
		}
		return first
	}
	return fmt.Errorf("redisstore: %w: %d of %d additions failed: %w", store.ErrPartialFailure, failed, len(hs), first)
}
