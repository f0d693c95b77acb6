//go:build unix && !linux

package mariadbtest

import (
	"syscall"
	"time"
)

// sysProcAttr puts mariadbd in its own process group. Outside Linux there is no parent-death signal, so a test
// binary that crashes can leave servers behind; Main still stops them on a normal exit or an interrupt.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// waitStopped cannot see threads' states here: SIGSTOP is trusted.
func waitStopped(pid int, timeout time.Duration) error { return nil }
