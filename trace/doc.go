// Package trace reads traces: logs of events, each a time, a key and a
// cost, that floodgate replays through a policy with simulated time to
// show what a limit would have done to real traffic.
//
// # The model
//
// A trace is a sequence of events in time order. An Event's T is the
// event's time in nanoseconds since an origin the trace chooses (the Unix
// epoch, the start of a test, anything), from 0 to algo.MaxTime. Equal
// times are fine; a time earlier than the one before is an error, because
// a replay would otherwise decide events in an order that never happened.
// Key names what is limited (a user, an address; "" is a key like any
// other), and N is the event's cost in the policy's units: 1 for most
// events, 0 for a peek that asks without taking.
//
// # The line formats
//
// A trace is text with one event per line, each line ended by "\n" or
// "\r\n" (the last may have no ending). In floodgate's own format, which
// ParseLine reads, a line is one of:
//
//   - JSON, when its first non-space byte is '{': one object such as
//     {"t": 12.345, "key": "alice", "n": 1}. t is required; key is a
//     string and n a number, "" and 1 when absent or null. Names are
//     matched exactly and t, key and n may appear once each. Other fields
//     are ignored, so a trace may carry extra data along.
//   - text, T [KEY [N]]: fields separated by spaces or tabs, such as
//     "12.345 alice 1" or "12.345". KEY is taken byte for byte, so it
//     cannot hold a space or a tab; write such keys in JSON.
//   - blank, or a comment whose first non-space byte is '#': skipped.
//
// The two forms mix freely in one trace.
//
// # Numbers
//
// t is decimal seconds, read exactly from its text (never through a
// float64): an optional minus sign, digits, an optional fraction and an
// optional exponent, as in 12, 12.345, 0.000000001 or 1.5e3. A time with
// more than nine decimals is an error, as it is in a policy's period
// (times are whole nanoseconds); "-0" is 0, and any other negative time is
// out of range. A UTF-8 byte-order mark before the first line is skipped.
// n is a whole number from 0 to math.MaxInt64 in the same syntax, so 2,
// 2.0 and 2e0 are all 2, while 1.5 is an error. The service's JSON and the
// floodgate command write and read seconds in this same form.
//
// # Errors
//
// Lines are numbered from 1, counting every line, blank lines and
// comments included. Reader.Next returns every problem with a line as a
// *LineError holding the line number; its cause wraps one of the sentinel
// errors ErrSyntax, ErrNumber, ErrRange, ErrOrder or ErrLineTooLong.
//
// # Other formats
//
// Reader.Format decides how a line becomes an event. It is ParseLine by
// default; another Format (a web server's access log, say) plugs in there
// and keeps the Reader's line handling, numbering and time-order check.
package trace
