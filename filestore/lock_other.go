//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package filestore

import "os"

// lockingOpen returns the function through which bbolt opens the file:
// it opens it, never creating it (Store.create does), and refuses an
// empty file, which bbolt would make a new database. bbolt locks the file
// itself, waiting for the lock timeout (bolt.Options.Timeout) without
// regard to the callers' contexts. It puts the file it opened in *fp.
func lockingOpen(_ *waiter, fp **os.File) func(string, int, os.FileMode) (*os.File, error) {
	return func(name string, flag int, perm os.FileMode) (*os.File, error) {
		f, err := os.OpenFile(name, flag&^os.O_CREATE, perm)
		if err != nil {
			return nil, err
		}
		if err := refuseEmpty(f); err != nil {
			f.Close()
			return nil, err
		}
		*fp = f
		return f, nil
	}
}
