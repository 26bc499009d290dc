package trace

import (
	"errors"
	"strconv"

	"github.com/floodgate/floodgate/internal/seconds"
)

// Errors for broken input, wrapped with details; test for them with
// errors.Is. Reader.Next returns them inside a *LineError.
var (
	// ErrSyntax is returned for a line that is not an event in its format:
	// JSON that is not one object, a field of the wrong JSON type, a JSON
	// event without t, or a text line with more than three fields.
	ErrSyntax = errors.New("malformed line")
	// ErrNumber is returned for a time or cost that is not a decimal
	// number, and for a cost that is not a whole number. Every reader of
	// decimal seconds in floodgate wraps this same error.
	ErrNumber = seconds.ErrNumber
	// ErrRange is returned for a time outside [0, algo.MaxTime]
	// nanoseconds and a cost outside [0, math.MaxInt64]. Every reader of
	// decimal seconds in floodgate wraps this same error.
	ErrRange = seconds.ErrRange
	// ErrOrder is returned for an event earlier than the event before it.
	ErrOrder = errors.New("time goes backwards")
	// ErrLineTooLong is returned for a line longer than MaxLineSize bytes.
	ErrLineTooLong = errors.New("line too long")
)

// LineError is the error Reader.Next returns for a line it cannot read as
// an event.
type LineError struct {
	Line int   // the line's number, from 1
	Err  error // the problem, wrapping one of the package's sentinel errors
}

// Error returns "line N: " followed by the problem.
func (e *LineError) Error() string {
	return "line " + strconv.Itoa(e.Line) + ": " + e.Err.Error()
}

// Unwrap returns e.Err.
func (e *LineError) Unwrap() error { return e.Err }
