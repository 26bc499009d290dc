package floodgate_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"

	"github.com/floodgate/floodgate/failsafe"
	"github.com/floodgate/floodgate/storetest"

	"github.com/floodgate/floodgate/memstore"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/store"
)

// TestAllowEach: each check is decided as its limiter's AllowN would
// alone, in order, on stores that take them in one step (a failsafe.Store)
// and on those that do not (memory); a failing store fails its own checks
// only; dry run, a cost above the burst and a missing limiter act as in
// AllowN.
func TestAllowEach(t *testing.T) {
	fc := newFake()
	shared := storetest.NewFlaky()
	fs := newFailsafe(shared, failsafe.Options{Clock: fc})
	mem := memstore.New(0)
	// Twins decide the same checks one AllowN at a time.
	twinShared, twinMem := memstore.New(0), memstore.New(0)
	mk := func(s store.Store, name, policy string, extra ...floodgate.Option) *floodgate.Limiter {
		return floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy(policy),
			append([]floodgate.Option{floodgate.WithStore(s), floodgate.WithClock(fc), floodgate.WithName(name)}, extra...)...))
	}
	user, global := mk(fs, "user", "fixed-window 2/1m"), mk(mem, "global", "token-bucket 5/1m burst=3")
	dry := mk(mem, "dry", "fixed-window 1/1m", floodgate.WithDryRun(true))
	tUser, tGlobal := mk(twinShared, "user", "fixed-window 2/1m"), mk(twinMem, "global", "token-bucket 5/1m burst=3")
	tDry := mk(twinMem, "dry", "fixed-window 1/1m", floodgate.WithDryRun(true))

	for round := range 3 {
		checks := []floodgate.Check{
			{Limiter: user, Key: "u1", N: 1}, {Limiter: global, Key: "g", N: 1}, {Limiter: user, Key: "u1", N: 1},
			{Limiter: user, Key: "u2", N: 1}, {Limiter: dry, Key: "d", N: 1}, {Limiter: global, Key: "g", N: 2},
		}
		twins := []*floodgate.Limiter{tUser, tGlobal, tUser, tUser, tDry, tGlobal}
		ds, errs := floodgate.AllowEach(ctx, checks...)
		if errs != nil {
			t.Fatalf("round %d: %v", round, errs)
		}
		for i, c := range checks {
			want, err := twins[i].AllowN(ctx, c.Key, c.N)
			if err != nil {
				t.Fatal(err)
			}
			if got := ds[i]; got.Allowed != want.Allowed || got.Remaining != want.Remaining || got.RetryAfter != want.RetryAfter ||
				got.ResetAfter != want.ResetAfter || got.DryRun != want.DryRun || got.Policy() != want.Policy() {
				t.Fatalf("round %d check %d: %+v, want as AllowN alone %+v", round, i, got, want)
			}
		}
		fc.Advance(10 * time.Second)
	}
	if got := dry.Stats().DryRunDenied; got != 2 {
		t.Errorf("dry run: %d denials counted, want 2", got)
	}

	// Bad checks fail alone: a cost above the burst, no limiter.
	ds, errs := floodgate.AllowEach(ctx,
		floodgate.Check{Limiter: global, Key: "big", N: 4}, floodgate.Check{Key: "x", N: 1},
		floodgate.Check{Limiter: global, Key: "ok", N: 1})
	if errs == nil || !errors.Is(errs[0], algo.ErrCostExceedsBurst) || ds[0].Allowed || ds[0].RetryAfter != algo.Never ||
		errs[1] == nil || errs[2] != nil || !ds[2].Allowed {
		t.Fatalf("bad checks: %+v %v", ds, errs)
	}

	// A failing store fails its checks, with RetryAfter the failsafe's
	// Timeout (one failure does not take it down); the memory store's
	// still decide.
	shared.Fail(errors.New("connection refused"))
	ds, errs = floodgate.AllowEach(ctx, floodgate.Check{Limiter: user, Key: "u9", N: 1}, floodgate.Check{Limiter: global, Key: "g9", N: 1})
	if errs == nil || !errors.Is(errs[0], failsafe.ErrUnavailable) || ds[0].Allowed || ds[0].RetryAfter != 100*time.Millisecond ||
		errs[1] != nil || !ds[1].Allowed {
		t.Fatalf("a failing store: %+v %v", ds, errs)
	}
	if got := user.Stats().Errors; got != 1 {
		t.Errorf("the failing check counted %d errors, want 1", got)
	}
}

// TestAllowEachAt: the checks are decided at the time given, not on the
// limiters' clocks, and a time AllowAt refuses fails every check and
// decides nothing.
func TestAllowEachAt(t *testing.T) {
	fc := newFake() // the limiter's clock, an hour before: never read
	mem := memstore.New(0)
	l := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("fixed-window 1/1m"), floodgate.WithStore(mem), floodgate.WithClock(fc)))
	at := epoch.Add(time.Hour)
	for _, step := range []struct {
		at    time.Time
		allow []bool // of the checks a, a, b
	}{
		{at, []bool{true, false, true}},
		{at.Add(59 * time.Second), []bool{false, false, false}},
		{at.Add(time.Minute), []bool{true, false, true}},
	} {
		ds, errs := floodgate.AllowEachAt(ctx, step.at, floodgate.Check{Limiter: l, Key: "a", N: 1},
			floodgate.Check{Limiter: l, Key: "a", N: 1}, floodgate.Check{Limiter: l, Key: "b", N: 1})
		if errs != nil {
			t.Fatalf("at %v: %v", step.at, errs)
		}
		for i, want := range step.allow {
			if ds[i].Allowed != want {
				t.Errorf("at %v, check %d: allowed %v, want %v", step.at, i, ds[i].Allowed, want)
			}
		}
	}
	for _, bad := range []time.Time{time.Unix(-1, 0), time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)} {
		ds, errs := floodgate.AllowEachAt(ctx, bad, floodgate.Check{Limiter: l, Key: "c", N: 1}, floodgate.Check{Limiter: l, Key: "c", N: 1})
		if len(errs) != 2 || !errors.Is(errs[0], algo.ErrInvalidTime) || !errors.Is(errs[1], algo.ErrInvalidTime) ||
			ds[0].Allowed || ds[0].Policy() != l.Policy() {
			t.Errorf("AllowEachAt(%v): %+v, %v; want ErrInvalidTime for both", bad, ds, errs)
		}
	}
	if d, err := l.AllowAt(ctx, "c", at, 1); err != nil || !d.Allowed {
		t.Errorf("after the bad times: %+v, %v; want nothing spent", d, err)
	}
}

func ExampleAllowEach() {
	mem := memstore.New(0)
	perUser := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("fixed-window 2/1m"), floodgate.WithStore(mem)))
	perIP := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("fixed-window 1/1m"), floodgate.WithStore(mem)))
	// Three independent checks: the second check of the address is
	// denied, and that spends nothing of the others.
	ds, errs := floodgate.AllowEach(context.Background(),
		floodgate.Check{Limiter: perUser, Key: "u42", N: 1},
		floodgate.Check{Limiter: perIP, Key: "192.0.2.7", N: 1},
		floodgate.Check{Limiter: perIP, Key: "192.0.2.7", N: 1})
	fmt.Println(errs == nil)
	for _, d := range ds {
		fmt.Println(d.Allowed, d.Remaining)
	}
	// Output:
	// true
	// true 1
	// true 0
	// false 0
}

// newFailsafe is failsafe.New with options that are right.
func newFailsafe(s store.Store, o failsafe.Options) *failsafe.Store {
	f, err := failsafe.New(s, o)
	if err != nil {
		panic(err)
	}
	return f
}

// halfDown is a store whose ApplyEach fails the ops on keys starting "b"
// apart from the others (store.ErrPartialFailure), as a Redis Cluster
// with one master down does: a memory store, but not Local.
type halfDown struct{ store.Store }

var errMasterDown = errors.New("master down")

func (s halfDown) ApplyEach(ctx context.Context, ops []store.Op) error {
	for i := range ops {
		if ops[i].Key[0] == 'b' {
			ops[i].Result = store.Result{Err: store.PartialFailure(errMasterDown)}
		} else if err := s.Apply(ctx, ops[i:i+1]); err != nil {
			return err
		}
	}
	return fmt.Errorf("%w: %w", store.ErrPartialFailure, errMasterDown)
}

// TestAllowEachPartialFailure: a store that fails some checks apart from
// the others fails those checks alone; the others have their decisions.
func TestAllowEachPartialFailure(t *testing.T) {
	l := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("fixed-window 1/1m"), floodgate.WithStore(halfDown{memstore.New(0)})))
	ds, errs := floodgate.AllowEach(ctx, floodgate.Check{Limiter: l, Key: "a"}, floodgate.Check{Limiter: l, Key: "b"}, floodgate.Check{Limiter: l, Key: "a"})
	if errs == nil || errs[0] != nil || errs[2] != nil || !errors.Is(errs[1], errMasterDown) {
		t.Fatalf("errors %v, want the check on b alone failed", errs)
	}
	if !ds[0].Allowed || ds[1].Allowed || ds[2].Allowed {
		t.Fatalf("decisions %+v, want a admitted once, by the store", ds)
	}
}
