package mariadbtest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// sysProcAttr puts mariadbd in its own process group, so a terminal's Ctrl-C reaches only the test binary (which
// then stops the servers), and asks the kernel to SIGKILL it when the test binary dies for any reason.
//
// Pdeathsig fires when the OS thread that started the child exits. The Go runtime keeps its threads for the life
// of the process unless a goroutine exits while locked to one with runtime.LockOSThread; nothing here does that.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// waitStopped waits until every thread of process pid is stopped (state T
// in /proc/pid/task/*/stat).
func waitStopped(pid int, timeout time.Duration) error {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	for deadline := time.Now().Add(timeout); ; time.Sleep(time.Millisecond) {
		tasks, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		running := 0
		for _, t := range tasks {
			stat, err := os.ReadFile(filepath.Join(dir, t.Name(), "stat"))
			if err != nil {
				continue // the thread exited
			}
			// "pid (comm) S ...": the state follows the last ')'.
			if i := bytes.LastIndexByte(stat, ')'); i < 0 || i+2 >= len(stat) || stat[i+2] != 'T' {
				running++
			}
		}
		if running == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("mariadbtest: %d threads of process %d still running %v after SIGSTOP", running, pid, timeout)
		}
	}
}
