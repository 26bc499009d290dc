package failsafe_test

import (
	"errors"
	"testing"
	"time"

	"github.com/floodgate/floodgate/failsafe"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/storetest"
)

// countingFlaky is a Flaky with counters, on its tables: they fail when
// it does.
type countingFlaky struct{ *storetest.Flaky }

func (s countingFlaky) Counters(name string, period time.Duration) (store.Counters, error) {
	return store.TableCounters(s.Flaky, name, period)
}

// TestCountersByMode: the counters of a failsafe.Store count on the store
// while it works, and by the mode when it fails: FailOpen knows no count,
// FailClosed fails with ErrUnavailable, FailLocal counts on the local
// store, from what it counted itself.
func TestCountersByMode(t *testing.T) {
	now := epoch.UnixNano()
	for _, mode := range []failsafe.Mode{failsafe.FailOpen, failsafe.FailClosed, failsafe.FailLocal} {
		t.Run(mode.String(), func(t *testing.T) {
			fl := storetest.NewFlaky()
			f := newFailsafe(t, countingFlaky{fl}, failsafe.Options{Mode: mode, Clock: newFake(), Timeout: -1})
			cs, err := store.CountersOf(f, "c", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			hs := []store.Hits{{Key: "k", Now: now, N: 3}, {Key: "k", Now: now, N: 2}}
			if err := cs.AddEach(ctx, hs); err != nil || hs[1].Count != 5 || hs[1].Unknown {
				t.Fatalf("up: %v, %+v; want a count of 5", err, hs)
			}
			fl.Fail(errRefused)
			hs = []store.Hits{{Key: "k", Now: now, N: 1}}
			err = cs.AddEach(ctx, hs)
			switch mode {
			case failsafe.FailOpen:
				if err != nil || !hs[0].Unknown {
					t.Errorf("failing open: %v, %+v; want no count known", err, hs[0])
				}
			case failsafe.FailClosed:
				if !errors.Is(err, failsafe.ErrUnavailable) {
					t.Errorf("failing closed: %v, want ErrUnavailable", err)
				}
			case failsafe.FailLocal:
				if err != nil || hs[0].Count != 1 {
					t.Errorf("failing local: %v, %+v; want the local count, 1", err, hs[0])
				}
			}
		})
	}
}

// TestCountersUnsupported: over a store without counters, a failsafe.Store
// says so, and store.CountersOf counts on its tables.
func TestCountersUnsupported(t *testing.T) {
	f := newFailsafe(t, storetest.NewFlaky(), failsafe.Options{Mode: failsafe.FailOpen})
	if _, err := f.Counters("c", time.Minute); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("Counters over a store without: %v, want ErrUnsupported", err)
	}
	cs, err := store.CountersOf(f, "c", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	hs := []store.Hits{{Key: "k", Now: epoch.UnixNano(), N: 4}}
	if err := cs.AddEach(ctx, hs); err != nil || hs[0].Count != 4 {
		t.Fatalf("%v, %+v; want a count of 4", err, hs)
	}
}
