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
