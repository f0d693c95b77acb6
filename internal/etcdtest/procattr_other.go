//go:build unix && !linux

package etcdtest

import "syscall"

// sysProcAttr puts etcd in its own process group. Outside Linux there is no parent-death signal, so a test
// binary that crashes can leave etcd behind; the test cleanup still kills it on a normal exit.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
