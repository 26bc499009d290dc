// Package failsafe keeps a limiter deciding while its store fails: a
// circuit breaker for floodgate's stores, with the failure mode its user
// chooses (fail closed, fail open, or decide locally).
//
// # The model
//
// A Store wraps another store.Store, typically one shared over the network
// (Redis) or a file. The wrapped store is up or down. While it is up, every
// call goes to it, bounded by the Timeout; the wrapper adds a few atomic
// loads, and the Timeout's context unless the caller's deadline is sooner.
// A call fails when the store returns an error that is not bad input, or
// when the Timeout expires (even if the caller's context has ended since:
// the Timeout expired first). A call cut short by the caller's own
// context first is not a failure. A failed call is decided by the Mode.
//
// The store goes down on sustained failure, not on one slow call: when
// Threshold calls in a row (5 by default) have failed, with no call
// succeeding in between, over at least FailFor (250ms by default) from
// the first failure to the last. So a stall of the store shorter than the
// Timeout plus FailFor fails the calls it holds, each after the Timeout,
// and leaves the store up for the others; a longer one, or a store that
// refuses every call, takes it down. Requiring a run of failures rather
// than one keeps a loaded host, whose calls sometimes outlast the Timeout
// while the store is fine, from tripping; requiring it to last keeps a
// burst of calls held by one short stall, which all fail together, from
// tripping.
//
// While it is down, calls do not reach it: each is decided at once by the
// Mode. After a cooldown (500ms by default) one call, the probe, goes to
// the store again, bounded by the Timeout, while every other call still
// uses the mode; if the probe succeeds the store is up, and if it fails
// the next probe may go a cooldown after this one began. So the store is
// used again within a cooldown (and a probe's round trip) of answering
// again. With a MaxCooldown above the Cooldown, each failed probe doubles
// the cooldown up to it. The wrapper starts no goroutine and queues
// nothing.
//
// # Partitions
//
// A store whose keys are spread over partitions that fail apart (a
// store.Partitioned, such as a Redis Cluster, whose partitions are its
// hash slots) is up or down partition by partition: a master of the
// cluster down takes down the slots it holds, one by one as each meets
// the threshold, and keys in other slots go on being decided by the
// store. The state of a partition is made the first time one of its keys
// is decided: about a hundred bytes for each partition in use (a
// Redis Cluster has 16384 slots), and a table of one pointer for each
// partition. An Apply, all or nothing, is one call: it goes to the store
// while all the partitions of its keys are up, it is decided by the mode
// while any is down (but for a probe of them all), and its failure counts
// against the partitions of the ops the store failed on when it says
// which (store.Result.Failure, as a Redis Cluster does), else against
// each of them. An
// ApplyEach is split by partition: the ops of the partitions that are up
// (or due for a probe) go to the store in one call, the others' are
// decided by the mode; when the store fails on some ops only
// (store.ErrPartialFailure, a Redis Cluster with one master down), only
// their partitions count the failure and only those ops are decided by
// the mode, while the others keep the store's decisions.
//
// # The modes
//
// While the store is down:
//   - FailClosed denies every request (peeks too), with RetryAfter the time
//     until the next probe (or, while a probe is under way, or for a call
//     that failed while the store is up, the Timeout, within which the
//     next call's outcome is known) and an error wrapping
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
// Nor is a call cut short by its caller's context a failure: it returns
// the context's error. With no Timeout, a call to a store that hangs holds
// its caller until the store answers, and a hanging probe keeps the store
// down until it returns.
//
// # Batches
//
// A batch (Apply) is decided the same way, all or nothing. While the store
// is down, FailClosed fails the whole batch, changing nothing; FailOpen
// admits each OpDecide and OpSchedule (an OpSchedule at its Now), and drops
// refunds and resets; FailLocal runs the batch on the local store. ApplyEach
// goes to the store's ApplyEach while it is up, and is decided op by op by
// the mode while it is down, partition by partition (above). When some of
// its ops fail closed and others do not, ApplyEach returns an error
// wrapping store.ErrPartialFailure, and each op that failed closed has a
// Result.Err wrapping ErrUnavailable (store.Result.Failure); when all of
// them fail closed, it returns ErrUnavailable's error, as Apply does.
//
// A refund goes to the store that admitted its units, if that store is the
// one deciding at the time, and is dropped otherwise: units admitted by the
// store and given back while it is down, or admitted locally and given back
// after the recovery, stay spent, which is only stricter (the stamps of the
// local store's admissions carry a mark saying so). A reset while the store
// is down resets the key on the local store in FailLocal mode, and nowhere
// in the others.
//
// # Counters
//
// A Store over a store.Counting store is Counting too (Store.Counters):
//   - The additions go to the store's counters, partition by partition, as
//     ApplyEach's ops do (the partition is the store's Counters.Partition).
//   - A partition's failures and probes count as ApplyEach's do.
//   - While a partition is down, or for the additions the store failed on,
//     the mode decides: FailOpen counts nothing and reports no count
//     (store.Hits.Unknown), FailClosed fails them with ErrUnavailable,
//     FailLocal adds them to the local store's counters.
//
// Over a store that is not Counting, Store.Counters returns an error
// wrapping errors.ErrUnsupported, and store.CountersOf counts on this
// Store's tables instead, through ApplyEach.
package failsafe
