//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package filestore

import (
	"os"
	"syscall"
)

// mapMetas maps the first n bytes of f, read-only and shared with every
// process's writes, so that the deny cache reads the file's meta pages
// without a system call.
func mapMetas(f *os.File, n int64) ([]byte, error) {
	return syscall.Mmap(int(f.Fd()), 0, int(n), syscall.PROT_READ, syscall.MAP_SHARED)
}

func unmapMetas(b []byte) { syscall.Munmap(b) }
