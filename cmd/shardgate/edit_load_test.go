package main

import (
	"bytes"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardgate/shardgate/proxy/server"
)

// TestEditApplyUnderLoad is issue 36's first "done means" as an operator
// meets it, with one proxy and its file: while sysbench oltp_read_write
// runs on sbtest1 and other clients read, update and insert rows of
// orders through the proxy, the rule of sbtest1 is edited in the proxy's
// own ks.yaml, `shardgate apply ks.yaml -wait` moves its rows and
// `shardgate cutover` swaps the rule: sysbench ends without an error, no
// other client statement fails, and sbtest1's rows are all in its new
// subtables. Then a rule for a new, empty table added to the file applies
// at once on a reload (what SIGHUP runs) and routes.
func TestEditApplyUnderLoad(t *testing.T) {
	sysbench, err := exec.LookPath("sysbench")
	if err != nil {
		t.Fatal("sysbench is not installed: scripts/deps.sh sysbench (or apt-get install -y sysbench)")
	}
	e := newPlanEnv(t, "cle")
	before := e.file("", e.rule("orders", "1, 1"), e.rule("sbtest1", "1, 1"))
	path := e.write(t, "ks.yaml", before)
	srv, sh := e.start(t, before, server.Options{})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	app, err := sql.Open("mysql", "app:pw@tcp("+l.Addr().String()+")/cle")
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	host, port, _ := strings.Cut(l.Addr().String(), ":")
	sb := []string{"oltp_read_write", "--db-driver=mysql", "--mysql-host=" + host, "--mysql-port=" + port, "--mysql-user=app",
		"--mysql-password=pw", "--mysql-db=cle", "--tables=1", "--table-size=10000", "--threads=4", "--auto-inc=off"}
	if out, err := exec.Command(sysbench, append(slices.Clone(sb), "prepare")...).CombinedOutput(); err != nil {
		t.Fatalf("sysbench prepare: %v\n%s", err, out)
	}
	sbDone := make(chan error, 1)
	var sbOut bytes.Buffer
	go func() {
		cmd := exec.Command(sysbench, append(slices.Clone(sb), "--time=20", "run")...)
		cmd.Stdout, cmd.Stderr = &sbOut, &sbOut
		sbDone <- cmd.Run()
	}()

	// The load: 4 clients, each updating and reading rows of the table
	// and inserting rows of its own.
	var (
		stop     atomic.Bool
		wg       sync.WaitGroup
		ops      atomic.Int64
		inserted atomic.Int64
		mu       sync.Mutex
		failures []error
	)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			next := 100000 * (w + 1)
			for !stop.Load() {
				id := rand.IntN(3000)
				var err error
				switch rand.IntN(3) {
				case 0:
					_, err = app.Exec("UPDATE orders SET v = CONCAT('w', ?) WHERE id = ?", w, id)
				case 1:
					var v string
					err = app.QueryRow("SELECT v FROM orders WHERE id = ?", id).Scan(&v)
					if errors.Is(err, sql.ErrNoRows) {
						err = fmt.Errorf("row %d is missing", id)
					}
				default:
					if _, err = app.Exec("INSERT INTO orders VALUES (?, 'new')", next); err == nil {
						inserted.Add(1)
						next++
					}
				}
				if err != nil {
					mu.Lock()
					failures = append(failures, err)
					mu.Unlock()
					continue
				}
				ops.Add(1)
			}
		}()
	}
	time.Sleep(500 * time.Millisecond)

	// The operator's edit, in the file the proxy runs, then apply.
	e.write(t, "ks.yaml", e.file("", e.rule("orders", "1, 1"), e.rule("sbtest1", "2, 2")))
	out, err := sh("apply", path, "-wait")
	if err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	t.Logf("$ shardgate apply ks.yaml -wait\n%s", out)
	m := regexp.MustCompile(`shardgate cutover (\w+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("apply did not get the workflow in sync:\n%s", out)
	}
	out, err = sh("cutover", m[1])
	if err != nil {
		t.Fatalf("cutover: %v\n%s", err, out)
	}
	t.Logf("$ shardgate cutover %s\n%s", m[1], out)
	if err := <-sbDone; err != nil {
		t.Errorf("sysbench across the cutover: %v\n%s", err, sbOut.String())
	}
	cut := sbOut.String()
	if i := strings.Index(cut, "SQL statistics:"); i >= 0 {
		cut = cut[i:]
	}
	t.Logf("sysbench oltp_read_write, 4 threads, 20 s across the apply and the cutover:\n%s", cut)
	stop.Store(true)
	wg.Wait()
	t.Logf("%d other client statements, %d rows inserted, %d failed", ops.Load(), inserted.Load(), len(failures))
	for i, err := range failures {
		if i < 5 {
			t.Errorf("a client statement failed: %v", err)
		}
	}
	if want, n := 3000+inserted.Load(), int64(0); app.QueryRow("SELECT COUNT(*) FROM orders").Scan(&n) != nil || n != want {
		t.Errorf("orders through the proxy: %d rows, want %d", n, want)
	}
	// sbtest1's rows (oltp_read_write deletes and inserts again as many
	// as it deletes) through the proxy and in its new subtables, on the
	// servers themselves.
	var want, direct int64
	if err := app.QueryRow("SELECT COUNT(*) FROM sbtest1").Scan(&want); err != nil || want != 10000 {
		t.Errorf("sbtest1 through the proxy: %d rows (%v), want 10000", want, err)
	}
	for i, s := range cluster.Servers {
		db, err := sql.Open("mysql", s.DSN("cle"))
		if err != nil {
			t.Fatal(err)
		}
		for k := 2 * i; k < 2*i+2; k++ {
			var c int64
			if err := db.QueryRow(fmt.Sprintf("SELECT COUNT(*) FROM sbtest1_g1_%04d", k)).Scan(&c); err != nil {
				t.Fatalf("node%d: %v", i+1, err)
			}
			direct += c
		}
		db.Close()
	}
	if direct != want {
		t.Errorf("the new subtables hold %d rows, want %d", direct, want)
	}

	// A rule for a new, empty table: applied by the reload at once.
	e.write(t, "ks.yaml", e.file("", e.rule("orders", "1, 1"), e.rule("sbtest1", "2, 2"), e.rule("carts", "1, 1")))
	if err := srv.ReloadFile(path); err != nil { // what SIGHUP runs
		t.Fatalf("reload: %v", err)
	}
	if _, err := app.Exec("CREATE TABLE carts (id INT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	if _, err := app.Exec("INSERT INTO carts VALUES (1), (2)"); err != nil {
		t.Fatal(err)
	}
	db, _ := sql.Open("mysql", cluster.Servers[1].DSN("cle"))
	defer db.Close()
	var c int
	if err := db.QueryRow("SELECT COUNT(*) FROM carts_0001").Scan(&c); err != nil || c != 1 {
		t.Errorf("the new rule does not route: carts_0001 on node2 holds %d rows (%v)", c, err)
	}
}
