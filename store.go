package floodgate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/floodgate/floodgate/algo"
)

// Store keeps the state of many keys for Limiters and decides on it. The
// memory store (NewMemoryStore) is the default; the file and Redis stores
// live in packages of their own. The package storetest holds the
// conformance suite every Store must pass: the same decisions as package
// algo, for every operation below, under concurrency.
//
// An implementation's duties:
//   - Safe for concurrent use, by many goroutines (and for shared stores,
//     many processes): every operation on a key is atomic.
//   - Decisions exactly as algo.Policy.Decide, algo.Policy.Schedule and
//     algo.Policy.Refund would make them on the key's state, at the time
//     the caller gives (or, where a store documents it, its own clock).
//   - A key's state is kept until it drains (algo.Policy.ResetAt); after
//     that the store may drop it, which changes no decision.
//   - Errors wrap the algo sentinels for bad input and say what failed for
//     a broken store; a failed operation changes nothing.
type Store interface {
	// Table returns the table that holds the keys of the limiter named
	// name with policy p. Limiters with equal names and policies share
	// state, in this process and, for a shared store, in every process
	// using it. A store may refuse a name it cannot hold.
	Table(name string, p Policy) (Table, error)
	// Apply carries out ops, in order, as one atomic step, all or
	// nothing: if any OpDecide or OpSchedule is denied, no op of the batch
	// takes effect, and Apply still reports every op's decision. Later ops
	// see the effect of earlier ones (two ops on one key add up). The ops'
	// Tables must come from this Store; another's is ErrForeignTable.
	//
	// Apply returns an error, and changes nothing, when it could not carry
	// the ops out: a broken store, a cancelled context, a bad time or cost.
	// A denial is not an error; an OpDecide whose cost exceeds its policy's
	// burst is a denial whose Op.Err wraps ErrCostExceedsBurst.
	Apply(ctx context.Context, ops []Op) error
}

// Table is one limiter's keys in a Store. It is safe for concurrent use.
type Table interface {
	// Decide decides an event of cost n at now (nanoseconds since the Unix
	// epoch) for key: the fast path of an Apply with one OpDecide.
	Decide(ctx context.Context, key string, now, n int64) (algo.Decision, error)
}

// OpKind says what an Op does.
type OpKind uint8

// The operations of Store.Apply.
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
	Err      error         // a denial's reason, such as ErrCostExceedsBurst
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
			return false, fmt.Errorf("%w: %d ns is outside [0, %d]", ErrInvalidTime, op.Now, int64(algo.MaxTime))
		}
		*s = algo.State{}
		return true, nil
	default:
		return false, fmt.Errorf("unknown op kind %d", op.Kind)
	}
	if errors.Is(err, ErrCostExceedsBurst) {
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
