package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/memstore"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return memstore.New(0) })
}

// A tiny bound exercises eviction and shard bounds under the same rules.
func TestConformanceSmall(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return memstore.New(64) })
}

var ctx = context.Background()

// A sliding log that could take more than a sixteenth of the store's
// memory is refused, with the bound named; one at the bound is not.
func TestSlidingLogBound(t *testing.T) {
	m := memstore.New(0, memstore.MaxBytes(16<<20))
	most := m.MaxLogLimit()
	if _, err := m.Table("log", algo.MustParsePolicy(fmt.Sprintf("sliding-log %d/1h", most))); err != nil {
		t.Fatalf("LIMIT %d, the most: %v", most, err)
	}
	_, err := m.Table("log", algo.MustParsePolicy(fmt.Sprintf("sliding-log %d/1h", most+1)))
	if !errors.Is(err, algo.ErrInvalidPolicy) || !strings.Contains(err.Error(), fmt.Sprint(most)) {
		t.Fatalf("LIMIT %d: %v, want ErrInvalidPolicy naming %d", most+1, err, most)
	}
	if got := memstore.New(0).MaxLogLimit(); got != 524_288 {
		t.Fatalf("MaxLogLimit at the default bound = %d", got)
	}
}

// A table folded or freed under memory pressure, while a limiter holds
// it, comes back when used, and a key at its limit is still denied, by
// Decide and by Apply.
func TestFreedTableComesBack(t *testing.T) {
	m := memstore.New(0, memstore.MaxBytes(1<<20))
	p := algo.MustParsePolicy("fixed-window 3/1h")
	held, err := m.Table("held", p)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if d, _ := held.Decide(ctx, "k", 0, 1); !d.Allowed {
			t.Fatal("denied below the limit")
		}
	}
	for i := range 500 { // other tables: held is folded in the first sweep
		tb, err := m.Table(fmt.Sprint("other-", i), p)
		if err != nil {
			t.Fatal(err)
		}
		tb.Decide(ctx, "k", 1, 1)
		if st := m.Stats(); st.Bytes > st.MaxBytes {
			t.Fatalf("%d bytes held, bound %d", st.Bytes, st.MaxBytes)
		}
	}
	if d, _ := held.Decide(ctx, "k", 2, 1); d.Allowed {
		t.Fatal("a key at its limit was admitted after its table was freed")
	}
	again, _ := m.Table("held", p)
	ops := []store.Op{{Kind: store.OpDecide, Table: again, Key: "k", Now: 3, N: 1}}
	if err := m.Apply(ctx, ops); err != nil || ops[0].Result.Decision.Allowed {
		t.Fatalf("Apply: %+v, %v; want denied", ops[0].Result.Decision, err)
	}
}
