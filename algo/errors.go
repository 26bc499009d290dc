package algo

import "errors"

// Errors returned by this package, wrapped with details; test for them with
// errors.Is.
var (
	// ErrInvalidPolicy is returned by ParsePolicy and New for a bad policy,
	// and by Decide for the zero Policy.
	ErrInvalidPolicy = errors.New("invalid policy")
	// ErrInvalidTime is returned by Decide for a time before 0 or after
	// MaxTime.
	ErrInvalidTime = errors.New("time out of range")
	// ErrInvalidCost is returned by Decide for a negative cost.
	ErrInvalidCost = errors.New("negative cost")
	// ErrCostExceedsBurst is returned by Decide, together with a denial
	// whose RetryAfter is Never, for a cost greater than the policy's
	// Burst: such an event can never be admitted.
	ErrCostExceedsBurst = errors.New("cost exceeds burst, never admissible")
	// ErrInvalidState is returned by State.UnmarshalBinary for bytes that
	// are not a state this package wrote.
	ErrInvalidState = errors.New("invalid state encoding")
)
