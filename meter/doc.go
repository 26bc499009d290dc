// Package meter measures how fast a resource is being consumed and says when
// the consumer should slow down. It provides LeakyBucket and RateLimiter, Go
// counterparts of Bloomberg BDE's balb::LeakyBucket and balb::RateLimiter,
// computed exactly in integers.
//
// # The model
//
// Picture a bucket with a hole in the bottom. Whatever is poured in runs out
// through the hole at a steady rate that depends only on the size of the
// hole. Pour faster than that for long enough and the bucket overflows;
// keep it from overflowing and, over time, you cannot pour faster on
// average than it drains.
//
// A LeakyBucket has two properties. Its drain rate, a Rate such as 512
// bytes per second or 1 message per hour, is the average rate of
// consumption to be enforced. Its capacity, in units, is how much it holds
// before it counts as overflowing; it bounds how far, and for how long, the
// actual rate may run ahead of the drain rate. A unit is whatever is being
// counted: bytes, messages, requests, CPU milliseconds.
//
// Units enter the bucket in two ways. Submitted units (Submit) stand for
// resource already consumed: they go into the bucket and drain at the drain
// rate. Reserved units (Reserve) stand for consumption that is promised but
// has not happened: they count toward the capacity but do not drain, until
// SubmitReserved turns them into submitted units or CancelReserved drops
// them. A reservation shrinks the room left for everyone else, so keep it
// short.
//
// Unlike water, submitted units never spill: the level may go above the
// capacity, and the excess drains like the rest. Overflow is a question the
// caller asks: WouldOverflow(now) reports whether one more unit would take
// the units in the bucket plus the reserved units above the capacity, and
// TimeToSubmit(now) says how long until one more unit fits.
//
// # Recommended use
//
// Check that one unit fits, consume as much as you need, then submit what
// you consumed:
//
//	if !b.WouldOverflow(now) {
//		n := send(chunk)
//		b.Submit(uint64(n))
//	} else {
//		wait(b.TimeToSubmit(now))
//	}
//
// Checking for one unit rather than for the whole amount means that a piece
// of work never waits for room it only needs once it is done, and that a
// piece larger than the capacity can go through at all. The price is that
// the level may end up to one piece above the capacity, a limited spike
// that is usually acceptable; in exchange the long-term average comes
// closer to the drain rate (BDE makes the same recommendation).
//
// # The time window
//
// A bucket approximates a moving total over a window of TimeWindow(rate,
// capacity), the time the drain rate takes to drain a full bucket. Used as
// recommended, the units consumed over any interval of length t are at most
// capacity + the largest piece + rate*t, so the average over intervals of
// about the window or longer is close to the drain rate, while shorter
// intervals may see bursts of up to a bucketful. CapacityFor(rate, window)
// goes the other way. A RateLimiter runs two buckets at once, a sustained
// rate over a long window and a peak rate over a short one, and allows one
// more unit only when it fits in both.
//
// # Time
//
// Nothing in this package reads a clock. Every method that depends on time
// takes the current time as a time.Time, from any clock and origin the
// caller likes, as long as one bucket always gets times from the same one;
// tests walk instants such as time.Unix(0, 0).Add(d) and never sleep. The
// bucket drains from its last update time to the time it is given, when
// UpdateState, WouldOverflow or TimeToSubmit update it.
//
// A time earlier than the last update (a clock stepping back) drains
// nothing and does not move the last update time. BDE moves it back, which
// lets the same interval drain a second time at the next update and admits
// more than the rate; this package never does.
//
// # Exactness
//
// The arithmetic is exact, on integers only. Draining for dt at Units per
// Per adds dt*Units to a carry kept in 1/Per of a unit (128-bit products
// and quotients from math/bits); whole units leave the bucket and the
// remainder stays in the carry for the next update. So a bucket updated a
// million times drains exactly what it would in one update: floor(elapsed *
// Units / Per) units in total, with no drift, and a rate of 1 per hour or 7
// per 2 seconds is as exact as 1 per second. An empty bucket carries
// nothing: idle time is not saved up. TimeToSubmit is exact too, rounded up
// to the nanosecond: after waiting exactly the returned duration one more
// unit fits, and one nanosecond earlier it does not.
//
// Changing the rate rescales the carry to the new Per, rounding down, so a
// change of rate never drains more than the exact amount. Because units
// then drain in steps of 1/Per, the rounding is not even visible: the bucket
// empties whole units at the same instants as it would with the exact
// fraction, until the rate changes again. Counts saturate at math.MaxUint64
// instead of wrapping around, and durations at Never.
//
// # Compared with floodgate's leaky-bucket policy
//
// floodgate's leaky-bucket policy (package algo) decides before an event
// happens whether to admit it, counts its whole cost at once, never lets the
// level exceed the capacity, and never admits an event that costs more than
// the capacity. This package monitors consumption after the fact: the
// caller asks whether one unit fits, consumes, and reports what it
// consumed, and the level may exceed the capacity. Use the policy to admit
// or deny requests; use a meter to pace a producer, such as a writer on a
// network connection, whose work comes in pieces of varying size.
//
// # Concurrency
//
// Like their BDE counterparts, LeakyBucket and RateLimiter are not safe for
// concurrent use. Callers that share one guard it with a mutex; the methods
// are short and never block.
package meter
