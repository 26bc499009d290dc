package floodgate

import "errors"

// Errors returned by a Limiter, wrapped with details; test for them with
// errors.Is. A denial is not an error: it is a Decision with Allowed false.
// Bad input is package algo's errors (algo.ErrInvalidCost,
// algo.ErrInvalidTime; algo.ErrCostExceedsBurst comes with a denial that
// can never become an admission), and a failing store's are its own.
var (
	// ErrWaitTooLong is returned by Wait when the wait needed would pass
	// the context's deadline or the limiter's maximum wait
	// (WithMaxWait). Nothing is consumed.
	ErrWaitTooLong = errors.New("wait would exceed the deadline or the maximum wait")
	// ErrQueueFull is returned by Wait when the key already has the
	// limiter's maximum number of waiters (WithMaxQueue).
	ErrQueueFull = errors.New("wait queue full")
)
