package failsafe_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/failsafe"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/storetest"
)

// partedEach is parted whose partition 1 (keys starting "b") can fail
// apart, as a Redis Cluster's master: its ApplyEach then carries out
// partition 0's ops and fails partition 1's, with
// store.ErrPartialFailure, or fails as a whole when all its ops are in
// partition 1.
type partedEach struct {
	parted
	down  atomic.Bool
	calls atomic.Int64 // ApplyEach calls with ops of partition 1
}

func (s *partedEach) ApplyEach(ctx context.Context, ops []store.Op) error {
	var work []store.Op
	var idx []int
	for i := range ops {
		if strings.HasPrefix(ops[i].Key, "b") {
			if s.calls.Add(1); !s.down.Load() {
				continue
			}
			ops[i].Result = store.Result{Err: store.PartialFailure(errRefused)}
			continue
		}
		work, idx = append(work, ops[i]), append(idx, i)
	}
	if !s.down.Load() {
		return s.parted.ApplyEach(ctx, ops)
	}
	if len(work) == 0 {
		return errRefused
	}
	if err := s.parted.ApplyEach(ctx, work); err != nil {
		return err
	}
	for j, i := range idx {
		ops[i].Result = work[j].Result
	}
	return fmt.Errorf("%w: %d of %d ops: %w", store.ErrPartialFailure, len(ops)-len(work), len(ops), errRefused)
}

// noTimeout turns the Timeout off, for tests of failures the store
// reports: on a loaded machine a memory store's call may outlast the
// default Timeout (100ms of real time), a failure the test did not make.
const noTimeout = -1

// TestFailsafeApplyEachPartial: while one partition fails, an ApplyEach
// across both has its healthy partition's ops decided by the store,
// exactly, and only the failing partition's by the mode; only the failing
// partition's breaker sees the failures and trips; once it is back, a
// probe brings it up and the store decides all again.
func TestFailsafeApplyEachPartial(t *testing.T) {
	for _, mode := range failModes {
		t.Run(mode.String(), func(t *testing.T) {
			fc := newFake()
			shared := &partedEach{parted: parted{storetest.NewFlaky()}}
			fs := newFailsafe(t, shared, failsafe.Options{Mode: mode, Clock: fc, Threshold: 3, FailFor: -1, Cooldown: time.Second, Timeout: noTimeout})
			p := algo.MustParsePolicy("fixed-window 5/1h")
			l := floodgate.Must(floodgate.NewLimiter(p, floodgate.WithStore(fs), floodgate.WithClock(fc)))
			checks := []floodgate.Check{{Limiter: l, Key: "a1"}, {Limiter: l, Key: "b1"}, {Limiter: l, Key: "a2"}}
			shared.down.Store(true)
			admitted := map[string]int{}
			for range 20 {
				ds, errs := floodgate.AllowEach(ctx, checks...)
				for i, c := range checks {
					err := error(nil)
					if errs != nil {
						err = errs[i]
					}
					if c.Key[0] == 'a' && err != nil || c.Key[0] == 'b' && (mode == failsafe.FailClosed) != errors.Is(err, failsafe.ErrUnavailable) {
						t.Fatalf("%s: %+v, %v", c.Key, ds[i], err)
					}
					if ds[i].Allowed {
						admitted[c.Key]++
					}
				}
			}
			wantB := map[failsafe.Mode]int{failsafe.FailClosed: 0, failsafe.FailOpen: 20, failsafe.FailLocal: 5}[mode]
			if admitted["a1"] != 5 || admitted["a2"] != 5 || admitted["b1"] != wantB {
				t.Fatalf("admitted %v; want 5 of each a key by the store, %d of b1 by the mode", admitted, wantB)
			}
			if st := fs.Stats(); !st.Down || st.Trips != 1 || st.Failures != 3 {
				t.Fatalf("partition 1 failing: %+v; want it alone down after 3 failures", st)
			}
			if calls := shared.calls.Load(); calls != 3 {
				t.Fatalf("partition 1's ops went to the store %d times, want 3 (until it went down)", calls)
			}
			if rem := remaining(t, shared.Flaky, "fixed-window 5/1h", p, "a1", fc.Now()); rem != 0 {
				t.Fatalf("the store has %d left for a1, want 0", rem)
			}

			// A batch all in the failing partition fails as a whole, as before.
			ops := []store.Op{{Kind: store.OpDecide, Table: must(fs.Table("api", p)), Key: "b2", Now: fc.Now().UnixNano(), N: 1}}
			err := fs.ApplyEach(ctx, ops)
			if errors.Is(err, store.ErrPartialFailure) || (mode == failsafe.FailClosed) != errors.Is(err, failsafe.ErrUnavailable) {
				t.Fatalf("a batch of partition 1 alone: %v", err)
			}

			shared.down.Store(false)
			fc.Advance(time.Second)
			ds, errs := floodgate.AllowEach(ctx, floodgate.Check{Limiter: l, Key: "b3"}, floodgate.Check{Limiter: l, Key: "a3"})
			if errs != nil || !ds[0].Allowed || !ds[1].Allowed {
				t.Fatalf("after the cooldown: %+v %v", ds, errs)
			}
			if st := fs.Stats(); st.Down || st.Recoveries != 1 {
				t.Fatalf("after the cooldown: %+v, want partition 1 up again", st)
			}
			if rem := remaining(t, shared.Flaky, "fixed-window 5/1h", p, "b3", fc.Now()); rem != 4 {
				t.Fatalf("the store has %d left for b3, want 4: the probe decided on it", rem)
			}
		})
	}
}

// must returns v, failing the test's goroutine with a panic on err.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func (s *partedEach) Apply(ctx context.Context, ops []store.Op) error {
	if !s.down.Load() || !slices.ContainsFunc(ops, func(op store.Op) bool { return strings.HasPrefix(op.Key, "b") }) {
		return s.parted.Apply(ctx, ops)
	}
	for i := range ops {
		if strings.HasPrefix(ops[i].Key, "b") {
			ops[i].Result = store.Result{Err: store.PartialFailure(errRefused)}
		}
	}
	return errRefused
}

// TestFailsafeApplyBlame: an all-or-nothing batch across a healthy and a
// failing partition fails whole, decided by the mode, but when the store
// names the ops it failed on, only their partition counts the failure:
// the healthy one stays up, its keys decided by the store.
func TestFailsafeApplyBlame(t *testing.T) {
	fc := newFake()
	shared := &partedEach{parted: parted{storetest.NewFlaky()}}
	fs := newFailsafe(t, shared, failsafe.Options{Clock: fc, Threshold: 3, FailFor: -1, Cooldown: time.Second, Timeout: noTimeout})
	p := algo.MustParsePolicy("fixed-window 5/1h")
	l := floodgate.Must(floodgate.NewLimiter(p, floodgate.WithStore(fs), floodgate.WithClock(fc)))
	shared.down.Store(true)
	for range 5 {
		res, err := floodgate.AllowAll(ctx, floodgate.Check{Limiter: l, Key: "a1", N: 1}, floodgate.Check{Limiter: l, Key: "b1", N: 1})
		if res.Allowed || !errors.Is(err, failsafe.ErrUnavailable) {
			t.Fatalf("a batch across the failing partition: %+v, %v; want denied, unavailable", res, err)
		}
	}
	if st := fs.Stats(); st.Trips != 1 || st.Failures != 3 {
		t.Fatalf("after 5 batches: %+v; want the failing partition alone down, after 3 failures", st)
	}
	if d := mustAllow(t, l, "a1", 1); !d.Allowed || d.Remaining != 4 {
		t.Fatalf("a1 after the batches: %+v; want decided by the store, 4 left", d)
	}
}
