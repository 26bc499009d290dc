package meter

import "errors"

// Errors returned by this package, wrapped with details; test for them with
// errors.Is. A method that returns an error leaves its receiver unchanged.
var (
	// ErrInvalidRate is returned by NewLeakyBucket, SetRateAndCapacity,
	// NewRateLimiter and SetRateLimits for a Rate whose Units is 0 or whose
	// Per is not positive.
	ErrInvalidRate = errors.New("invalid rate")
	// ErrInvalidCapacity is returned by NewLeakyBucket and
	// SetRateAndCapacity for a capacity of 0.
	ErrInvalidCapacity = errors.New("invalid capacity")
	// ErrInvalidWindow is returned by NewRateLimiter and SetRateLimits for
	// a time window that is not positive.
	ErrInvalidWindow = errors.New("invalid time window")
	// ErrNotReserved is returned by SubmitReserved and CancelReserved for
	// more units than are reserved. BDE leaves that case undefined.
	ErrNotReserved = errors.New("more units than reserved")
)
