package store

import "sync/atomic"

// CacheStats are the counts of a store's deny cache: a local cache of
// denied keys' states from which the store answers, exactly, the
// decisions those states deny (redisstore.WithDenyCache,
// filestore.WithDenyCache). A store that has one reports them with a
// method CacheStats() CacheStats; package prommetrics exports them.
type CacheStats struct {
	Entries  int64 // keys held, fills under way included
	Bytes    int64 // bytes held, as the bound counts them
	MaxBytes int64 // the bound; 0 for a store without a cache
	// Hits counts decisions answered from the cache, without the
	// store's backend.
	Hits uint64
	// Fills counts keys' states read into the cache after a denial.
	Fills uint64
	// Invalidations counts keys dropped because they were written: by
	// any process where the backend reports writes (Redis), by this
	// process where it does not (a file).
	Invalidations uint64
	// Flushes counts drops of the whole cache: a lost or silent Redis
	// tracking connection, a FLUSHALL; a file that another process wrote
	// or that was replaced.
	Flushes uint64
	// Evictions counts keys dropped to stay within MaxBytes.
	Evictions uint64
	// Live reports whether the cache may answer now.
	Live bool
	// Err, when the cache may not answer (Live false), is why, if the
	// store knows: the error that ended a Redis tracking connection or
	// that the server gave when asked to set one up (an ACL's NOPERM, a
	// server without RESP3); a file's failed transaction, or meta pages
	// that the file store cannot read.
	Err error
}

// CacheCounts are the counters of a store's deny cache, safe for
// concurrent use: what CacheStats counts.
type CacheCounts struct {
	Hits, Fills, Invalidations, Flushes, Evictions atomic.Uint64
}

// Stats returns the CacheStats of a cache with counts c that holds
// entries keys in bytes bytes of maxBytes, and may answer now or not.
func (c *CacheCounts) Stats(entries, bytes, maxBytes int64, live bool) CacheStats {
	return CacheStats{Entries: entries, Bytes: bytes, MaxBytes: maxBytes, Live: live,
		Hits: c.Hits.Load(), Fills: c.Fills.Load(), Invalidations: c.Invalidations.Load(),
		Flushes: c.Flushes.Load(), Evictions: c.Evictions.Load()}
}
