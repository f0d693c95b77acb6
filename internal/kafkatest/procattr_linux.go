package kafkatest

import "syscall"

// sysProcAttr puts the broker's JVM in its own process group, so a terminal's Ctrl-C reaches only the test
// binary, and asks the kernel to SIGKILL it when the test binary dies for any reason.
//
// Pdeathsig fires when the OS thread that started the child exits. The Go runtime keeps its threads for the life
// of the process unless a goroutine exits while locked to one with runtime.LockOSThread; nothing here does that.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
