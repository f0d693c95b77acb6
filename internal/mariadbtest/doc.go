// Package mariadbtest runs throwaway MariaDB servers for integration tests.
//
// Layer: test support only. Production code never imports it; integration tests in any package do, usually once
// per package from TestMain through Main, so that all tests of the package share one set of servers.
//
// Lifecycle: Start bootstraps one data directory with mariadb-install-db (creating the test account in the same
// step), copies it for every further server, and boots all servers in parallel on free 127.0.0.1 ports. Each
// server is an independent mariadbd process with its own data directory, socket, pid file and error log under
// its own subdirectory. Stop shuts them down and removes the directory if Start created it. Kill and Restart
// exist for tests that need a backend to die in the middle of a query and come back on the same address.
//
// Invariants:
//   - No server outlives the test binary: Main stops the cluster when the tests finish or the binary is
//     interrupted, and on Linux every mariadbd carries a parent-death signal (SIGKILL), so even a crashed or
//     timed-out test binary takes its servers with it.
//   - Every server of a Cluster has the same account (Server.User, Server.Password; the password is random per
//     Start) with ALL PRIVILEGES ... WITH GRANT OPTION on '%', authenticated with mysql_native_password.
//     root@localhost has no password and is reachable through Server.Socket only.
//   - Readiness is decided by connecting and pinging over TCP with the test account, never by sleeping.
//
// Concurrency: a Cluster's Servers slice is fixed after Start. Server methods are safe to call from any
// goroutine; Kill, Restart and Stop on one server are serialised by a mutex.
package mariadbtest
