package failsafe_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/failsafe"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/storetest"
)

// defaults are the options of the tests of the threshold and the
// cooldown: the defaults, on the fake clock of newFailsafeCase.
var defaults = failsafe.Options{Mode: failsafe.FailOpen, Threshold: 5, FailFor: 250 * time.Millisecond, Cooldown: 500 * time.Millisecond}

// TestFailsafeThreshold: the store goes down after Threshold failures in
// a row over FailFor, and not before; a success starts the run again.
func TestFailsafeThreshold(t *testing.T) {
	c := newFailsafeCase(t, algo.MustParsePolicy("token-bucket 1000/1s"), defaults)
	c.shared.Fail(errRefused)
	for range 4 {
		mustAllow(t, c.l, "k", 1)
		c.fc.Advance(100 * time.Millisecond)
	}
	c.shared.Heal()
	mustAllow(t, c.l, "k", 1) // a success: the run starts again
	c.shared.Fail(errRefused)
	for range 4 {
		mustAllow(t, c.l, "k", 1)
		c.fc.Advance(100 * time.Millisecond)
	}
	if st := c.fs.Stats(); st.Down || st.Failures != 8 || st.Open != 8 {
		t.Fatalf("after 4 failures, a success and 4 more: %+v, want up", st)
	}
	// Many failures at once, as one stall fails the calls it holds
	// together, do not meet FailFor.
	c.shared.Heal()
	mustAllow(t, c.l, "k", 1)
	c.shared.Fail(errRefused)
	for range 100 {
		mustAllow(t, c.l, "k", 1)
	}
	c.fc.Advance(249 * time.Millisecond)
	mustAllow(t, c.l, "k", 1)
	if st := c.fs.Stats(); st.Down {
		t.Fatalf("101 failures over 249ms: %+v, want up", st)
	}
	c.fc.Advance(time.Millisecond)
	mustAllow(t, c.l, "k", 1)
	if st := c.fs.Stats(); !st.Down || st.Trips != 1 {
		t.Fatalf("failures over 250ms: %+v, want down", st)
	}
	calls := c.shared.Calls()
	mustAllow(t, c.l, "k", 1)
	if c.shared.Calls() != calls {
		t.Fatal("a call reached the store while it was down")
	}
}

// TestFailsafeOneSlowCall: one call slower than the Timeout gets the
// mode's answer, and nothing else does: the store stays up, and the calls
// after it are decided by the store, within the policy.
func TestFailsafeOneSlowCall(t *testing.T) {
	o := defaults
	o.Timeout = time.Millisecond
	c := newFailsafeCase(t, algo.MustParsePolicy("fixed-window 10/1h"), o)
	c.shared.Set(func(ctx context.Context, key string) error {
		if key == "slow" {
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	})
	mustAllow(t, c.l, "slow", 1)
	admitted := 0
	for range 100 {
		if mustAllow(t, c.l, "k", 1).Allowed {
			admitted++
		}
		c.fc.Advance(10 * time.Millisecond)
	}
	st := c.fs.Stats()
	t.Logf("one call over the Timeout: %d fail-open admissions, %d trips", st.Open, st.Trips)
	if st.Down || st.Trips != 0 || st.Failures != 1 || st.Open != 1 || admitted != 10 {
		t.Fatalf("after one slow call: %+v, %d of 100 admitted; want up, the slow call alone open, 10 admitted", st, admitted)
	}
}

// TestFailsafeOwnTimeout: a call that outlasts the Timeout is a failure
// even when the store returns after the caller has given up too (a
// client that does not heed its context); one cut short by the caller
// first is not.
func TestFailsafeOwnTimeout(t *testing.T) {
	p := algo.MustParsePolicy("token-bucket 10/1s")
	o := failsafe.Options{Mode: failsafe.FailOpen, Timeout: time.Millisecond}
	t.Run("timeout-first", func(t *testing.T) {
		c := newFailsafeCase(t, p, o)
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		c.shared.Set(func(ctx context.Context, _ string) error {
			<-ctx.Done() // the Timeout
			cancel()     // then the caller gives up
			return errRefused
		})
		if _, err := c.l.Allow(cctx, "k"); err != nil {
			t.Fatal(err)
		}
		if st := c.fs.Stats(); st.Failures != 1 || !st.Down {
			t.Fatalf("a call past the Timeout, then the caller's cancellation: %+v, want a failure", st)
		}
	})
	t.Run("caller-first", func(t *testing.T) {
		o := o
		o.Timeout = time.Minute
		c := newFailsafeCase(t, p, o)
		cctx, cancel := context.WithCancel(ctx)
		c.shared.Set(func(ctx context.Context, _ string) error {
			cancel()
			<-ctx.Done()
			return errRefused
		})
		if _, err := c.l.Allow(cctx, "k"); !errors.Is(err, context.Canceled) {
			t.Fatalf("a call the caller cancelled: %v", err)
		}
		if st := c.fs.Stats(); st != (failsafe.Stats{}) {
			t.Fatalf("the caller's cancellation counted: %+v", st)
		}
	})
}

// TestFailsafeCooldown: with the default Cooldown, the store is used
// again within 500ms of answering again, however long it was down: a
// failed probe does not double the cooldown, and the next probe may go a
// cooldown after the failed one began.
func TestFailsafeCooldown(t *testing.T) {
	fc, shared := newFake(), storetest.NewFlaky()
	fs := newFailsafe(t, shared, failsafe.Options{Mode: failsafe.FailOpen, Clock: fc, Threshold: 1, FailFor: -1})
	l := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("token-bucket 1000/1s"), floodgate.WithStore(fs), floodgate.WithClock(fc)))
	shared.Set(func(ctx context.Context, _ string) error {
		fc.Advance(100 * time.Millisecond) // each call takes 100ms to fail
		return errRefused
	})
	mustAllow(t, l, "k", 1) // down at 100ms, the next probe at 600ms
	fc.Advance(500 * time.Millisecond)
	for range 20 { // 10s of failed probes
		calls := shared.Calls()
		mustAllow(t, l, "k", 1) // probes from 600ms to 700ms
		if shared.Calls() != calls+1 {
			t.Fatal("no probe a cooldown after the last one began")
		}
		fc.Advance(300 * time.Millisecond)
		mustAllow(t, l, "k", 1)
		if shared.Calls() != calls+1 {
			t.Fatal("a probe before the cooldown passed")
		}
		fc.Advance(100 * time.Millisecond) // a cooldown since the probe began
	}
	mustAllow(t, l, "k", 1) // the last failed probe, ending at 10.7s
	shared.Heal()           // the store answers again
	fc.Advance(400 * time.Millisecond)
	mustAllow(t, l, "k", 1)
	if st := fs.Stats(); st.Down || st.Recoveries != 1 || st.Failures != 22 {
		t.Fatalf("a probe's duration after the store answers again: %+v, want up", st)
	}
}

// parted is a storetest.Flaky in two partitions: keys starting "b" are
// in partition 1, the others in 0.
type parted struct{ *storetest.Flaky }

func (parted) Partitions() int { return 2 }

func (parted) Partition(_ store.Table, key string) int {
	if strings.HasPrefix(key, "b") {
		return 1
	}
	return 0
}

// TestFailsafePartitions: a partition that fails goes down alone; keys
// in the others go on being decided by the store. A batch touching a
// partition that is down is decided by the mode.
func TestFailsafePartitions(t *testing.T) {
	fc, shared := newFake(), parted{storetest.NewFlaky()}
	fs := newFailsafe(t, shared, failsafe.Options{Mode: failsafe.FailOpen, Clock: fc, Threshold: 3, FailFor: -1, Cooldown: time.Second})
	p := algo.MustParsePolicy("fixed-window 5/1h")
	l := floodgate.Must(floodgate.NewLimiter(p, floodgate.WithStore(fs), floodgate.WithClock(fc)))
	shared.Set(func(_ context.Context, key string) error {
		if strings.HasPrefix(key, "b") {
			return errRefused
		}
		return nil
	})
	admitted := map[string]int{}
	for range 20 {
		for _, k := range []string{"a1", "b1", "a2"} {
			if mustAllow(t, l, k, 1).Allowed {
				admitted[k]++
			}
		}
	}
	st := fs.Stats()
	if !st.Down || st.Trips != 1 || st.Open != 20 || admitted["a1"] != 5 || admitted["a2"] != 5 {
		t.Fatalf("partition 1 failing: %+v, admitted %v; want partition 0's keys decided by the store (5 each), b1's by the mode", st, admitted)
	}
	res, err := floodgate.AllowAll(ctx, floodgate.Check{Limiter: l, Key: "a3", N: 1}, floodgate.Check{Limiter: l, Key: "b2", N: 1})
	if err != nil || !res.Allowed || fs.Stats().Open != 21 {
		t.Fatalf("a batch across a partition that is down: %+v, %v, %+v; want decided by the mode", res, err, fs.Stats())
	}
	shared.Heal()
	fc.Advance(time.Second)
	mustAllow(t, l, "b1", 1)
	if st := fs.Stats(); st.Down || st.Recoveries != 1 {
		t.Fatalf("after the cooldown: %+v, want up", st)
	}
	// A batch across both partitions that fails is one failed call,
	// counted against each.
	shared.Fail(errRefused)
	before := fs.Stats().Failures
	for range 3 {
		floodgate.AllowAll(ctx, floodgate.Check{Limiter: l, Key: "a4", N: 1}, floodgate.Check{Limiter: l, Key: "b3", N: 1})
	}
	if st := fs.Stats(); st.Failures != before+3 || st.Trips != 3 {
		t.Fatalf("3 failed batches across both partitions: %+v, want 3 more failures and both partitions down", st)
	}
}
