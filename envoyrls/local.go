package envoyrls

import (
	"context"
	"fmt"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/floodgate/floodgate/clock"
	"github.com/floodgate/floodgate/store"
)

// DefaultFlushInterval is how often, by default, a Service writes to its
// store the hits it answered from memory (see WithFlushInterval).
const DefaultFlushInterval = 100 * time.Millisecond

// maxOverCounts bounds the counters a Service remembers as over; past it,
// the hits on the others go to the store.
const maxOverCounts = 1 << 16

// flushBatch is the most counters one flush writes in one ApplyEach.
const flushBatch = 512

// An overKey names one fixed-window counter: the domain's counter of a
// window length (counterKey) for one descriptor's store key.
type overKey struct {
	counterKey
	key string
}

// An overCount is what a Service knows of a fixed-window counter in one
// window: known is a lower bound of its count (the store's last reply,
// plus the hits answered from memory since), and pending the hits
// answered from memory and not yet written to the store. known is 0 when
// the counter must be asked (a write of its hits failed).
type overCount struct {
	c              store.Counters // the counter's: its domain's of its window length
	start          int64          // the window's start, ns since the epoch
	known, pending int64
}

// overCounts are the counters a Service knows to be over some limit in
// their current window, and the hits it owes them. Its methods are safe
// for concurrent use.
//
// Invariants:
//  1. A counter is in the shard its key hashes to (shardOf), and only
//     there; its fields are read and written with that shard's mu held.
//  2. n is the number of counters in all the shards, changed with the
//     shard's mu held: n == 0 means no counter, and no hit owed.
//  3. started and closed change with state held, and never back: the
//     flusher starts at most once, and never after Close.
type overCounts struct {
	// writing is held by a flush while it writes one batch, and
	// read-held by each request's store call, so that no flush of a
	// window's hits reaches the store after a request of this process
	// decided a later window there.
	writing sync.RWMutex
	shards  [overShards]overShard
	seed    maphash.Seed
	n       atomic.Int64
	off     bool          // WithFlushInterval < 0: every hit goes to the store
	every   time.Duration // the flush interval
	state   sync.Mutex
	started atomic.Bool // the flusher runs
	closed  atomic.Bool // Close was called: every hit goes to the store
	// answered counts the descriptors answered from memory
	// (Stats.FromMemory).
	answered atomic.Uint64
	stop     chan struct{} // closed by Close
	done     chan struct{} // closed when the flusher returns
}

// overShards is how many shards the counters known over are split in,
// so that concurrent requests on different counters seldom take one lock.
const overShards = 64

// An overShard is some of the counters known over, on a cache line of
// their own.
type overShard struct {
	mu sync.Mutex
	m  map[overKey]*overCount
	_  [48]byte
}

// shardOf returns the shard of the counter k (invariant 1).
func (o *overCounts) shardOf(k overKey) *overShard {
	return &o.shards[maphash.String(o.seed, k.key)%overShards]
}

// windowStart is the start of the fixed window of length period that holds
// now, both in ns since the epoch, as package algo aligns it.
func windowStart(now int64, period time.Duration) int64 { return now - now%int64(period) }

func (d *desc) overKey(domainName string) overKey {
	return overKey{counterKey{domainName, d.r.period}, d.key}
}

// answer answers a fixed-window descriptor from memory when its counter is
// known to be past the rule's requests_per_unit in the current window, as
// the store would: over, whatever the cost (the count only grows within a
// window), the hits owed to the counter. It does so only while more than
// a flush interval is left of the window, so that the flusher writes the
// hits before the window ends. Otherwise it hands the descriptor
// the hits owed to its counter, which the store is asked to add with its
// own (d.owed), and reports false.
func (o *overCounts) answer(s *Service, domainName string, d *desc, now int64) bool {
	if o.off || o.n.Load() == 0 { // invariant 2: nothing known, nothing owed
		return false
	}
	k := d.overKey(domainName)
	sh := o.shardOf(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	c := sh.m[k]
	switch {
	case c == nil:
		return false
	case c.start != windowStart(now, d.r.period):
		// Hits owed to a window that has ended are dropped: no decision
		// reads a window's count once it has ended (see the package doc).
		o.remove(sh, k)
		return false
	case c.known > int64(d.r.perUnit) && !o.closed.Load() && now+int64(o.every) < c.start+int64(d.r.period):
		c.known, c.pending = addCount(c.known, d.n), addCount(c.pending, d.n)
		d.over = true
		o.answered.Add(1)
		if !o.started.Load() && c.pending > 0 {
			o.startFlusher(s)
		}
		return true
	}
	d.owed, c.pending = c.pending, 0
	return false
}

// addCount adds n hits to a count, both at least 0, the count at most
// store.MaxCount, as a counter reports it.
func addCount(count, n int64) int64 { return min(count+min(n, store.MaxCount), store.MaxCount) }

// learn records what the store answered for the fixed-window descriptors
// ds[todo] decided at now: the count of each counter past its rule's
// limit, and gives back the hits owed to the counters whose store call
// failed.
func (o *overCounts) learn(domainName string, ds []desc, todo []int, now int64) {
	if o.off {
		return
	}
	for _, i := range todo {
		if d := &ds[i]; d.r.upstream && (d.over || d.owed > 0 || o.n.Load() > 0) {
			o.learnOne(domainName, d, now)
		}
	}
}

// learnOne is learn's for one descriptor, d, with its shard's lock held.
func (o *overCounts) learnOne(domainName string, d *desc, now int64) {
	k := d.overKey(domainName)
	sh := o.shardOf(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	c := sh.m[k]
	if d.err != nil {
		if c != nil && d.owed > 0 {
			c.pending, c.known = addCount(c.pending, d.owed), 0
		}
		return
	}
	count := d.count
	if c == nil {
		if !d.over || count <= int64(d.r.perUnit) || o.n.Load() >= maxOverCounts {
			return
		}
		c = &overCount{c: d.l.c, start: -1}
		if sh.m == nil {
			sh.m = make(map[overKey]*overCount)
		}
		sh.m[k] = c
		o.n.Add(1)
	}
	if start := windowStart(now, d.r.period); c.start != start {
		c.start, c.pending = start, 0
	}
	c.known = addCount(count, c.pending)
}

// remove forgets the counter k of sh, whose mu is held (invariant 2).
func (o *overCounts) remove(sh *overShard, k overKey) {
	delete(sh.m, k)
	o.n.Add(-1)
}

func newOverCounts(flushEvery time.Duration) overCounts {
	return overCounts{off: flushEvery < 0, every: flushEvery, seed: maphash.MakeSeed(),
		stop: make(chan struct{}), done: make(chan struct{})}
}

// startFlusher starts the goroutine that flushes every flush interval, on
// the service's clock, until close, unless it runs or Close was called
// (invariant 3).
func (o *overCounts) startFlusher(s *Service) {
	o.state.Lock()
	defer o.state.Unlock()
	if o.started.Load() || o.closed.Load() {
		return
	}
	o.started.Store(true)
	go func() {
		defer close(o.done)
		clk := s.opts.clock
		if clk == nil {
			clk = clock.Real{}
		}
		for {
			t := clk.NewTimer(o.every)
			select {
			case <-t.C():
				if err := s.Flush(context.Background()); err != nil {
					s.logStoreError("", "(the hits answered from memory)", err)
				}
			case <-o.stop:
				t.Stop()
				return
			}
		}
	}()
}

// Flush writes to the store the hits answered from memory since the last
// flush (see WithFlushInterval), and returns the first error; the hits of
// a counter whose write failed are kept, to be written with its next hit
// or flush, and its next hits are asked of the store. A Service flushes by
// itself every flush interval, and Close flushes; Flush is for a caller
// that wants the store's counts exact now. It writes flushBatch counters
// at a time, holding back requests to the store only while one batch is
// written, and stops at the first batch that fails: the counters not
// written keep their hits.
func (s *Service) Flush(ctx context.Context) error {
	now := s.now()
	ds := s.local.owed(now)
	for len(ds) > 0 {
		batch := ds[:min(len(ds), flushBatch)]
		ds = ds[len(batch):]
		if err := s.flushBatch(ctx, batch, now); err != nil {
			for i := range ds {
				ds[i].err = err
			}
			s.local.flushed(ds, s.now())
			return fmt.Errorf("envoyrls: writing the hits answered from memory: %w", err)
		}
	}
	return nil
}

// flushBatch writes batch, hits owed at owedAt, and returns the first
// error. It holds writing meanwhile, so that no request of this process
// decides a later window on the store before the batch is written; a
// counter whose window has ended since owedAt is not written, its hits
// dropped as answer drops them.
func (s *Service) flushBatch(ctx context.Context, batch []desc, owedAt int64) error {
	s.local.writing.Lock()
	defer s.local.writing.Unlock()
	now := s.now()
	live := batch[:0]
	for _, d := range batch {
		if windowStart(now, d.r.period) == windowStart(owedAt, d.r.period) {
			live = append(live, d)
		}
	}
	todo := make([]int, len(live))
	for i := range todo {
		todo[i] = i
	}
	s.decideOnStore(ctx, live, todo, now)
	s.local.flushed(live, now)
	for i := range live {
		if err := live[i].err; err != nil {
			return err
		}
	}
	return nil
}

// flushRule stands for the rule of a flush: a fixed window that is over
// as soon as it counts a hit, so that decided keeps the count.
var flushRule = &rule{upstream: true}

// owed takes the hits owed to the counters of current windows, each as a
// desc whose cost is them, and forgets the counters whose window ended.
func (o *overCounts) owed(now int64) []desc {
	var ds []desc
	for i := range o.shards {
		sh := &o.shards[i]
		sh.mu.Lock()
		for k, c := range sh.m {
			switch {
			case c.start != windowStart(now, k.period):
				o.remove(sh, k)
			case c.pending > 0:
				r := *flushRule
				r.domain, r.period = k.domain, k.period
				ds = append(ds, desc{r: &r, l: limiter{c: c.c}, key: k.key, n: c.pending})
				c.pending = 0
			}
		}
		sh.mu.Unlock()
	}
	return ds
}

// flushed records the store's answers to a flush, as learn does for
// requests: a counter's count is the store's, plus the hits answered
// since; a counter whose write failed keeps its hits and is asked next.
func (o *overCounts) flushed(ds []desc, now int64) {
	for i := range ds {
		o.flushedOne(&ds[i], now)
	}
}

// flushedOne is flushed's for one desc, d, with its shard's lock held.
func (o *overCounts) flushedOne(d *desc, now int64) {
	k := d.overKey(d.r.domain)
	sh := o.shardOf(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	switch c := sh.m[k]; {
	case c == nil || c.start != windowStart(now, d.r.period):
	case d.err != nil:
		c.pending, c.known = addCount(c.pending, d.n), 0
	default:
		c.known = addCount(d.count, c.pending)
	}
}

// Close stops the flushing and writes to the store the hits the Service
// answered from memory, returning the first error of that write. Call it
// when the Service will answer no more requests, before the store is
// closed; requests answered after it are written by their own store call
// or by a later Flush.
func (s *Service) Close(ctx context.Context) error {
	o := &s.local
	o.state.Lock()
	started := o.started.Load()
	if !o.closed.Load() {
		o.closed.Store(true)
		close(o.stop)
	}
	o.state.Unlock()
	if started {
		<-o.done
	}
	return s.Flush(ctx)
}

// check verifies invariants 1 and 2, for tests: each counter in the shard
// its key hashes to, and n their number.
func (o *overCounts) check() error {
	n := 0
	for i := range o.shards {
		sh := &o.shards[i]
		sh.mu.Lock()
		for k := range sh.m {
			if o.shardOf(k) != sh {
				sh.mu.Unlock()
				return fmt.Errorf("counter %v in shard %d, not its own", k, i)
			}
		}
		n += len(sh.m)
		sh.mu.Unlock()
	}
	if got := o.n.Load(); got != int64(n) {
		return fmt.Errorf("n is %d, the shards hold %d counters", got, n)
	}
	return nil
}
