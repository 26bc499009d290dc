package failsafe

import "errors"

// Errors of a failsafe Store, wrapped with details; test for them with
// errors.Is.
var (
	// ErrUnavailable is returned in FailClosed mode while the store is
	// failing, with a denial, wrapping the store's last error too.
	// Nothing is spent.
	ErrUnavailable = errors.New("store unavailable")
	// ErrInvalidOptions is returned by New for a nil store or an unknown
	// Mode.
	ErrInvalidOptions = errors.New("invalid options")
)
