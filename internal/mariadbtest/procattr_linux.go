package mariadbtest

import "syscall"

// sysProcAttr puts mariadbd in its own process group, so a terminal's Ctrl-C reaches only the test binary (which
// then stops the servers), and asks the kernel to SIGKILL it when the test binary dies for any reason.
//
// Pdeathsig fires when the OS thread that started the child exits. The Go runtime keeps its threads for the life
// of the process unless a goroutine exits while locked to one with runtime.LockOSThread; nothing here does that.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
