package xa_test

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"strconv"
	"testing"
)

// BenchmarkMariaDBOnePhase measures what MariaDB itself charges for a
// write transaction on one node as XA (XA START ... XA END, XA COMMIT ...
// ONE PHASE: what transaction_mode xa sends) against a plain one (START
// TRANSACTION ... COMMIT: multi), sent directly to one server with no
// proxy: two single-row UPDATEs each, on one connection. server-µs/txn is
// the mariadbd process's CPU time (utime+stime) per transaction. -count
// runs one case's repetitions back to back, so interleave whole runs and
// compare the ratios of each run's pair:
//
//	go test -c -o /tmp/xa.test ./xa && cd xa &&
//	for i in 1 2 3 4 5; do /tmp/xa.test -test.run '^$' -test.bench MariaDBOnePhase -test.benchtime 3s; done
//
// ns/op is not comparable between the cases: XA END and XA COMMIT go
// separately here, in one write through the proxy.
func BenchmarkMariaDBOnePhase(b *testing.B) {
	if cluster == nil {
		b.Skip("needs MariaDB (skipped under -short)")
	}
	s := cluster.Servers[0]
	db, err := sql.Open("mysql", s.DSN(""))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	cn, err := db.Conn(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer cn.Close()
	for _, q := range []string{"CREATE DATABASE IF NOT EXISTS xa_bench",
		"CREATE TABLE IF NOT EXISTS xa_bench.t (id INT PRIMARY KEY, v INT NOT NULL)",
		"REPLACE INTO xa_bench.t VALUES (1, 0), (2, 0)"} {
		if _, err := cn.ExecContext(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
	run := func(b *testing.B, begin func(i int) []string, end func(i int) []string) {
		c0 := cpuTicks(b, s.Pid())
		for i := 0; i < b.N; i++ {
			qs := append(begin(i), "UPDATE xa_bench.t SET v = v + 1 WHERE id = 1", "UPDATE xa_bench.t SET v = v + 1 WHERE id = 2")
			for _, q := range append(qs, end(i)...) {
				if _, err := cn.ExecContext(ctx, q); err != nil {
					b.Fatal(err)
				}
			}
		}
		ticks := cpuTicks(b, s.Pid()) - c0
		b.ReportMetric(float64(ticks)*1e6/clockTicks/float64(b.N), "server-µs/txn")
	}
	b.Run("commit", func(b *testing.B) {
		run(b, func(int) []string { return []string{"START TRANSACTION"} }, func(int) []string { return []string{"COMMIT"} })
	})
	b.Run("xa-one-phase", func(b *testing.B) {
		xid := func(i int) string { return fmt.Sprintf("'sg-bench-%d','node1',21319", i) }
		run(b, func(i int) []string { return []string{"XA START " + xid(i)} },
			func(i int) []string { return []string{"XA END " + xid(i), "XA COMMIT " + xid(i) + " ONE PHASE"} })
	})
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on
// every Linux architecture Go supports.
const clockTicks = 100

// cpuTicks is process pid's utime+stime.
func cpuTicks(b *testing.B, pid int) int64 {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Skip("no /proc: ", err)
	}
	// Fields after "pid (comm) ": state is the first; utime and stime are
	// the 12th and 13th.
	f := bytes.Fields(stat[bytes.LastIndexByte(stat, ')')+2:])
	u, _ := strconv.ParseInt(string(f[11]), 10, 64)
	k, _ := strconv.ParseInt(string(f[12]), 10, 64)
	return u + k
}
