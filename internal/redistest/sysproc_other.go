//go:build !linux

package redistest

import "syscall"

// sysProcAttr is empty where there is no parent-death signal: Main and
// t.Cleanup stop the servers, and a redis-server stays in the test binary's
// process group so that an interrupt from the terminal reaches it too.
func sysProcAttr() *syscall.SysProcAttr { return nil }
