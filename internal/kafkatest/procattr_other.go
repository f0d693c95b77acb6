//go:build unix && !linux

package kafkatest

import "syscall"

// sysProcAttr puts the broker's JVM in its own process group. Outside Linux there is no parent-death signal, so a
// test binary that crashes can leave the broker behind; the test cleanup still kills it on a normal exit.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
