package filestore

import "errors"

// Errors of the file store, wrapped with details; test for them with
// errors.Is. The store also returns the floodgate sentinels for bad input
// (algo.ErrInvalidTime, ErrInvalidCost, ErrInvalidKey,
// ErrForeignTable), and wraps the operating system's and bbolt's errors
// when the file cannot be read or written.
var (
	// ErrLocked is returned when the file stayed locked by another
	// process, or another Store, for longer than the lock timeout
	// (WithLockTimeout). The error names the file. Nothing was done.
	ErrLocked = errors.New("file locked")
	// ErrCorrupt is returned when the file is damaged: a value under a
	// limiter's key that is not a state of the limiter's algorithm (the
	// error names the key), a damaged page that bbolt cannot read (the
	// error says what the store was doing, and bbolt's complaint), or
	// metadata whose checksum fails. Nothing was done.
	ErrCorrupt = errors.New("corrupt file")
	// ErrNotStore is returned, by Open and by every call, when the file
	// at the path is not a floodgate store: an empty file, a file that is
	// not a bbolt database, or another program's bbolt database. The
	// store creates a file only where none is, so it never takes such a
	// file over. Nothing was done.
	ErrNotStore = errors.New("not a floodgate store")
	// ErrClosed is returned by calls made after Store.Close.
	ErrClosed = errors.New("store closed")
	// ErrInvalidOption is returned by Open for an option out of range.
	ErrInvalidOption = errors.New("invalid option")
)
