package envoyrls

import (
	"context"
	"fmt"
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
type overCounts struct {
	// writing is held by a flush, and read-held by each request's store
	// call, so that no flush of a window's hits reaches the store after
	// a request of this process decided a later window there.
	writing sync.RWMutex
	mu      sync.Mutex
	m       map[overKey]*overCount
	off     bool          // WithFlushInterval < 0: every hit goes to the store
	every   time.Duration // the flush interval
	started bool          // the flusher runs
	closed  bool          // Close was called: every hit goes to the store
	// answered counts the descriptors answered from memory
	// (Stats.FromMemory).
	answered atomic.Uint64
	stop     chan struct{} // closed by Close
	done     chan struct{} // closed when the flusher returns
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
	if o.off {
		return false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	k := d.overKey(domainName)
	c := o.m[k]
	switch {
	case c == nil:
		return false
	case c.start != windowStart(now, d.r.period):
		// Hits owed to a window that has ended are dropped: no decision
		// reads a window's count once it has ended (see the package doc).
		delete(o.m, k)
		return false
	case c.known > int64(d.r.perUnit) && !o.closed && now+int64(o.every) < c.start+int64(d.r.period):
		c.known, c.pending = addCount(c.known, d.n), addCount(c.pending, d.n)
		d.over = true
		o.answered.Add(1)
		if !o.started && c.pending > 0 {
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
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, i := range todo {
		d := &ds[i]
		if !d.r.upstream {
			continue
		}
		k := d.overKey(domainName)
		c := o.m[k]
		if d.err != nil {
			if c != nil && d.owed > 0 {
				c.pending, c.known = addCount(c.pending, d.owed), 0
			}
			continue
		}
		count := d.count
		if c == nil {
			if !d.over || count <= int64(d.r.perUnit) || len(o.m) >= maxOverCounts {
				continue
			}
			c = &overCount{c: d.l.c, start: -1}
			o.m[k] = c
		}
		if start := windowStart(now, d.r.period); c.start != start {
			c.start, c.pending = start, 0
		}
		c.known = addCount(count, c.pending)
	}
}

func newOverCounts(flushEvery time.Duration) overCounts {
	return overCounts{off: flushEvery < 0, every: flushEvery, m: make(map[overKey]*overCount),
		stop: make(chan struct{}), done: make(chan struct{})}
}

// startFlusher starts the goroutine that flushes every flush interval, on
// the service's clock, until close. o.mu is held.
func (o *overCounts) startFlusher(s *Service) {
	o.started = true
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
// that wants the store's counts exact now.
func (s *Service) Flush(ctx context.Context) error {
	s.local.writing.Lock()
	defer s.local.writing.Unlock()
	now := s.now()
	ds := s.local.owed(now)
	var first error
	for len(ds) > 0 {
		batch := ds[:min(len(ds), flushBatch)]
		ds = ds[len(batch):]
		todo := make([]int, len(batch))
		for i := range todo {
			todo[i] = i
		}
		s.decideOnStore(ctx, batch, todo, now)
		s.local.flushed(batch, now)
		for i := range batch {
			if err := batch[i].err; err != nil && first == nil {
				first = fmt.Errorf("envoyrls: writing the hits answered from memory: %w", err)
			}
		}
	}
	return first
}

// flushRule stands for the rule of a flush: a fixed window that is over
// as soon as it counts a hit, so that decided keeps the count.
var flushRule = &rule{upstream: true}

// owed takes the hits owed to the counters of current windows, each as a
// desc whose cost is them, and forgets the counters whose window ended.
func (o *overCounts) owed(now int64) []desc {
	o.mu.Lock()
	defer o.mu.Unlock()
	var ds []desc
	for k, c := range o.m {
		switch {
		case c.start != windowStart(now, k.period):
			delete(o.m, k)
		case c.pending > 0:
			r := *flushRule
			r.domain, r.period = k.domain, k.period
			ds = append(ds, desc{r: &r, l: limiter{c: c.c}, key: k.key, n: c.pending})
			c.pending = 0
		}
	}
	return ds
}

// flushed records the store's answers to a flush, as learn does for
// requests: a counter's count is the store's, plus the hits answered
// since; a counter whose write failed keeps its hits and is asked next.
func (o *overCounts) flushed(ds []desc, now int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for i := range ds {
		d := &ds[i]
		k := d.overKey(d.r.domain)
		c := o.m[k]
		switch {
		case c == nil || c.start != windowStart(now, d.r.period):
		case d.err != nil:
			c.pending, c.known = addCount(c.pending, d.n), 0
		default:
			c.known = addCount(d.count, c.pending)
		}
	}
}

// Close stops the flushing and writes to the store the hits the Service
// answered from memory, returning the first error of that write. Call it
// when the Service will answer no more requests, before the store is
// closed; requests answered after it are written by their own store call
// or by a later Flush.
func (s *Service) Close(ctx context.Context) error {
	o := &s.local
	o.mu.Lock()
	started := o.started
	if !o.closed {
		o.closed = true
		close(o.stop)
	}
	o.mu.Unlock()
	if started {
		<-o.done
	}
	return s.Flush(ctx)
}
