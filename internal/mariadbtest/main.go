package mariadbtest

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"
)

// Main is a TestMain helper that shares n servers among all tests of a package:
//
//	var cluster *mariadbtest.Cluster // nil under -short
//
//	func TestMain(m *testing.M) {
//		mariadbtest.Main(m, 2, func(c *mariadbtest.Cluster) int {
//			cluster = c
//			return m.Run()
//		})
//	}
//
// Under -short (and for go test -list) it calls run with a nil Cluster without starting anything; tests that
// need servers then call t.Skip. Otherwise it starts the servers, and if MariaDB is missing or does not start
// it prints a loud error and exits with status 1: a missing database must fail the build, not skip the tests.
// After run returns (or panics) the servers are stopped; an interrupt (SIGINT, SIGTERM) also stops them before
// exiting. Main calls os.Exit with run's code, or 1 if stopping failed. A nil run means m.Run.
func Main(m *testing.M, n int, run func(c *Cluster) int) {
	os.Exit(mainCode(m, n, run))
}

// listing reports whether the binary only lists tests (go test -list) or
// fuzzes (go test -fuzz, whose targets here run without servers: every
// worker process would otherwise start its own), which needs no servers.
func listing() bool {
	for _, name := range []string{"test.list", "test.fuzz"} {
		if f := flag.Lookup(name); f != nil && f.Value.String() != "" {
			return true
		}
	}
	return false
}

func mainCode(m *testing.M, n int, run func(c *Cluster) int) (code int) {
	if !flag.Parsed() {
		flag.Parse()
	}
	if run == nil {
		run = func(*Cluster) int { return m.Run() }
	}
	if testing.Short() || listing() {
		return run(nil)
	}
	c, err := Start("", n)
	if err != nil {
		fmt.Fprintf(os.Stderr, "\n"+
			"*** mariadbtest: cannot start %d MariaDB server(s): %v\n"+
			"*** Integration tests need MariaDB: run scripts/deps.sh mariadb (or apt-get install -y mariadb-server).\n"+
			"*** Use go test -short to skip integration tests.\n\n", n, err)
		return 1
	}

	// The interrupt watcher is owned by this function: it ends when done is closed below, or exits the binary.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	watcherDone := make(chan struct{})
	go func() {
		defer close(watcherDone)
		select {
		case sig := <-sigs:
			fmt.Fprintf(os.Stderr, "mariadbtest: %v: stopping MariaDB servers\n", sig)
			if err := c.Stop(); err != nil {
				fmt.Fprintf(os.Stderr, "mariadbtest: %v\n", err)
			}
			os.Exit(1)
		case <-done:
		}
	}()
	defer func() {
		signal.Stop(sigs)
		close(done)
		<-watcherDone
		if err := c.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "mariadbtest: stopping MariaDB servers: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}()
	return run(c)
}
