package memstore_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/memstore"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/storetest"
)

// policyChangeTable returns the table named "api" with policy text in m.
func policyChangeTable(t *testing.T, m *memstore.Store, text string) store.Table {
	t.Helper()
	tb, err := m.Table("api", algo.MustParsePolicy(text))
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

// spend decides n units of key on tb at now, which must be admitted.
func spend(t *testing.T, tb store.Table, key string, now, n int64) {
	t.Helper()
	if d, err := tb.Decide(context.Background(), key, now, n); err != nil || !d.Allowed {
		t.Fatalf("spending %d of %q at %d: %+v, %v", n, key, now, d, err)
	}
}

// remaining peeks at key on tb at now.
func remaining(t *testing.T, tb store.Table, key string, now int64) int64 {
	t.Helper()
	d, err := tb.Decide(context.Background(), key, now, 0)
	if err != nil {
		t.Fatal(err)
	}
	return d.Remaining
}

// TestPolicyChangeAcrossSnapshot: a limiter that keeps its name and
// changes its policy across a restart from a snapshot keeps each key's
// spent units.
func TestPolicyChangeAcrossSnapshot(t *testing.T) {
	before := memstore.New(0)
	storetest.PolicyChange(t, before, func(t *testing.T, now int64) store.Store {
		var snap bytes.Buffer
		if err := before.WriteSnapshot(&snap, now); err != nil {
			t.Fatal(err)
		}
		after := memstore.New(0)
		if err := after.ReadSnapshot(&snap, now); err != nil {
			t.Fatal(err)
		}
		return after
	})
}

// TestPolicyChangeInApply: Apply finds a key's state under the former
// policy too, and a denied batch leaves the former table's state alone.
func TestPolicyChangeInApply(t *testing.T) {
	now := snapT0.UnixNano()
	m := memstore.New(0)
	spend(t, policyChangeTable(t, m, "sliding-log 10/1m"), "k", now, 7)
	tb := policyChangeTable(t, m, "sliding-log 20/1m")
	ops := []store.Op{{Kind: store.OpDecide, Table: tb, Key: "k", Now: now + 1, N: 14}}
	if err := m.Apply(context.Background(), ops); err != nil {
		t.Fatal(err)
	}
	if ops[0].Result.Decision.Allowed {
		t.Errorf("14 units with 7 of 20 spent: admitted, want denied")
	}
	ops[0].N = 13
	if err := m.Apply(context.Background(), ops); err != nil || !ops[0].Result.Decision.Allowed {
		t.Errorf("13 units with 7 of 20 spent: %+v, %v; want admitted", ops[0].Result, err)
	}
	if got := remaining(t, tb, "k", now+2); got != 0 {
		t.Errorf("Remaining %d, want 0", got)
	}
}
