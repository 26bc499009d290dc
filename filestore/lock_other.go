//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package filestore

import "os"

// lockingOpen returns nil: bbolt opens and locks the file itself, waiting
// for the lock timeout (bolt.Options.Timeout) without regard to the
// callers' contexts.
func lockingOpen(*waiter) func(string, int, os.FileMode) (*os.File, error) { return nil }
