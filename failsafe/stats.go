package failsafe

import "sync/atomic"

// counter is an atomic counter padded to 64 bytes, so that no two counters
// share a cache line, nor gen and those counted on every call while the
// store is down.
type counter struct {
	atomic.Uint64
	_ [56]byte
}

const (
	countFailures = iota
	countOpen
	countClosed
	countLocal
	countRecoveries
	countTrips
	nCounts
)

// Stats counts what a Store did since it was made. A call
// is one Table.Decide or one Store.Apply, however many ops it holds; the
// ops of an ApplyEach that the mode decides count one call for each
// partition they are in.
type Stats struct {
	// Down reports whether the store is failing now: one of its
	// partitions at least.
	Down bool
	// Failures counts the calls to the store that failed, probes
	// included; bad input and callers' done contexts are not failures.
	Failures uint64
	// Open counts the calls admitted by FailOpen because the store was
	// failing.
	Open uint64
	// Closed counts the calls denied by FailClosed because the store was
	// failing.
	Closed uint64
	// Local counts the calls decided on the local store by FailLocal,
	// admitted or not.
	Local uint64
	// Trips counts the times a partition of the store went down.
	Trips uint64
	// Recoveries counts the times a partition of the store came back up.
	Recoveries uint64
}

// Stats returns the store's counts.
func (f *Store) Stats() Stats {
	return Stats{
		Down:       f.downParts.Load() > 0,
		Failures:   f.stats[countFailures].Load(),
		Open:       f.stats[countOpen].Load(),
		Closed:     f.stats[countClosed].Load(),
		Local:      f.stats[countLocal].Load(),
		Trips:      f.stats[countTrips].Load(),
		Recoveries: f.stats[countRecoveries].Load(),
	}
}
