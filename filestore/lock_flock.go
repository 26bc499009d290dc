//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package filestore

import (
	"errors"
	"os"
	"syscall"
)

// lockingOpen returns the function through which bbolt opens the file: it
// opens it, never creating it (Store.create does), and takes the exclusive
// flock that bbolt takes (bbolt's own flock on the same open file then
// succeeds at once), polling while another holds it and calling w.wait
// between attempts, so that the wait ends with the callers' contexts and
// not only with a timeout. It refuses an empty file, which bbolt would
// make a new database, and puts the file it opened in *fp.
func lockingOpen(w *waiter, fp **os.File) func(string, int, os.FileMode) (*os.File, error) {
	return func(name string, flag int, perm os.FileMode) (*os.File, error) {
		f, err := os.OpenFile(name, flag&^os.O_CREATE, perm)
		if err != nil {
			return nil, err
		}
		fd := int(f.Fd())
		for {
			err := syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB)
			if err == nil {
				if err := refuseEmpty(f); err != nil {
					f.Close()
					return nil, err
				}
				*fp = f
				return f, nil
			}
			if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
				f.Close()
				return nil, err
			}
			if err := w.wait(); err != nil {
				f.Close()
				return nil, err
			}
		}
	}
}
