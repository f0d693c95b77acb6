package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/internal/mariadbtest"
	"github.com/shardgate/shardgate/move"
)

// moveCluster starts three servers of the test's own and a configuration
// with sbtest.sbtest1 hash-sharded into two subtables on node1 and node2.
func moveCluster(t *testing.T) (*mariadbtest.Cluster, *config.Config) {
	t.Helper()
	backends(t) // skips under -short
	c, err := mariadbtest.Start("", 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop() })
	cfg := newConfig(t, c.Servers...)
	for i := range cfg.Nodes {
		cfg.Nodes[i].MaxConnsLimit = 32
	}
	cfg.Schemas[0].Shard = []config.ShardRule{{DB: "sbtest", Table: "sbtest1", Key: "id", Type: "hash", Nodes: []string{"node1", "node2"},
		Locations: []int{1, 1}, Sequence: "id", SequenceBlock: 1000}}
	cfg.Sidecar = config.Sidecar{Node: "node1", DB: "shardgate_sidecar"}
	for _, s := range c.Servers {
		mustExec(t, openDB(t, directDSN(s, "", "")), "CREATE DATABASE sbtest")
	}
	return c, cfg
}

// admin calls the admin API of p and decodes the answer into out.
func admin(t *testing.T, base, method, path string, body any, out any) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, base+path, rd)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode == 200 {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v\n%s", method, path, err, b)
		}
	}
	return resp.StatusCode, string(b)
}

// workflow returns the status of workflow name.
func workflow(t *testing.T, base, name string) move.Status {
	t.Helper()
	var st move.Status
	if code, body := admin(t, base, "GET", "/admin/workflows/"+name, nil, &st); code != 200 {
		t.Fatalf("GET workflow %s: %d %s", name, code, body)
	}
	return st
}

// waitPhase waits until workflow name reaches phase.
func waitPhase(t *testing.T, base, name, phase string, timeout time.Duration) move.Status {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		st := workflow(t, base, name)
		if st.State.Phase == phase {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("workflow %s is %s after %v, want %s (error: %s)", name, st.State.Phase, timeout, phase, st.State.Error)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// tableSum is COUNT(*) and a checksum of every column of sbtest1 read
// through the subtables named, directly on their servers.
func tableSum(t *testing.T, c *mariadbtest.Cluster, subs map[int][]string) (rows int64, sum string) {
	t.Helper()
	var total, crc int64
	for node, names := range subs {
		db := openDB(t, directDSN(c.Servers[node], "sbtest", ""))
		for _, n := range names {
			var r, s int64
			if err := db.QueryRow("SELECT COUNT(*), COALESCE(SUM(CRC32(CONCAT_WS('|', id, k, c, pad))), 0) FROM "+n).Scan(&r, &s); err != nil {
				t.Fatal(err)
			}
			total += r
			crc += s
		}
	}
	return total, strconv.FormatInt(crc, 10)
}

var (
	oldLayout = map[int][]string{0: {"sbtest1_0000"}, 1: {"sbtest1_0001"}}
	newLayout = map[int][]string{0: {"sbtest1_g1_0000", "sbtest1_g1_0001", "sbtest1_g1_0002"}, 1: {"sbtest1_g1_0003", "sbtest1_g1_0004", "sbtest1_g1_0005"},
		2: {"sbtest1_g1_0006", "sbtest1_g1_0007"}}
)

// TestReshardUnderLoad: sysbench oltp_read_write runs through the proxy
// against sbtest1 (2 subtables) while it is resharded to 8 subtables over
// 3 nodes; the proxy is stopped during the copy and a new one resumes the
// workflow; verify finds no difference; the cutover holds statements
// briefly and sysbench sees no error; the new layout holds exactly the
// rows the proxy answers with, the reverse stream keeps the old layout
// equal to it, and a rollback returns to the old layout without losing a
// write. MOVE_ROWS sets the table size (default 100000; docs/data-movement.md's
// walk-through uses 1000000).
func TestReshardUnderLoad(t *testing.T) {
	c, cfg := moveCluster(t)
	rows := 100000
	if v, err := strconv.Atoi(os.Getenv("MOVE_ROWS")); err == nil && v > 0 {
		rows = v
	}
	p := startProxy(t, cfg)
	bin, args := sysbenchFor(t, p, "sbtest", rows)
	web := httptest.NewServer(p.srv.AdminHandler())
	defer web.Close()

	// A small table is copied slowly so that the proxy can be stopped in
	// the middle of it; a big one with the default options.
	req := map[string]any{"table": "sbtest.sbtest1", "name": "grow", "nodes": []string{"node1", "node2", "node3"}, "locations": []int{3, 3, 2}}
	chunk := int64(8000) // rows per chunk: batch_rows x 8 subtables
	if rows <= 200000 {
		req["options"] = map[string]any{"CopyWorkers": 1, "BatchRows": 200}
		chunk = 1600
	}
	if code, body := admin(t, web.URL, "POST", "/admin/workflows", req, nil); code != 200 {
		t.Fatalf("start: %d %s", code, body)
	}
	deadline := time.Now().Add(time.Minute)
	for workflowFromStore(t, c).State.RowsCopied == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no chunk checkpointed in a minute")
		}
		time.Sleep(20 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	if err := p.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	web.Close()
	ws := workflowFromStore(t, c)
	if ws.State.Phase != move.PhaseCopying || ws.State.RowsCopied >= int64(rows) {
		t.Fatalf("after the stop: phase %s, %d rows copied of %d; want the copy interrupted", ws.State.Phase, ws.State.RowsCopied, rows)
	}
	t.Logf("proxy stopped with %d of %d rows copied", ws.State.RowsCopied, rows)

	// A new proxy resumes the copy while sysbench writes.
	cfg.Addr = "127.0.0.1:0"
	p2 := startProxy(t, cfg)
	web2 := httptest.NewServer(p2.srv.AdminHandler())
	defer web2.Close()
	host, port, _ := strings.Cut(p2.addr, ":")
	for i, a := range args {
		if strings.HasPrefix(a, "--mysql-host=") {
			args[i] = "--mysql-host=" + host
		}
		if strings.HasPrefix(a, "--mysql-port=") {
			args[i] = "--mysql-port=" + port
		}
	}
	bench := exec.Command(bin, append(slices.Clone(args), "--threads=4", "--time=0", "--events=0", "--report-interval=1",
		"--mysql-ignore-errors=1213,1020", "run")...)
	var out bytes.Buffer
	bench.Stdout, bench.Stderr = &out, &out
	if err := bench.Start(); err != nil {
		t.Fatal(err)
	}
	benchDone := make(chan error, 1)
	go func() { benchDone <- bench.Wait() }()
	stopBench := func() {
		bench.Process.Signal(os.Interrupt)
		select {
		case <-benchDone:
		case <-time.After(10 * time.Second):
			bench.Process.Kill()
			<-benchDone
		}
	}
	defer func() {
		if bench.ProcessState == nil {
			stopBench()
		}
	}()
	st := waitPhase(t, web2.URL, "grow", move.PhaseReady, 5*time.Minute)
	if len(st.State.Diffs) != 0 {
		t.Fatalf("verify found differences: %+v", st.State.Diffs)
	}
	t.Logf("ready: %d rows copied in %.1fs, %d changes applied, verified with no difference", st.State.RowsCopied, st.State.CopySeconds, st.State.ChangesApplied)
	// The copy went on from its checkpoint: at most a chunk per source was
	// copied twice.
	if st.State.RowsCopied > int64(rows)+2*chunk {
		t.Fatalf("%d rows copied for a table of %d: the resumed copy started over", st.State.RowsCopied, rows)
	}
	select {
	case <-benchDone:
		t.Fatalf("sysbench stopped during the copy:\n%s", out.String())
	default:
	}

	if code, body := admin(t, web2.URL, "POST", "/admin/workflows/grow/cutover", nil, &st); code != 200 {
		t.Fatalf("cutover: %d %s", code, body)
	}
	if st.State.Phase != move.PhaseSwitched {
		t.Fatalf("after cutover: phase %s", st.State.Phase)
	}
	t.Logf("cutover: pause %.1f ms after %d attempts", st.State.PauseMillis, st.State.Cutovers)
	time.Sleep(3 * time.Second) // sysbench runs on under the new rule
	select {
	case <-benchDone:
		t.Fatalf("sysbench stopped at the cutover:\n%s", out.String())
	default:
	}
	// The new subtables serve the statements now: the old ones get only
	// the reverse stream's writes.
	db := openDB(t, p2.dsn("sbtest", ""))
	mustExec(t, db, "INSERT INTO sbtest1 (id, k, c, pad) VALUES (5000001, 1, 'after cutover', 'x')")
	if got := queryValue(t, openDB(t, directDSN(c.Servers[0], "sbtest", "")), "SELECT COUNT(*) FROM sbtest1_g1_0001 WHERE id = 5000001"); got != "1" {
		t.Fatalf("the row written after the cutover is not in its new subtable (5000001 mod 8 = 1 on node1): %s", got)
	}
	stopBench()
	// sysbench stops at its first error it does not ignore; it ran until
	// stopped, so there was none. Its reports count the deadlocks it ignores.
	if strings.Contains(out.String(), "FATAL") {
		t.Fatalf("sysbench reported errors:\n%s", out.String())
	}
	t.Logf("sysbench through the reshard: %s; statements held at the cutover: %d", benchSummary(out.String()), p2.srv.Stats().HeldStatements)

	// Reference: the proxy's own answer equals the new layout's rows, and
	// the reverse stream brings the old layout to the same rows.
	var proxyRows int64
	if err := db.QueryRow("SELECT COUNT(*) FROM sbtest1").Scan(&proxyRows); err != nil {
		t.Fatal(err)
	}
	newRows, newSum := tableSum(t, c, newLayout)
	if newRows != proxyRows {
		t.Fatalf("the proxy counts %d rows, the new subtables hold %d", proxyRows, newRows)
	}
	// The old subtables are fenced (renamed) since the cutover; the
	// reverse stream writes to them under their fenced names.
	fencedLayout := map[int][]string{0: {move.FencedName("sbtest1_0000")}, 1: {move.FencedName("sbtest1_0001")}}
	eventually(t, 30*time.Second, "the old layout to equal the new one", func() bool {
		r, s := tableSum(t, c, fencedLayout)
		return r == newRows && s == newSum
	})
	t.Logf("after the run: %d rows, checksum %s, in both layouts", newRows, newSum)

	// Rollback: the old layout serves again, with every write.
	mustExec(t, db, "UPDATE sbtest1 SET c = 'before rollback' WHERE id = 5000001")
	if code, body := admin(t, web2.URL, "POST", "/admin/workflows/grow/rollback", nil, &st); code != 200 {
		t.Fatalf("rollback: %d %s", code, body)
	}
	if st.State.Phase != move.PhaseRolledBack {
		t.Fatalf("after rollback: phase %s", st.State.Phase)
	}
	if got := queryValue(t, db, "SELECT c FROM sbtest1 WHERE id = 5000001"); got != "before rollback" {
		t.Fatalf("after the rollback the last write reads %q", got)
	}
	if got := queryValue(t, openDB(t, directDSN(c.Servers[1], "sbtest", "")), "SELECT c FROM sbtest1_0001 WHERE id = 5000001"); got != "before rollback" {
		t.Fatalf("the old subtable has %q", got)
	}
	oldRows, oldSum := tableSum(t, c, oldLayout)
	if oldRows != newRows || oldSum == "" {
		t.Fatalf("after rollback the old layout has %d rows, want %d", oldRows, newRows)
	}
	if got := queryValue(t, db, "SELECT COUNT(*) FROM sbtest1"); got != strconv.FormatInt(newRows, 10) {
		t.Fatalf("after rollback the proxy counts %s rows, want %d", got, newRows)
	}
}

// workflowFromStore reads the only workflow from the sidecar (node1).
func workflowFromStore(t *testing.T, c *mariadbtest.Cluster) move.Workflow {
	t.Helper()
	var spec, state string
	if err := openDB(t, directDSN(c.Servers[0], "", "")).QueryRow("SELECT spec, state FROM shardgate_sidecar.move_workflows").Scan(&spec, &state); err != nil {
		t.Fatal(err)
	}
	var w move.Workflow
	if err := json.Unmarshal([]byte(spec), &w.Spec); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(state), &w.State); err != nil {
		t.Fatal(err)
	}
	return w
}

// benchSummary adds up sysbench's per-second reports: transactions,
// ignored errors (deadlocks between its own threads) and reconnects.
func benchSummary(out string) string {
	var tps, errs, reconn float64
	var secs int
	for _, l := range strings.Split(out, "\n") {
		if !strings.Contains(l, " tps: ") {
			continue
		}
		secs++
		for _, f := range []struct {
			key string
			sum *float64
		}{{"tps: ", &tps}, {"err/s: ", &errs}, {"reconn/s: ", &reconn}} {
			if _, rest, ok := strings.Cut(l, f.key); ok {
				v, _ := strconv.ParseFloat(strings.Fields(rest)[0], 64)
				*f.sum += v
			}
		}
	}
	return fmt.Sprintf("%d s, %.0f transactions, %.0f ignored errors (deadlocks), %.0f reconnects", secs, tps, errs, reconn)
}

// TestImportFromStandalone: a table on a MariaDB server that is not behind
// the proxy is imported into a table sharded over two nodes while the
// application keeps writing to the standalone server; the proxy is stopped
// during the copy and a new one resumes it; the workflow says
// when it is in sync (verified, no difference); the application stops
// there, complete applies the rest, and the sharded table then holds
// exactly the standalone table's rows, served through the proxy.
func TestImportFromStandalone(t *testing.T) {
	c, cfg := moveCluster(t)
	cfg.Schemas[0].Shard = []config.ShardRule{{DB: "app", Table: "sbtest1", Key: "id", Type: "hash", Nodes: []string{"node1", "node2"}, Locations: []int{2, 2}}}
	for _, s := range c.Servers[:2] {
		mustExec(t, openDB(t, directDSN(s, "", "")), "CREATE DATABASE app")
	}
	legacy := c.Servers[2] // the standalone server; its database is not behind the proxy
	mustExec(t, openDB(t, directDSN(legacy, "", "")), "CREATE DATABASE legacy")
	bin, err := exec.LookPath("sysbench")
	if err != nil {
		t.Fatal("sysbench is not installed: scripts/deps.sh sysbench (or apt-get install -y sysbench)")
	}
	host, port, _ := strings.Cut(legacy.Addr, ":")
	args := []string{"oltp_read_write", "--db-driver=mysql", "--mysql-host=" + host, "--mysql-port=" + port,
		"--mysql-user=" + legacy.User, "--mysql-password=" + legacy.Password, "--mysql-db=legacy", "--tables=1", "--table-size=50000"}
	if out, err := exec.Command(bin, append(slices.Clone(args), "prepare")...).CombinedOutput(); err != nil {
		t.Fatalf("sysbench prepare: %v\n%s", err, out)
	}
	p := startProxy(t, cfg)
	web := httptest.NewServer(p.srv.AdminHandler())
	defer web.Close()

	// The application writes to the standalone server during the import.
	bench := exec.Command(bin, append(slices.Clone(args), "--threads=2", "--time=0", "--events=0", "--report-interval=1", "run")...)
	var out bytes.Buffer
	bench.Stdout, bench.Stderr = &out, &out
	if err := bench.Start(); err != nil {
		t.Fatal(err)
	}
	benchDone := make(chan error, 1)
	go func() { benchDone <- bench.Wait() }()
	stopped := false
	stopBench := func() {
		if stopped {
			return
		}
		stopped = true
		bench.Process.Signal(os.Interrupt)
		select {
		case <-benchDone:
		case <-time.After(10 * time.Second):
			bench.Process.Kill()
			<-benchDone
		}
	}
	defer stopBench()

	// A slow copy, so that the proxy can be stopped in the middle of it.
	req := map[string]any{"kind": "import", "table": "app.sbtest1", "name": "imp",
		"source": map[string]string{"addr": legacy.Addr, "user": legacy.User, "password": legacy.Password}, "source_table": "legacy.sbtest1",
		"options": map[string]any{"CopyWorkers": 1, "BatchRows": 100}}
	if code, body := admin(t, web.URL, "POST", "/admin/workflows", req, nil); code != 200 {
		t.Fatalf("start: %d %s", code, body)
	}
	deadline := time.Now().Add(time.Minute)
	for workflowFromStore(t, c).State.RowsCopied == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no chunk checkpointed in a minute")
		}
		time.Sleep(20 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	if err := p.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	web.Close()
	if ws := workflowFromStore(t, c); ws.State.Phase != move.PhaseCopying || ws.State.RowsCopied >= 50000 {
		t.Fatalf("after the stop: phase %s, %d rows copied; want the copy interrupted", ws.State.Phase, ws.State.RowsCopied)
	}
	// A new proxy resumes the import.
	p = startProxy(t, cfg)
	web = httptest.NewServer(p.srv.AdminHandler())
	defer web.Close()
	st := waitPhase(t, web.URL, "imp", move.PhaseReady, 3*time.Minute)
	if st.State.RowsCopied > 50000+2*1000 { // chunks of at least 1 000 rows
		t.Fatalf("%d rows copied for 50000: the resumed copy started over", st.State.RowsCopied)
	}
	if len(st.State.Diffs) != 0 {
		t.Fatalf("verify found differences: %+v", st.State.Diffs)
	}
	t.Logf("in sync: %d rows copied in %.1fs, %d changes applied, %d rows verified", st.State.RowsCopied, st.State.CopySeconds, st.State.ChangesApplied, st.State.VerifyRows)
	time.Sleep(time.Second) // more writes to catch up with
	// The application moves to the proxy: it stops writing to the
	// standalone server, and complete applies what is left.
	stopBench()
	if strings.Contains(out.String(), "FATAL") {
		t.Fatalf("sysbench on the standalone server failed:\n%s", out.String())
	}
	if code, body := admin(t, web.URL, "POST", "/admin/workflows/imp/complete", nil, &st); code != 200 {
		t.Fatalf("complete: %d %s", code, body)
	}
	if st.State.Phase != move.PhaseCompleted {
		t.Fatalf("after complete: phase %s", st.State.Phase)
	}
	var wantRows, wantSum int64
	if err := openDB(t, directDSN(legacy, "legacy", "")).QueryRow("SELECT COUNT(*), SUM(CRC32(CONCAT_WS('|', id, k, c, pad))) FROM sbtest1").Scan(&wantRows, &wantSum); err != nil {
		t.Fatal(err)
	}
	db := openDB(t, p.dsn("app", ""))
	var gotRows, gotSum int64
	if err := db.QueryRow("SELECT COUNT(*), SUM(CRC32(CONCAT_WS('|', id, k, c, pad))) FROM sbtest1").Scan(&gotRows, &gotSum); err != nil {
		t.Fatal(err)
	}
	if gotRows != wantRows || gotSum != wantSum {
		t.Fatalf("through the proxy: %d rows, checksum %d; the standalone table: %d rows, checksum %d", gotRows, gotSum, wantRows, wantSum)
	}
	t.Logf("imported: %d rows, checksum %d, equal through the proxy; the application's run: %s", gotRows, gotSum, benchSummary(out.String()))
	mustExec(t, db, "UPDATE sbtest1 SET c = 'through the proxy' WHERE id = 7")
	if got := queryValue(t, db, "SELECT c FROM sbtest1 WHERE id = 7"); got != "through the proxy" {
		t.Fatalf("read back %q", got)
	}
}

// TestReshardAdminSQL: the admin SQL of data movement, for admin_user only:
// a reshard started, watched with SHOW WORKFLOW STATUS, cut over and
// completed; its errors name the cause.
func TestReshardAdminSQL(t *testing.T) {
	servers := backends(t)
	cfg := newConfig(t, servers...)
	for _, s := range servers {
		mustExec(t, openDB(t, directDSN(s, "", "")), "DROP DATABASE IF EXISTS mvsql", "CREATE DATABASE mvsql")
	}
	cfg.Schemas[0].Shard = []config.ShardRule{{DB: "mvsql", Table: "t", Key: "id", Type: "hash", Nodes: []string{"node1", "node2"}, Locations: []int{1, 1}}}
	cfg.Users = append(cfg.Users, config.User{User: "adm", Password: appPassword})
	cfg.Schemas = append(cfg.Schemas, config.Schema{User: "adm", Nodes: []string{"node1"}, Default: "node1"})
	cfg.AdminUser = "adm"
	cfg.Sidecar = config.Sidecar{Node: "node1", DB: "mvsql_sidecar"}
	p := startProxy(t, cfg)
	app := openDB(t, p.dsn("mvsql", ""))
	adm := openDB(t, userDSN("adm", appPassword, p.addr, "", ""))
	mustExec(t, app, "CREATE TABLE t (id INT PRIMARY KEY, v INT)")
	for i := 0; i < 2000; i += 100 {
		var vals []string
		for j := i; j < i+100; j++ {
			vals = append(vals, fmt.Sprintf("(%d, %d)", j, j))
		}
		mustExec(t, app, "INSERT INTO t VALUES "+strings.Join(vals, ","))
	}
	_, err := app.Exec("admin reshard(opt,table,nodes,locations) values('start','mvsql.t','node1,node2','2,2')")
	wantSQLError(t, err, 1227, "42000")
	_, err = adm.Exec("admin reshard(opt,table,nodes,locations) values('start','mvsql.t','node1,node9','2,2')")
	if me := wantSQLError(t, err, 1210, "HY000"); !strings.Contains(me.Message, "node9") {
		t.Errorf("an unknown node: %s", me.Message)
	}
	mustExec(t, adm, "admin reshard(opt,table,nodes,locations) values('start','mvsql.t','node1,node2','2,2')")
	var name string
	eventually(t, time.Minute, "the workflow to be ready", func() bool {
		rows := queryStrings(t, adm, "show workflow status")
		if len(rows) != 1 {
			return false
		}
		name = rows[0][0]
		return rows[0][3] == move.PhaseReady && rows[0][8] == "0"
	})
	_, err = adm.Exec("admin workflow(opt,name) values('complete','" + name + "')")
	if me := wantSQLError(t, err, 1210, "HY000"); !strings.Contains(me.Message, "has not cut over yet") {
		t.Errorf("complete before the cutover: %s", me.Message)
	}
	mustExec(t, adm, "admin workflow(opt,name) values('cutover','"+name+"')")
	mustExec(t, app, "UPDATE t SET v = -1 WHERE id = 6") // 6 mod 4 = 2
	if got := queryValue(t, openDB(t, directDSN(servers[1], "mvsql", "")), "SELECT v FROM t_g1_0002 WHERE id = 6"); got != "-1" {
		t.Fatalf("after the cutover the write is not in its new subtable: v = %s", got)
	}
	mustExec(t, adm, "admin workflow(opt,name) values('complete','"+name+"')")
	if got := queryStrings(t, adm, "show workflow status"); got[0][3] != move.PhaseCompleted || got[0][10] != "node1:t_g1_0000,node1:t_g1_0001,node2:t_g1_0002,node2:t_g1_0003" {
		t.Fatalf("after complete: %q", got)
	}
	if got := queryValue(t, app, "SELECT COUNT(*) FROM t"); got != "2000" {
		t.Fatalf("the proxy counts %s rows", got)
	}
	// complete dropped the old subtables, fenced since the cutover.
	for _, s := range servers[:2] {
		if got := queryValue(t, openDB(t, directDSN(s, "", "")), "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'mvsql' AND TABLE_NAME NOT LIKE 't\\_g1\\_%'"); got != "0" {
			t.Fatalf("after complete %s tables other than the new subtables are left on %s", got, s.Addr)
		}
	}
}
