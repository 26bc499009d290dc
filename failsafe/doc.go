// Package failsafe keeps a limiter deciding while its store fails: a
// circuit breaker for floodgate's stores, with the failure mode its user
// chooses (fail closed, fail open, or decide locally).
//
// # The model
//
// A Store wraps another store.Store, typically one shared over the network
// (Redis) or a file. The wrapped store is up or down. While it is up, every
// call goes to it, bounded by the Timeout; the wrapper adds one atomic load,
// and the Timeout's context unless the caller's deadline is sooner. The
// first call that fails (an error that is not bad input, or the Timeout
// expiring) marks the store down. While it is down, calls do not reach it:
// each is decided at once by the Mode. After a cooldown one call, the probe,
// goes to the store again, while every other call still uses the mode; if
// the probe succeeds the store is up, and if it fails the cooldown doubles,
// up to MaxCooldown. The wrapper starts no goroutine and queues nothing.
//
// # The modes
//
// While the store is down:
//   - FailClosed denies every request (peeks too), with RetryAfter the time
//     until the next probe (or, while a probe is under way, the Timeout,
//     within which its outcome is known) and an error wrapping
//     ErrUnavailable and the store's last error. Only the store admits, so
//     nothing is admitted beyond the limit.
//   - FailOpen admits every request, with Remaining 0 (unknown), and counts
//     it: there is no limit while the store is down.
//   - FailLocal decides on a memory store of this process (package memstore),
//     on the table of the same name and policy, made the first time it is
//     needed. Each process decides alone, so N processes may together admit
//     N times the limit while the store is down. Nor does a key's state
//     cross a failover: the local store counts only what it admitted itself
//     (a key it has not seen starts afresh, with a full bucket), and after
//     the recovery the store decides from its own state, which does not
//     count what was admitted locally. So at each switch, either way, a
//     process may admit up to one burst (the policy's Burst) per key beyond
//     the limit. Apart from that, it never admits more than the limit.
//
// # What is not a failure
//
// Bad input (a negative cost, a time out of range, a key the store
// refuses, a table of another store) is not a failure: the store's answer
// is passed on, and while the store is down the wrapper gives the same
// answer in every mode (store.Check), except for keys, which only the
// store checks. A cost above the burst is denied with RetryAfter
// algo.Never and an error wrapping algo.ErrCostExceedsBurst, up or down.
// Nor is a call whose caller's context is done a failure: it returns the
// context's error. With no Timeout, a call to a store that hangs holds its
// caller until the store answers, and a hanging probe keeps the store down
// until it returns.
//
// # Batches
//
// A batch (Apply) is decided the same way, all or nothing. While the store
// is down, FailClosed fails the whole batch, changing nothing; FailOpen
// admits each OpDecide and OpSchedule (an OpSchedule at its Now), and drops
// refunds and resets; FailLocal runs the batch on the local store. ApplyEach
// goes to the store's ApplyEach while it is up, and is decided op by op by
// the mode while it is down.
//
// A refund goes to the store that admitted its units, if that store is the
// one deciding at the time, and is dropped otherwise: units admitted by the
// store and given back while it is down, or admitted locally and given back
// after the recovery, stay spent, which is only stricter (the stamps of the
// local store's admissions carry a mark saying so). A reset while the store
// is down resets the key on the local store in FailLocal mode, and nowhere
// in the others.
package failsafe
