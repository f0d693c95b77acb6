package server_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/internal/mariadbtest"
	"github.com/shardgate/shardgate/proxy/session"
)

// xaCluster starts three servers of the test's own and a proxy in
// transaction_mode xa over them, with xa_t.acct hash-sharded on id into
// one subtable per node (acct_0000 on node1: ids 3, 6, 9; acct_0001 on
// node2: 1, 4, 7; acct_0002 on node3: 2, 5, 8), balance 100 each, and the
// sidecar on node1. Recovery runs every 200 ms.
func xaCluster(t *testing.T) (*mariadbtest.Cluster, *proxy, *sql.DB, []*sql.DB) {
	t.Helper()
	backends(t) // skips under -short
	c, err := mariadbtest.Start("", 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop() })
	cfg := newConfig(t, c.Servers...)
	cfg.TransactionMode = config.TransactionXA
	cfg.Schemas[0].Shard = []config.ShardRule{{DB: "xa_t", Table: "acct", Key: "id", Type: "hash",
		Nodes: []string{"node1", "node2", "node3"}, Locations: []int{1, 1, 1}}}
	cfg.Sidecar = config.Sidecar{Node: "node1", DB: "shardgate_sidecar"}
	cfg.XA = config.XAOptions{RecoveryInterval: 200 * time.Millisecond, Lease: 2 * time.Second}
	cfg.Backend.CommandTimeout = 2 * time.Second // a paused sidecar fails the decision quickly
	var direct []*sql.DB
	for _, s := range c.Servers {
		d := openDB(t, directDSN(s, "", ""))
		mustExec(t, d, "CREATE DATABASE xa_t")
		direct = append(direct, d)
	}
	p := startProxy(t, cfg)
	db := openDB(t, p.dsn("xa_t", ""))
	mustExec(t, db, "CREATE TABLE acct (id INT PRIMARY KEY, balance INT NOT NULL)",
		"INSERT INTO acct VALUES (1,100),(2,100),(3,100),(4,100),(5,100),(6,100),(7,100),(8,100),(9,100)")
	return c, p, db, direct
}

// xaBalances reads balances of ids 1..9 through the proxy, in id order.
func xaBalances(t *testing.T, db querier) string {
	t.Helper()
	var b []string
	for _, r := range queryStrings(t, db, "SELECT balance FROM acct ORDER BY id") {
		b = append(b, r[0])
	}
	return strings.Join(b, ",")
}

// prepared lists what XA RECOVER shows on each server.
func prepared(t *testing.T, direct []*sql.DB) string {
	t.Helper()
	var out []string
	for i, d := range direct {
		for _, r := range queryStrings(t, d, "XA RECOVER") {
			out = append(out, fmt.Sprintf("node%d:%s", i+1, r[3]))
		}
	}
	return strings.Join(out, " ")
}

// TestXATransactions: in transaction_mode xa, transactions across 2 and 3
// nodes commit and roll back on all of them; a transaction on one node
// commits in one phase (no decision written); savepoints, autocommit=0 and
// prepared statements work as in a plain transaction; a fenced instance
// cannot commit (everything rolls back, error 1402); a node lost before
// PREPARE rolls everything back; a node lost after the decision is
// committed by recovery when it returns. Nothing stays prepared, and the
// decision log empties.
func TestXATransactions(t *testing.T) {
	c, p, db, direct := xaCluster(t)
	co := p.srv.XA()
	const start = "100,100,100,100,100,100,100,100,100"
	check := func(t *testing.T, want string) {
		t.Helper()
		if got := xaBalances(t, db); got != want {
			t.Fatalf("balances %s, want %s", got, want)
		}
		if got := prepared(t, direct); got != "" {
			t.Fatalf("branches left prepared: %s", got)
		}
	}
	reset := func(t *testing.T) {
		mustExec(t, db, "UPDATE acct SET balance = 100")
	}
	decided := func() uint64 { return co.Stats().Decided }

	t.Run("commit on 2 and 3 nodes", func(t *testing.T) {
		defer reset(t)
		d0 := decided()
		cn := conn(t, db)
		mustExec(t, cn, "BEGIN", "UPDATE acct SET balance = balance - 10 WHERE id = 3", "UPDATE acct SET balance = balance + 10 WHERE id = 1", "COMMIT")
		check(t, "110,100,90,100,100,100,100,100,100")
		mustExec(t, cn, "START TRANSACTION", "UPDATE acct SET balance = balance - 30 WHERE id = 3",
			"UPDATE acct SET balance = balance + 20 WHERE id = 1", "UPDATE acct SET balance = balance + 10 WHERE id = 2", "COMMIT")
		check(t, "130,110,60,100,100,100,100,100,100")
		if got := decided() - d0; got != 2 {
			t.Errorf("%d commit decisions written, want 2", got)
		}
	})
	t.Run("rollback on 2 and 3 nodes", func(t *testing.T) {
		cn := conn(t, db)
		mustExec(t, cn, "BEGIN", "UPDATE acct SET balance = 0 WHERE id = 3", "UPDATE acct SET balance = 0 WHERE id = 1", "ROLLBACK")
		check(t, start)
		mustExec(t, cn, "BEGIN", "UPDATE acct SET balance = 0 WHERE id IN (1, 2, 3)")
		if got := xaBalances(t, cn); got != "0,0,0,100,100,100,100,100,100" {
			t.Errorf("inside the transaction: %s", got)
		}
		mustExec(t, cn, "ROLLBACK")
		check(t, start)
	})
	t.Run("one node commits in one phase", func(t *testing.T) {
		defer reset(t)
		d0 := decided()
		cn := conn(t, db)
		mustExec(t, cn, "BEGIN", "UPDATE acct SET balance = 1 WHERE id = 3", "UPDATE acct SET balance = 2 WHERE id = 6", "COMMIT")
		check(t, "100,100,1,100,100,2,100,100,100")
		if got := decided() - d0; got != 0 {
			t.Errorf("%d decisions written for a one-node transaction, want 0", got)
		}
	})
	t.Run("savepoints", func(t *testing.T) {
		defer reset(t)
		cn := conn(t, db)
		mustExec(t, cn, "BEGIN", "UPDATE acct SET balance = 1 WHERE id = 3", "SAVEPOINT a",
			"UPDATE acct SET balance = 2 WHERE id = 1", "UPDATE acct SET balance = 3 WHERE id = 2", "ROLLBACK TO SAVEPOINT a",
			"UPDATE acct SET balance = 4 WHERE id = 4", "SAVEPOINT b", "UPDATE acct SET balance = 5 WHERE id = 5", "RELEASE SAVEPOINT b", "COMMIT")
		check(t, "100,100,1,4,5,100,100,100,100")
	})
	t.Run("autocommit=0", func(t *testing.T) {
		defer reset(t)
		cn := conn(t, db)
		mustExec(t, cn, "SET autocommit = 0", "UPDATE acct SET balance = 7 WHERE id = 3", "UPDATE acct SET balance = 7 WHERE id = 1", "COMMIT",
			"UPDATE acct SET balance = 8 WHERE id = 3", "UPDATE acct SET balance = 8 WHERE id = 2", "ROLLBACK",
			"UPDATE acct SET balance = 9 WHERE id = 5", "UPDATE acct SET balance = 9 WHERE id = 6", "COMMIT", "SET autocommit = 1")
		check(t, "7,100,7,100,9,9,100,100,100")
	})
	t.Run("prepared statements", func(t *testing.T) {
		defer reset(t)
		tx, err := db.Begin()
		if err != nil {
			t.Fatal(err)
		}
		st, err := tx.Prepare("UPDATE acct SET balance = balance + ? WHERE id = ?")
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range [][2]int{{-5, 3}, {3, 1}, {2, 2}} {
			if _, err := st.Exec(a[0], a[1]); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		check(t, "103,102,95,100,100,100,100,100,100")
	})
	t.Run("one statement on several nodes", func(t *testing.T) {
		defer reset(t)
		d0 := decided()
		mustExec(t, db, "UPDATE acct SET balance = balance + 1")
		check(t, "101,101,101,101,101,101,101,101,101")
		if got := decided() - d0; got != 1 {
			t.Errorf("%d commit decisions for one UPDATE on three nodes, want 1", got)
		}
		// id 10 goes to node2, id 2 (which exists) to node3: node2's
		// insert is undone when node3's fails.
		_, err := db.Exec("INSERT INTO acct VALUES (10, 1), (2, 5)")
		me := wantSQLError(t, err, 1062, "23000")
		if !strings.Contains(me.Message, "rolled back on every node") {
			t.Errorf("error message %q does not say the statement was rolled back", me.Message)
		}
		if got := queryValue(t, db, "SELECT COUNT(*) FROM acct WHERE id = 10"); got != "0" {
			t.Errorf("the row node2 inserted survived the failed statement")
		}
		check(t, "101,101,101,101,101,101,101,101,101")
	})
	t.Run("LOAD DATA and a batch on several nodes", func(t *testing.T) {
		defer reset(t)
		defer mustExec(t, db, "DELETE FROM acct WHERE id >= 10")
		load := func(db execer, rows string) error {
			file := filepath.Join(t.TempDir(), "acct.csv")
			if err := os.WriteFile(file, []byte(rows), 0o600); err != nil {
				t.Fatal(err)
			}
			gomysql.RegisterLocalFile(file)
			defer gomysql.DeregisterLocalFile(file)
			_, err := db.ExecContext(context.Background(), "LOAD DATA LOCAL INFILE '"+file+"' INTO TABLE acct FIELDS TERMINATED BY ','")
			return err
		}
		// ids 10, 11, 12 go to node2, node3, node1: one decision.
		d0 := decided()
		if err := load(db, "10,1\n11,1\n12,1\n"); err != nil {
			t.Fatal(err)
		}
		if got := decided() - d0; got != 1 {
			t.Errorf("%d commit decisions for one LOAD DATA on three nodes, want 1", got)
		}
		if got := queryValue(t, db, "SELECT COUNT(*) FROM acct WHERE id >= 10"); got != "3" {
			t.Errorf("%s rows loaded, want 3", got)
		}
		// LOCAL loads skip duplicates (as IGNORE), but not a lock wait
		// timeout: with id 2's row (node3) locked, the lines for node1 and
		// node2 are undone.
		locker, loader := conn(t, db), conn(t, db)
		mustExec(t, locker, "BEGIN", "UPDATE acct SET balance = 2 WHERE id = 2")
		mustExec(t, loader, "SET innodb_lock_wait_timeout = 1")
		me := wantSQLError(t, load(loader, "13,1\n14,1\n15,1\n2,1\n"), 1205, "HY000")
		mustExec(t, locker, "ROLLBACK")
		if !strings.Contains(me.Message, "rolled back on every node") {
			t.Errorf("error message %q does not say the load was rolled back", me.Message)
		}
		if got := queryValue(t, db, "SELECT COUNT(*) FROM acct WHERE id >= 13"); got != "0" {
			t.Errorf("%s rows of the failed load survived it", got)
		}
		// A batch: each statement is its own transaction, as on one
		// server. The first commits; the second fails on node3 and its
		// row on node2 is undone.
		mdb := openDB(t, p.dsn("xa_t", "multiStatements=true"))
		_, err := mdb.Exec("UPDATE acct SET balance = 7 WHERE id IN (1, 3); INSERT INTO acct VALUES (16, 1), (2, 5)")
		wantSQLError(t, err, 1062, "23000")
		if got := queryValue(t, db, "SELECT COUNT(*) FROM acct WHERE id = 16"); got != "0" {
			t.Errorf("the batch's failed INSERT left its row on node2")
		}
		mustExec(t, db, "DELETE FROM acct WHERE id >= 10")
		check(t, "7,100,7,100,100,100,100,100,100")
	})
	t.Run("autocommit=0 and statements that commit implicitly", func(t *testing.T) {
		defer reset(t)
		cn := conn(t, db)
		// SET autocommit = 0 again does not commit; ROLLBACK undoes.
		mustExec(t, cn, "SET autocommit = 0", "UPDATE acct SET balance = 1 WHERE id = 3", "UPDATE acct SET balance = 1 WHERE id = 1",
			"SET autocommit = 0", "ROLLBACK")
		check(t, start)
		// DDL commits the open transaction, then runs (no XA branch).
		mustExec(t, cn, "UPDATE acct SET balance = 2 WHERE id = 3", "UPDATE acct SET balance = 2 WHERE id = 1",
			"CREATE TABLE ddl_in_xa (id INT PRIMARY KEY)", "ROLLBACK")
		check(t, "2,100,2,100,100,100,100,100,100")
		mustExec(t, cn, "SET autocommit = 1", "BEGIN", "DROP TABLE ddl_in_xa", "UPDATE acct SET balance = 3 WHERE id = 3", "ROLLBACK")
		check(t, "2,100,3,100,100,100,100,100,100") // DROP ended the transaction: the UPDATE was autocommitted
		// SET autocommit = 1 commits the open transaction, two-phase.
		d0 := decided()
		mustExec(t, cn, "SET autocommit = 0", "UPDATE acct SET balance = 4 WHERE id = 3", "UPDATE acct SET balance = 4 WHERE id = 2",
			"SET autocommit = 1", "ROLLBACK")
		check(t, "2,4,4,100,100,100,100,100,100")
		if got := decided() - d0; got != 1 {
			t.Errorf("%d decisions for SET autocommit = 1 over two nodes, want 1", got)
		}
	})
	t.Run("read only transactions are not XA", func(t *testing.T) {
		s0 := co.Stats()
		cn := conn(t, db)
		mustExec(t, cn, "START TRANSACTION READ ONLY")
		if got := queryValue(t, cn, "SELECT SUM(balance) FROM acct"); got != "900" {
			t.Errorf("SUM %s", got)
		}
		mustExec(t, cn, "COMMIT")
		if s1 := co.Stats(); s1.OnePhase != s0.OnePhase || s1.Decided != s0.Decided {
			t.Errorf("a READ ONLY transaction committed as XA: %+v, then %+v", s0, s1)
		}
	})
	t.Run("deadlock ends the transaction on every node", func(t *testing.T) {
		defer reset(t)
		a, b := conn(t, db), conn(t, db)
		mustExec(t, a, "BEGIN", "UPDATE acct SET balance = 1 WHERE id = 1", "UPDATE acct SET balance = 1 WHERE id = 3")
		mustExec(t, b, "BEGIN", "UPDATE acct SET balance = 2 WHERE id = 6")
		victim, survivor := deadlock(t, direct[0], a, b, "UPDATE acct SET balance = 1 WHERE id = 6", "UPDATE acct SET balance = 2 WHERE id = 3")
		// The victim's transaction is over on every node: node2's row is
		// back, and the victim can begin again at once.
		if victim == a {
			if got := queryValue(t, direct[1], "SELECT balance FROM xa_t.acct_0001 WHERE id = 1"); got != "100" {
				t.Errorf("node2's part of the deadlocked transaction: balance %s, want 100 (rolled back)", got)
			}
		}
		mustExec(t, victim, "BEGIN", "ROLLBACK")
		mustExec(t, survivor, "COMMIT")
		if got := prepared(t, direct); got != "" {
			t.Fatalf("branches left prepared: %s", got)
		}
	})
	t.Run("a node lost mid-transaction after a SET", func(t *testing.T) {
		defer reset(t)
		cn := conn(t, db)
		mustExec(t, cn, "BEGIN", "UPDATE acct SET balance = 0 WHERE id = 1", "SET sql_mode = 'STRICT_ALL_TABLES'")
		// InnoDB refreshes information_schema.innodb_trx only when it was
		// last read more than 100 ms ago: wait that out, or the view may
		// predate the transaction.
		time.Sleep(150 * time.Millisecond)
		var id string
		if err := direct[1].QueryRow("SELECT trx_mysql_thread_id FROM information_schema.innodb_trx").Scan(&id); err != nil {
			t.Fatal(err)
		}
		mustExec(t, direct[1], "KILL "+id)
		if _, err := cn.ExecContext(context.Background(), "UPDATE acct SET balance = 0 WHERE id = 4"); err == nil {
			t.Fatal("a statement on the lost connection succeeded")
		}
		// The session's transaction is gone with it: nothing of it may
		// commit, whatever the client sends next.
		cn.ExecContext(context.Background(), "UPDATE acct SET balance = 0 WHERE id = 3")
		cn.ExecContext(context.Background(), "COMMIT")
		cn.Close()
		check(t, start)
	})
	// A branch's connection lost while the session is idle is found by the
	// next statement that reaches it, whatever that statement is; nothing
	// of the transaction may commit after that, whatever the client sends.
	for _, tc := range []struct {
		name, setup, finds string
		multi              bool
	}{
		{"a lost node found by a write on several nodes", "UPDATE acct SET balance = 0 WHERE id = 3", "UPDATE acct SET balance = 5 WHERE id IN (3, 4)", false},
		{"a lost node found by a batch", "", "UPDATE acct SET balance = 0 WHERE id = 4; UPDATE acct SET balance = 0 WHERE id = 7", true},
		{"a lost node found after UNLOCK TABLES", "UNLOCK TABLES", "UPDATE acct SET balance = 0 WHERE id = 4", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer reset(t)
			cdb := db
			if tc.multi {
				cdb = openDB(t, p.dsn("xa_t", "multiStatements=true"))
			}
			cn := conn(t, cdb)
			mustExec(t, cn, "BEGIN", "UPDATE acct SET balance = 0 WHERE id = 1") // node2
			if tc.setup != "" {
				mustExec(t, cn, tc.setup)
			}
			time.Sleep(150 * time.Millisecond) // innodb_trx is refreshed after 100 ms unread
			var id string
			if err := direct[1].QueryRow("SELECT trx_mysql_thread_id FROM information_schema.innodb_trx").Scan(&id); err != nil {
				t.Fatal(err)
			}
			mustExec(t, direct[1], "KILL "+id)
			if _, err := cn.ExecContext(context.Background(), tc.finds); err == nil {
				t.Fatalf("%q succeeded on the lost connection", tc.finds)
			}
			cn.ExecContext(context.Background(), "UPDATE acct SET balance = 0 WHERE id = 6") // node1
			if _, err := cn.ExecContext(context.Background(), "COMMIT"); err == nil {
				t.Errorf("COMMIT succeeded after node2's part was lost")
			}
			check(t, start)
		})
	}
	t.Run("fenced instance cannot commit", func(t *testing.T) {
		defer reset(t)
		mustExec(t, direct[0], fmt.Sprintf("UPDATE shardgate_sidecar.xa_instances SET fenced = NOW(6) WHERE id = %d", co.Instance()))
		cn := conn(t, db)
		mustExec(t, cn, "BEGIN", "UPDATE acct SET balance = 0 WHERE id = 3", "UPDATE acct SET balance = 0 WHERE id = 1")
		_, err := cn.ExecContext(context.Background(), "COMMIT")
		wantSQLError(t, err, 1402, "XA100")
		check(t, start)
		// The next heartbeat registers the proxy again.
		old := co.Instance()
		eventually(t, 10*time.Second, "a new registration", func() bool { return co.Instance() != old })
		mustExec(t, cn, "BEGIN", "UPDATE acct SET balance = 1 WHERE id = 3", "UPDATE acct SET balance = 1 WHERE id = 1", "COMMIT")
		check(t, "1,100,1,100,100,100,100,100,100")
	})
	// The sidecar (node1) stops answering once both branches are prepared:
	// the decision can be neither written nor read, the client is told so
	// (1180), the branches stay prepared, and recovery finishes them all
	// the same way once it answers again.
	t.Run("sidecar unreachable at the decision", func(t *testing.T) {
		var once sync.Once
		h := func(stage, node string) {
			if stage == session.XABeforeDecision {
				once.Do(func() { c.Servers[0].Pause() })
			}
		}
		p.srv.Knobs().XAStage.Store(&h)
		defer p.srv.Knobs().XAStage.Store(nil)
		cn := conn(t, db)
		mustExec(t, cn, "BEGIN", "UPDATE acct SET balance = 0 WHERE id = 1", "UPDATE acct SET balance = 0 WHERE id = 2")
		_, err := cn.ExecContext(context.Background(), "COMMIT")
		p.srv.Knobs().XAStage.Store(nil)
		c.Servers[0].Resume()
		me := wantSQLError(t, err, 1180, "HY000")
		if !strings.Contains(me.Message, "recovery commits or rolls it back") {
			t.Errorf("message %q", me.Message)
		}
		cn.Close()
		// The decision insert may still have run once the server went on
		// (it had the statement): recovery finishes both branches the
		// same way, whichever way that is.
		eventually(t, 15*time.Second, "recovery to finish the branches", func() bool {
			var n int
			for _, d := range direct {
				rows, err := d.Query("XA RECOVER")
				if err != nil {
					return false
				}
				for rows.Next() {
					n++
				}
				rows.Close()
			}
			return n == 0
		})
		if got := xaBalances(t, db); got != start && got != "0,0,100,100,100,100,100,100,100" {
			t.Fatalf("balances %s: the transaction is half committed", got)
		}
		reset(t)
	})
	t.Run("node lost before prepare", func(t *testing.T) {
		cn := conn(t, db)
		mustExec(t, cn, "BEGIN", "UPDATE acct SET balance = 0 WHERE id = 3", "UPDATE acct SET balance = 0 WHERE id = 1")
		if err := c.Servers[1].Kill(); err != nil {
			t.Fatal(err)
		}
		if _, err := cn.ExecContext(context.Background(), "COMMIT"); err == nil {
			t.Fatal("COMMIT succeeded with node2 gone before PREPARE")
		}
		cn.Close()
		if err := c.Servers[1].Restart(); err != nil {
			t.Fatal(err)
		}
		eventually(t, 10*time.Second, "node2 up", func() bool { return db.QueryRow("SELECT COUNT(*) FROM acct").Scan(new(int)) == nil })
		check(t, start)
	})
	t.Run("node lost after the decision", func(t *testing.T) {
		defer reset(t)
		var once sync.Once
		h := func(stage, node string) {
			if stage == session.XABeforeCommit && node == "node2" {
				once.Do(func() { c.Servers[1].Kill() })
			}
		}
		p.srv.Knobs().XAStage.Store(&h)
		defer p.srv.Knobs().XAStage.Store(nil)
		cn := conn(t, db)
		mustExec(t, cn, "BEGIN", "UPDATE acct SET balance = 50 WHERE id = 3", "UPDATE acct SET balance = 150 WHERE id = 1",
			"UPDATE acct SET balance = 10 WHERE id = 2", "COMMIT") // reported committed
		p.srv.Knobs().XAStage.Store(nil)
		cn.Close()
		if got := queryValue(t, direct[0], "SELECT balance FROM xa_t.acct_0000 WHERE id = 3"); got != "50" {
			t.Errorf("node1 after COMMIT: %s, want 50", got)
		}
		if got := queryValue(t, direct[2], "SELECT balance FROM xa_t.acct_0002 WHERE id = 2"); got != "10" {
			t.Errorf("node3 after COMMIT: %s, want 10", got)
		}
		if err := c.Servers[1].Restart(); err != nil {
			t.Fatal(err)
		}
		d1 := openDB(t, directDSN(c.Servers[1], "", ""))
		eventually(t, 15*time.Second, "recovery to commit node2's branch", func() bool {
			var v string
			return d1.QueryRow("SELECT balance FROM xa_t.acct_0001 WHERE id = 1").Scan(&v) == nil && v == "150"
		})
		eventually(t, 10*time.Second, "node2 up", func() bool { return db.QueryRow("SELECT COUNT(*) FROM acct").Scan(new(int)) == nil })
		direct[1] = d1
		check(t, "150,10,50,100,100,100,100,100,100")
	})
	// The Grafana dashboard's XA panel queries what /metrics exports.
	web := httptest.NewServer(p.srv.AdminHandler())
	defer web.Close()
	resp, err := http.Get(web.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	exposed, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	dash, err := os.ReadFile("../../etc/grafana-shardgate.json")
	if err != nil {
		t.Fatal(err)
	}
	names := regexp.MustCompile(`shardgate_xa_[a-z_]+`).FindAllString(string(dash), -1)
	if len(names) < 4 {
		t.Errorf("the dashboard queries %d XA metrics", len(names))
	}
	for _, name := range names {
		if !strings.Contains(string(exposed), "# TYPE "+name+" ") {
			t.Errorf("the dashboard queries %s, which /metrics does not export", name)
		}
	}
	if !strings.Contains(string(exposed), `shardgate_xa_recovered_branches_total{action="commit"} `) {
		t.Errorf("no recovered-branch count in /metrics")
	}
	eventually(t, 10*time.Second, "the decision log to empty", func() bool {
		return queryValue(t, direct[0], "SELECT COUNT(*) FROM shardgate_sidecar.xa_decisions") == "0"
	})
}
