package redisstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/store"
	"github.com/redis/go-redis/v9"
)

// CacheStats returns the counts of the store's deny cache: the zero
// CacheStats when it has none. Live reports whether its invalidations
// are known to arrive.
func (s *Store) CacheStats() store.CacheStats {
	c := s.cache
	if c == nil {
		return store.CacheStats{}
	}
	c.mu.Lock()
	entries, bytes := int64(c.idx.n), c.bytes
	c.mu.Unlock()
	st := c.Stats(entries, bytes, c.max, c.isLive())
	if !st.Live {
		st.Err = c.err()
	}
	return st
}

// entryBytes is what the bound counts for a key besides its name's bytes
// and, for a sliding log, its log (algo.State.LogSize): the entry, with
// the key's string header, and its share of the index's array (16 to 32
// bytes: an array a quarter to half full), as measured on the heap
// (TestDenyCacheBytes).
const entryBytes = 144

// entrySize is what the bound counts for the entry of the Redis key k
// whose log, if any, takes logBytes.
func entrySize(k string, logBytes int) int64 {
	return entryBytes + heapBytes(len(k)) + int64(logBytes)
}

// heapBytes is at least what the heap takes to hold n bytes: the
// allocator rounds a block up to its size class, multiples of 16 up to
// 256 bytes, less than a quarter apart above (and whole 8 KiB pages
// past 32 KiB).
func heapBytes(n int) int64 {
	if n > 256 {
		n += n / 4
	}
	return int64(n+15) &^ 15
}

// maxFills bounds the fills under way at once; a denial that finds them
// all busy is not cached.
const maxFills = 64

// denyCache is a Store's cache of keys' states read after denials, with
// which it answers, exactly, the decisions that the state denies (see
// the package documentation, "Cached denials").
//
// Invariants, cited by number where they are relied on:
//
//  1. A fill reads its key on its tracker's connection right after
//     CLIENT CACHING YES: the server then pushes an invalidation there at
//     the key's next write, by anyone, before its reply to any later
//     command there, and pushes nothing for keys not so read
//     (TestRedisOptInTracking, TestDenyCacheFleetWrites).
//  2. A fill's entry is in the cache, pending, before its read is sent;
//     an invalidation or a flush (FLUSHALL, FLUSHDB, or a SWAPDB that the
//     marker shows: tracker.pong) drops the key's entry, pending or not;
//     keep fills an entry only while it is still the key's. So no state
//     older than the latest invalidation applied is kept
//     (TestDenyCacheDifferential).
//  3. Tracking is per connection: when a tracker's connection ends, its
//     entries go (flush) and its fills under way are abandoned; a new
//     connection tracks only what it reads itself
//     (TestChaosDenyCacheTrackingKilled,
//     TestChaosDenyCacheTrackedAfterRedial).
//  4. An entry is answered only while its tracker is live: a PONG
//     answered a PING sent within liveHorizon, and a PONG comes after
//     every invalidation of a write made before its PING
//     (TestChaosDenyCacheServerStopped).
//  5. An entry in the index is never written: keep puts a new entry in
//     the pending one's place. A decision reads an entry without a lock
//     (TestDenyCacheEntriesImmutable).
//  6. A lookup (index.get) takes no lock and writes no shared memory.
//     Once a writer has removed an entry, no lookup that begins later
//     finds it: a removal moves the later entries of its run back, each
//     written to its new slot before its old one is overwritten, and a
//     rebuild empties the array it replaces. A lookup that meets a
//     writer may miss an entry that is there, which only sends its
//     decision to Redis (TestIndexRemoved, TestIndexConcurrent).
//  7. Between writers (who hold mu) the index's array is at most half
//     full, counts its entries in n, and holds each key once, where its
//     probe finds it (index.check; TestIndexCheck).
type denyCache struct {
	s   *Store
	max int64
	// base is the origin of the trackers' and entries' instants, read on
	// the monotonic clock.
	base  time.Time
	fills chan struct{}
	// redialAfter is time.After, with which the trackers wait to redial; tests
	// replace it.
	redialAfter func(time.Duration) <-chan time.Time
	start       sync.Once
	tr          atomic.Pointer[tracker] // off a Cluster, the one tracker, once started

	trMu     sync.Mutex
	trackers map[*redis.Client]*tracker // on a Cluster, by master (trackerOf)
	closed   bool

	// mu serializes the writers of idx and bytes; decisions take no
	// lock (invariant 6).
	mu    sync.Mutex
	idx   *index // Redis key -> entry
	bytes int64  // under mu

	// Every cached answer writes Hits, from every CPU: on a cache line
	// of its own, so that no decision's reads of the fields above wait
	// for another CPU's writes.
	_ [64]byte
	store.CacheCounts
	_ [64]byte
}

// entry is a key's state as Redis held it, or a fill under way (pending:
// until 0); never written once in the index (invariant 5).
type entry struct {
	key   string // the Redis key
	t     *table
	tr    *tracker   // whose invalidations the entry relies on
	size  int64      // the bytes the bound counts for the entry
	state algo.State // a sliding log's ring is shared by its readers: never written
	// offset turns the monotonic clock (ns since base) into Redis's
	// (server mode): the latest Redis's clock can be at an instant.
	offset int64
	// until is the monotonic instant (ns since base) before which Redis
	// cannot have expired the key; 0 while the fill is under way.
	until int64
}

func newDenyCache(s *Store, maxBytes int64) *denyCache {
	return &denyCache{s: s, max: maxBytes, base: time.Now(), fills: make(chan struct{}, maxFills),
		idx: newIndex(), redialAfter: time.After}
}

// mono returns the monotonic time since base.
func (c *denyCache) mono() int64 { return int64(time.Since(c.base)) }

// ensure starts the tracker, off a Cluster, with the first decision.
func (c *denyCache) ensure() {
	c.start.Do(func() {
		if rc, ok := c.s.client.(*redis.Client); ok {
			tr := newTracker(c, rc)
			c.tr.Store(tr)
			tr.start()
		}
	})
}

// flush drops tr's entries, and its fills under way (invariant 3);
// unless server says the server emptied itself (FLUSHALL), tr vouches
// for nothing until it is live again.
func (c *denyCache) flush(tr *tracker, server bool) {
	c.mu.Lock()
	if !server {
		tr.liveUntil.Store(0)
	}
	all := tr == c.tr.Load()
	c.idx.rebuild(func(e *entry) bool {
		if all || e.tr == tr {
			c.bytes -= e.size
			return true
		}
		return false
	})
	c.mu.Unlock()
	c.Flushes.Add(1)
}

// invalidate drops the entries of keys, Redis keys that were written.
func (c *denyCache) invalidate(keys []any) {
	c.mu.Lock()
	for _, k := range keys {
		if key, ok := k.(string); ok {
			if e := c.idx.find(key); e != nil {
				c.remove(e)
				c.Invalidations.Add(1)
			}
		}
	}
	c.mu.Unlock()
}

// remove deletes e, an entry of the index; c.mu is held.
func (c *denyCache) remove(e *entry) {
	c.idx.remove(e)
	c.bytes -= e.size
}

// drop deletes the entry of key in t, which an op of this process may
// write.
func (c *denyCache) drop(t *table, key string) {
	var buf [128]byte
	k := t.appendRedisKey(buf[:0], key)
	if c.idx.get(k) == nil {
		return
	}
	c.mu.Lock()
	if e := c.idx.find(string(k)); e != nil {
		c.remove(e)
	}
	c.mu.Unlock()
}

// decide answers a decision of n units at now for key in t from the
// cache: ok is false when the cache holds no state for it, is not live,
// or the state would admit (which only Redis may).
func (c *denyCache) decide(t *table, key string, now, n int64) (d algo.Decision, err error, ok bool) {
	var buf [128]byte
	k := t.appendRedisKey(buf[:0], key)
	e := c.idx.get(k) // invariants 5, 6
	if e == nil {
		return d, nil, false
	}
	now0 := c.mono()
	if now0 >= e.until /* pending: 0 */ || !e.tr.isLive(now0) || !c.owns(e.tr, k) { // invariant 4
		return d, nil, false
	}
	if !c.s.cfg.callerTime {
		now = now0 + e.offset // Redis's clock, as Redis would decide
	}
	st := e.state
	if wouldAdmit(&t.policy, &st, now, n) {
		return d, nil, false
	}
	d, err = t.policy.Decide(&st, now, n)
	switch {
	case err != nil && !isCostExceedsBurst(err):
		return d, nil, false
	case d.Allowed:
		return d, nil, false
	case err != nil:
		err = fmt.Errorf("redisstore: %w", err)
	}
	c.Hits.Add(1)
	return d, err, true
}

// wouldAdmit reports whether p admits n units at now on st, a sliding
// log, whose ring st shares with its entry's readers and which Decide
// writes when, and only when, it admits: a peek, which writes nothing,
// tells, since a log admits n > 0 units exactly when n is at most a
// peek's Remaining. For the other algorithms, whose states the cache
// copies whole, it returns false.
func wouldAdmit(p *algo.Policy, st *algo.State, now, n int64) bool {
	if p.Algorithm() != algo.SlidingLog {
		return false
	}
	peek, _ := p.Decide(st, now, 0)
	return n > 0 && n <= peek.Remaining
}

// denied starts a fill of key's state in t after Redis denied an op on
// it, unless the cache holds the key already, is not live, or the bound
// and the fills under way leave no room.
func (c *denyCache) denied(t *table, key string) {
	k := t.redisKey(key)
	size := entrySize(k, 0)
	if size > c.max || t.policy.Algorithm() == algo.SlidingLog && t.policy.Limit() > c.max/32 {
		// A log is read whole: only one whose longest, LIMIT entries of
		// 16 bytes in a ring of at most twice as many, fits the bound.
		return
	}
	tr := c.trackerFor(k)
	if tr == nil {
		return
	}
	c.mu.Lock()
	// An entry already there stays: a fill under way, or a state that
	// other callers' denials, sent to Redis while it was pending, found
	// already (a state that Redis no longer holds has an invalidation on
	// its way, after which the next denial fills the key again).
	if c.idx.find(k) != nil || !tr.isLive(c.mono()) {
		c.mu.Unlock()
		return
	}
	select {
	case c.fills <- struct{}{}:
	default:
		c.mu.Unlock()
		return
	}
	e := &entry{key: k, t: t, tr: tr, size: size}
	c.add(e)
	c.mu.Unlock()
	go func() {
		defer func() { <-c.fills }()
		c.fill(k, e)
	}()
}

// add puts e in the index, whose key has no entry, after dropping
// others, from the eviction's cursor on, until it fits; c.mu is held.
func (c *denyCache) add(e *entry) {
	for c.bytes+e.size > c.max {
		v := c.idx.evict()
		if v == nil {
			break
		}
		c.bytes -= v.size
		c.Evictions.Add(1)
	}
	c.idx.insert(e)
	c.bytes += e.size
}

// fill reads key's state, its expiry and (server mode) Redis's clock in
// one round trip on the connection of e's tracker, whose server tracks
// the read (invariant 1; on a Cluster a MOVED or ASK reply, a slot that
// moved, abandons it, as does a marker not the tracker's, a SWAPDB:
// tracker.pong), and makes e, a pending entry, hold them, unless e was
// dropped meanwhile (invariant 2).
func (c *denyCache) fill(key string, e *entry) {
	read := "GET"
	if e.t.policy.Algorithm() == algo.SlidingLog {
		read = "HGETALL"
	}
	cmds := [][]string{{"CLIENT", "CACHING", "YES"}, {read, key}, {"PTTL", key}, {"TIME"}}
	if c.s.cfg.callerTime {
		cmds = cmds[:3]
	}
	sent := time.Now()
	cl, err := e.tr.send(false, cmds...)
	if err != nil {
		c.abandon(key, e)
		return
	}
	timeout := time.NewTimer(c.s.cfg.timeout)
	defer timeout.Stop()
	select {
	case <-cl.done:
	case <-timeout.C:
		c.abandon(key, e)
		return
	}
	if cl.failed() != nil {
		c.abandon(key, e)
		return
	}
	replies, ok := cl.marked()
	if !ok {
		c.abandon(key, e)
		return
	}
	st, found, err := stateIn(e.t.policy.Algorithm(), replies[1])
	if err != nil || !found && c.s.cluster {
		// No key is the initial state; but on a Cluster an absent key is
		// not kept: a slot that moves drops only the entries of the keys
		// that its old master held (the migration's deletions).
		c.abandon(key, e)
		return
	}
	until, offset, err := timesOf(replies[2:], sent.Sub(c.base))
	if err != nil {
		c.abandon(key, e)
		return
	}
	c.keep(key, e, st, offset, until)
}

// timesOf returns, from the fill's replies to PTTL and (server mode)
// TIME, sent at sent (since base), the instant (since base) before which
// Redis cannot have expired the key, and the offset from this process's
// monotonic clock to Redis's (0 without TIME).
func timesOf(replies []any, sent time.Duration) (until, offset int64, err error) {
	pttl, err := strconv.ParseInt(fmt.Sprint(replies[0]), 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("redisstore: a PTTL of %q", replies[0])
	}
	until = math.MaxInt64
	if pttl >= 0 {
		// The key expires at its PTTL after the read, which came after
		// sent; a millisecond less for PTTL's rounding.
		until = int64(sent + time.Duration(pttl-1)*time.Millisecond)
	}
	if len(replies) < 2 {
		return until, 0, nil
	}
	tm, ok := replies[1].([]any)
	if !ok || len(tm) != 2 {
		return 0, 0, fmt.Errorf("redisstore: a TIME of %v", replies[1])
	}
	sec, err1 := strconv.ParseInt(fmt.Sprint(tm[0]), 10, 64)
	usec, err2 := strconv.ParseInt(fmt.Sprint(tm[1]), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("redisstore: a TIME of %v", tm)
	}
	// Redis read its clock after sent; TIME has microseconds.
	return until, (sec*1e9 + usec*1e3) + int64(time.Microsecond) - int64(sent), nil
}

// keep replaces e, the pending entry of key, with one holding st, unless
// e was dropped meanwhile (invariants 2, 5). A log's bytes are known only
// now: room is made for them, or the entry goes when it cannot fit.
func (c *denyCache) keep(key string, e *entry, st algo.State, offset, until int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.idx.find(key) != e {
		return
	}
	c.remove(e)
	f := &entry{key: key, t: e.t, tr: e.tr, size: entrySize(key, st.LogSize()), state: st, offset: offset, until: until}
	if f.size > c.max {
		return
	}
	c.add(f)
	c.Fills.Add(1)
}

// abandon drops e, a fill that failed.
func (c *denyCache) abandon(key string, e *entry) {
	c.mu.Lock()
	if c.idx.find(key) == e {
		c.remove(e)
	}
	c.mu.Unlock()
}

// touched drops the cache's entries of ops' keys, which the ops may
// write.
func (c *denyCache) touched(ops []store.Op) {
	for i := range ops {
		if t, ok := ops[i].Table.(*table); ok && t.store == c.s {
			c.drop(t, ops[i].Key)
		}
	}
}

func isCostExceedsBurst(err error) bool { return errors.Is(err, algo.ErrCostExceedsBurst) }

// answer sets op's Result from the cache when op, an Apply's lone op, is
// a decision that the cache answers.
func (c *denyCache) answer(op *store.Op) bool {
	if op.Kind != store.OpDecide {
		return false
	}
	t := op.Table.(*table) // checked by Apply
	d, err, ok := c.decide(t, op.Key, op.Now, op.N)
	if !ok {
		return false
	}
	op.Result = store.Result{Decision: d, At: op.Now, Err: err}
	return true
}

// after updates the cache after op, a decision or an Apply's lone op,
// went to Redis and ended with err: a denial starts a fill; anything
// else may have written the key, whose entry goes.
func (c *denyCache) after(op *store.Op, err error) {
	t := op.Table.(*table)
	if err == nil && op.Kind == store.OpDecide && !op.Result.Decision.Allowed {
		c.denied(t, op.Key)
		return
	}
	c.drop(t, op.Key)
}

// applyEach is Store.ApplyEach with the cache: it answers each decision
// that the cache denies, unless an earlier op of ops on its key goes to
// Redis (whose effect it must see), and sends the others to Redis.
func (c *denyCache) applyEach(ctx context.Context, ops []store.Op) error {
	rest, index := store.AnswerEach(ops, c.answer, keyOfOp)
	if len(rest) == 0 {
		return nil
	}
	c.touched(rest)
	err := c.s.applyEach(ctx, rest)
	for j, i := range index {
		ops[i].Result = rest[j].Result
		c.after(&rest[j], err)
	}
	return err
}

// keyOfOp returns the Redis key of op, an op on a table of the cache's
// store.
func keyOfOp(op *store.Op) string { return op.Table.(*table).redisKey(op.Key) }
