package redisstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"

	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/storetest"
	"github.com/redis/go-redis/v9"
)

// The script's two forms decide alike: the conformance suite on the EVAL
// form, which a Redis without functions gets.
func TestConformanceEval(t *testing.T) {
	c := redistest.SharedServer(t).Client(t)
	n := 0
	storetest.Run(t, func(t *testing.T) store.Store {
		n++
		s, err := New(c, WithPrefix("eval"+time.Now().Format("150405.000000000")+":"), WithCallerTime(), WithMinTTL(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		s.run.noFunc.Store(true)
		return s
	})
	if n == 0 {
		t.Fatal("the suite made no store")
	}
}

// The store loads its function library when Redis lacks it, at first and
// after FUNCTION FLUSH, on a single Redis and on every master of a
// cluster; and a user whom an ACL forbids functions gets the EVAL form.
func TestFunctionLibrary(t *testing.T) {
	ctx := context.Background()
	srv := redistest.NewServer(t)
	c := srv.Client(t)
	s, err := New(c, WithCallerTime())
	if err != nil {
		t.Fatal(err)
	}
	tb, _ := s.Table("x", algo.MustParsePolicy("fixed-window 5/1h"))
	decide := func(s *Store, tb store.Table, want int64) {
		t.Helper()
		d, err := tb.Decide(ctx, "k", 1e9, 1)
		if err != nil || !d.Allowed || d.Remaining != want {
			t.Fatalf("%+v %v, want %d remaining", d, err, want)
		}
	}
	decide(s, tb, 4)
	decide(s, tb, 3)
	if got := s.run.loads.Load(); got != 1 {
		t.Errorf("library loaded %d times, want 1", got)
	}
	libs, err := c.FunctionList(ctx, redis.FunctionListQuery{LibraryNamePattern: function}).Result()
	var names []string
	if err == nil && len(libs) == 1 {
		for _, f := range libs[0].Functions {
			names = append(names, f.Name)
		}
		slices.Sort(names)
	}
	if err != nil || !slices.Equal(names, []string{function, countForm.function}) {
		t.Fatalf("FUNCTION LIST: %+v %v", libs, err)
	}
	if err := c.FunctionFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	decide(s, tb, 2)
	if got := s.run.loads.Load(); got != 2 || s.run.noFunc.Load() {
		t.Errorf("after FUNCTION FLUSH: loaded %d times (want 2), EVAL form %v", got, s.run.noFunc.Load())
	}

	// Many callers find it missing at once: all succeed, and it is
	// loaded about once, not by each.
	if err := c.FunctionFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	const callers = 32
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			ops := []store.Op{{Kind: store.OpDecide, Table: tb, Key: fmt.Sprint("many", i), Now: 1e9, N: 1}}
			if err := s.ApplyEach(ctx, ops); err != nil || !ops[0].Result.Decision.Allowed {
				t.Errorf("caller %d after FUNCTION FLUSH: %+v %v", i, ops[0].Result.Decision, err)
			}
		})
	}
	wg.Wait()
	if got := s.run.loads.Load() - 2; got < 1 || got > 4 {
		t.Errorf("%d callers loaded the library %d times", callers, got)
	}

	// A user who may not use functions.
	if err := c.Do(ctx, "ACL", "SETUSER", "nofunc", "on", ">secret", "~*", "&*", "+@all", "-function", "-fcall", "-fcall_ro").Err(); err != nil {
		t.Fatal(err)
	}
	limited := redis.NewClient(&redis.Options{Network: srv.Network(), Addr: srv.Addr(), Username: "nofunc", Password: "secret"})
	t.Cleanup(func() { limited.Close() })
	s2, err := New(limited, WithCallerTime())
	if err != nil {
		t.Fatal(err)
	}
	tb2, _ := s2.Table("x", algo.MustParsePolicy("fixed-window 5/1h"))
	decide(s2, tb2, 1) // the same key as s's: the two forms share state
	if !s2.run.noFunc.Load() {
		t.Error("a user without functions did not fall back to EVAL")
	}

	// Every master of a cluster.
	cl := redistest.SharedCluster(t)
	cc := cl.Client(t)
	if err := cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return m.FunctionFlush(ctx).Err() }); err != nil {
		t.Fatal(err)
	}
	s3, err := New(cc, WithCallerTime(), WithPrefix("fl"+time.Now().Format("150405.000000000")+":"))
	if err != nil {
		t.Fatal(err)
	}
	tb3, _ := s3.Table("x", algo.MustParsePolicy("fixed-window 5/1h"))
	ops := make([]store.Op, 12)
	for i := range ops {
		ops[i] = store.Op{Kind: store.OpDecide, Table: tb3, Key: string(rune('a' + i)), Now: 1e9, N: 1}
	}
	if err := s3.Apply(ctx, ops); err != nil {
		t.Fatal(err)
	}
	var masters atomic.Int64 // ForEachMaster asks the masters at once
	err = cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		libs, err := m.FunctionList(ctx, redis.FunctionListQuery{LibraryNamePattern: function}).Result()
		if err == nil && len(libs) == 1 {
			masters.Add(1)
		}
		return err
	})
	if err != nil || masters.Load() != 3 {
		t.Errorf("the library is on %d of 3 masters (%v)", masters.Load(), err)
	}
}

// A FUNCTION FLUSH right after the store loads its library, before the
// call goes again: after each of fewer than maxLoads loads in a row, the
// call loads it again and is carried out, once; after every load, it
// fails with ErrUnavailable, never with Redis's "Function not found", and
// is not carried out. On a single Redis (a call alone) and on a cluster
// (calls of several slots of a master in one pipeline, the masters at
// once: there, a master's calls may go again between another master's
// load and its flush, and succeed).
func TestChaosFlushAfterLoad(t *testing.T) {
	ctx := context.Background()
	single := redistest.SharedServer(t).Client(t)
	cc := redistest.SharedCluster(t).Client(t)
	flushAll := func() error {
		if err := single.FunctionFlush(ctx).Err(); err != nil {
			return err
		}
		return cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return m.FunctionFlush(ctx).Err() })
	}
	for _, tc := range []struct {
		name    string
		client  redis.UniversalClient
		keys    int
		flushes int64
	}{
		{"single/once", single, 1, 1},
		{"single/max-1", single, 1, maxLoads - 1},
		{"single/always", single, 1, 1 << 20},
		{"cluster/once", cc, 12, 1},
		{"cluster/always", cc, 12, 1 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(tc.client, WithCallerTime(), WithPrefix("fal"+time.Now().Format("150405.000000000")+":"))
			if err != nil {
				t.Fatal(err)
			}
			tb, _ := s.Table("x", algo.MustParsePolicy("fixed-window 5/1h"))
			ops := make([]store.Op, tc.keys)
			for i := range ops {
				ops[i] = store.Op{Kind: store.OpDecide, Table: tb, Key: string(rune('a' + i)), Now: 1e9, N: 1}
			}
			if err := flushAll(); err != nil {
				t.Fatal(err)
			}
			var flushed atomic.Int64
			s.run.afterLoad = func() {
				if flushed.Add(1) <= tc.flushes {
					if err := flushAll(); err != nil {
						t.Error(err)
					}
				}
			}
			err = s.ApplyEach(ctx, ops)
			t.Logf("%d flushes, %d loads, %v", min(flushed.Load(), tc.flushes), s.run.loads.Load(), err)
			if tc.flushes < maxLoads && err != nil {
				t.Fatalf("after %d flushes: %v", tc.flushes, err)
			}
			if tc.flushes >= maxLoads && err == nil {
				t.Fatal("flushed after every load: no op failed")
			}
			s.run.afterLoad = nil
			for i := range ops {
				want := int64(3) // the ApplyEach carried it out once, then this
				if err := ops[i].Result.Err; err != nil {
					want = 4 // not carried out
					var reply redis.Error
					if !errors.Is(err, ErrUnavailable) || errors.As(err, &reply) {
						t.Errorf("key %s: %v, want ErrUnavailable and no error of Redis's", ops[i].Key, err)
					}
				}
				if d, err := tb.Decide(ctx, ops[i].Key, 1e9, 1); err != nil || d.Remaining != want {
					t.Errorf("key %s: then %+v %v, want %d remaining", ops[i].Key, d, err, want)
				}
			}
		})
	}
}

// A load of the library waits only for a load on its own server, and no
// longer than its context: while one master's load is under way (as when
// that master stalls mid-load), another master's load goes ahead, and a
// second load on the first master ends with its caller's deadline.
func TestLoadWaitsOnlyForItsServer(t *testing.T) {
	ctx := context.Background()
	cc := redistest.SharedCluster(t).Client(t)
	s, err := New(cc)
	if err != nil {
		t.Fatal(err)
	}
	var masters []*redis.Client
	for i := 0; len(masters) < 2; i++ {
		m, err := cc.MasterForKey(ctx, fmt.Sprint("k", i))
		if err != nil {
			t.Fatal(err)
		}
		if len(masters) == 0 || m != masters[0] {
			masters = append(masters, m)
		}
	}
	busy, other := s.run.loaderOf(masters[0]), masters[1]
	busy.turn <- struct{}{} // a load on masters[0] under way
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := s.run.load(cctx, other); err != nil || s.run.noFunc.Load() {
		t.Errorf("a load on another master while one is under way: eval %v, %v; want the library loaded", s.run.noFunc.Load(), err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := s.run.load(short, masters[0]); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a load on the busy master: %v, want its caller's deadline", err)
	}
	<-busy.turn
	if err := s.run.load(cctx, masters[0]); err != nil {
		t.Errorf("a load on the master once free: %v", err)
	}
}
