package store

import (
	"errors"
	"fmt"
	"time"

	"github.com/floodgate/floodgate/algo"
)

// OpKind says what an Op does.
type OpKind uint8

// The operations of Store.Apply and Store.ApplyEach.
const (
	// OpDecide decides N units at Now, like Table.Decide; when admitted
	// with N > 0 it sets Result.Stamp, for a later refund.
	OpDecide OpKind = iota + 1
	// OpSchedule decides N units at Now, and when they are not admitted
	// at Now but would be within MaxWait, admits them for later, holding
	// them from Now (algo.Policy.Schedule).
	OpSchedule
	// OpRefund gives back N units admitted with Stamp (algo.Policy.Refund).
	OpRefund
	// OpReset forgets the key's state: the key starts afresh.
	OpReset
)

// Op is one operation of Store.Apply and Store.ApplyEach: what to do,
// then, in Result, what the store did.
type Op struct {
	Kind  OpKind
	Table Table
	Key   string
	Now   int64 // nanoseconds since the Unix epoch
	// N is the units: the cost of OpDecide and OpSchedule, the units that
	// OpRefund gives back.
	N int64
	// MaxWait is OpSchedule's: the longest wait for which it admits units
	// for later.
	MaxWait time.Duration
	// Stamp is OpRefund's: the Result.Stamp of the op that admitted the
	// units.
	Stamp algo.Stamp

	// Result is set by the store.
	Result Result
}

// Result is what a store did with an Op.
type Result struct {
	// Decision is an OpDecide's or OpSchedule's; the zero Decision for
	// the other kinds.
	Decision algo.Decision
	// At is the instant from which an admitted OpDecide or OpSchedule may
	// act: Now, or later for units scheduled for later, or for units
	// placed after a step back of the clock (algo.Stamp.At).
	At int64
	// Stamp identifies the units an admitted OpDecide or OpSchedule with
	// N > 0 spent, for an OpRefund to give them back.
	Stamp algo.Stamp
	// Err is a denial's reason, such as algo.ErrCostExceedsBurst; nil for
	// an admission and a plain denial. After an ApplyEach whose error
	// wraps ErrPartialFailure, it is the failure of an op that the store
	// failed on, wrapping ErrPartialFailure (see Failure).
	Err error
}

// Failure returns the failure of an op that ApplyEach failed on while
// carrying out others (its Err wraps ErrPartialFailure), without
// ErrPartialFailure when Err was made by PartialFailure; nil for any
// other op. The op's outcome is unknown, and the rest of r is what the
// store answered in its place (a failsafe.Store failing closed denies
// it, say).
func (r *Result) Failure() error {
	if r.Err == nil || !errors.Is(r.Err, ErrPartialFailure) {
		return nil
	}
	var pf *partialFailure
	if errors.As(r.Err, &pf) {
		return pf.err
	}
	return r.Err
}

// PartialFailure returns the Result.Err of an op that ApplyEach failed on
// with err while carrying out others: an error wrapping ErrPartialFailure
// and err, which Result.Failure gives back.
func PartialFailure(err error) error { return &partialFailure{err} }

type partialFailure struct{ err error }

func (e *partialFailure) Error() string   { return ErrPartialFailure.Error() + ": " + e.err.Error() }
func (e *partialFailure) Unwrap() []error { return []error{ErrPartialFailure, e.err} }

// Carry carries out op on s, the state of op's key under p, as every
// Store's Apply does for each of its ops, once they have passed Check: it
// sets op.Result and reports whether the op went through, false only for
// a denied OpDecide or OpSchedule, which leaves s as it was (the caller
// then undoes the batch's other ops). An error (input that Check refuses)
// means nothing was carried out; s may have changed and is to be
// discarded.
func (op *Op) Carry(p *algo.Policy, s *algo.State) (ok bool, err error) {
	r := &op.Result
	*r = Result{}
	switch op.Kind {
	case OpDecide:
		r.Decision, err = p.Decide(s, op.Now, op.N)
		r.At = op.Now
	case OpSchedule:
		r.Decision, r.At, err = p.Schedule(s, op.Now, op.N, int64(op.MaxWait))
	case OpRefund:
		return true, p.Refund(s, op.Stamp, op.Now, op.N)
	case OpReset:
		*s = algo.State{}
		return true, nil
	default:
		return false, fmt.Errorf("%w: kind %d", ErrInvalidOp, op.Kind)
	}
	if errors.Is(err, algo.ErrCostExceedsBurst) {
		r.Err, err = err, nil
	}
	if err != nil || !r.Decision.Allowed {
		return false, err
	}
	if op.N > 0 {
		r.Stamp = p.StampOf(s, r.At)
		r.At = r.Stamp.At
	}
	return true, nil
}

// Refund returns the op that gives back, at now, the units that op spent,
// and whether it spent any: an OpDecide or OpSchedule admitted with N > 0.
func (op *Op) Refund(now int64) (Op, bool) {
	if (op.Kind != OpDecide && op.Kind != OpSchedule) || !op.Result.Decision.Allowed || op.N <= 0 {
		return Op{}, false
	}
	return Op{Kind: OpRefund, Table: op.Table, Key: op.Key, Now: now, N: op.N, Stamp: op.Result.Stamp}, true
}

// Check returns the error a store returns for op, on a table of policy p,
// before it does anything: an error wrapping ErrInvalidOp for an unknown
// kind; algo.ErrInvalidTime for a Now, or a refund's Stamp.At, outside [0,
// algo.MaxTime]; algo.ErrInvalidCost for a negative N, or a refund of more
// than the burst. A cost above the burst is not an error: it is denied.
func (op *Op) Check(p *algo.Policy) error {
	switch op.Kind {
	case OpDecide, OpSchedule:
		return p.CheckEvent(op.Now, op.N)
	case OpRefund:
		if op.Stamp.At < 0 || op.Stamp.At > algo.MaxTime {
			return fmt.Errorf("%w: a refund's stamp at %d ns is outside [0, %d]", algo.ErrInvalidTime, op.Stamp.At, int64(algo.MaxTime))
		}
		return p.CheckRefund(op.Now, op.N)
	case OpReset:
		return p.CheckEvent(op.Now, 0)
	}
	return fmt.Errorf("%w: kind %d", ErrInvalidOp, op.Kind)
}

// Check checks ops as a store's Apply and ApplyEach do first, so that bad
// input fails the whole call and changes nothing. policy returns the
// policy of a table of the store, and false for another store's table
// (ErrForeignTable). The error names the first op at fault.
func Check(ops []Op, policy func(Table) (*algo.Policy, bool)) error {
	for i := range ops {
		op := &ops[i]
		p, ok := policy(op.Table)
		if !ok {
			return fmt.Errorf("op %d: %w", i, ErrForeignTable)
		}
		if err := op.Check(p); err != nil {
			return fmt.Errorf("op %d on %q: %w", i, op.Key, err)
		}
	}
	return nil
}
