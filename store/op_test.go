package store_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/store"
)

// t0 is a realistic time: 2026-11-22 in nanoseconds since the Unix epoch.
const t0 = int64(1795305600) * 1e9

// ownTable is a Table that Check takes for the store's own.
type ownTable struct{ store.Table }

func TestCheck(t *testing.T) {
	p := algo.MustParsePolicy("token-bucket 10/1s burst=4")
	own := func(tb store.Table) (*algo.Policy, bool) {
		if _, ok := tb.(ownTable); ok {
			return &p, true
		}
		return nil, false
	}
	op := func(k store.OpKind, now, n int64) store.Op {
		return store.Op{Kind: k, Table: ownTable{}, Key: "k", Now: now, N: n}
	}
	refund := op(store.OpRefund, t0, 1)
	refund.Stamp.At = -1
	for _, c := range []struct {
		name string
		op   store.Op
		want error // nil: no error
	}{
		{"decide", op(store.OpDecide, t0, 1), nil},
		{"decide above the burst is a denial, not an error", op(store.OpDecide, t0, 5), nil},
		{"schedule", op(store.OpSchedule, t0, 2), nil},
		{"refund", op(store.OpRefund, t0, 4), nil},
		{"reset", op(store.OpReset, t0, 0), nil},
		{"unknown kind", op(0, t0, 1), store.ErrInvalidOp},
		{"negative cost", op(store.OpDecide, t0, -1), algo.ErrInvalidCost},
		{"time before the epoch", op(store.OpSchedule, -1, 1), algo.ErrInvalidTime},
		{"time after MaxTime", op(store.OpDecide, algo.MaxTime+1, 1), algo.ErrInvalidTime},
		{"reset out of time", op(store.OpReset, -1, 0), algo.ErrInvalidTime},
		{"refund above the burst", op(store.OpRefund, t0, 5), algo.ErrInvalidCost},
		{"refund's stamp out of time", refund, algo.ErrInvalidTime},
		{"another store's table", store.Op{Kind: store.OpDecide, Key: "k", Now: t0, N: 1}, store.ErrForeignTable},
	} {
		ops := []store.Op{op(store.OpDecide, t0, 1), c.op}
		err := store.Check(ops, own)
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%s: Check: %v, want %v", c.name, err, c.want)
		}
		if c.want != nil && err.Error()[:4] != "op 1" {
			t.Errorf("%s: Check's error %q does not name op 1", c.name, err)
		}
	}
}

// Carry is the transition every store makes: admitted ops change the state
// and say what they spent; a denial changes nothing; Refund gives back
// what an admission spent.
func TestCarryAndRefund(t *testing.T) {
	p := algo.MustParsePolicy("fixed-window 2/1s")
	var s algo.State
	spend := store.Op{Kind: store.OpDecide, Key: "k", Now: t0, N: 2}
	if ok, err := spend.Carry(&p, &s); !ok || err != nil || !spend.Result.Decision.Allowed || spend.Result.At != t0 {
		t.Fatalf("the first op: %v %v %+v", ok, err, spend.Result)
	}
	more := store.Op{Kind: store.OpDecide, Key: "k", Now: t0, N: 1}
	if ok, err := more.Carry(&p, &s); ok || err != nil || more.Result.Decision.Allowed {
		t.Fatalf("an op over the limit: %v %v %+v", ok, err, more.Result)
	}
	if _, ok := more.Refund(t0); ok {
		t.Fatal("a denied op has something to refund")
	}
	r, ok := spend.Refund(t0)
	if !ok || r.Kind != store.OpRefund || r.N != 2 || r.Stamp != spend.Result.Stamp {
		t.Fatalf("the refund of the first op: %+v, %v", r, ok)
	}
	if ok, err := r.Carry(&p, &s); !ok || err != nil {
		t.Fatalf("carrying the refund: %v %v", ok, err)
	}
	if ok, err := more.Carry(&p, &s); !ok || err != nil || more.Result.Decision.Remaining != 1 {
		t.Fatalf("after the refund: %v %v %+v", ok, err, more.Result)
	}
}

func ExampleCheck() {
	p := algo.MustParsePolicy("token-bucket 10/1s")
	ops := []store.Op{{Kind: store.OpDecide, Key: "alice", Now: t0, N: -3}}
	// A store answers for its own tables; this one takes every table.
	err := store.Check(ops, func(store.Table) (*algo.Policy, bool) { return &p, true })
	fmt.Println(err)
	fmt.Println(errors.Is(err, algo.ErrInvalidCost))
	// Output:
	// op 0 on "alice": negative cost: -3
	// true
}

// Failure tells an op that ApplyEach failed on, apart from the others,
// from a denial with a reason and from an admission, and gives its cause.
func TestResultFailure(t *testing.T) {
	down := errors.New("master down")
	for _, c := range []struct {
		name string
		r    store.Result
		want error
	}{
		{"admitted", store.Result{Decision: algo.Decision{Allowed: true}}, nil},
		{"denied above the burst", store.Result{Err: algo.ErrCostExceedsBurst}, nil},
		{"failed apart", store.Result{Err: store.PartialFailure(down)}, down},
		{"failed apart, wrapped", store.Result{Err: fmt.Errorf("wrapped: %w", store.PartialFailure(down))}, down},
	} {
		if got := c.r.Failure(); got != c.want {
			t.Errorf("%s: Failure() = %v, want %v", c.name, got, c.want)
		}
	}
	err := store.PartialFailure(down)
	if !errors.Is(err, store.ErrPartialFailure) || !errors.Is(err, down) || err.Error() != "partial failure: master down" {
		t.Errorf("PartialFailure(down) = %q, want it to wrap both", err)
	}
}
