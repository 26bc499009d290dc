package redisstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/internal/tablename"
	"github.com/floodgate/floodgate/store"
	"github.com/redis/go-redis/v9"
)

// Counters implements store.Counting, with WithCounters (else it answers
// errors.ErrUnsupported): the counter of key K in the window
// of index W (its start over period) is the Redis key "#" + PREFIX + name
// + "@" + period + "@" + W + ":" + K, name escaped as Table escapes it,
// outside the prefix that a deny cache tracks (WithDenyCache), since no
// counter is cached: each write there would cost Redis an invalidation. An
// integer that INCRBY adds to, with an expiry at the end of the next
// window (on the caller's clock), so that a process whose clock is behind
// by up to a window still finds it. Nothing is denied, and there is no
// script: an addition is an INCRBY and a PEXPIRE, pipelined, as
// envoyproxy/ratelimit's. The window is the one holding the caller's
// time, whatever the store's clock (WithCallerTime or not): every
// process names the window its own clock is in.
func (s *Store) Counters(name string, period time.Duration) (store.Counters, error) {
	if !s.cfg.counters {
		return nil, fmt.Errorf("redisstore: counters of its own need WithCounters: %w", errors.ErrUnsupported)
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

// AddEach implements store.Counters: one INCRBY of each addition, in one
// pipeline (on a Cluster, go-redis's, one for each master, at once), then
// a PEXPIRE of each key the INCRBYs made, in another. It returns by the store's timeout or ctx's deadline,
// as every call does, however long Redis stalls: the pipeline goes on
// alone, on copies of its own.
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
	p := c.pipeline(bounded, hs)
	done := make(chan struct{})
	go func() {
		p.exec(bounded, c.s.client)
		close(done)
	}()
	select {
	case <-done:
	case <-bounded.Done():
		return c.s.batchErr(ctx, bounded.Err())
	}
	return p.results(hs, func(err error) error { return c.s.doneErr(ctx, bounded, err) })
}

// A pipeline is one AddEach's commands, its own.
type pipeline struct {
	keys []string
	n    []int64
	ttl  []time.Duration
	cmds []*redis.IntCmd // the INCRBYs'
}

// pipeline returns the commands of hs.
func (c *counters) pipeline(ctx context.Context, hs []store.Hits) *pipeline {
	p := &pipeline{keys: make([]string, len(hs)), n: make([]int64, len(hs)), ttl: make([]time.Duration, len(hs))}
	var last int64 = -1
	var prefix string
	for i := range hs {
		h := &hs[i]
		if w := h.Now / c.period; w != last {
			last, prefix = w, c.prefix(h.Now)
		}
		start := h.Now - h.Now%c.period
		// The end of the next window, in whole milliseconds, rounded up.
		ttl := (start + 2*c.period - h.Now + int64(time.Millisecond) - 1) / int64(time.Millisecond) * int64(time.Millisecond)
		p.keys[i], p.n[i], p.ttl[i] = prefix+h.Key, h.N, time.Duration(ttl)
	}
	return p
}

// exec sends p's INCRBYs through client and keeps their replies, then
// the PEXPIRE of each key an INCRBY made (its reply is its cost): a
// counter takes one expiry, not one a hit.
func (p *pipeline) exec(ctx context.Context, client redis.UniversalClient) {
	pl := client.Pipeline()
	p.cmds = make([]*redis.IntCmd, len(p.keys))
	for i, k := range p.keys {
		p.cmds[i] = pl.IncrBy(ctx, k, p.n[i])
	}
	_, _ = pl.Exec(ctx) // each command keeps its own error
	var ex redis.Pipeliner
	for i, k := range p.keys {
		if v, err := p.cmds[i].Result(); err == nil && v == p.n[i] {
			if ex == nil {
				ex = client.Pipeline()
			}
			ex.PExpire(ctx, k, p.ttl[i])
		}
	}
	if ex != nil {
		_, _ = ex.Exec(ctx)
	}
}

// results sets the count of each of hs from p's replies, and returns
// AddEach's error: the first failure's, when every addition failed, and
// one wrapping store.ErrPartialFailure when some did. done turns a
// failure into the caller's error (Store.doneErr).
func (p *pipeline) results(hs []store.Hits, done func(error) error) error {
	var first error
	failed := 0
	for i := range hs {
		h := &hs[i]
		h.Count, h.Unknown, h.Err = 0, false, nil
		v, err := p.cmds[i].Result()
		if err != nil {
			err = done(countersErr(err))
			first, h.Err = cmp.Or(first, err), store.PartialFailure(err)
			failed++
			continue
		}
		h.Count = min(v, store.MaxCount)
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

// countersErr wraps the error of a command of a pipeline: ErrUnavailable
// when Redis did not answer, as decode does for the script's.
func countersErr(err error) error {
	var reply redis.Error
	if !errors.As(err, &reply) && !errors.Is(err, context.Canceled) {
		err = fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return fmt.Errorf("redisstore: %w", err)
}
