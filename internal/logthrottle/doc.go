// Package logthrottle keeps an error that repeats on every request, such
// as a store that is down, from flooding the log: it lets through at most
// one line a second and counts the lines it holds back, so that the next
// line it lets through can say how many there were.
//
// # The model
//
// A Throttle remembers when it last let a line through and how many lines
// it has held back since. A line is let through when Interval or more has
// passed since the last one; it takes the count with it, and the count
// starts again from 0. Only the lines' text is lost: the errors themselves
// are counted by their callers (each front-end's Stats).
//
// AllowAt takes the time, so that tests walk fixed instants instead of
// sleeping; Allow is AllowAt at the time on the clock.
package logthrottle
