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
	// with N > 0 it sets Stamp, for a later refund.
	OpDecide OpKind = iota + 1
	// OpSchedule decides N units at Now, and when they are not admitted
	// at Now but would be within MaxWait, admits them for later, holding
	// them from Now (algo.Policy.Schedule). It sets Decision, At and Stamp.
	OpSchedule
	// OpRefund gives back N units admitted with Stamp (algo.Policy.Refund).
	OpRefund
	// OpReset forgets the key's state: the key starts afresh.
	OpReset
)

// Op is one operation of Store.Apply: its input, then what the store sets.
type Op struct {
	Kind    OpKind
	Table   Table
	Key     string
	Now     int64 // nanoseconds since the Unix epoch
	N       int64
	MaxWait time.Duration // OpSchedule
	Stamp   algo.Stamp    // OpRefund's input; set by an admitted OpDecide or OpSchedule

	Decision algo.Decision // OpDecide, OpSchedule
	At       int64         // OpSchedule: the instant the caller may act
	Err      error         // a denial's reason, such as algo.ErrCostExceedsBurst
}

// Carry carries out op on s, the state of op's key under p, as every
// Store's Apply does for each of its ops: it sets op's outputs (Decision,
// At, Stamp, Err) and reports whether the op went through, false only for
// a denied OpDecide or OpSchedule, which leaves s as it was (the caller
// then undoes the batch's other ops). An error (a bad time or cost, an
// unknown kind) means nothing was carried out; s may have changed and is
// to be discarded.
func (op *Op) Carry(p *algo.Policy, s *algo.State) (ok bool, err error) {
	stamp := op.Stamp
	op.Err, op.At, op.Stamp, op.Decision = nil, 0, algo.Stamp{}, algo.Decision{}
	switch op.Kind {
	case OpDecide:
		op.Decision, err = p.Decide(s, op.Now, op.N)
		op.At = op.Now
	case OpSchedule:
		op.Decision, op.At, err = p.Schedule(s, op.Now, op.N, int64(op.MaxWait))
	case OpRefund:
		return true, p.Refund(s, stamp, op.Now, op.N)
	case OpReset:
		if op.Now < 0 || op.Now > algo.MaxTime {
			return false, fmt.Errorf("%w: %d ns is outside [0, %d]", algo.ErrInvalidTime, op.Now, int64(algo.MaxTime))
		}
		*s = algo.State{}
		return true, nil
	default:
		return false, fmt.Errorf("%w: kind %d", ErrInvalidOp, op.Kind)
	}
	if errors.Is(err, algo.ErrCostExceedsBurst) {
		op.Err, err = err, nil
	}
	if err != nil || !op.Decision.Allowed {
		return false, err
	}
	if op.N > 0 {
		op.Stamp = p.StampOf(s, op.At)
		op.At = op.Stamp.At
	}
	return true, nil
}
