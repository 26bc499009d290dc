package floodgate

import (
	"errors"

	"github.com/floodgate/floodgate/algo"
)

// Errors returned by floodgate, wrapped with details; test for them with
// errors.Is. A denial is not an error: it is a Decision with Allowed false.
var (
	// ErrInvalidPolicy is returned by ParsePolicy and NewPolicy for a bad
	// policy, naming the part at fault.
	ErrInvalidPolicy = algo.ErrInvalidPolicy
	// ErrInvalidTime is returned for a time before the Unix epoch or after
	// algo.MaxTime (the year 2116).
	ErrInvalidTime = algo.ErrInvalidTime
	// ErrInvalidCost is returned for a negative cost.
	ErrInvalidCost = algo.ErrInvalidCost
	// ErrCostExceedsBurst is returned, together with a denial whose
	// RetryAfter is Never, for a cost greater than the policy's burst:
	// such a request can never be admitted, and Wait returns it at once.
	ErrCostExceedsBurst = algo.ErrCostExceedsBurst
	// ErrWaitTooLong is returned by Wait when the wait needed would pass
	// the context's deadline or the limiter's maximum wait
	// (WithMaxWait). Nothing is consumed.
	ErrWaitTooLong = errors.New("wait would exceed the deadline or the maximum wait")
	// ErrQueueFull is returned by Wait when the key already has the
	// limiter's maximum number of waiters (WithMaxQueue).
	ErrQueueFull = errors.New("wait queue full")
)
