package redisstore

import (
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// An Option configures a Store.
type Option interface{ apply(*config) error }

type config struct {
	prefix      string
	callerTime  bool
	minTTL      time.Duration
	maxBatch    int
	maxInFlight int
	maxPending  int
	timeout     time.Duration
	denyCache   int64        // bytes; 0: no cache
	logger      *slog.Logger // nil: none
	counters    bool         // Counters answers: WithCounters
}

func defaults() config {
	return config{prefix: DefaultPrefix, counters: true, maxBatch: 128, maxInFlight: 2, maxPending: 10_000, timeout: DefaultTimeout}
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

// DefaultPrefix starts the name of every Redis key the store writes,
// unless WithPrefix says otherwise.
const DefaultPrefix = "floodgate:"

// WithPrefix starts every Redis key the store writes with prefix (default
// DefaultPrefix), so that several applications, or environments, can share
// one Redis; the counters' keys (Store.Counters) start with "#" and prefix. A prefix holding a hash tag ("{fg}:") puts every key in one
// hash slot of a Redis Cluster: all-or-nothing checks across any keys then
// take one script, at the price of one node holding all the state.
func WithPrefix(prefix string) Option {
	return optionFunc(func(c *config) error {
		if strings.ContainsAny(prefix, "\x00") {
			return fmt.Errorf("%w: prefix %q holds a NUL byte", ErrInvalidOption, prefix)
		}
		c.prefix = prefix
		return nil
	})
}

// WithCallerTime decides at the time the caller gives (Op.Now, the
// limiter's clock or AllowAt's time) instead of the Redis server's clock.
// Tests with a fake clock and the simulator, which replays a trace's own
// times, need it; a fleet of instances whose clocks may disagree should
// not use it.
//
// A key then expires ResetAfter after its last write, measured in real
// time by Redis; that is exact while the caller's time runs at least as
// fast as real time. When it may run slower (a dense trace replayed
// slowly), set WithMinTTL too.
func WithCallerTime() Option {
	return optionFunc(func(c *config) error { c.callerTime = true; return nil })
}

// WithMinTTL keeps every key at least d of real time after its last write,
// even when its state drains sooner. Use it with WithCallerTime when the
// caller's time may run slower than real time.
func WithMinTTL(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d < 0 {
			return fmt.Errorf("%w: negative minimum TTL %v", ErrInvalidOption, d)
		}
		c.minTTL = d
		return nil
	})
}

// WithMaxBatch bounds how many concurrent calls the store sends to Redis
// in one script call (default 128), and how many ops of one ApplyEach
// make one of those calls. 1 turns batching off.
func WithMaxBatch(n int) Option {
	return optionFunc(func(c *config) error {
		if n < 1 {
			return fmt.Errorf("%w: batch size %d is less than 1", ErrInvalidOption, n)
		}
		c.maxBatch = n
		return nil
	})
}

// WithMaxInFlight bounds how many script calls the store has waiting on
// Redis at once (default 2). Calls that arrive while that many are out
// wait, and leave together in the next batch.
func WithMaxInFlight(n int) Option {
	return optionFunc(func(c *config) error {
		if n < 1 {
			return fmt.Errorf("%w: %d calls in flight is less than 1", ErrInvalidOption, n)
		}
		c.maxInFlight = n
		return nil
	})
}

// DefaultTimeout bounds every call of a Store to Redis unless WithTimeout
// says otherwise.
const DefaultTimeout = time.Second

// WithTimeout bounds every call of the store (Decide, Apply, ApplyEach)
// to d (default DefaultTimeout), or to its context's deadline when that
// comes first, whatever the client's own timeouts: a call that Redis has
// not answered by then returns an error wrapping ErrUnavailable and
// context.DeadlineExceeded. d must be positive.
func WithTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("%w: timeout %v is not positive", ErrInvalidOption, d)
		}
		c.timeout = d
		return nil
	})
}

// WithDenyCache gives the store a local cache of denied keys' states,
// bounded to maxBytes bytes, from which it answers, exactly and without
// Redis, every later decision that the state Redis holds would deny: a
// flood of requests over their limit costs Redis one call a key, not
// one a request, until something writes the key. Redis tells the store of
// every write to a key under its prefix, by anyone, on a connection of
// its own (CLIENT TRACKING); the package documentation, "Cached
// denials", says when an answer is local and how long another process's
// write may take to be seen. 0, the default, means no cache; a negative
// maxBytes is an error. The cache works on a single Redis, Sentinel's
// failover client and a Redis Cluster (a tracking connection to each
// master); on any other client it is ignored. A store with a cache has a
// goroutine and a connection of its own (on a Cluster, one of each per
// master): Close stops them.
func WithDenyCache(maxBytes int64) Option {
	return optionFunc(func(c *config) error {
		if maxBytes < 0 {
			return fmt.Errorf("%w: a deny cache of %d bytes", ErrInvalidOption, maxBytes)
		}
		c.denyCache = maxBytes
		return nil
	})
}

// WithCounters says whether the store counts hits on counters of its own
// (Store.Counters), which envoyrls uses for Envoy's fixed windows: on, the
// default, each addition is an INCRBY, and the key's expiry when the INCRBY
// made it, in the counters' function, whose calls join other calls' as
// the decisions' script's do. Off, Counters answers errors.ErrUnsupported
// and store.CountersOf counts on the store's tables, through the
// decisions' script, as floodgate did before the counters were the
// default. Turning it on or off starts every counter afresh, since the
// two keep their counts under other keys: a fleet that changes it one
// instance at a time counts a window in two places while both kinds
// serve, and may admit up to twice a limit in that window.
func WithCounters(on bool) Option {
	return optionFunc(func(c *config) error { c.counters = on; return nil })
}

// WithLogger logs to l when the deny cache (WithDenyCache) goes off and
// when it comes back: once each time, at level Warn with the reason (a
// connection lost, an ACL that forbids CLIENT, a Redis without RESP3),
// then at level Info, each with the attribute server, the server's
// address. Store.CacheStats tells the same at any time. The default, and
// a nil l, log nothing.
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) error { c.logger = l; return nil })
}
