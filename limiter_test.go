package floodgate_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate/floodgate/memstore"
	"github.com/floodgate/floodgate/store"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/clock"
)

var ctx = context.Background()

// epoch is the fake clocks' start: 2026-11-22 00:00 UTC.
var epoch = time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)

func newFake() *clock.Fake { return clock.NewFake(epoch) }

func mustAllow(t *testing.T, l *floodgate.Limiter, key string, n int64) floodgate.Decision {
	t.Helper()
	d, err := l.AllowN(ctx, key, n)
	if err != nil {
		t.Fatalf("AllowN(%q, %d): %v", key, n, err)
	}
	return d
}

func TestAllowMatchesCore(t *testing.T) {
	for _, ps := range []string{"token-bucket 3/1s burst=5", "leaky-bucket 1/1h capacity=20", "sliding-log 2/10s", "sliding-window 3/500ms", "fixed-window 3/1s"} {
		p := algo.MustParsePolicy(ps)
		fc := newFake()
		l := floodgate.Must(floodgate.NewLimiter(p, floodgate.WithClock(fc)))
		states := map[string]*algo.State{}
		for i := range 3000 {
			key := fmt.Sprint("user", i%3)
			n := int64(i % 3)
			fc.Advance(time.Duration(i*7919%400) * time.Millisecond)
			got := mustAllow(t, l, key, n)
			s := states[key]
			if s == nil {
				s = new(algo.State)
				states[key] = s
			}
			want, _ := p.Decide(s, fc.Now().UnixNano(), n)
			if got.Allowed != want.Allowed || got.Remaining != want.Remaining || got.RetryAfter != want.RetryAfter || got.ResetAfter != want.ResetAfter || got.Policy() != p {
				t.Fatalf("%s event %d: limiter %+v, core %+v", ps, i, got, want)
			}
		}
	}
}

func TestAllowAt(t *testing.T) {
	l := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("fixed-window 2/1m")))
	at := epoch.Add(30 * time.Second)
	for i, want := range []bool{true, true, false} {
		d, err := l.AllowAt(ctx, "k", at, 1)
		if err != nil || d.Allowed != want {
			t.Fatalf("call %d: %+v, %v; want allowed=%v", i, d, err, want)
		}
	}
	if d, _ := l.AllowAt(ctx, "k", at.Add(30*time.Second), 1); !d.Allowed {
		t.Fatalf("the next window denied: %+v", d)
	}
	for _, bad := range []time.Time{time.Unix(-1, 0), time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)} {
		if _, err := l.AllowAt(ctx, "k", bad, 1); !errors.Is(err, algo.ErrInvalidTime) {
			t.Errorf("AllowAt(%v): error %v, want ErrInvalidTime", bad, err)
		}
	}
}

func TestErrors(t *testing.T) {
	l := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("token-bucket 10/1s burst=5"), floodgate.WithClock(newFake())))
	d, err := l.AllowN(ctx, "k", 6)
	if !errors.Is(err, algo.ErrCostExceedsBurst) || d.Allowed || d.RetryAfter != algo.Never {
		t.Fatalf("cost 6 on burst 5: %+v, %v", d, err)
	}
	if _, err := l.AllowN(ctx, "k", -1); !errors.Is(err, algo.ErrInvalidCost) {
		t.Fatalf("cost -1: %v", err)
	}
	if d := mustAllow(t, l, "k", 0); d.Remaining != 5 {
		t.Fatalf("bad requests changed the state: %+v", d)
	}
	if st := l.Stats(); st.Errors != 1 || st.DryRunDenied != 0 {
		t.Fatalf("stats %+v, want 1 error (the negative cost; a cost above the burst is a denial)", st)
	}
}

func TestDryRun(t *testing.T) {
	fc := newFake()
	shadow := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("sliding-log 2/1m"), floodgate.WithClock(fc), floodgate.WithDryRun(true)))
	enforce := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("sliding-log 2/1m"), floodgate.WithClock(fc)))
	for i := range 5 {
		ds := mustAllow(t, shadow, "k", 1)
		de := mustAllow(t, enforce, "k", 1)
		if !ds.Allowed || ds.DryRun != !de.Allowed || ds.Remaining != de.Remaining || ds.RetryAfter != de.RetryAfter {
			t.Fatalf("call %d: dry-run %+v, enforcing %+v", i, ds, de)
		}
		fc.Advance(10 * time.Second)
	}
	if st := shadow.Stats(); st.DryRunDenied != 3 || st.Errors != 0 {
		t.Fatalf("dry-run stats %+v, want 3 would-be denials", st)
	}
	if err := shadow.WaitN(ctx, "k", 1); err != nil {
		t.Fatalf("dry-run Wait: %v", err)
	}
	if d, err := shadow.AllowN(ctx, "k", 3); err != nil || !d.Allowed || !d.DryRun || d.RetryAfter != algo.Never {
		t.Fatalf("dry-run with a cost above the burst: %+v, %v", d, err)
	}
}

func TestReset(t *testing.T) {
	l := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("leaky-bucket 1/1h capacity=2"), floodgate.WithClock(newFake())))
	mustAllow(t, l, "k", 2)
	if d := mustAllow(t, l, "k", 1); d.Allowed {
		t.Fatal("a full bucket admitted")
	}
	if err := l.Reset(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if d := mustAllow(t, l, "k", 2); !d.Allowed {
		t.Fatalf("after Reset: %+v", d)
	}
}

// TestSharedStore: limiters with one name and policy on one store share
// state; another name does not.
func TestSharedStore(t *testing.T) {
	store := memstore.New(0)
	fc := newFake()
	p := algo.MustParsePolicy("fixed-window 3/1m")
	a := floodgate.Must(floodgate.NewLimiter(p, floodgate.WithStore(store), floodgate.WithClock(fc)))
	b := floodgate.Must(floodgate.NewLimiter(p, floodgate.WithStore(store), floodgate.WithClock(fc)))
	c := floodgate.Must(floodgate.NewLimiter(p, floodgate.WithStore(store), floodgate.WithClock(fc), floodgate.WithName("other")))
	mustAllow(t, a, "k", 2)
	if d := mustAllow(t, b, "k", 1); d.Remaining != 0 {
		t.Fatalf("limiters of one name do not share: %+v", d)
	}
	if d := mustAllow(t, c, "k", 1); d.Remaining != 2 {
		t.Fatalf("a limiter of another name shares: %+v", d)
	}
	if a.Name() != p.String() || c.Name() != "other" || a.Policy() != p || a.Store() != store {
		t.Fatal("accessors")
	}
}

// TestOneKeyThousandGoroutines: 1,000 goroutines on one key at one
// instant admit exactly what the policy allows, for every algorithm.
func TestOneKeyThousandGoroutines(t *testing.T) {
	for _, p := range []algo.Policy{
		algo.MustParsePolicy("token-bucket 10/1s burst=250"), algo.MustParsePolicy("leaky-bucket 1/1h capacity=250"),
		algo.MustParsePolicy("sliding-log 250/1m"), algo.MustParsePolicy("sliding-window 250/1m"), algo.MustParsePolicy("fixed-window 250/1m"),
	} {
		l := floodgate.Must(floodgate.NewLimiter(p, floodgate.WithClock(newFake())))
		var admitted atomic.Int64
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range 1000 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				if d, err := l.Allow(ctx, "hot"); err == nil && d.Allowed {
					admitted.Add(1)
				}
			}()
		}
		close(start)
		wg.Wait()
		if got := admitted.Load(); got != 250 {
			t.Fatalf("%v: admitted %d of 1,000, want exactly 250", p, got)
		}
	}
}

// TestRandomKeyFlood: an attacker sending 300,000 random keys (30 times the bound) cannot
// grow the limiter past its bound, in keys or in heap.
func TestRandomKeyFlood(t *testing.T) {
	const bound, keys = 10_000, 300_000
	fc := newFake()
	store := memstore.New(bound)
	l := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("token-bucket 1/1h burst=5"), floodgate.WithStore(store), floodgate.WithClock(fc)))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	buf := make([]byte, 0, 32)
	for i := range keys {
		buf = fmt.Appendf(buf[:0], "attacker-%x", uint64(i)*0x9e3779b97f4a7c15)
		if _, err := l.Allow(ctx, string(buf)); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	st := store.Stats()
	// Keys held and evicted are the keys admitted: once evicted keys fill
	// the store's shadow, new keys start from their state and most are
	// denied, never inserted.
	if st.Keys > bound || st.Keys < bound*9/10 || uint64(st.Keys)+st.Evictions > keys {
		t.Fatalf("stats %+v after %d keys, bound %d", st, keys, bound)
	}
	grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	if grown > 4<<20 { // 10,000 keys at ~50 bytes, with room; 300,000 would be 15+ MiB
		t.Fatalf("heap grew by %d bytes for a bound of %d keys", grown, bound)
	}
	runtime.KeepAlive(l)
}

// NewLimiter fails, rather than make a limiter whose every call fails,
// for the zero Policy and for a table its store refuses.
func TestNewLimiterErrors(t *testing.T) {
	if _, err := floodgate.NewLimiter(algo.Policy{}); !errors.Is(err, algo.ErrInvalidPolicy) {
		t.Errorf("NewLimiter of the zero Policy: %v, want ErrInvalidPolicy", err)
	}
	p := algo.MustParsePolicy("fixed-window 1/1m")
	if _, err := floodgate.NewLimiter(p, floodgate.WithStore(refusingStore{memstore.New(0)})); !errors.Is(err, errNoTables) {
		t.Errorf("NewLimiter on a store that refuses the table: %v, want the store's error", err)
	}
	defer func() {
		if r := recover(); r == nil {
			t.Error("Must of an error did not panic")
		}
	}()
	floodgate.Must(floodgate.NewLimiter(algo.Policy{}))
}

var errNoTables = errors.New("no tables here")

// refusingStore refuses every table.
type refusingStore struct{ store.Store }

func (refusingStore) Table(string, algo.Policy) (store.Table, error) {
	return nil, errNoTables
}
