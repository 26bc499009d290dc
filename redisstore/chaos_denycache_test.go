package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/redisstore"
	"github.com/floodgate/floodgate/store"
	"github.com/redis/go-redis/v9"
)

// overLimit spends the whole burst of a fixed window of 2 per hour on
// key, then is denied once, and waits for the cache to hold the key.
func overLimit(t *testing.T, s *redisstore.Store, key string) store.Table {
	t.Helper()
	tb, err := s.Table("chaos", algo.MustParsePolicy("fixed-window 2/1h"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 3 {
		if i == 2 {
			// The admissions' own invalidations, which would drop a fill
			// begun before they arrive, are in.
			if err := s.Sync(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if d, err := tb.Decide(ctx, key, cacheT0, 1); err != nil || d.Allowed != (i < 2) {
			t.Fatalf("decision %d: %+v %v", i, d, err)
		}
	}
	redisstore.WaitFills(s)
	if !redisstore.Cached(s, tb, key) {
		t.Fatalf("the cache does not hold the denied key: %+v", s.CacheStats())
	}
	if d, err := tb.Decide(ctx, key, cacheT0, 1); err != nil || d.Allowed {
		t.Fatalf("a cached decision: %+v %v", d, err)
	}
	return tb
}

// killTracking kills the store's tracking connection from Redis's side.
func killTracking(t *testing.T, c *redis.Client) {
	t.Helper()
	ctx := context.Background()
	list, err := c.ClientList(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	killed := 0
	for _, line := range strings.Split(list, "\n") {
		if !strings.Contains(line, " name=floodgate-tracking ") {
			continue
		}
		id, _, _ := strings.Cut(strings.TrimPrefix(line, "id="), " ")
		if err := c.Do(ctx, "CLIENT", "KILL", "ID", id).Err(); err != nil {
			t.Fatal(err)
		}
		killed++
	}
	if killed != 1 {
		t.Fatalf("killed %d tracking connections, want 1", killed)
	}
}

// waitFor waits up to limit for cond, and returns how long it took.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > limit {
			t.Fatalf("%s: not within %v", what, limit)
		}
		time.Sleep(time.Millisecond)
	}
	return time.Since(start)
}

// A tracking connection killed while a key is cached drops the cache at
// once; a reset by another process while it is down is seen after the
// reconnect, which comes within a second.
func TestChaosDenyCacheTrackingKilled(t *testing.T) {
	srv := redistest.NewServer(t)
	c := srv.Client(t)
	s := cachedStore(t, c, "killed:")
	other := newStore(t, c, redisstore.WithPrefix("killed:"), redisstore.WithCallerTime(), redisstore.WithMinTTL(time.Hour))
	tb := overLimit(t, s, "k")
	flushes := s.CacheStats().Flushes
	killTracking(t, c)
	took := waitFor(t, time.Second, "the cache dropped", func() bool { return s.CacheStats().Flushes > flushes })
	t.Logf("the cache dropped %v after the kill", took)
	if redisstore.Cached(s, tb, "k") || s.CacheStats().Entries != 0 {
		t.Fatalf("the cache holds entries after its connection was killed: %+v", s.CacheStats())
	}
	// Another process resets the key while the tracking connection is down.
	to, _ := other.Table("chaos", algo.MustParsePolicy("fixed-window 2/1h"))
	ctx := context.Background()
	if err := other.Apply(ctx, []store.Op{{Kind: store.OpReset, Table: to, Key: "k", Now: cacheT0}}); err != nil {
		t.Fatal(err)
	}
	took = waitFor(t, time.Second, "live again", func() bool { return s.CacheStats().Live })
	t.Logf("live again %v after the reset", took)
	if d, err := tb.Decide(ctx, "k", cacheT0, 1); err != nil || !d.Allowed || d.Remaining != 1 {
		t.Fatalf("after the reset and the reconnect: %+v %v, want admitted with 1 remaining", d, err)
	}
}

// Tracking is per connection: a key filled after the tracking
// connection was killed and dialled again is read on the new connection,
// whose server then reports the key's next write (invariant 3 in
// denycache.go).
func TestChaosDenyCacheTrackedAfterRedial(t *testing.T) {
	srv := redistest.NewServer(t)
	c := srv.Client(t)
	s := cachedStore(t, c, "retrack:")
	other := newStore(t, c, redisstore.WithPrefix("retrack:"), redisstore.WithCallerTime(), redisstore.WithMinTTL(time.Hour))
	overLimit(t, s, "before")
	flushes := s.CacheStats().Flushes
	killTracking(t, c)
	waitFor(t, time.Second, "the cache dropped", func() bool { return s.CacheStats().Flushes > flushes })
	waitLive(t, s)
	tb := overLimit(t, s, "after")
	to, _ := other.Table("chaos", algo.MustParsePolicy("fixed-window 2/1h"))
	ctx := context.Background()
	if err := other.Apply(ctx, []store.Op{{Kind: store.OpReset, Table: to, Key: "after", Now: cacheT0}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if redisstore.Cached(s, tb, "after") {
		t.Fatalf("another process reset a key filled after a redial, and the cache still holds it: %+v", s.CacheStats())
	}
}

// A redis-server killed and restarted empty: the cache drops with the
// connection, and after the restart the key starts afresh, not denied
// from a stale state; the cache is live again within a second.
func TestChaosDenyCacheServerRestart(t *testing.T) {
	srv := redistest.NewServer(t)
	c := srv.Client(t)
	s := cachedStore(t, c, "restart:", redisstore.WithTimeout(200*time.Millisecond))
	tb := overLimit(t, s, "k")
	srv.Kill()
	waitFor(t, time.Second, "the cache dropped", func() bool { return s.CacheStats().Entries == 0 })
	ctx := context.Background()
	if _, err := tb.Decide(ctx, "k", cacheT0, 1); !errors.Is(err, redisstore.ErrUnavailable) {
		t.Fatalf("with Redis down: %v, want ErrUnavailable, not a cached answer", err)
	}
	srv.Restart(t)
	took := waitFor(t, time.Second, "live again", func() bool { return s.CacheStats().Live })
	t.Logf("live again %v after the restart", took)
	if d, err := tb.Decide(ctx, "k", cacheT0, 1); err != nil || !d.Allowed {
		t.Fatalf("after the restart: %+v %v, want admitted (an empty server)", d, err)
	}
}

// A stopped redis-server (SIGSTOP) leaves the tracking connection open
// but silent: the cache stops answering within its horizon (500 ms), and
// decisions go to Redis and fail by the caller's deadline (100 ms); once
// Redis resumes, the cache is live again within a second. The store's own
// timeout is the default, so that setting the test up on a busy machine
// does not time out.
func TestChaosDenyCacheServerStopped(t *testing.T) {
	srv := redistest.NewServer(t)
	c := srv.Client(t)
	s := cachedStore(t, c, "stopped:")
	tb := overLimit(t, s, "k")
	srv.Pause()
	defer srv.Resume()
	time.Sleep(600 * time.Millisecond) // the fault is real time: past the horizon
	ctx := context.Background()
	start := time.Now()
	budget, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	_, err := tb.Decide(budget, "k", cacheT0, 1)
	cancel()
	took := time.Since(start)
	t.Logf("a decision with Redis stopped: %v after %v", err, took)
	if !errors.Is(err, redisstore.ErrUnavailable) {
		t.Fatalf("with Redis stopped past the horizon: %v, want ErrUnavailable, not a cached answer", err)
	}
	if took > time.Second {
		t.Errorf("a decision took %v, more than a second", took)
	}
	srv.Resume()
	took = waitFor(t, 2*time.Second, "live again", func() bool { return s.CacheStats().Live })
	t.Logf("live again %v after the resume", took)
	if took > time.Second {
		t.Errorf("live again %v after the resume, more than a second", took)
	}
	if d, err := tb.Decide(ctx, "k", cacheT0, 1); err != nil || d.Allowed {
		t.Fatalf("after the resume: %+v %v, want denied", d, err)
	}
}

// FLUSHALL and FLUSHDB by anyone invalidate every cached key.
func TestDenyCacheFlushAll(t *testing.T) {
	srv := redistest.NewServer(t)
	c := srv.Client(t)
	s := cachedStore(t, c, "flushall:")
	ctx := context.Background()
	for _, flush := range []string{"FLUSHALL", "FLUSHDB"} {
		tb := overLimit(t, s, flush)
		if err := c.Do(ctx, flush).Err(); err != nil {
			t.Fatal(err)
		}
		if err := s.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if d, err := tb.Decide(ctx, flush, cacheT0, 1); err != nil || !d.Allowed {
			t.Fatalf("after %s: %+v %v, want admitted", flush, d, err)
		}
	}
}

// A flood of distinct denied keys keeps the cache within its bound, and
// the fills under way within theirs.
func TestChaosDenyCacheKeyFlood(t *testing.T) {
	c := testClient(t)
	const maxBytes = 32 << 10
	s := cachedStore(t, c, fmt.Sprintf("keyflood%d:", prefixes.Add(1)), redisstore.WithDenyCache(maxBytes))
	tb, err := s.Table("flood", algo.MustParsePolicy("token-bucket 1/1h"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	goroutines := runtime.NumGoroutine()
	const keys = 3000
	for i := range keys {
		// A cost above the burst: denied, and nothing written.
		if d, err := tb.Decide(ctx, fmt.Sprint("key-", i), cacheT0, 2); d.Allowed || !errors.Is(err, algo.ErrCostExceedsBurst) {
			t.Fatalf("key %d: %+v %v", i, d, err)
		}
		if st := s.CacheStats(); st.Bytes > maxBytes {
			t.Fatalf("after %d keys: %d bytes held, more than %d", i, st.Bytes, maxBytes)
		}
		if n := runtime.NumGoroutine(); n > goroutines+70 {
			t.Fatalf("after %d keys: %d goroutines, %d at the start", i, n, goroutines)
		}
	}
	redisstore.WaitFills(s)
	st := s.CacheStats()
	t.Logf("%d denied keys: %+v", keys, st)
	if st.Bytes > maxBytes || st.Evictions == 0 || st.Entries < 100 {
		t.Errorf("after %d keys: %+v, want at most %d bytes, evictions, and at least 100 entries", keys, st, maxBytes)
	}
}

// The bound's count of an entry, EntrySize, is at least what the heap
// holds for it, for Redis keys of lengths just past the allocator's size
// classes (49 bytes take 64) as well as in them.
func TestDenyCacheBytes(t *testing.T) {
	c := testClient(t)
	for _, redisKey := range []int{44, 48, 49, 97, 257, 1793} {
		s := cachedStore(t, c, fmt.Sprintf("bytes%d:", prefixes.Add(1)), redisstore.WithDenyCache(1<<40))
		tb, _ := s.Table("bytes", algo.MustParsePolicy("token-bucket 1/1h"))
		base := len(redisstore.KeyOf(tb, ""))
		const n = 50_000
		keys := make([]string, n)
		for i := range keys {
			keys[i] = fmt.Sprintf("%0*d", redisKey-base, i+redisKey*n)
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for _, k := range keys {
			redisstore.Hold(s, tb, k)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		heap := float64(after.HeapAlloc-before.HeapAlloc) / n
		counted := float64(s.CacheStats().Bytes) / n
		t.Logf("keys of %d bytes in Redis: %.1f bytes an entry on the heap, %.1f counted", redisKey, heap, counted)
		if heap > counted {
			t.Errorf("keys of %d bytes in Redis: an entry takes %.1f bytes on the heap, more than the %.1f the bound counts", redisKey, heap, counted)
		}
		runtime.KeepAlive(keys)
	}
}

// The invalidation window: from the moment another process sends a
// write of a cached key to the moment this process's cache drops it.
// Each of 200 trials caches a denied key, resets it from another store,
// and times the drop; the test logs the median and the maximum, and
// demands that every drop came within a second (the machine may be
// loaded; the figures are what matter).
func TestDenyCacheWindow(t *testing.T) {
	c := testClient(t)
	prefix := fmt.Sprintf("window%d:", prefixes.Add(1))
	s := cachedStore(t, c, prefix)
	other := newStore(t, c, redisstore.WithPrefix(prefix), redisstore.WithCallerTime(), redisstore.WithMinTTL(time.Hour))
	p := algo.MustParsePolicy("fixed-window 1/1h")
	tb, _ := s.Table("w", p)
	to, _ := other.Table("w", p)
	ctx := context.Background()
	const trials = 200
	var windows, afterAck []time.Duration
	for i := range trials {
		key := fmt.Sprint("k", i)
		tb.Decide(ctx, key, cacheT0, 1)
		tb.Decide(ctx, key, cacheT0, 1)
		redisstore.WaitFills(s)
		if !redisstore.Cached(s, tb, key) {
			continue // a fill that the cache's horizon or a heartbeat overtook
		}
		start := time.Now()
		if err := other.Apply(ctx, []store.Op{{Kind: store.OpReset, Table: to, Key: key, Now: cacheT0}}); err != nil {
			t.Fatal(err)
		}
		acked := time.Now()
		for redisstore.Cached(s, tb, key) {
			if time.Since(start) > time.Second {
				t.Fatalf("trial %d: the cache still holds the key a second after another process reset it", i)
			}
			runtime.Gosched()
		}
		windows = append(windows, time.Since(start))
		afterAck = append(afterAck, time.Since(acked))
	}
	if len(windows) < trials/2 {
		t.Fatalf("only %d of %d trials cached their key", len(windows), trials)
	}
	slices.Sort(windows)
	slices.Sort(afterAck)
	t.Logf("invalidation window over %d trials: from the write sent, median %v, max %v; from its reply, median %v, max %v",
		len(windows), windows[len(windows)/2], windows[len(windows)-1], afterAck[len(afterAck)/2], afterAck[len(afterAck)-1])
}

// The bound's count of an entry of a sliding log, EntrySize plus its
// log, is at least what the heap holds for it, for logs of
// 1 to 100 entries.
func TestDenyCacheSlidingLogBytes(t *testing.T) {
	for _, entries := range []int{1, 5, 100} {
		t.Run(fmt.Sprint(entries), func(t *testing.T) {
			s := cachedStore(t, testClient(t), fmt.Sprintf("logbytes%d:", prefixes.Add(1)), redisstore.WithDenyCache(1<<30))
			tb, _ := s.Table("bytes", algo.MustParsePolicy("sliding-log 100/1h"))
			// The log as lua/log.lua keeps it: h, c, u and "T N" at each
			// entry's index.
			h := map[string]string{"h": "7", "c": fmt.Sprint(entries), "u": fmt.Sprint(entries)}
			for i := range entries {
				h[fmt.Sprint(7+i)] = fmt.Sprint(cacheT0+int64(i)*1e6, " 1")
			}
			// Redis keys of 48 bytes, a size class of the heap's: the
			// bound counts a key's bytes at its length.
			const n = 10_000
			width := 48 - len(redisstore.KeyOf(tb, "user-"))
			keys := make([]string, n)
			for i := range keys {
				keys[i] = fmt.Sprintf("user-%0*d", width, i)
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			for _, k := range keys {
				if err := redisstore.HoldLog(s, tb, k, h); err != nil {
					t.Fatal(err)
				}
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			heap := float64(after.HeapAlloc-before.HeapAlloc) / n
			counted := float64(s.CacheStats().Bytes) / n
			t.Logf("%d entries of logs of %d entries: %.1f bytes each on the heap, %.1f counted (keys of %d bytes in Redis)",
				n, entries, heap, counted, len(redisstore.KeyOf(tb, keys[0])))
			if heap > counted {
				t.Errorf("an entry takes %.1f bytes on the heap, more than the %.1f the bound counts", heap, counted)
			}
			runtime.KeepAlive(keys)
		})
	}
}

// A cache bounded to fit one log of 40 entries, and not two, keeps one
// after denials on two such keys; a log whose LIMIT could outgrow the
// bound is not even read: its bytes never pass the bound, and Redis
// never sends a log that it cannot keep.
func TestDenyCacheSlidingLogBound(t *testing.T) {
	c := testClient(t)
	const max = 1400 // a log of 40 entries: a ring of 64 (1,072 bytes), the entry, the key; LIMIT 40 <= max/32
	s := cachedStore(t, c, fmt.Sprintf("logbound%d:", prefixes.Add(1)), redisstore.WithDenyCache(max))
	tb, _ := s.Table("b", algo.MustParsePolicy("sliding-log 40/1h"))
	big, _ := s.Table("big", algo.MustParsePolicy("sliding-log 100/1h"))
	ctx := context.Background()
	fill := func(tb store.Table, key string, n int) {
		t.Helper()
		for i := range n {
			tb.Decide(ctx, key, cacheT0+int64(i), 1)
		}
		// The admissions' invalidations, which would drop a fill begun
		// before they arrive, are in.
		if err := s.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if d, err := tb.Decide(ctx, key, cacheT0+int64(n), 1); err != nil || d.Allowed {
			t.Fatalf("%s: %+v %v, want a denial", key, d, err)
		}
		redisstore.WaitFills(s)
		if st := s.CacheStats(); st.Bytes > max {
			t.Fatalf("after %s: the cache counts %d bytes, more than its bound %d", key, st.Bytes, max)
		}
	}
	fill(tb, "a", 40)
	if !redisstore.Cached(s, tb, "a") {
		t.Skip("the fill did not hold: a heartbeat overtook it") // the machine is too loaded to test
	}
	fill(tb, "b", 40)
	if st := s.CacheStats(); st.Entries != 1 || !redisstore.Cached(s, tb, "b") {
		t.Errorf("after two logs of 40 entries: %+v, b cached %v; want b alone", st, redisstore.Cached(s, tb, "b"))
	}
	big.Decide(ctx, "c", cacheT0, 0) // big's first call reads its name's policies (an HGETALL)
	before := commands(t, c)["hgetall"]
	fill(big, "c", 100)
	if redisstore.Cached(s, big, "c") {
		t.Errorf("a log of 100 entries is cached in a cache of %d bytes: %+v", max, s.CacheStats())
	}
	if n := commands(t, c)["hgetall"] - before; n != 0 {
		t.Errorf("a log of LIMIT 100 in a cache of %d bytes was read %d times", max, n)
	}
}
