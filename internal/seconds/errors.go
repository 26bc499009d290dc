package seconds

import "errors"

// Errors for text that Parse and ParseCount cannot read, wrapped with the
// text and what was wanted; test for them with errors.Is.
var (
	// ErrNumber is returned for text that is not a decimal number, and by
	// ParseCount for a number that is not whole.
	ErrNumber = errors.New("invalid number")
	// ErrRange is returned by Parse for seconds outside [0, algo.MaxTime]
	// nanoseconds, and by ParseCount for a count outside
	// [0, math.MaxInt64].
	ErrRange = errors.New("out of range")
)
