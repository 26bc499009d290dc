// Package seconds converts between floodgate's nanoseconds and the seconds
// that its text speaks: the service's JSON, HTTP and gRPC answers, the
// CLI's output and traces.
//
// # The model
//
// Inside floodgate a time or a duration is an integer count of
// nanoseconds (an int64, as time.Duration and algo's times are). Outside,
// it is decimal seconds such as 12.345. The two convert exactly, with
// integer arithmetic only: a float64 cannot hold every nanosecond count of
// a long time, so a value never passes through one. Parse reads decimal
// seconds into nanoseconds, and refuses text with more than nine decimals
// rather than round it; Append writes nanoseconds as the
// decimal seconds that Parse reads back to the same value. ParseCount
// reads a whole number (a cost) in the same syntax.
//
// Where only whole seconds can be said (a Retry-After field, a gRPC
// message, Envoy's duration_until_reset), Ceil rounds up, so that a client
// waiting the rounded value is never early. It returns 0 for a duration
// of 0 or less; a caller that must never say 0 writes max(Ceil(d), 1),
// where the reader sees it.
//
// # Errors
//
// Parse and ParseCount return errors wrapping ErrNumber for text that is
// not a number and ErrRange for a number out of range; test for them with
// errors.Is.
package seconds
