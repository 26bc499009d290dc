package frontend

import "sync/atomic"

// Counter is an atomic counter alone on its cache line: denials can be as
// frequent as requests.
type Counter struct {
	atomic.Uint64
	_ [56]byte
}

// Counts counts what a front-end did since it was made. Its zero value
// counts nothing yet; it is safe for concurrent use.
type Counts struct {
	Denials, DryRunDenied, KeyErrors, Failures, ServedOnError, Abandoned Counter
}

// Stats is a snapshot of Counts; each front-end's Stats type converts
// from it.
type Stats struct {
	Denied        uint64 // denied
	DryRunDenied  uint64 // a dry-run limiter would have denied, served
	KeyErrors     uint64 // refused: no key could be found
	Errors        uint64 // refused: a limiter failed, or the cost exceeds a burst
	ServedOnError uint64 // served although their limiter failed
	Abandoned     uint64 // gone while they waited their turn
}

// Stats returns the counts now.
func (c *Counts) Stats() Stats {
	return Stats{
		Denied:        c.Denials.Load(),
		DryRunDenied:  c.DryRunDenied.Load(),
		KeyErrors:     c.KeyErrors.Load(),
		Errors:        c.Failures.Load(),
		ServedOnError: c.ServedOnError.Load(),
		Abandoned:     c.Abandoned.Load(),
	}
}
