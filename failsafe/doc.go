// Package failsafe keeps a limiter deciding while its store fails. It is a
// circuit breaker for floodgate's stores, with the failure mode its user
// chooses: fail closed, fail open, or decide locally.
//
// # The model
//
// A Store wraps another store.Store, typically one over the network
// (Redis) or a file. The wrapped store is up or down.
//
// While it is up:
//   - Every call goes to it, bounded by the Timeout (or the caller's
//     deadline, when sooner).
//   - The wrapper adds a few atomic loads.
//   - A call fails when the store returns an error that is not bad input,
//     or when the Timeout expires first.
//   - A call cut short by the caller's own context is not a failure.
//   - The Mode decides a failed call.
//
// It goes down on sustained failure, not on one slow call:
//   - Threshold calls in a row (5 by default) have failed, none succeeding
//     in between,
//   - over at least FailFor (250ms by default), first failure to last.
//
// Why both: a loaded host's calls sometimes outlast the Timeout while the
// store is fine, so one failure is not enough. A short stall fails all the
// calls it holds at once, so a run of failures must also last. A stall
// shorter than the Timeout plus FailFor fails the calls it holds and leaves
// the store up for the others.
//
// While it is down:
//   - Calls do not reach it: the Mode decides each at once.
//   - After a Cooldown (500ms by default) one call, the probe, goes to the
//     store, bounded by the Timeout. Other calls still use the Mode.
//   - A probe that succeeds brings the store up. One that fails allows the
//     next probe a Cooldown after it began.
//   - With a MaxCooldown above the Cooldown, each failed probe doubles the
//     cooldown, up to MaxCooldown.
//
// So the store is used again within a cooldown and a round trip of
// answering again. The wrapper starts no goroutine and queues nothing.
//
// # Partitions
//
// Some stores spread their keys over partitions that fail apart (a
// store.Partitioned, such as a Redis Cluster, whose partitions are hash
// slots). Such a store is up or down partition by partition:
//   - A Cluster master down takes down its slots, each as it meets the
//     threshold. Keys in other slots are still decided by the store.
//   - A partition's state is made when one of its keys is first decided:
//     about a hundred bytes for each partition in use, and one pointer for
//     each partition (a Cluster has 16384).
//   - An Apply, all or nothing, is one call. It goes to the store while
//     every partition of its keys is up; else the Mode decides it (but for
//     a probe of them all). Its failure counts against the partitions the
//     store failed on when it says which (store.Result.Failure), else
//     against all of them.
//   - An ApplyEach is split by partition. The ops of partitions that are up
//     (or due for a probe) go to the store in one call; the Mode decides
//     the others. When the store fails on some ops only
//     (store.ErrPartialFailure), only their partitions count the failure,
//     and only those ops go to the Mode.
//
// # The modes
//
// While the store is down:
//   - FailClosed denies every request, peeks too, with an error wrapping
//     ErrUnavailable and the store's last error. RetryAfter is the time to
//     the next probe; during a probe, or for a call that failed while the
//     store is up, it is the Timeout. Only the store admits, so nothing is
//     admitted beyond the limit.
//   - FailOpen admits every request, with Remaining 0 (unknown), and
//     counts it. There is no limit while the store is down.
//   - FailLocal decides on a memory store of this process (package
//     memstore), on the table of the same name and policy. Each process
//     decides alone, so N processes may admit N times the limit while the
//     store is down. A key's state does not cross a switch: the local store
//     counts only its own admissions, and after the recovery the store does
//     not count them. So at each switch a process may admit up to one burst
//     per key beyond the limit, and never more.
//
// # What is not a failure
//
//   - Bad input: a negative cost, a time out of range, a key the store
//     refuses, a table of another store. The store's answer is passed on.
//     While the store is down every mode gives the same answer
//     (store.Check), but for keys, which only the store checks.
//   - A cost above the burst: denied with RetryAfter algo.Never and an
//     error wrapping algo.ErrCostExceedsBurst, up or down.
//   - A call cut short by its caller's context: it returns the context's
//     error.
//
// With no Timeout, a call to a store that hangs holds its caller until the
// store answers, and a hanging probe keeps the store down until it returns.
//
// # Batches
//
// While the store is down, an Apply is decided all or nothing:
//   - FailClosed fails the whole batch and changes nothing.
//   - FailOpen admits each OpDecide and OpSchedule (an OpSchedule at its
//     Now), and drops refunds and resets.
//   - FailLocal runs the batch on the local store.
//
// An ApplyEach goes to the store's ApplyEach while it is up. While it is
// down the Mode decides op by op, partition by partition. When some ops
// fail closed and others do not, ApplyEach returns an error wrapping
// store.ErrPartialFailure, and each op that failed closed has a Result.Err
// wrapping ErrUnavailable. When all fail closed, it returns
// ErrUnavailable's error, as Apply does.
//
// Refunds and resets:
//   - A refund goes to the store that admitted its units, if that store
//     decides now, and is dropped otherwise. Such units stay spent, which is
//     only stricter. The local store's stamps carry a mark saying so.
//   - A reset while the store is down resets the key on the local store in
//     FailLocal, and nowhere in the other modes.
//
// # Counters
//
// A Store over a store.Counting store is Counting too (Store.Counters):
//   - Additions go to the store's counters partition by partition, as
//     ApplyEach's ops do (the partition is Counters.Partition).
//   - A partition's failures and probes count as ApplyEach's do.
//   - While a partition is down, or for additions the store failed on, the
//     Mode decides: FailOpen counts nothing and reports no count
//     (store.Hits.Unknown), FailClosed fails them with ErrUnavailable, and
//     FailLocal adds them to the local store's counters.
//
// Over a store that is not Counting, Store.Counters returns an error
// wrapping errors.ErrUnsupported, and store.CountersOf counts on this
// Store's tables instead, through ApplyEach.
package failsafe
