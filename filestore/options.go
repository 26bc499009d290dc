package filestore

import (
	"fmt"
	"time"
)

// An Option configures a Store.
type Option interface{ apply(*config) error }

type config struct {
	lockTimeout time.Duration
	hold        bool
	denyCache   int64 // bytes; 0: no cache
}

// DefaultLockTimeout is how long a call waits for the file while other
// processes hold it, unless WithLockTimeout says otherwise.
const DefaultLockTimeout = 10 * time.Second

func defaults() config { return config{lockTimeout: DefaultLockTimeout} }

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

// WithLockTimeout bounds how long a call (and Open) waits while another
// process, or another Store, holds the file (default DefaultLockTimeout);
// after that it fails with an error wrapping ErrLocked. 0 means no wait:
// a call fails at once when the file is taken. The caller's context may
// end the wait sooner.
func WithLockTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d < 0 {
			return fmt.Errorf("%w: negative lock timeout %v", ErrInvalidOption, d)
		}
		c.lockTimeout = d
		return nil
	})
}

// WithHold keeps the file open, and so locked, from Open until Close: for
// a long-running process that owns the file. Calls then skip opening and
// closing the file, much of a lone decision's time, and never wait for
// other processes; but every other process, and every other Store, that
// uses the file meanwhile waits for it, and fails with ErrLocked after
// its lock timeout.
func WithHold() Option {
	return optionFunc(func(c *config) error { c.hold = true; return nil })
}

// WithDenyCache gives the store a local cache of denied keys' states,
// bounded to maxBytes bytes, from which it answers, exactly and without a
// transaction, every later decision that the state in the file would
// deny, for as long as no transaction, of any process, has committed to
// the file since the state was read: a flood of requests over their
// limit costs the file one transaction a key, not one a request. Each
// answer first reads the file's two meta pages, which name its last
// transaction; the package documentation, "Cached denials", says why
// that is exact. 0, the default, means no cache; a negative maxBytes is
// an error.
func WithDenyCache(maxBytes int64) Option {
	return optionFunc(func(c *config) error {
		if maxBytes < 0 {
			return fmt.Errorf("%w: a deny cache of %d bytes", ErrInvalidOption, maxBytes)
		}
		c.denyCache = maxBytes
		return nil
	})
}
