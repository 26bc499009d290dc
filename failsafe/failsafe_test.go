package failsafe_test

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate/floodgate/failsafe"

	"github.com/floodgate/floodgate/memstore"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/clock"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/storetest"
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

// newFailsafe is failsafe.New for options that are right.
func newFailsafe(t *testing.T, s store.Store, o failsafe.Options) *failsafe.Store {
	t.Helper()
	f, err := failsafe.New(s, o)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// errRefused is the failing shared store's error.
var errRefused = errors.New("connection refused")

// remaining peeks at key in s's state, bypassing its hook.
func remaining(t *testing.T, s *storetest.Flaky, name string, p algo.Policy, key string, now time.Time) int64 {
	t.Helper()
	return peekStore(t, s.Inner(), name, p, key, now)
}

func peekStore(t *testing.T, s store.Store, name string, p algo.Policy, key string, now time.Time) int64 {
	t.Helper()
	tb, err := s.Table(name, p)
	if err != nil {
		t.Fatal(err)
	}
	d, err := tb.Decide(ctx, key, now.UnixNano(), 0)
	if err != nil {
		t.Fatal(err)
	}
	return d.Remaining
}

// failsafeCase is a failsafe.Store on a storetest.Flaky, with a limiter named
// "api" on it, all on one fake clock.
type failsafeCase struct {
	fc     *clock.Fake
	shared *storetest.Flaky
	local  *memstore.Store
	fs     *failsafe.Store
	p      algo.Policy
	l      *floodgate.Limiter
}

// Unless o says otherwise, one failure takes the store down and the
// cooldown is 1s: the tests of what the store does while down.
func newFailsafeCase(t *testing.T, p algo.Policy, o failsafe.Options) *failsafeCase {
	t.Helper()
	c := &failsafeCase{fc: newFake(), shared: storetest.NewFlaky(), local: memstore.New(0), p: p}
	o.Clock, o.Local = c.fc, c.local
	if o.Threshold == 0 {
		o.Threshold, o.FailFor = 1, -1
	}
	o.Cooldown = cmp.Or(o.Cooldown, time.Second)
	c.fs = newFailsafe(t, c.shared, o)
	c.l = floodgate.Must(floodgate.NewLimiter(p, floodgate.WithStore(c.fs), floodgate.WithClock(c.fc), floodgate.WithName("api")))
	return c
}

// table returns the failsafe store's table named name with policy p.
func (c *failsafeCase) table(t *testing.T, name string, p algo.Policy) store.Table {
	t.Helper()
	tb, err := c.fs.Table(name, p)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

// trip makes the shared store fail and one call find out.
func (c *failsafeCase) trip(t *testing.T) {
	t.Helper()
	c.shared.Fail(errRefused)
	c.l.Allow(ctx, "trip")
	if !c.fs.Stats().Down {
		t.Fatal("the store is not down after a failed call")
	}
}

// recover heals the shared store and lets the next probe through.
func (c *failsafeCase) recover(t *testing.T, cooldown time.Duration) {
	t.Helper()
	c.shared.Heal()
	c.fc.Advance(cooldown)
	c.l.Allow(ctx, "probe")
	if c.fs.Stats().Down {
		t.Fatal("the store is still down after a successful probe")
	}
}

var failModes = []failsafe.Mode{failsafe.FailClosed, failsafe.FailOpen, failsafe.FailLocal}

// TestFailsafeModes: what each mode decides, and counts, while the store
// is down; FailLocal decides on the local table of the same name and
// policy.
func TestFailsafeModes(t *testing.T) {
	p := algo.MustParsePolicy("token-bucket 3/1s")
	for _, mode := range failModes {
		t.Run(mode.String(), func(t *testing.T) {
			c := newFailsafeCase(t, p, failsafe.Options{Mode: mode})
			if d := mustAllow(t, c.l, "k", 1); !d.Allowed || d.Remaining != 2 {
				t.Fatalf("while up: %+v", d)
			}
			c.shared.Fail(errRefused)
			var got []string
			for i := range 5 {
				d, err := c.l.Allow(ctx, "k")
				got = append(got, fmt.Sprintf("%v %d %v", d.Allowed, d.Remaining, d.RetryAfter))
				switch mode {
				case failsafe.FailClosed:
					if !errors.Is(err, failsafe.ErrUnavailable) || !errors.Is(err, errRefused) {
						t.Fatalf("request %d: %v, want ErrUnavailable wrapping the store's error", i, err)
					}
				default:
					if err != nil {
						t.Fatalf("request %d: %v", i, err)
					}
				}
			}
			want := map[failsafe.Mode]string{
				// The cooldown (1s) is the wait until the store is tried again.
				failsafe.FailClosed: "false 0 1s|false 0 1s|false 0 1s|false 0 1s|false 0 1s",
				failsafe.FailOpen:   "true 0 0s|true 0 0s|true 0 0s|true 0 0s|true 0 0s",
				// A fresh local bucket of 3.
				failsafe.FailLocal: "true 2 0s|true 1 0s|true 0 0s|false 0 333.333334ms|false 0 333.333334ms",
			}[mode]
			if g := strings.Join(got, "|"); g != want {
				t.Fatalf("decisions while down:\n got %s\nwant %s", g, want)
			}
			if n := c.shared.Calls(); n != 2 {
				t.Fatalf("%d calls reached the store, want 2: the one up and the one that failed", n)
			}
			if r := remaining(t, c.shared, "api", p, "k", c.fc.Now()); r != 2 {
				t.Fatalf("the shared state changed while down: %d remaining", r)
			}
			if r := peekStore(t, c.local, "api", p, "k", c.fc.Now()); mode == failsafe.FailLocal && r != 0 {
				t.Fatalf("the local table %q %v has %d remaining, want 0: not the one that decided", "api", p, r)
			}
			c.fc.Advance(400 * time.Millisecond)
			d, _ := c.l.Allow(ctx, "k")
			if mode == failsafe.FailClosed && d.RetryAfter != 600*time.Millisecond {
				t.Fatalf("400ms into the cooldown: RetryAfter %v, want 600ms", d.RetryAfter)
			}
			st := c.fs.Stats()
			wantSt := failsafe.Stats{Down: true, Failures: 1, Trips: 1}
			switch mode {
			case failsafe.FailClosed:
				wantSt.Closed = 6
			case failsafe.FailOpen:
				wantSt.Open = 6
			case failsafe.FailLocal:
				wantSt.Local = 6
			}
			if st != wantSt {
				t.Fatalf("Stats %+v, want %+v", st, wantSt)
			}
			if mode == failsafe.FailClosed && c.l.Stats().Errors != 6 {
				t.Fatalf("the limiter counted %d errors, want 6", c.l.Stats().Errors)
			}
		})
	}
}

// TestFailsafeBadInput: bad input is answered as the store answers it, up
// or down, and is not a failure.
func TestFailsafeBadInput(t *testing.T) {
	p := algo.MustParsePolicy("token-bucket 3/1s")
	for _, mode := range failModes {
		t.Run(mode.String(), func(t *testing.T) {
			c := newFailsafeCase(t, p, failsafe.Options{Mode: mode})
			tb := c.table(t, "api", p)
			now := c.fc.Now().UnixNano()
			check := func(state string, keyChecked bool) {
				t.Helper()
				if _, err := tb.Decide(ctx, "k", now, -1); !errors.Is(err, algo.ErrInvalidCost) {
					t.Fatalf("%s, a negative cost: %v", state, err)
				}
				if _, err := tb.Decide(ctx, "k", -1, 1); !errors.Is(err, algo.ErrInvalidTime) {
					t.Fatalf("%s, a time before the epoch: %v", state, err)
				}
				if d, err := tb.Decide(ctx, "k", now, 4); !errors.Is(err, algo.ErrCostExceedsBurst) || d.Allowed || d.RetryAfter != algo.Never {
					t.Fatalf("%s, a cost above the burst: %+v, %v", state, d, err)
				}
				if _, err := tb.Decide(ctx, "k\x00", now, 1); keyChecked && !errors.Is(err, store.ErrInvalidKey) {
					t.Fatalf("%s, a key the store refuses: %v", state, err)
				}
				foreign, _ := memstore.New(0).Table("api", p)
				if err := c.fs.Apply(ctx, []store.Op{{Kind: store.OpDecide, Table: foreign, Key: "k", Now: now, N: 1}}); !errors.Is(err, store.ErrForeignTable) {
					t.Fatalf("%s, another store's table: %v", state, err)
				}
				if err := c.fs.Apply(ctx, []store.Op{{Kind: 99, Table: tb, Key: "k", Now: now}}); err == nil {
					t.Fatalf("%s, an unknown op kind was accepted", state)
				}
				for _, op := range []store.Op{
					{Kind: store.OpDecide, Table: tb, Key: "k", Now: now, N: -1},
					{Kind: store.OpSchedule, Table: tb, Key: "k", Now: algo.MaxTime + 1, N: 1},
					{Kind: store.OpRefund, Table: tb, Key: "k", Now: now, N: 4},
				} {
					if err := c.fs.Apply(ctx, []store.Op{op}); !errors.Is(err, algo.ErrInvalidCost) && !errors.Is(err, algo.ErrInvalidTime) {
						t.Fatalf("%s, Apply of a bad op %+v: %v", state, op, err)
					}
				}
			}
			check("up", true)
			if st := c.fs.Stats(); st != (failsafe.Stats{}) {
				t.Fatalf("bad input while up counted: %+v", st)
			}
			c.trip(t)
			// While down the store is not asked, so only it can refuse a key;
			// the cooldown has not passed, so no probe is due.
			check("down", false)
			if st := c.fs.Stats(); st.Failures != 1 || !st.Down {
				t.Fatalf("bad input while down counted as a failure: %+v", st)
			}

			// A probe that meets bad input tells nothing: the store stays
			// down and the next call probes at once.
			c.shared.Heal()
			c.fc.Advance(time.Second)
			if _, err := tb.Decide(ctx, "k\x00", c.fc.Now().UnixNano(), 1); !errors.Is(err, store.ErrInvalidKey) {
				t.Fatalf("a probe with a key the store refuses: %v", err)
			}
			if st := c.fs.Stats(); !st.Down || st.Failures != 1 {
				t.Fatalf("a probe with bad input changed the state: %+v", st)
			}
			if d, err := tb.Decide(ctx, "k", c.fc.Now().UnixNano(), 1); err != nil || !d.Allowed {
				t.Fatalf("the next probe: %+v, %v", d, err)
			}
			if st := c.fs.Stats(); st.Down || st.Recoveries != 1 {
				t.Fatalf("after a good probe: %+v", st)
			}
		})
	}
}

// TestFailsafeRecovery: while down, nothing reaches the store until the
// cooldown has passed; then one probe does, and its success brings the
// store back. Each transition is logged once.
func TestFailsafeRecovery(t *testing.T) {
	var logs bytes.Buffer
	p := algo.MustParsePolicy("sliding-log 1000/1m")
	c := newFailsafeCase(t, p, failsafe.Options{Mode: failsafe.FailOpen,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{ReplaceAttr: dropTime}))})
	mustAllow(t, c.l, "k", 1)
	c.shared.Fail(errRefused)
	for range 100 {
		if d := mustAllow(t, c.l, "k", 1); !d.Allowed {
			t.Fatal("FailOpen denied")
		}
		c.fc.Advance(9 * time.Millisecond) // 900ms in all
	}
	c.shared.Heal()
	c.fc.Advance(99 * time.Millisecond) // 999ms
	mustAllow(t, c.l, "k", 1)
	if n := c.shared.Calls(); n != 2 {
		t.Fatalf("%d calls reached the store before the cooldown passed, want 2", n)
	}
	c.fc.Advance(time.Millisecond)
	// What would not reach the store, or might be answered without it,
	// does not probe.
	if err := c.fs.Apply(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.l.AllowN(ctx, "k", 1001); !errors.Is(err, algo.ErrCostExceedsBurst) {
		t.Fatalf("a cost above the burst while down: %v", err)
	}
	if st := c.fs.Stats(); !st.Down || c.shared.Calls() != 2 {
		t.Fatalf("an empty batch or a cost above the burst probed: %+v, %d calls", st, c.shared.Calls())
	}
	d := mustAllow(t, c.l, "k", 1)
	if n := c.shared.Calls(); n != 3 || d.Remaining != 998 {
		t.Fatalf("the probe: %d calls, %+v; want the store's decision (998 left: 2 admitted by the store)", n, d)
	}
	st := c.fs.Stats()
	if want := (failsafe.Stats{Failures: 1, Open: 101, Trips: 1, Recoveries: 1}); st != want {
		t.Fatalf("Stats %+v, want %+v", st, want)
	}
	for range 10 {
		mustAllow(t, c.l, "k", 1)
	}
	if n := c.shared.Calls(); n != 13 {
		t.Fatalf("%d calls reached the store, want every call once it is up", n)
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 2 ||
		!strings.Contains(lines[0], `level=WARN msg="floodgate: store failing" mode=open cooldown=1s err="connection refused"`) ||
		!strings.Contains(lines[1], `level=INFO msg="floodgate: store recovered" mode=open down=1s`) {
		t.Fatalf("logs, want one line per transition:\n%s", logs.String())
	}
}

func dropTime(_ []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}

// TestFailsafeCooldownDoubling: each failed probe doubles the cooldown, up
// to MaxCooldown; a recovery sets it back. FailClosed's RetryAfter is the
// time until the next probe.
func TestFailsafeCooldownDoubling(t *testing.T) {
	p := algo.MustParsePolicy("fixed-window 10/1m")
	c := newFailsafeCase(t, p, failsafe.Options{Cooldown: time.Second, MaxCooldown: 4 * time.Second})
	c.shared.Fail(errRefused)
	at := func(d time.Duration) (floodgate.Decision, int64) {
		t.Helper()
		c.fc.Set(epoch.Add(d))
		before := c.shared.Calls()
		dec, err := c.l.Allow(ctx, "k")
		if dec.Allowed || !errors.Is(err, failsafe.ErrUnavailable) {
			t.Fatalf("at %v: %+v, %v", d, dec, err)
		}
		return dec, c.shared.Calls() - before
	}
	if d, calls := at(0); calls != 1 || d.RetryAfter != time.Second {
		t.Fatalf("the first failure: %d calls, RetryAfter %v", calls, d.RetryAfter)
	}
	for _, probe := range []struct{ at, next time.Duration }{
		{1 * time.Second, 2 * time.Second},
		{3 * time.Second, 4 * time.Second},
		{7 * time.Second, 4 * time.Second}, // capped
		{11 * time.Second, 4 * time.Second},
	} {
		if d, calls := at(probe.at - 1); calls != 0 || d.RetryAfter != 1 {
			t.Fatalf("1ns before the probe at %v: %d calls, RetryAfter %v", probe.at, calls, d.RetryAfter)
		}
		if d, calls := at(probe.at); calls != 1 || d.RetryAfter != probe.next {
			t.Fatalf("the probe at %v: %d calls, RetryAfter %v, want 1 call and %v", probe.at, calls, d.RetryAfter, probe.next)
		}
	}
	c.shared.Heal()
	c.fc.Set(epoch.Add(15 * time.Second))
	if d := mustAllow(t, c.l, "k", 1); !d.Allowed {
		t.Fatalf("the probe at 15s: %+v", d)
	}
	c.shared.Fail(errRefused)
	if d, calls := at(16 * time.Second); calls != 1 || d.RetryAfter != time.Second {
		t.Fatalf("a failure after the recovery: %d calls, RetryAfter %v, want the cooldown back to 1s", calls, d.RetryAfter)
	}
	if st := c.fs.Stats(); st.Failures != 6 || st.Recoveries != 1 || !st.Down {
		t.Fatalf("Stats %+v, want 6 failures (2 + 4 probes), 1 recovery", st)
	}
}

// TestFailsafeOneProbe: when many goroutines come after the cooldown, one
// probes and the others use the mode meanwhile; FailClosed tells them to
// retry after the Timeout, within which the probe's outcome is known.
func TestFailsafeOneProbe(t *testing.T) {
	p := algo.MustParsePolicy("token-bucket 1000/1s")
	c := newFailsafeCase(t, p, failsafe.Options{Timeout: time.Minute})
	c.trip(t)
	c.fc.Advance(time.Second)
	// The first call in waits for release; any other returns at once, so
	// that a second probe fails the test instead of hanging it.
	var in atomic.Int64
	entered, release := make(chan struct{}), make(chan struct{})
	c.shared.Set(func(context.Context, string) error {
		if in.Add(1) == 1 {
			close(entered)
			<-release
		}
		return nil
	})
	type result struct {
		d   floodgate.Decision
		err error
	}
	const n = 64
	results := make(chan result, n)
	for range n {
		go func() {
			d, err := c.l.Allow(ctx, "k")
			results <- result{d, err}
		}()
	}
	<-entered
	for range n - 1 {
		r := <-results
		if r.d.Allowed || r.d.RetryAfter != time.Minute || !errors.Is(r.err, failsafe.ErrUnavailable) {
			t.Fatalf("a call during the probe: %+v, %v; want a denial with RetryAfter the Timeout", r.d, r.err)
		}
	}
	if calls := c.shared.Calls(); calls != 2 {
		t.Fatalf("%d calls reached the store, want 2: the failure and one probe", calls)
	}
	close(release)
	if r := <-results; !r.d.Allowed || r.err != nil {
		t.Fatalf("the probe: %+v, %v", r.d, r.err)
	}
	if st := c.fs.Stats(); st.Down || st.Recoveries != 1 || st.Closed != n {
		t.Fatalf("Stats %+v, want up again, %d closed (the trip and %d during the probe)", st, n, n-1)
	}
}

// TestFailsafeTimeout: a call that outlasts the Timeout is a failure; one
// cut short by the caller's own context is not, and returns its error.
func TestFailsafeTimeout(t *testing.T) {
	p := algo.MustParsePolicy("token-bucket 10/1s")
	t.Run("timeout", func(t *testing.T) {
		c := newFailsafeCase(t, p, failsafe.Options{Mode: failsafe.FailOpen, Timeout: time.Millisecond})
		c.shared.Hang()
		if d := mustAllow(t, c.l, "k", 1); !d.Allowed {
			t.Fatalf("Allow after the Timeout: %+v", d)
		}
		if st := c.fs.Stats(); st.Failures != 1 || !st.Down {
			t.Fatalf("a timed-out Decide: %+v", st)
		}
		c.fc.Advance(time.Second) // the next call probes, through Apply
		r, err := c.l.Reserve(ctx, "k", 1)
		if err != nil || !r.OK() {
			t.Fatalf("Reserve after the Timeout: %+v, %v", r.Decision(), err)
		}
		if st := c.fs.Stats(); st.Failures != 2 || !st.Down || st.Open != 2 {
			t.Fatalf("a timed-out Apply: %+v", st)
		}
	})
	t.Run("caller-cancels", func(t *testing.T) {
		c := newFailsafeCase(t, p, failsafe.Options{Timeout: time.Minute})
		entered := make(chan struct{}, 1)
		c.shared.Set(func(ctx context.Context, _ string) error {
			entered <- struct{}{}
			<-ctx.Done()
			return ctx.Err()
		})
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan error)
		go func() {
			_, err := c.l.Allow(cctx, "k")
			done <- err
		}()
		<-entered
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("a cancelled call: %v", err)
		}
		if _, err := c.l.Reserve(cctx, "k", 1); !errors.Is(err, context.Canceled) {
			t.Fatalf("Apply with a cancelled context: %v", err)
		}
		if st := c.fs.Stats(); st != (failsafe.Stats{}) {
			t.Fatalf("the caller's cancellation counted: %+v", st)
		}
	})
	t.Run("caller-deadline", func(t *testing.T) {
		c := newFailsafeCase(t, p, failsafe.Options{Timeout: time.Minute})
		c.shared.Hang()
		dctx, cancel := context.WithTimeout(ctx, time.Millisecond)
		defer cancel()
		if _, err := c.l.Allow(dctx, "k"); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a call past the caller's deadline: %v", err)
		}
		if st := c.fs.Stats(); st != (failsafe.Stats{}) {
			t.Fatalf("the caller's deadline counted: %+v", st)
		}
	})
	t.Run("probe-cancelled", func(t *testing.T) {
		c := newFailsafeCase(t, p, failsafe.Options{Timeout: time.Minute})
		c.trip(t)
		c.fc.Advance(time.Second)
		c.shared.Hang()
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := c.l.Allow(cctx, "k"); !errors.Is(err, context.Canceled) {
			t.Fatalf("a probe with a cancelled context: %v", err)
		}
		if st := c.fs.Stats(); !st.Down || st.Failures != 1 {
			t.Fatalf("a cancelled probe changed the state: %+v", st)
		}
		c.shared.Heal()
		if d := mustAllow(t, c.l, "k", 1); !d.Allowed || c.fs.Stats().Down {
			t.Fatalf("the next call did not probe at once: %+v, %+v", d, c.fs.Stats())
		}
	})
}

// TestFailsafeStaleFailure: a call that began before an outage and fails
// after the recovery does not take the store down again.
func TestFailsafeStaleFailure(t *testing.T) {
	c := newFailsafeCase(t, algo.MustParsePolicy("fixed-window 10/1m"), failsafe.Options{Mode: failsafe.FailOpen, Timeout: -1})
	var down atomic.Bool
	entered, release := make(chan struct{}), make(chan struct{})
	c.shared.Set(func(_ context.Context, key string) error {
		if key == "slow" {
			close(entered)
			<-release
			return errRefused
		}
		if down.Load() {
			return errRefused
		}
		return nil
	})
	slow := make(chan floodgate.Decision)
	go func() {
		d, _ := c.l.Allow(ctx, "slow")
		slow <- d
	}()
	<-entered
	down.Store(true)
	mustAllow(t, c.l, "k", 1)
	down.Store(false)
	c.fc.Advance(time.Second)
	mustAllow(t, c.l, "k", 1)
	if st := c.fs.Stats(); st.Down || st.Recoveries != 1 {
		t.Fatalf("before the slow call ends: %+v", st)
	}
	close(release)
	if d := <-slow; !d.Allowed {
		t.Fatalf("the slow call: %+v", d)
	}
	if st := c.fs.Stats(); st.Down || st.Failures != 2 {
		t.Fatalf("a failure from before the recovery took the store down: %+v", st)
	}
}

// TestFailsafeApply: batches in each mode while the store is down.
func TestFailsafeApply(t *testing.T) {
	pa := algo.MustParsePolicy("token-bucket 1/1h burst=2")
	pb := algo.MustParsePolicy("fixed-window 1/1h")
	for _, mode := range failModes {
		t.Run(mode.String(), func(t *testing.T) {
			c := newFailsafeCase(t, pa, failsafe.Options{Mode: mode})
			a, b := c.table(t, "api", pa), c.table(t, "b", pb)
			c.trip(t)
			now := c.fc.Now().UnixNano()
			apply := func(ops ...store.Op) ([]store.Op, error) {
				t.Helper()
				err := c.fs.Apply(ctx, ops)
				if mode == failsafe.FailClosed {
					if !errors.Is(err, failsafe.ErrUnavailable) || !errors.Is(err, errRefused) {
						t.Fatalf("FailClosed Apply: %v", err)
					}
				} else if err != nil {
					t.Fatal(err)
				}
				return ops, err
			}
			local := func(name string, p algo.Policy) int64 {
				t.Helper()
				return peekStore(t, c.local, name, p, "k", c.fc.Now())
			}
			both := func() []store.Op {
				return []store.Op{
					{Kind: store.OpDecide, Table: a, Key: "k", Now: now, N: 1},
					{Kind: store.OpDecide, Table: b, Key: "k", Now: now, N: 1},
				}
			}

			ops, _ := apply(both()...)
			allowed := ops[0].Result.Decision.Allowed && ops[1].Result.Decision.Allowed
			if allowed != (mode != failsafe.FailClosed) {
				t.Fatalf("the first batch: %+v", ops)
			}
			if mode == failsafe.FailClosed && (ops[0].Result.Decision.RetryAfter != time.Second || ops[1].Result.Decision.RetryAfter != time.Second) {
				t.Fatalf("FailClosed's ops: %+v, want RetryAfter the cooldown", ops)
			}
			// The second: b's window is full in FailLocal, so nothing of the
			// batch takes effect, a's unit included.
			ops, _ = apply(both()...)
			if mode == failsafe.FailLocal && (!ops[0].Result.Decision.Allowed || ops[1].Result.Decision.Allowed) {
				t.Fatalf("the second batch: %+v", ops)
			}
			if mode == failsafe.FailOpen && !(ops[0].Result.Decision.Allowed && ops[1].Result.Decision.Allowed) {
				t.Fatalf("FailOpen denied: %+v", ops)
			}
			wantA := map[failsafe.Mode]int64{failsafe.FailClosed: 2, failsafe.FailOpen: 2, failsafe.FailLocal: 1}[mode]
			if r := local("api", pa); r != wantA {
				t.Fatalf("the local a has %d left, want %d", r, wantA)
			}

			// A schedule: in FailLocal a unit held from now, for 1h from now.
			ops, _ = apply(store.Op{Kind: store.OpSchedule, Table: a, Key: "k", Now: now, N: 2, MaxWait: 2 * time.Hour})
			switch op := ops[0]; mode {
			case failsafe.FailOpen:
				if !op.Result.Decision.Allowed || op.Result.At != now {
					t.Fatalf("FailOpen's schedule: %+v", op)
				}
			case failsafe.FailLocal:
				if !op.Result.Decision.Allowed || op.Result.At != now+int64(time.Hour) || op.Result.Decision.RetryAfter != time.Hour {
					t.Fatalf("FailLocal's schedule: %+v", op)
				}
				// Its refund, while still down, goes back to the local store.
				apply(store.Op{Kind: store.OpRefund, Table: a, Key: "k", Now: now, N: 2, Stamp: op.Result.Stamp})
				if r := local("api", pa); r != 1 {
					t.Fatalf("after the refund the local a has %d left, want 1", r)
				}
			}
			apply(store.Op{Kind: store.OpReset, Table: a, Key: "k", Now: now})
			if r := local("api", pa); r != 2 {
				t.Fatalf("after a reset the local a has %d left, want 2", r)
			}
			if r := remaining(t, c.shared, "api", pa, "k", c.fc.Now()); r != 2 {
				t.Fatalf("the shared a changed while down: %d left", r)
			}
			st := c.fs.Stats()
			counted := map[failsafe.Mode]uint64{failsafe.FailClosed: st.Closed, failsafe.FailOpen: st.Open, failsafe.FailLocal: st.Local}[mode]
			// trip, two batches, schedule (and in FailLocal its refund), reset
			want := map[failsafe.Mode]uint64{failsafe.FailClosed: 5, failsafe.FailOpen: 4, failsafe.FailLocal: 6}[mode]
			if counted != want || st.Failures != 1 {
				t.Fatalf("Stats %+v, want %d calls counted", st, want)
			}
		})
	}
}

// TestFailsafeRefundAcrossFailover: a refund goes to the store that
// admitted its units, if that one is deciding, and nowhere otherwise.
func TestFailsafeRefundAcrossFailover(t *testing.T) {
	p := algo.MustParsePolicy("token-bucket 1/1h")
	c := newFailsafeCase(t, p, failsafe.Options{Mode: failsafe.FailLocal})
	reserve := func(key string) *floodgate.Reservation {
		t.Helper()
		r, err := c.l.Reserve(ctx, key, 1)
		if err != nil || !r.OK() {
			t.Fatalf("Reserve(%q): %+v, %v", key, r.Decision(), err)
		}
		return r
	}
	cancel := func(r *floodgate.Reservation) {
		t.Helper()
		if err := r.Cancel(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Up: reserved and cancelled on the store.
	cancel(reserve("up"))
	if d := mustAllow(t, c.l, "up", 0); d.Remaining != 1 {
		t.Fatalf("a refund while up: %+v", d)
	}
	fromStore := reserve("k")
	c.trip(t)
	// Down: k is fresh on the local store; spend it there.
	if d := mustAllow(t, c.l, "k", 1); !d.Allowed {
		t.Fatalf("the local k: %+v", d)
	}
	// The store's reservation, cancelled now, must not refill the local k.
	cancel(fromStore)
	if d := mustAllow(t, c.l, "k", 1); d.Allowed {
		t.Fatal("the store's refund was applied to the local store")
	}
	// A local reservation cancelled while down refills the local key.
	cancel(reserve("local"))
	if d := mustAllow(t, c.l, "local", 0); d.Remaining != 1 {
		t.Fatalf("a local refund while down: %+v", d)
	}
	fromLocal := reserve("j")
	c.recover(t, time.Second)
	if r := remaining(t, c.shared, "api", p, "k", c.fc.Now()); r != 0 {
		t.Fatalf("the store's k got its refund while down, or later: %d left", r)
	}
	// Up again: j is fresh on the store; spend it there.
	if d := mustAllow(t, c.l, "j", 1); !d.Allowed {
		t.Fatalf("the store's j: %+v", d)
	}
	cancel(fromLocal)
	if r := remaining(t, c.shared, "api", p, "j", c.fc.Now()); r != 0 {
		t.Fatalf("the local refund was applied to the store: j has %d left", r)
	}
}

// TestFailsafeAllowAll: several limits on a failing store, and with limits
// on another store: all or nothing, whatever the mode.
func TestFailsafeAllowAll(t *testing.T) {
	user := algo.MustParsePolicy("sliding-log 2/1m")
	for _, mode := range failModes {
		t.Run(mode.String(), func(t *testing.T) {
			c := newFailsafeCase(t, user, failsafe.Options{Mode: mode})
			other := memstore.New(0)
			global := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("fixed-window 1/1m"), floodgate.WithStore(other), floodgate.WithClock(c.fc)))
			perIP := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("sliding-log 1/1m"), floodgate.WithStore(c.fs), floodgate.WithClock(c.fc)))
			c.trip(t)
			check := func(checks ...floodgate.Check) (floodgate.MultiDecision, error) {
				t.Helper()
				md, err := floodgate.AllowAll(ctx, checks...)
				if mode == failsafe.FailClosed {
					if !errors.Is(err, failsafe.ErrUnavailable) {
						t.Fatalf("FailClosed: %v", err)
					}
					// The wait until the store is tried again: the cooldown.
					if md.Allowed || md.RetryAfter != time.Second || md.Denied < 0 || checks[md.Denied].Limiter.Store() != store.Store(c.fs) {
						t.Fatalf("FailClosed: %+v, want RetryAfter 1s (the cooldown) from the failing store's check", md)
					}
				} else if err != nil {
					t.Fatal(err)
				}
				return md, err
			}
			// The other store first: on FailClosed it admits, then gives back.
			md, _ := check(floodgate.Check{Limiter: global, Key: "all", N: 1}, floodgate.Check{Limiter: c.l, Key: "alice", N: 1})
			if mode != failsafe.FailClosed && !md.Allowed {
				t.Fatalf("the first check: %+v", md)
			}
			wantGlobal := map[failsafe.Mode]int64{failsafe.FailClosed: 1, failsafe.FailOpen: 0, failsafe.FailLocal: 0}[mode]
			if d := mustAllow(t, global, "all", 0); d.Remaining != wantGlobal {
				t.Fatalf("global has %d left, want %d", d.Remaining, wantGlobal)
			}
			if mode == failsafe.FailClosed {
				return
			}
			// The global limit denies: alice's local unit is given back.
			md, _ = check(floodgate.Check{Limiter: c.l, Key: "alice", N: 1}, floodgate.Check{Limiter: global, Key: "all", N: 1})
			if md.Allowed || md.Denied != 1 {
				t.Fatalf("the second check: %+v", md)
			}
			if mode == failsafe.FailLocal {
				if d := mustAllow(t, c.l, "alice", 0); d.Remaining != 1 {
					t.Fatalf("alice has %d left locally, want 1: the refund was lost", d.Remaining)
				}
			}
			// Two limits on the failing store: one batch.
			for i := range 2 {
				md, _ = check(floodgate.Check{Limiter: c.l, Key: "bob", N: 1}, floodgate.Check{Limiter: perIP, Key: "10.0.0.1", N: 1})
				if want := mode == failsafe.FailOpen || i == 0; md.Allowed != want {
					t.Fatalf("bob's check %d: %+v, want allowed %v", i, md, want)
				}
			}
			if mode == failsafe.FailLocal {
				if d := mustAllow(t, c.l, "bob", 0); d.Remaining != 1 {
					t.Fatalf("bob has %d left locally, want 1: the denied batch spent", d.Remaining)
				}
			}
		})
	}
}

// TestFailsafeUpPathAllocs: while the store is up, deciding through the
// wrapper allocates nothing of its own when no Timeout context is needed.
func TestFailsafeUpPathAllocs(t *testing.T) {
	p := algo.MustParsePolicy("token-bucket 1000000/1s")
	for _, c := range []struct {
		name    string
		timeout time.Duration
		ctx     context.Context
	}{
		{"no-timeout", -1, ctx},
		{"caller-deadline-sooner", time.Hour, func() context.Context {
			c, cancel := context.WithTimeout(ctx, time.Minute)
			t.Cleanup(cancel)
			return c
		}()},
	} {
		fs := newFailsafe(t, memstore.New(0), failsafe.Options{Timeout: c.timeout})
		tb, err := fs.Table("api", p)
		if err != nil {
			t.Fatal(err)
		}
		now := epoch.UnixNano()
		tb.Decide(c.ctx, "k", now, 1)
		if allocs := testing.AllocsPerRun(100, func() { tb.Decide(c.ctx, "k", now, 1) }); allocs != 0 {
			t.Fatalf("%s: %v allocations a Decide", c.name, allocs)
		}
	}
}

// TestFailsafeOptions: the zero options, bad ones, and a MaxCooldown below
// the Cooldown.
func TestFailsafeOptions(t *testing.T) {
	p := algo.MustParsePolicy("fixed-window 1/1m")
	fs := newFailsafe(t, memstore.New(0), failsafe.Options{})
	if fs.Mode() != failsafe.FailClosed || fs.Mode().String() != "closed" {
		t.Fatalf("the zero options' mode: %v", fs.Mode())
	}
	if _, ok := fs.Unwrap().(*memstore.Store); !ok {
		t.Fatalf("Unwrap: %T", fs.Unwrap())
	}
	if _, err := failsafe.New(nil, failsafe.Options{}); !errors.Is(err, failsafe.ErrInvalidOptions) {
		t.Fatalf("New of a nil store: %v, want ErrInvalidOptions", err)
	}
	if _, err := failsafe.New(memstore.New(0), failsafe.Options{Mode: 7}); !errors.Is(err, failsafe.ErrInvalidOptions) {
		t.Fatalf("New with an unknown mode: %v, want ErrInvalidOptions", err)
	}
	if s := failsafe.Mode(7).String(); s != "Mode(7)" {
		t.Fatalf("String of an unknown mode: %q", s)
	}

	c := newFailsafeCase(t, p, failsafe.Options{Cooldown: 2 * time.Second, MaxCooldown: time.Second})
	c.trip(t)
	c.fc.Advance(2 * time.Second)
	if d, _ := c.l.Allow(ctx, "k"); d.RetryAfter != 2*time.Second {
		t.Fatalf("after a failed probe with MaxCooldown below Cooldown: RetryAfter %v, want 2s", d.RetryAfter)
	}
}

// TestFailsafeConformance: a failsafe.Store on a working store keeps the
// Store contract, ApplyEach included. (No Timeout: on a loaded machine a
// call may outlast it, and FailLocal then decides it locally, which the
// suite rightly counts as units not spent on the store.)
func TestFailsafeConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		return newFailsafe(t, memstore.New(0), failsafe.Options{Mode: failsafe.FailLocal, Timeout: noTimeout})
	})
}

// TestFailsafeApplyEach: ApplyEach decides each op as if alone, on the
// store while it is up and by the mode while it is down, where FailLocal
// too decides each op alone.
func TestFailsafeApplyEach(t *testing.T) {
	pa := algo.MustParsePolicy("token-bucket 1/1h burst=2")
	pb := algo.MustParsePolicy("fixed-window 1/1h")
	for _, mode := range failModes {
		t.Run(mode.String(), func(t *testing.T) {
			c := newFailsafeCase(t, pa, failsafe.Options{Mode: mode})
			a, b := c.table(t, "api", pa), c.table(t, "b", pb)
			now := c.fc.Now().UnixNano()
			three := func() []store.Op {
				return []store.Op{
					{Kind: store.OpDecide, Table: a, Key: "k", Now: now, N: 1},
					{Kind: store.OpDecide, Table: b, Key: "k", Now: now, N: 1},
					{Kind: store.OpDecide, Table: b, Key: "k", Now: now, N: 1},
				}
			}
			allowed := func(ops []store.Op) [3]bool {
				return [3]bool{ops[0].Result.Decision.Allowed, ops[1].Result.Decision.Allowed, ops[2].Result.Decision.Allowed}
			}
			// Up: b's second unit is denied, the others admitted on the store.
			ops := three()
			if err := c.fs.ApplyEach(ctx, ops); err != nil {
				t.Fatal(err)
			}
			if got := allowed(ops); got != [3]bool{true, true, false} {
				t.Fatalf("up: admitted %v, want a and b's first", got)
			}
			if ra, rb := remaining(t, c.shared, "api", pa, "k", c.fc.Now()), remaining(t, c.shared, "b", pb, "k", c.fc.Now()); ra != 1 || rb != 0 {
				t.Fatalf("up: the store has a %d, b %d left; want 1 and 0", ra, rb)
			}

			c.trip(t)
			ops = three()
			err := c.fs.ApplyEach(ctx, ops)
			switch mode {
			case failsafe.FailClosed:
				if !errors.Is(err, failsafe.ErrUnavailable) || !errors.Is(err, errRefused) {
					t.Fatalf("FailClosed: %v", err)
				}
			case failsafe.FailOpen:
				if err != nil || allowed(ops) != [3]bool{true, true, true} {
					t.Fatalf("FailOpen: %v %+v", err, ops)
				}
			case failsafe.FailLocal:
				if err != nil || allowed(ops) != [3]bool{true, true, false} {
					t.Fatalf("FailLocal: %v, admitted %v, want a and b's first", err, allowed(ops))
				}
				if ra := peekStore(t, c.local, "api", pa, "k", c.fc.Now()); ra != 1 {
					t.Fatalf("FailLocal: the local a has %d left, want 1", ra)
				}
			}
			if ra := remaining(t, c.shared, "api", pa, "k", c.fc.Now()); ra != 1 {
				t.Fatalf("the store changed while down: a has %d left", ra)
			}

			// Back up: the store decides again.
			c.recover(t, time.Second)
			ops = three()[:1]
			if err := c.fs.ApplyEach(ctx, ops); err != nil || !ops[0].Result.Decision.Allowed {
				t.Fatalf("after the recovery: %v %+v", err, ops[0])
			}
			if ra := remaining(t, c.shared, "api", pa, "k", c.fc.Now()); ra != 0 {
				t.Fatalf("after the recovery the store's a has %d left, want 0", ra)
			}
		})
	}
}
