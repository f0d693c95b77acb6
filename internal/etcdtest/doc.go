// Package etcdtest runs a throwaway single-member etcd for tests of the fleet (package topo and the proxies that
// agree through it).
//
// Layer: test support only. Production code never imports it. It imports the standard library only: readiness
// is decided over etcd's HTTP /health endpoint, so the helper does not depend on the client version under test.
//
// Lifecycle: Start (or New, for a TestMain that shares one server among a package's tests) runs the etcd binary
// from PATH, /usr/bin or /usr/local/bin with its data directory, log and nothing else under one directory, on two
// free 127.0.0.1 ports below the kernel's ephemeral range (client and peer), and returns once /health reports
// a leader and the member answering is this one. Stop (SIGTERM) and Kill (SIGKILL) end the process but keep the
// data directory and the ports; Restart brings the same member back on the same ports with the same data, so the
// revision history and the leases survive, as they do when an operator restarts a real etcd. Pause (SIGSTOP) and Resume make it hang with its sockets open, as a hung machine or a
// network that drops packets does. Close kills the process for good.
//
// Invariants:
//   - Never a fake: the real etcd (Debian's etcd-server, installed by scripts/deps.sh etcd). A missing binary
//     fails the test loudly with the install command; only go test -short skips.
//   - No server outlives the test binary: Start registers Close as a cleanup, and on Linux the process carries a
//     parent-death signal (SIGKILL).
//   - Readiness is decided by asking the server, never by sleeping.
//
// Concurrency: a Server's exported fields are fixed after New; its methods are safe from any goroutine, and Stop,
// Kill, Restart and Close are serialised by a mutex.
package etcdtest
