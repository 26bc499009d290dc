package store

import "errors"

// Errors of the store contract, wrapped with details; test for them with
// errors.Is. Bad times and costs are package algo's errors
// (algo.ErrInvalidTime, algo.ErrInvalidCost).
var (
	// ErrForeignTable is returned by Apply and ApplyEach for an Op whose
	// Table belongs to another store.
	ErrForeignTable = errors.New("table of another store")
	// ErrInvalidKey is returned for a key, or a limiter's name, that a
	// store cannot hold.
	ErrInvalidKey = errors.New("invalid key")
	// ErrInvalidOp is returned for an Op of an unknown kind.
	ErrInvalidOp = errors.New("invalid op")
	// ErrPartialFailure is returned by ApplyEach, wrapped, when the store
	// failed on some of the ops but not on the others (a Redis Cluster
	// with one master down): each op it failed on has a Result.Err
	// wrapping ErrPartialFailure and the failure (PartialFailure,
	// Result.Failure), and
	// every other op has its Result as if the call had succeeded.
	ErrPartialFailure = errors.New("partial failure")
)
