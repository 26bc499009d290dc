package filestore

// PendingCalls returns how many calls wait for the next transaction.
func PendingCalls(s *Store) int {
	s.batch.mu.Lock()
	defer s.batch.mu.Unlock()
	return len(s.batch.pending)
}

// SetMaxBatch bounds the calls of one transaction; 1 turns batching off.
func SetMaxBatch(s *Store, n int) {
	s.batch.mu.Lock()
	defer s.batch.mu.Unlock()
	s.batch.maxBatch = n
}

// SweepKeys is how many keys a write transaction sweeps.
const SweepKeys = sweepKeys

// Busy reports whether a transaction is under way, or about to be.
func Busy(s *Store) bool {
	s.batch.mu.Lock()
	defer s.batch.mu.Unlock()
	return s.batch.busy
}
