package filestore

// PendingCalls returns how many calls wait for the next transaction.
func PendingCalls(s *Store) int { return s.batcher.Pending() }

// SetMaxBatch bounds the calls of one transaction; 1 turns batching off.
// Call it before the store's first call.
func SetMaxBatch(s *Store, n int) { s.batcher = newBatcher(s, n) }

// SweepKeys is how many keys a write transaction sweeps.
const SweepKeys = sweepKeys

// Busy reports whether a transaction is under way, or about to be.
func Busy(s *Store) bool { return s.batcher.Senders() > 0 }

// Transactions returns how many transactions s has begun.
func Transactions(s *Store) uint64 { return s.transactions.Load() }
