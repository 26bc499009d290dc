package trace

import "github.com/floodgate/floodgate/internal/seconds"

// ParseSeconds parses decimal seconds exactly into nanoseconds, from 0 to
// algo.MaxTime; see ParseLine for the syntax. An error wraps ErrNumber for
// bad syntax and ErrRange for a value out of range.
func ParseSeconds(s string) (int64, error) { return seconds.Parse(s) }

// AppendSeconds appends ns nanoseconds as decimal seconds, the form
// ParseSeconds reads back exactly.
func AppendSeconds(b []byte, ns int64) []byte { return seconds.Append(b, ns) }
