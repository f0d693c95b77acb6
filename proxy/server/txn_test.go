package server_test

import (
	"database/sql"
	"strings"
	"testing"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/mysql"
)

// txnProxy starts a proxy over both servers with database txn_t whose
// table acct is hash-sharded on id into acct_0000..0003 (0000-0001 on
// node1, 0002-0003 on node2), loaded with ids 1..8 (balance 100), and
// table plain unsharded on node1. Ids 1, 5 live on node1 (subtable 1) and
// 2, 6 on node2 (subtable 2).
func txnProxy(t *testing.T, mode string) (*proxy, *sql.DB) {
	t.Helper()
	srvs := backends(t)
	cfg := newConfig(t, srvs[0], srvs[1])
	cfg.TransactionMode = mode
	cfg.Schemas[0].Shard = []config.ShardRule{{DB: "txn_t", Table: "acct", Key: "id", Type: "hash",
		Nodes: []string{"node1", "node2"}, Locations: []int{2, 2}}}
	p := startProxy(t, cfg)
	db := openDB(t, p.dsn("", ""))
	mustExec(t, db, "DROP DATABASE IF EXISTS txn_t", "CREATE DATABASE txn_t", "USE txn_t")
	c := conn(t, db)
	mustExec(t, c, "USE txn_t",
		"CREATE TABLE acct (id INT PRIMARY KEY, balance INT NOT NULL)",
		"CREATE TABLE plain (id INT PRIMARY KEY, note VARCHAR(20))",
		"INSERT INTO acct (id, balance) VALUES (1,100),(2,100),(3,100),(4,100),(5,100),(6,100),(7,100),(8,100)")
	c.Close()
	t.Cleanup(func() { db.Exec("DROP DATABASE IF EXISTS txn_t") })
	return p, openDB(t, p.dsn("txn_t", ""))
}

func balances(t *testing.T, db querier) string {
	t.Helper()
	return joinRows(queryStrings(t, db, "SELECT id, balance FROM acct WHERE id IN (1, 2, 5, 6) ORDER BY id"))
}

// TestTransactionAcrossNodes: in transaction_mode multi, a transaction
// reaches both nodes; reads inside it see its own writes on both (point
// reads and a merged aggregate over all subtables); ROLLBACK undoes both,
// COMMIT keeps both, savepoints work across nodes, and other sessions see
// nothing before COMMIT.
func TestTransactionAcrossNodes(t *testing.T) {
	p, db := txnProxy(t, config.TransactionMulti)
	const start = "1,100|2,100|5,100|6,100"
	t.Run("rollback", func(t *testing.T) {
		c := conn(t, db)
		mustExec(t, c, "BEGIN", "UPDATE acct SET balance = balance - 10 WHERE id = 1", "UPDATE acct SET balance = balance + 10 WHERE id = 2")
		if got := balances(t, c); got != "1,90|2,110|5,100|6,100" {
			t.Errorf("inside the transaction: %s", got)
		}
		if got := queryValue(t, c, "SELECT SUM(balance) FROM acct"); got != "800" {
			t.Errorf("merged SUM inside the transaction: %s", got)
		}
		if got := queryValue(t, c, "SELECT COUNT(*) FROM acct WHERE balance <> 100"); got != "2" {
			t.Errorf("merged COUNT inside the transaction sees %s changed rows, want 2", got)
		}
		if got := balances(t, db); got != start {
			t.Errorf("another session sees uncommitted changes: %s", got)
		}
		mustExec(t, c, "ROLLBACK")
		if got := balances(t, c); got != start {
			t.Errorf("after ROLLBACK: %s", got)
		}
	})

	t.Run("commit", func(t *testing.T) {
		c := conn(t, db)
		mustExec(t, c, "START TRANSACTION", "UPDATE acct SET balance = 50 WHERE id = 5", "UPDATE acct SET balance = 60 WHERE id = 6",
			"INSERT INTO plain (id, note) VALUES (1, 'in txn')", "COMMIT")
		if got := balances(t, db); got != "1,100|2,100|5,50|6,60" {
			t.Errorf("after COMMIT, another session sees %s", got)
		}
		if got := queryValue(t, db, "SELECT note FROM plain WHERE id = 1"); got != "in txn" {
			t.Errorf("unsharded row committed with the transaction: %s", got)
		}
		mustExec(t, c, "UPDATE acct SET balance = 100 WHERE id IN (5, 6)", "DELETE FROM plain")
	})

	t.Run("savepoints", func(t *testing.T) {
		c := conn(t, db)
		mustExec(t, c, "BEGIN", "UPDATE acct SET balance = 1 WHERE id = 1", "SAVEPOINT a",
			"UPDATE acct SET balance = 2 WHERE id = 2", // node2 joins after the savepoint
			"UPDATE acct SET balance = 3 WHERE id = 1",
			"ROLLBACK TO SAVEPOINT a")
		if got := balances(t, c); got != "1,1|2,100|5,100|6,100" {
			t.Errorf("after ROLLBACK TO SAVEPOINT: %s", got)
		}
		mustExec(t, c, "RELEASE SAVEPOINT a", "COMMIT")
		if got := balances(t, db); got != "1,1|2,100|5,100|6,100" {
			t.Errorf("after COMMIT: %s", got)
		}
		_, err := c.ExecContext(t.Context(), "ROLLBACK TO SAVEPOINT nosuch")
		wantSQLError(t, err, 1305, "42000")
		mustExec(t, c, "UPDATE acct SET balance = 100 WHERE id = 1")
	})

	t.Run("autocommit off", func(t *testing.T) {
		c := conn(t, db)
		mustExec(t, c, "SET autocommit = 0", "UPDATE acct SET balance = 7 WHERE id = 5", "UPDATE acct SET balance = 8 WHERE id = 6")
		// A plain cross-shard read is no error with autocommit off.
		if got := queryValue(t, c, "SELECT COUNT(*) FROM acct"); got != "8" {
			t.Errorf("COUNT(*) with autocommit off: %s", got)
		}
		if got := balances(t, db); got != "1,100|2,100|5,100|6,100" {
			t.Errorf("another session sees uncommitted changes: %s", got)
		}
		mustExec(t, c, "ROLLBACK")
		if got := balances(t, c); got != "1,100|2,100|5,100|6,100" {
			t.Errorf("after ROLLBACK with autocommit off: %s", got)
		}
		mustExec(t, c, "UPDATE acct SET balance = 9 WHERE id = 2", "COMMIT", "SET autocommit = 1")
		if got := balances(t, db); got != "1,100|2,9|5,100|6,100" {
			t.Errorf("after COMMIT with autocommit off: %s", got)
		}
		mustExec(t, c, "UPDATE acct SET balance = 100 WHERE id = 2")
	})

	t.Run("DDL commits", func(t *testing.T) {
		c := conn(t, db)
		mustExec(t, c, "BEGIN", "UPDATE acct SET balance = 11 WHERE id = 1", "UPDATE acct SET balance = 12 WHERE id = 2",
			"CREATE TABLE ddl_commits (x INT)", "ROLLBACK")
		if got := balances(t, db); got != "1,11|2,12|5,100|6,100" {
			t.Errorf("DDL did not commit the transaction on every node: %s", got)
		}
		mustExec(t, c, "DROP TABLE ddl_commits", "UPDATE acct SET balance = 100 WHERE id IN (1, 2)")
	})

	// The proxy answers BEGIN itself: its OK must carry
	// SERVER_STATUS_IN_TRANS, and COMMIT's must clear it.
	t.Run("status flags", func(t *testing.T) {
		r := dialRaw(t, p.addr)
		r.loginDB("txn_t", rawCaps)
		status := func(q string) uint16 {
			r.command(append([]byte{mysql.ComQuery}, q...))
			p := r.read()
			ok, err := mysql.ParseOK(p)
			if err != nil {
				t.Fatalf("%s: %s", q, describe(p))
			}
			return ok.Status
		}
		if st := status("BEGIN"); st&mysql.StatusInTrans == 0 {
			t.Errorf("BEGIN: status %#x lacks IN_TRANS", st)
		}
		if st := status("UPDATE acct SET balance = 100 WHERE id = 2"); st&mysql.StatusInTrans == 0 {
			t.Errorf("UPDATE in the transaction: status %#x lacks IN_TRANS", st)
		}
		if st := status("COMMIT"); st&mysql.StatusInTrans != 0 || st&mysql.StatusAutocommit == 0 {
			t.Errorf("COMMIT: status %#x", st)
		}
	})
}

// TestTransactionSingleMode: transaction_mode single refuses the statement
// that would take a transaction to a second node with 1235 naming both
// nodes, and the transaction stays usable.
func TestTransactionSingleMode(t *testing.T) {
	_, db := txnProxy(t, config.TransactionSingle)
	c := conn(t, db)
	mustExec(t, c, "BEGIN", "UPDATE acct SET balance = 1 WHERE id = 1")
	_, err := c.ExecContext(t.Context(), "UPDATE acct SET balance = 2 WHERE id = 2")
	me := wantSQLError(t, err, mysql.ErNotSupported, "42000")
	if !strings.Contains(me.Message, "node1") || !strings.Contains(me.Message, "node2") {
		t.Errorf("message does not name both nodes: %s", me.Message)
	}
	mustExec(t, c, "UPDATE acct SET balance = 5 WHERE id = 5", "COMMIT")
	if got := balances(t, db); got != "1,1|2,100|5,5|6,100" {
		t.Errorf("after COMMIT: %s", got)
	}
	// Outside a transaction both nodes are fine.
	mustExec(t, c, "UPDATE acct SET balance = 100 WHERE id IN (1, 2, 5)")
	if got := balances(t, db); got != "1,100|2,100|5,100|6,100" {
		t.Errorf("after the cleanup: %s", got)
	}
}

// TestPreparedOnShardedRefused: until binary prepared statements are routed,
// preparing one on a sharded table is refused with 1235 (it would run on
// the default node, against the wrong table); the same statement through
// the text protocol works, and prepared statements on unsharded tables
// still work.
func TestPreparedOnShardedRefused(t *testing.T) {
	p, db := txnProxy(t, config.TransactionMulti)
	_, err := db.Query("SELECT balance FROM acct WHERE id = ?", 2)
	me := wantSQLError(t, err, mysql.ErNotSupported, "42000")
	if !strings.Contains(me.Message, "acct") {
		t.Errorf("message does not name the table: %s", me.Message)
	}
	text := openDB(t, p.dsn("txn_t", "interpolateParams=true"))
	if got := queryValue(t, text, "SELECT balance FROM acct WHERE id = ?", 2); got != "100" {
		t.Errorf("text protocol: %s", got)
	}
	if got := queryValue(t, db, "SELECT COUNT(*) FROM plain WHERE id > ?", 0); got != "0" {
		t.Errorf("prepared statement on an unsharded table: %s", got)
	}
	_, err = db.Exec("PREPARE s FROM 'SELECT balance FROM acct WHERE id = ?'")
	wantSQLError(t, err, mysql.ErNotSupported, "42000")
}
