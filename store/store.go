package store

import (
	"context"

	"github.com/floodgate/floodgate/algo"
)

// Store keeps the state of many keys, in tables, and decides on it. See
// the package documentation for the duties of an implementation; package
// storetest tests them.
type Store interface {
	// Table returns the table that holds the keys of the limiter named
	// name with policy p. Equal names and policies give the same table, in
	// this process and, for a shared store, in every process using it. A
	// store may refuse a name it cannot hold (an error wrapping
	// ErrInvalidKey) and refuses the zero Policy (algo.ErrInvalidPolicy).
	Table(name string, p algo.Policy) (Table, error)
	// Apply carries out ops, in order, as one atomic step, all or
	// nothing: if any OpDecide or OpSchedule is denied, no op takes
	// effect, and Apply still sets every op's Result. Later ops see the
	// effects of earlier ones (two ops on one key add up).
	//
	// Apply returns an error, and changes nothing, for bad input (see
	// Check), a table of another store (ErrForeignTable), a context done
	// before the call, or a store that could not be reached. A store that
	// fails while the ops are on their way (a reply from Redis that never
	// comes) returns its error, and the ops may have taken effect, all or
	// nothing, as when a context ends then (below). A denial is not an
	// error; an op whose cost exceeds its policy's burst is a denial
	// whose Result.Err wraps algo.ErrCostExceedsBurst.
	//
	// A store whose keys are in partitions that fail apart (Partitioned)
	// may say which ops it failed on: their Result.Err is then a
	// PartialFailure (Result.Failure), and the other ops were in
	// partitions that answered, the units they admitted refunded (their
	// refunds and resets stay done). Apply still fails
	// whole: its error never wraps ErrPartialFailure.
	//
	// A context that ends while the ops are on their way (to Redis, to a
	// file) ends the call at once, with the context's error: ops that
	// were still waiting to go are withdrawn, and change nothing; ops
	// already on their way may still take effect, all or nothing, their
	// Results lost. Either way, once Apply returns, the store touches ops
	// no more.
	Apply(ctx context.Context, ops []Op) error
	// ApplyEach carries out ops, in order, each as if alone: as an Apply
	// of that op alone would, so that a denied op changes nothing and
	// leaves the others be, and an op sees the effects of the earlier ops
	// on its key. A store takes them in one step where it can.
	//
	// Bad input fails the whole call before anything is done, as in
	// Apply. Any other error (a broken store, a context that ended) leaves
	// the ops' outcomes unknown: some may have taken effect; unless it
	// wraps ErrPartialFailure, which says that the store failed on some
	// ops only (those in a partition that failed, for a Partitioned
	// store): the outcome of each op with a Result.Failure is unknown, and
	// every other op was carried out, its Result set. A caller that does
	// not look at the ops' Results when ApplyEach fails takes every op for
	// failed, which was true of some. Once ApplyEach returns, the store
	// touches ops no more.
	ApplyEach(ctx context.Context, ops []Op) error
}

// Table is one limiter's keys in a Store. It is safe for concurrent use.
type Table interface {
	// Decide decides an event of cost n at now (nanoseconds since the Unix
	// epoch) for key: the fast path of an Apply with one OpDecide.
	Decide(ctx context.Context, key string, now, n int64) (algo.Decision, error)
}

// Local is implemented by a Store whose state is in this process's
// memory (package memstore): it decides an op without a round trip or a
// transaction, so a batch of independent ops saves it nothing, and
// building one costs more than the ops. floodgate.AllowEach decides the
// checks on such a store one by one, with Table.Decide, as AllowN would.
// Local itself does nothing. A wrapper of another store (a failsafe.Store)
// is not Local, whatever it wraps.
type Local interface {
	Store
	Local()
}

// Partitioned is implemented by a Store whose keys are spread over
// partitions that can fail apart from one another, such as the hash slots
// of a Redis Cluster, whose masters each hold some of them. A wrapper
// that stands in for a failing store (package failsafe) keeps the state of
// each partition apart, so that keys in working partitions go on being
// decided by the store. A Store that does not implement Partitioned is
// one partition.
type Partitioned interface {
	Store
	// Partitions returns how many partitions the store has, at least 1;
	// it is the same for the store's whole life.
	Partitions() int
	// Partition returns the partition of key in t, a table of the store:
	// a number in [0, Partitions()). It calls out to nothing and is safe
	// for concurrent use.
	Partition(t Table, key string) int
}
