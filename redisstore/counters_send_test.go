package redisstore

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/store"
	"github.com/redis/go-redis/v9"
)

// The counters' additions of calls that arrive while maxInFlight calls
// are out leave together, in one call of the counters' function: while
// Redis is paused, two AddEach go out and hang, 100 more queue; when
// Redis resumes they take one function call, and each addition to the
// one key gets a count of its own.
func TestCountersJoinOtherCalls(t *testing.T) {
	ctx := context.Background()
	c, control := pausable(t)
	s, err := New(c, WithMaxInFlight(2), WithMaxBatch(128), WithTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	cs, err := s.Counters("join", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC).UnixNano()
	if err := cs.AddEach(ctx, []store.Hits{{Key: "warm", Now: now, N: 1}}); err != nil { // loads the function
		t.Fatal(err)
	}
	c.ConfigResetStat(ctx)
	if err := c.Do(ctx, "CLIENT", "PAUSE", "60000", "WRITE").Err(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	counts := make(chan int64, 102)
	add := func() {
		defer wg.Done()
		hs := []store.Hits{{Key: "hot", Now: now, N: 1}}
		if err := cs.AddEach(ctx, hs); err != nil {
			t.Error(err)
		}
		counts <- hs[0].Count
	}
	for i := range 2 { // as TestCallsWaitingLeaveInOneScript
		wg.Add(1)
		go add()
		waitFor(t, func() bool { return s.adder.Senders() == i+1 && s.adder.Pending() == 0 })
	}
	wg.Add(100)
	for range 100 {
		go add()
	}
	waitFor(t, func() bool { return s.adder.Pending() == 100 })
	if err := control.Do(ctx, "CLIENT", "UNPAUSE").Err(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(counts)
	var got []int64
	for n := range counts {
		got = append(got, n)
	}
	slices.Sort(got)
	for i, n := range got {
		if n != int64(i+1) {
			t.Fatalf("counts %v, want 1 to 102, each once", got)
		}
	}
	if calls := scriptCalls(t, c); calls != 3 {
		t.Errorf("%d function calls for 102 AddEach (2 out, 100 waiting), want 3", calls)
	}
}

// An addition whose key is on another master of a Redis Cluster, sent in
// a master's call of several slots, fails alone, having changed nothing,
// and goes again in a call of its own slot: Redis 7 answers a Lua
// redis.pcall of a key not local to the node with an error, rather than
// failing the call (what recount relies on).
func TestCountersRecountKeysOfAnotherMaster(t *testing.T) {
	ctx := context.Background()
	cc := redistest.SharedCluster(t).Client(t)
	s, err := New(cc, WithPrefix("recount:"))
	if err != nil {
		t.Fatal(err)
	}
	here, there := keysOfTwoMasters(t, cc, "#recount:k")
	call := &addCall{Work: adds{as: []addition{
		{key: here, n: 2, ttl: 60_000, slot: slot(here, "")},
		{key: there, n: 3, ttl: 60_000, slot: slot(there, "")},
	}}}
	s.carryAdds(ctx, []*addCall{call}, true)
	for i, want := range []int64{2, 3} {
		a := call.Work.as[i]
		if a.err != nil || a.count != want {
			t.Errorf("addition to %s: count %d, %v; want %d (Redis: a non-local key in a function's pcall)", a.key, a.count, a.err, want)
		}
		if n, err := cc.Get(ctx, a.key).Int64(); err != nil || n != want {
			t.Errorf("Redis: GET %s = %d, %v; want %d, added once", a.key, n, err, want)
		}
	}
}

// keysOfTwoMasters returns two keys starting with prefix that two
// different masters of cc serve.
func keysOfTwoMasters(t *testing.T, cc *redis.ClusterClient, prefix string) (string, string) {
	t.Helper()
	ctx := context.Background()
	first, err := cc.MasterForKey(ctx, prefix+"0")
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < 1000; i++ {
		key := prefix + strings.Repeat("x", i)
		m, err := cc.MasterForKey(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if m != first {
			return prefix + "0", key
		}
	}
	t.Fatal("no two masters")
	return "", ""
}

// The counters' script form (EVALSHA, then EVAL when Redis's script cache
// lacks it: a Redis without functions) counts as the function does, on
// one Redis and on a Cluster, where it goes a call per slot.
func TestCountersEval(t *testing.T) {
	ctx := context.Background()
	for name, c := range map[string]redis.UniversalClient{
		"one":     redistest.SharedServer(t).Client(t),
		"cluster": redistest.SharedCluster(t).Client(t),
	} {
		t.Run(name, func(t *testing.T) {
			s, err := New(c, WithPrefix("evalcounters"+time.Now().Format("150405.000000000")+":"))
			if err != nil {
				t.Fatal(err)
			}
			s.run.noFunc.Store(true)
			cs, err := s.Counters("n", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			now := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC).UnixNano()
			for round := range int64(2) {
				if round == 1 {
					if err := c.ScriptFlush(ctx).Err(); err != nil {
						t.Fatal(err)
					}
				}
				hs := []store.Hits{{Key: "a", Now: now, N: 2}, {Key: "b", Now: now, N: 3}, {Key: "a", Now: now, N: 1}}
				if err := cs.AddEach(ctx, hs); err != nil {
					t.Fatal(err)
				}
				for i, want := range []int64{2, 3, 3} {
					if want += round * []int64{3, 3, 3}[i]; hs[i].Count != want {
						t.Errorf("round %d, addition %d: count %d, want %d", round, i, hs[i].Count, want)
					}
				}
			}
		})
	}
}
