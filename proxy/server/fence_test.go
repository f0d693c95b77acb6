package server_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/shardgate/shardgate/move"
)

// TestFenceStaleProxy: proxy A runs a reshard of sbtest1 (2 subtables on
// node1 and node2 to 8 over 3 nodes); proxies B and C, in front of the
// same nodes and sidecar, are told nothing and keep the old rule. After
// A's cutover the old subtables are fenced (renamed): B's autocommitted
// write meets the fence, B reads the cut-over rule from the sidecar and
// writes the row once, to its new subtable; C's transaction meets it and
// gets 1213 (rolled back, retryable), and its retry succeeds; D's prepared
// statements (one prepared before the cutover) run again too. No old
// subtable takes a write under its name. After A's rollback, B (now on the
// new rule, whose subtables are gone) meets the fence again and writes to
// the old subtables; every write made through B is there.
func TestFenceStaleProxy(t *testing.T) {
	c, cfg := moveCluster(t)
	a := startProxy(t, cfg)
	cfgB, cfgC, cfgD := *cfg, *cfg, *cfg
	b, cp, d := startProxy(t, &cfgB), startProxy(t, &cfgC), startProxy(t, &cfgD)
	dbA := openDB(t, a.dsn("sbtest", ""))
	mustExec(t, dbA, "CREATE TABLE sbtest1 (id INT PRIMARY KEY, k INT NOT NULL, c VARCHAR(120) NOT NULL, pad VARCHAR(60) NOT NULL)")
	for i := 0; i < 2000; i += 200 {
		var vals []string
		for j := i + 1; j <= i+200; j++ {
			vals = append(vals, fmt.Sprintf("(%d, %d, 'c%d', 'p')", j, j, j))
		}
		mustExec(t, dbA, "INSERT INTO sbtest1 VALUES "+strings.Join(vals, ","))
	}
	dbB, dbC := openDB(t, b.dsn("sbtest", "")), openDB(t, cp.dsn("sbtest", ""))
	// B and C route by the old rule: a row through them lands in an old subtable.
	mustExec(t, dbB, "INSERT INTO sbtest1 VALUES (4000001, 1, 'b before', 'p')")
	if got := queryValue(t, openDB(t, directDSN(c.Servers[1], "sbtest", "")), "SELECT c FROM sbtest1_0001 WHERE id = 4000001"); got != "b before" {
		t.Fatalf("B's write before the cutover: %q", got)
	}
	// D executes prepared statements (the driver's, without interpolation):
	// one prepared before the cutover, executed after it.
	dbD := openDB(t, d.dsn("sbtest", ""))
	upd, err := dbD.Prepare("UPDATE sbtest1 SET c = ? WHERE id = ?")
	if err != nil {
		t.Fatal(err)
	}
	defer upd.Close()
	if _, err := upd.Exec("d before", 5); err != nil {
		t.Fatal(err)
	}
	web := httptest.NewServer(a.srv.AdminHandler())
	defer web.Close()
	req := map[string]any{"table": "sbtest.sbtest1", "name": "grow", "nodes": []string{"node1", "node2", "node3"}, "locations": []int{3, 3, 2}}
	if code, body := admin(t, web.URL, "POST", "/admin/workflows", req, nil); code != 200 {
		t.Fatalf("start: %d %s", code, body)
	}
	waitPhase(t, web.URL, "grow", move.PhaseReady, 2*time.Minute)
	var st move.Status
	if code, body := admin(t, web.URL, "POST", "/admin/workflows/grow/cutover", nil, &st); code != 200 {
		t.Fatalf("cutover: %d %s", code, body)
	}
	t.Logf("cutover with the fence: pause %.1f ms after %d attempts", st.State.PauseMillis, st.State.Cutovers)

	// The old subtables are fenced: under their names they are gone.
	n1, n2 := openDB(t, directDSN(c.Servers[0], "sbtest", "")), openDB(t, directDSN(c.Servers[1], "sbtest", ""))
	for _, x := range []struct {
		db   querier
		name string
	}{{n1, "sbtest1_0000"}, {n2, "sbtest1_0001"}} {
		if got := queryValue(t, x.db, "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'sbtest' AND TABLE_NAME = ?", x.name); got != "0" {
			t.Fatalf("%s is still there after the cutover", x.name)
		}
	}

	// D's prepared statements meet the fence too, and run again.
	if _, err := upd.Exec("d after", 5); err != nil {
		t.Fatalf("D's prepared UPDATE after the cutover: %v", err)
	}
	if _, err := dbD.Exec("INSERT INTO sbtest1 VALUES (?, ?, ?, ?)", 5000002, 1, "d new", "p"); err != nil {
		t.Fatalf("D's prepared INSERT after the cutover: %v", err)
	}
	if got := queryValue(t, n1, "SELECT c FROM sbtest1_g1_0002 WHERE id = 5000002"); got != "d new" {
		t.Fatalf("D's INSERT is not in its new subtable (5000002 mod 8 = 2 on node1): %q", got)
	}

	// C in a transaction: a retryable error, the transaction rolled back.
	tx, err := dbC.Begin()
	if err != nil {
		t.Fatal(err)
	}
	_, err = tx.Exec("UPDATE sbtest1 SET c = 'c in txn' WHERE id = 3")
	wantSQLError(t, err, 1213, "40001")
	tx.Rollback()
	mustExec(t, dbC, "UPDATE sbtest1 SET c = 'c retried' WHERE id = 3") // C refreshed its rule
	if got := queryValue(t, openDB(t, directDSN(c.Servers[1], "sbtest", "")), "SELECT c FROM sbtest1_g1_0003 WHERE id = 3"); got != "c retried" {
		t.Fatalf("C's retried write is not in its new subtable (3 mod 8 = 3 on node2): %q", got)
	}

	// B in autocommit: retried on the new subtables after the refresh.
	t0 := time.Now()
	mustExec(t, dbB, "INSERT INTO sbtest1 VALUES (5000001, 1, 'b after', 'p')")
	t.Logf("B's write that met the fence took %v", time.Since(t0))
	if got := queryValue(t, n1, "SELECT c FROM sbtest1_g1_0001 WHERE id = 5000001"); got != "b after" {
		t.Fatalf("B's write after the cutover is not in its new subtable (5000001 mod 8 = 1 on node1): %q", got)
	}
	if got := queryValue(t, dbB, "SELECT COUNT(*) FROM sbtest1"); got != "2003" {
		t.Fatalf("B counts %s rows after the cutover, want 2003", got)
	}
	// The fenced old subtable gets the row from the reverse stream only.
	eventually(t, 30*time.Second, "the reverse stream to bring B's row to the fenced old subtable", func() bool {
		return queryValue(t, n2, "SELECT COUNT(*) FROM sbtest1_0001__fenced WHERE id = 5000001") == "1"
	})

	// Rollback: B, now on the new rule, meets the fence again.
	if code, body := admin(t, web.URL, "POST", "/admin/workflows/grow/rollback", nil, &st); code != 200 {
		t.Fatalf("rollback: %d %s", code, body)
	}
	t.Logf("rollback with the fence: pause %.1f ms", st.State.PauseMillis)
	mustExec(t, dbB, "UPDATE sbtest1 SET c = 'b after rollback' WHERE id = 5000001")
	if got := queryValue(t, n2, "SELECT c FROM sbtest1_0001 WHERE id = 5000001"); got != "b after rollback" {
		t.Fatalf("after the rollback B's write is not in the old subtable: %q", got)
	}
	for id, want := range map[int]string{3: "c retried", 4000001: "b before", 5: "d after", 5000002: "d new"} {
		if got := queryValue(t, dbA, "SELECT c FROM sbtest1 WHERE id = ?", id); got != want {
			t.Fatalf("after the rollback row %d reads %q through A, want %q", id, got, want)
		}
	}
	if got := queryValue(t, dbA, "SELECT COUNT(*) FROM sbtest1"); got != "2003" {
		t.Fatalf("A counts %s rows after the rollback, want 2003", got)
	}
	if got := queryValue(t, n1, "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'sbtest' AND TABLE_NAME LIKE 'sbtest1%fenced'"); got != "0" {
		t.Fatalf("%s fenced tables left on node1 after the rollback", got)
	}
}

// TestFencePostponed: a transaction that proxy C keeps open on an old
// subtable holds the fence's RENAME past cutover_timeout, so A's cutover
// is postponed and the fence undone (the other node's subtable renamed
// back); once C commits, the next attempt cuts over. Proxy B writes
// throughout, by the old rule until it meets the fence: not one of its
// writes fails, and every row it wrote, and C's, is in the new subtables.
func TestFencePostponed(t *testing.T) {
	c, cfg := moveCluster(t)
	a := startProxy(t, cfg)
	cfgB, cfgC := *cfg, *cfg
	b, cp := startProxy(t, &cfgB), startProxy(t, &cfgC)
	dbA := openDB(t, a.dsn("sbtest", ""))
	mustExec(t, dbA, "CREATE TABLE sbtest1 (id INT PRIMARY KEY, k INT NOT NULL, c VARCHAR(120) NOT NULL, pad VARCHAR(60) NOT NULL)")
	var vals []string
	for j := 1; j <= 200; j++ {
		vals = append(vals, fmt.Sprintf("(%d, %d, 'c%d', 'p')", j, j, j))
	}
	mustExec(t, dbA, "INSERT INTO sbtest1 VALUES "+strings.Join(vals, ","))
	dbB, dbC := openDB(t, b.dsn("sbtest", "")), openDB(t, cp.dsn("sbtest", ""))
	web := httptest.NewServer(a.srv.AdminHandler())
	defer web.Close()
	req := map[string]any{"table": "sbtest.sbtest1", "name": "grow", "nodes": []string{"node1", "node2", "node3"}, "locations": []int{3, 3, 2}}
	if code, body := admin(t, web.URL, "POST", "/admin/workflows", req, nil); code != 200 {
		t.Fatalf("start: %d %s", code, body)
	}
	waitPhase(t, web.URL, "grow", move.PhaseReady, 2*time.Minute)

	// B writes a row every few milliseconds until told to stop.
	stop, written := make(chan struct{}), make(chan []error, 1)
	next := 6000000
	go func() {
		var errs []error
		for {
			select {
			case <-stop:
				written <- errs
				return
			default:
			}
			next++
			if _, err := dbB.Exec(fmt.Sprintf("INSERT INTO sbtest1 VALUES (%d, 1, 'b', 'p')", next)); err != nil {
				errs = append(errs, err)
			}
			time.Sleep(3 * time.Millisecond)
		}
	}()
	tx, err := dbC.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec("UPDATE sbtest1 SET c = 'c held' WHERE id = 2"); err != nil { // sbtest1_0000 on node1
		t.Fatal(err)
	}
	done := make(chan move.Status, 1)
	go func() {
		var st move.Status
		if code, body := admin(t, web.URL, "POST", "/admin/workflows/grow/cutover", nil, &st); code != 200 {
			t.Errorf("cutover: %d %s", code, body)
		}
		done <- st
	}()
	eventually(t, 30*time.Second, "a cutover attempt to be postponed and another to start", func() bool {
		return workflow(t, web.URL, "grow").State.Cutovers >= 2
	})
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	st := <-done
	close(stop)
	errs := <-written
	if st.State.Phase != move.PhaseSwitched {
		t.Fatalf("after the cutover: phase %s (%s)", st.State.Phase, st.State.Error)
	}
	t.Logf("cut over after %d attempts, pause %.1f ms; B wrote %d rows meanwhile, %d errors", st.State.Cutovers, st.State.PauseMillis, next-6000000, len(errs))
	for _, err := range errs {
		t.Errorf("B's write failed: %v", err)
	}
	rows, _ := tableSum(t, c, newLayout)
	if want := int64(200 + next - 6000000); len(errs) == 0 && rows != want {
		t.Fatalf("the new subtables hold %d rows, want %d", rows, want)
	}
	if got := queryValue(t, dbA, "SELECT c FROM sbtest1 WHERE id = 2"); got != "c held" {
		t.Fatalf("C's committed write reads %q after the cutover", got)
	}
}

// TestFenceSettledOnRestart: a proxy that stopped between a fence and its
// swap leaves the old subtables renamed; the proxy that resumes the
// workflow (ready: the old rule is in force) renames them back. And one
// that resumes a workflow cut over while its old subtables are not fenced
// (cut over by an older proxy) fences them.
func TestFenceSettledOnRestart(t *testing.T) {
	c, cfg := moveCluster(t)
	a := startProxy(t, cfg)
	dbA := openDB(t, a.dsn("sbtest", ""))
	mustExec(t, dbA, "CREATE TABLE sbtest1 (id INT PRIMARY KEY, k INT NOT NULL, c VARCHAR(120) NOT NULL, pad VARCHAR(60) NOT NULL)",
		"INSERT INTO sbtest1 VALUES (1, 1, 'a', 'p'), (2, 2, 'b', 'p')")
	web := httptest.NewServer(a.srv.AdminHandler())
	req := map[string]any{"table": "sbtest.sbtest1", "name": "grow", "nodes": []string{"node1", "node2", "node3"}, "locations": []int{3, 3, 2}}
	if code, body := admin(t, web.URL, "POST", "/admin/workflows", req, nil); code != 200 {
		t.Fatalf("start: %d %s", code, body)
	}
	waitPhase(t, web.URL, "grow", move.PhaseReady, 2*time.Minute)
	restart := func() (*proxy, *httptest.Server) {
		t.Helper()
		web.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if err := a.srv.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		a = startProxy(t, cfg)
		web = httptest.NewServer(a.srv.AdminHandler())
		return a, web
	}
	n1, n2 := openDB(t, directDSN(c.Servers[0], "sbtest", "")), openDB(t, directDSN(c.Servers[1], "sbtest", ""))
	exists := func(db querier, name string) bool {
		return queryValue(t, db, "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'sbtest' AND TABLE_NAME = ?", name) == "1"
	}

	// Stopped between the fence and the swap: fenced, still ready.
	mustExec(t, n1, "RENAME TABLE sbtest1_0000 TO sbtest1_0000__fenced")
	mustExec(t, n2, "RENAME TABLE sbtest1_0001 TO sbtest1_0001__fenced")
	a, web = restart()
	eventually(t, 30*time.Second, "the old subtables to be renamed back", func() bool {
		return exists(n1, "sbtest1_0000") && exists(n2, "sbtest1_0001")
	})
	if got := queryValue(t, openDB(t, a.dsn("sbtest", "")), "SELECT c FROM sbtest1 WHERE id = 2"); got != "b" {
		t.Fatalf("after the restart row 2 reads %q", got)
	}

	// Cut over, then the old subtables unfenced behind the workflow's back.
	waitPhase(t, web.URL, "grow", move.PhaseReady, time.Minute)
	var st move.Status
	if code, body := admin(t, web.URL, "POST", "/admin/workflows/grow/cutover", nil, &st); code != 200 {
		t.Fatalf("cutover: %d %s", code, body)
	}
	mustExec(t, n1, "RENAME TABLE sbtest1_0000__fenced TO sbtest1_0000")
	a, web = restart()
	eventually(t, 30*time.Second, "the old subtable to be fenced again", func() bool {
		return exists(n1, "sbtest1_0000__fenced") && !exists(n1, "sbtest1_0000")
	})
	defer web.Close()
	if got := queryValue(t, openDB(t, a.dsn("sbtest", "")), "SELECT c FROM sbtest1 WHERE id = 2"); got != "b" {
		t.Fatalf("after the second restart row 2 reads %q", got)
	}
}
