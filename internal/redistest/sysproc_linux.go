package redistest

import "syscall"

// sysProcAttr has Linux kill redis-server when the test binary dies, however
// it dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
