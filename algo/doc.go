// Package algo is floodgate's exact core: five rate-limiting algorithms as
// pure state transitions, (state, now, n) -> (state', decision), on
// integers. It never reads a clock, does no I/O, starts no goroutine and
// does not allocate in the common case. Every store and front-end of
// floodgate decides through it or, for Redis, through scripts held to it by
// shared test vectors; it is the reference they must agree with.
//
// # The model
//
// A Policy says how many units (requests, messages, bytes) a key may spend:
// LIMIT units per PERIOD, with an algorithm that says what "per PERIOD"
// means. Each key has a State, initially the zero State. An event is a time
// t and a cost n; Policy.Decide admits or denies it and returns a Decision:
// whether it was admitted, how many units remain, how long to wait before
// retrying (RetryAfter), and how long until the key is back to its initial
// state (ResetAfter).
//
// Time is an int64 count of nanoseconds since any origin the caller
// chooses (the Unix epoch, the start of a trace), between 0 and MaxTime.
//
// # The algorithms, exactly
//
// Below, t is the event's time and n its cost; a primed value is the one
// after the event, which for a denied event is the current one, since a
// denial changes nothing. An event costing 0 is a peek: always admitted, it
// changes nothing and reports the current headroom. An event costing more
// than the policy's Burst (B, C or LIMIT) is never admitted; Decide denies it
// with RetryAfter Never and an error wrapping ErrCostExceedsBurst.
//
// token-bucket LIMIT/PERIOD burst=B (B defaults to LIMIT) is GCRA, the
// generic cell rate algorithm. With the emission interval T = PERIOD/LIMIT
// and tau = B*T, the state is the theoretical arrival time TAT. The event is
// admitted iff max(TAT, t) + n*T - t <= tau, and then TAT' = max(TAT, t) +
// n*T. Remaining = floor((tau - (TAT' - t)) / T), ResetAfter = TAT' - t, and
// a denied event's RetryAfter = max(TAT, t) + n*T - tau - t.
//
// leaky-bucket LIMIT/PERIOD capacity=C (C defaults to LIMIT) is a meter
// whose level drains continuously at LIMIT per PERIOD, never below 0. The
// event is admitted iff level + n <= C. Remaining = floor(C - level'),
// ResetAfter = level'/rate, and a denied event's RetryAfter = (level + n -
// C)/rate. This is the token bucket seen from the other side: a meter at
// level l is a TAT of t + l*T, so leaky-bucket L/P capacity=C and
// token-bucket L/P burst=C make the same decisions, and floodgate computes
// both one way. Both names exist because people think in both.
//
// sliding-log LIMIT/PERIOD keeps an exact log of admitted units. An entry
// counts while its time is after t - PERIOD (an entry exactly PERIOD old no
// longer counts). The event is admitted iff count + n <= LIMIT, and then adds
// n units at t. Remaining = LIMIT - count', ResetAfter = newest counted entry
// + PERIOD - t (0 for an empty log), and a denied event's RetryAfter is the
// time until enough of the oldest units expire. Units admitted at one
// instant share an entry, so a key's log holds at most LIMIT entries, in a
// ring that grows and shrinks with it.
//
// sliding-window LIMIT/PERIOD approximates the log with two counters, cur
// for the window [k*PERIOD, (k+1)*PERIOD) holding t and prev for the one
// before: est = prev*(PERIOD - elapsed)/PERIOD + cur, where elapsed = t -
// k*PERIOD, computed as an exact fraction. The event is admitted iff est + n
// <= LIMIT. Remaining = floor(LIMIT - est'); ResetAfter is the time to the
// end of the next window if cur' > 0, else to the end of the current window
// if prev > 0, else 0; a denied event's RetryAfter is the smallest wait after
// which est + n <= LIMIT.
//
// fixed-window LIMIT/PERIOD counts units in the windows [k*PERIOD,
// (k+1)*PERIOD). The event is admitted iff count + n <= LIMIT. Remaining =
// LIMIT - count', ResetAfter = window end - t when count' > 0 (else 0), and a
// denied event's RetryAfter = window end - t.
//
// # Exactness
//
// No decision uses floating point. The bucket algorithms count time in
// units of 1/LIMIT nanoseconds, in which T is exactly PERIOD units, so a
// policy such as 3 per second or 7 per 2 seconds, whose T is not a whole
// number of nanoseconds, never drifts. Products that can exceed 64 bits (a
// count up to 10^15 times a span up to a century, below 2^113) are taken
// in 128 bits. When T is a whole number of nanoseconds (100 per second,
// 1000 per day), every one of those quantities is a whole number of
// nanoseconds too, and the buckets compute them in 64 bits, with the same
// results and without dividing a 128-bit number.
// Durations in a Decision are whole nanoseconds rounded up, so waiting
// exactly RetryAfter always suffices, and one nanosecond less never does.
//
// # Bounds
//
// LIMIT, burst and capacity are at most MaxLimit (10^15: a byte rate of
// 1.25*10^9 per second, a 10 Gbit/s link, with bursts of days); PERIOD is at most
// MaxPeriod (366 days); a full bucket drains in at most MaxDrain (100
// years); times run from 0 to MaxTime (2^62 ns, about 146 years). Within
// them nothing overflows. Outside them New and ParsePolicy return an error
// wrapping ErrInvalidPolicy, and Decide an error wrapping ErrInvalidTime.
//
// # Time going backwards
//
// Clocks step back (NTP, a different machine's clock on a shared store). A
// step back is not an error, and it never admits more than the policy
// allows. A sliding log decides an event earlier than its newest entry at
// that entry's time. The window algorithms decide an event from an earlier
// window in the window they stored (sliding-window at its start, where its
// estimate is highest); within that window sliding-window uses the event's
// own time, which only makes the estimate higher. The buckets need no rule:
// their state is a time in the future, and an earlier t only makes an event
// wait longer. Durations in a Decision are always measured from the event's
// own time.
//
// # Giving back and waiting
//
// Refund takes back the units of an admitted event that its caller did not
// use (a cancelled reservation), identified by the Stamp that StampOf gave
// right after the event. It never lets the events that stay act beyond the
// policy, and never leaves a State more permissive than if the event had
// not happened; refunded at the same instant with no event since, it
// leaves it exactly as permissive. A window or log takes the units off its
// count; a bucket gives back what has not drained only when no units were
// admitted after the event, and otherwise nothing: those later events are
// placed behind it and keep their instants. Schedule admits an event that may wait: for the
// buckets it holds the units from now for the earliest instant they fit,
// so that events scheduled one after another act in order; the window and
// log algorithms cannot hold units for a later window, and schedule only
// what fits now.
//
// # Changing a policy
//
// Convert carries a key's state from one policy to another, for a limiter
// that keeps its name and changes its policy: the units the key spent stay
// spent. Equal policies keep the state; buckets of one LIMIT and PERIOD
// keep the TAT; logs keep their entries; windows of one algorithm and
// PERIOD keep their counts, each capped at the new LIMIT. Any other change
// spends at the time of the conversion the units the old state still
// counts, capped at the new burst: the latest they can have been spent,
// so the strictest placement. A converted state is never less strict than
// the new policy's own after those units; what the old state no longer
// counts (a window that ended) is gone.
//
// Cell is a State in 16 bytes for the four algorithms without a log, for
// stores that keep millions of keys in memory, when the policy is Compact
// (LIMIT at most 2^32-1); Clone copies a State deeply, for stores that must
// be able to put one back.
package algo
