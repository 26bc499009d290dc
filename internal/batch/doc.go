// Package batch gathers the calls that many goroutines make to a store at
// the same moment, so that one send carries many of them: one script call
// to Redis (package redisstore), one transaction of a file (package
// filestore). It is the one batcher of the stores, and holds the one
// answer to what happens when a caller's context ends while its call is
// on its way.
//
// # The model
//
// A caller hands a Batcher a Call: the work to do, which the call owns (a
// copy of the caller's ops), and the caller's context.
//   - A call that finds no send under way and no call waiting is sent at
//     once, alone, from the caller's goroutine, with the caller's context.
//     A lone caller pays nothing for batching, but cannot leave a send that
//     stalls. Limits.Detach has a sender send it instead, so that it can.
//   - Calls that arrive meanwhile wait in a queue. A sender, a goroutine of
//     the batcher's, takes up to MaxBatch of them at a time, in the order
//     they came, and hands them to the store's send function together.
//   - At most MaxInFlight sends are under way at once, the lone caller's
//     among them.
//   - A sender sends until the queue is empty, then ends: the batcher keeps
//     no goroutine beyond the calls it serves.
//   - At most MaxPending calls wait; beyond, a call fails at once with
//     ErrFull.
//
// Before it takes a batch, a sender whose batch may still grow yields the
// processor while another send is under way, as long as each yield brings
// new calls (at most 8 times). Why: the callers a send has just answered
// usually call again at once. Their calls then go in this batch, not the
// next, while the store is busy with the other send and waiting costs
// nothing. Fewer, larger sends cost the store less for each call.
//
// # Callers that leave
//
// A caller waits until its call is done or its context ends, whichever
// comes first. A call moves through these states, each move a
// compare-and-swap, so that a caller leaving and a sender taking or
// finishing the call never overlap:
//
//	waiting   → taken      the send takes the call, about to carry it out (Take)
//	taken     → done       the send is over: Work and Err are the caller's again
//	waiting   → withdrawn  the caller's context ended first: nothing is done
//	taken     → left       the caller's context ended first: the call goes on
//
// What each end means for the caller:
//   - Withdrawn: nothing was done, and Do returns the context's error.
//   - Left: the call may still take effect. The caller returns the
//     context's error at once, however long the store stalls. The send
//     finishes the call on its own, and nobody reads its outcome.
//
// Leaving is safe because a send reads and writes only a call's Work and
// Err, never the caller's memory, and once Do has returned an error the
// call is no longer the caller's. The caller copies its ops into the call
// before Do, and the outcome back only when Do returns nil.
//
// A send may take its calls late: the file store waits for the file's lock
// first, and meanwhile every call can still be withdrawn. The send learns
// from Call.Waiting when no caller waits any more, and gives up.
//
// # Invariants
//
// The stores rely on these; the test named after each checks it.
//
//  1. A lone caller sends its own call, from its goroutine, with its own
//     context, unless Limits.Detach (TestLoneCallerSendsItself,
//     TestDetach).
//  2. Calls that wait go in the order they came, up to MaxBatch in one
//     send; DoAll's go together (TestCallsWaitingGoTogether, TestDoAll).
//  3. At most MaxInFlight sends are under way, the lone caller's among
//     them (TestMaxInFlight).
//  4. Past MaxPending waiting calls, Do fails with ErrFull and nothing is
//     done (TestFull).
//  5. A call moves only along the moves drawn above, each a
//     compare-and-swap: it is never both withdrawn and taken, and a call
//     done for its caller was carried out once (TestCallersLeavingRace).
//  6. A withdrawn call did nothing: Take leaves it out, and Do returns
//     its context's error (TestWithdrawn, TestTakeLate).
//  7. A caller leaving a taken call returns at once, however long the
//     send stalls; the send finishes the call alone and touches only its
//     Work and Err (TestLeftWhileTaken, under the race detector).
//  8. A send that leaves out a call whose caller waits fails that call;
//     it never reports it done (TestSendLeavesOut).
//  9. A batch's context ends at the latest deadline of its callers still
//     waiting, never when one of them has none; no caller's cancel ends
//     it (TestBatchContext).
package batch
