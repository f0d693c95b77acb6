package server_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

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

	t.Run("savepoints with autocommit off", func(t *testing.T) {
		// Connector/J's way: no BEGIN, autocommit=0. The savepoint is set
		// on node2 too when the transaction reaches it after the
		// SAVEPOINT, so ROLLBACK TO undoes the rows there (it used to
		// fail with 1305, or leave node2's rows to be committed).
		c := conn(t, db)
		mustExec(t, c, "SET autocommit = 0", "UPDATE acct SET balance = 1 WHERE id = 1", "SAVEPOINT a",
			"UPDATE acct SET balance = 2 WHERE id = 2", // node2 joins after the savepoint
			"UPDATE acct SET balance = 3 WHERE id = 1",
			"ROLLBACK TO SAVEPOINT a")
		if got := balances(t, c); got != "1,1|2,100|5,100|6,100" {
			t.Errorf("after ROLLBACK TO SAVEPOINT: %s", got)
		}
		mustExec(t, c, "SAVEPOINT b", "UPDATE acct SET balance = 6 WHERE id = 6", "ROLLBACK TO b", "COMMIT")
		if got := balances(t, db); got != "1,1|2,100|5,100|6,100" {
			t.Errorf("after COMMIT: %s", got)
		}
		// The savepoints ended with the transaction.
		_, err := c.ExecContext(t.Context(), "ROLLBACK TO SAVEPOINT a")
		wantSQLError(t, err, 1305, "42000")
		mustExec(t, c, "UPDATE acct SET balance = 100 WHERE id = 1", "COMMIT", "SET autocommit = 1")
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

	// A statement that fails inside the transaction leaves it open on
	// that node: ROLLBACK must still reach it (an ERR packet carries no
	// status flags to say so).
	t.Run("error inside", func(t *testing.T) {
		c := conn(t, db)
		mustExec(t, c, "BEGIN", "UPDATE acct SET balance = 31 WHERE id = 2")
		_, err := c.ExecContext(t.Context(), "INSERT INTO acct (id, balance) VALUES (6, 0)")
		wantSQLError(t, err, 1062, "23000")
		mustExec(t, c, "UPDATE acct SET balance = 32 WHERE id = 1", "ROLLBACK")
		if got := balances(t, db); got != "1,100|2,100|5,100|6,100" {
			t.Errorf("after ROLLBACK following an error: %s", got)
		}
		// The pool holds no connection with a transaction left open.
		p.waitPoolIdle(t, 5*time.Second)
		if got := balances(t, openDB(t, p.dsn("txn_t", ""))); got != "1,100|2,100|5,100|6,100" {
			t.Errorf("a new client sees %s", got)
		}
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

	// sysbench prepares BEGIN and COMMIT: as prepared statements they
	// must open and end the same cross-node transaction.
	t.Run("prepared BEGIN and COMMIT", func(t *testing.T) {
		c := conn(t, db)
		stmts := map[string]*sql.Stmt{}
		for _, q := range []string{"BEGIN", "COMMIT", "ROLLBACK", "UPDATE acct SET balance = ? WHERE id = ?"} {
			st, err := c.PrepareContext(t.Context(), q)
			if err != nil {
				t.Fatalf("prepare %s: %v", q, err)
			}
			defer st.Close()
			stmts[q] = st
		}
		exec := func(q string, args ...any) {
			t.Helper()
			if _, err := stmts[q].Exec(args...); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		exec("BEGIN")
		exec("UPDATE acct SET balance = ? WHERE id = ?", 21, 1)
		exec("UPDATE acct SET balance = ? WHERE id = ?", 22, 2)
		if got := balances(t, db); got != "1,100|2,100|5,100|6,100" {
			t.Errorf("another session sees uncommitted changes: %s", got)
		}
		exec("ROLLBACK")
		if got := balances(t, db); got != "1,100|2,100|5,100|6,100" {
			t.Errorf("after a prepared ROLLBACK: %s", got)
		}
		exec("BEGIN")
		exec("UPDATE acct SET balance = ? WHERE id = ?", 23, 5)
		exec("UPDATE acct SET balance = ? WHERE id = ?", 24, 6)
		exec("COMMIT")
		if got := balances(t, db); got != "1,100|2,100|5,23|6,24" {
			t.Errorf("after a prepared COMMIT: %s", got)
		}
		mustExec(t, c, "UPDATE acct SET balance = 100 WHERE id IN (5, 6)")
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

// TestPreparedOnSharded: binary prepared statements on a sharded table are
// routed at each execution by their bound values (point reads, writes,
// inserts that land in the right subtable, NULL and string parameters);
// executions that would need several targets are refused with 1235, as is
// SQL-level PREPARE of a sharded statement; prepared statements on
// unsharded tables are forwarded as before.
func TestPreparedOnSharded(t *testing.T) {
	p, db := txnProxy(t, config.TransactionMulti)
	srvs := backends(t)
	for id := 1; id <= 8; id++ {
		if got := queryValue(t, db, "SELECT balance FROM acct WHERE id = ?", id); got != "100" {
			t.Errorf("prepared point read of id %d: %s", id, got)
		}
	}
	ins, err := db.Prepare("INSERT INTO acct (id, balance) VALUES (?, ?)")
	if err != nil {
		t.Fatal(err)
	}
	defer ins.Close()
	for _, id := range []int64{9, 10, 11, 12, -3} {
		if _, err := ins.Exec(id, id*10); err != nil {
			t.Fatalf("insert %d: %v", id, err)
		}
	}
	// Each row is in subtable id mod 4 on its node, read directly.
	d1 := openDB(t, directDSN(srvs[0], "txn_t", ""))
	d2 := openDB(t, directDSN(srvs[1], "txn_t", ""))
	for _, c := range []struct {
		db    *sql.DB
		table string
		want  string
	}{
		// -3 is 2^64-3 as kingshard hashes it: subtable 1.
		{d1, "acct_0001", "-3|1|5|9"}, {d2, "acct_0002", "2|6|10"}, {d2, "acct_0003", "3|7|11"}, {d1, "acct_0000", "4|8|12"},
	} {
		if got := joinRows(queryStrings(t, c.db, "SELECT id FROM "+c.table+" ORDER BY id")); got != c.want {
			t.Errorf("%s holds %s, want %s", c.table, got, c.want)
		}
	}
	upd, err := db.Prepare("UPDATE acct SET balance = ? WHERE id = ?")
	if err != nil {
		t.Fatal(err)
	}
	defer upd.Close()
	res, err := upd.Exec(nil, "10") // a NULL value and a string key
	if err == nil {
		t.Fatalf("setting NOT NULL balance to NULL succeeded: %v", res)
	}
	wantSQLError(t, err, 1048, "23000")
	if res, err = upd.Exec(7, "10"); err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Errorf("UPDATE affected %d rows", n)
	}
	if got := queryValue(t, d2, "SELECT balance FROM acct_0002 WHERE id = 10"); got != "7" {
		t.Errorf("row 10 after the prepared UPDATE: %s", got)
	}
	// Cross-shard executions answer what the text protocol answers, in
	// the binary protocol (the driver decodes both into the same values).
	text := openDB(t, p.dsn("txn_t", "interpolateParams=true&parseTime=true"))
	bin := openDB(t, p.dsn("txn_t", "parseTime=true"))
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{"SELECT SUM(balance), COUNT(*), AVG(balance), MIN(id), MAX(id) FROM acct WHERE balance > ?", []any{0}},
		{"SELECT id, balance FROM acct WHERE id IN (?, ?, ?) ORDER BY id", []any{1, 2, 3}},
		{"SELECT id, balance * 1.5, CAST(id AS CHAR), NULL, CAST('2016-03-06 10:11:12.5' AS DATETIME(1)), CAST(? AS DATE) FROM acct WHERE balance >= ? ORDER BY id DESC LIMIT 1, 3", []any{"2020-01-02", 100}},
		{"SELECT balance, COUNT(*) FROM acct GROUP BY balance HAVING COUNT(*) > ? ORDER BY balance", []any{1}},
		{"SELECT DISTINCT balance FROM acct WHERE id BETWEEN ? AND ? ORDER BY balance", []any{-10, 10}},
		{"SELECT id FROM acct WHERE balance = ? ORDER BY id", []any{int64(-30)}},
	} {
		want := joinRows(queryStrings(t, text, q.sql, q.args...))
		if got := joinRows(queryStrings(t, bin, q.sql, q.args...)); got != want {
			t.Errorf("%s %v:\n prepared %s\n text     %s", q.sql, q.args, got, want)
		}
	}
	res, err = bin.Exec("UPDATE acct SET balance = balance + ? WHERE id > ?", 0, 0) // every subtable
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 0 {
		t.Errorf("cross-shard UPDATE adding 0 changed %d rows", n)
	}
	sel, err := db.Prepare("SELECT id FROM acct WHERE id IN (?, ?)")
	if err != nil {
		t.Fatal(err)
	}
	defer sel.Close()
	var ids []int
	rows, err := sel.Query(1, 5) // both on acct_0001
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if rows.Close(); len(ids) != 2 {
		t.Errorf("IN on one subtable: %v", ids)
	}
	if got := queryValue(t, text, "SELECT COUNT(*) FROM acct WHERE balance > ?", 0); got != "12" { // all but -3
		t.Errorf("text protocol COUNT: %s", got)
	}
	if got := queryValue(t, db, "SELECT COUNT(*) FROM plain WHERE id > ?", 0); got != "0" {
		t.Errorf("prepared statement on an unsharded table: %s", got)
	}
	// SQL-level PREPARE / EXECUTE / DEALLOCATE on the sharded table.
	c := conn(t, db)
	mustExec(t, c, "SET @id = 2, @min = 100", "PREPARE s FROM 'SELECT balance FROM acct WHERE id = ?'",
		"PREPARE agg FROM 'SELECT COUNT(*), SUM(balance) FROM acct WHERE balance >= ? AND id > 0'")
	if got := queryValue(t, c, "EXECUTE s USING @id"); got != "100" {
		t.Errorf("EXECUTE s USING @id: %s", got)
	}
	if got := joinRows(queryStrings(t, c, "EXECUTE agg USING @min")); got != "10,1030" {
		t.Errorf("EXECUTE agg USING @min: %s", got)
	}
	mustExec(t, c, "SET @id = 10")
	if got := queryValue(t, c, "EXECUTE s USING @id"); got != "7" {
		t.Errorf("EXECUTE s after SET @id = 10: %s", got)
	}
	_, err = c.ExecContext(t.Context(), "EXECUTE s")
	wantSQLError(t, err, mysql.ErWrongArguments, "HY000")
	mustExec(t, c, "DEALLOCATE PREPARE s")
	_, err = c.ExecContext(t.Context(), "EXECUTE s USING @id")
	wantSQLError(t, err, mysql.ErUnknownStmtHandler, "HY000")
	// Without sharded tables, the backend's own.
	mustExec(t, c, "PREPARE u FROM 'SELECT ? + 1'")
	if got := queryValue(t, c, "EXECUTE u USING @id"); got != "11" {
		t.Errorf("unsharded EXECUTE: %s", got)
	}
}

// TestKillCrossShardQuery: KILL QUERY reaches every backend of a merged
// cross-shard statement, which ends at once with 1317 on the client.
func TestKillCrossShardQuery(t *testing.T) {
	p, db := txnProxy(t, config.TransactionMulti)
	victim := conn(t, db)
	done := make(chan error, 1)
	go func() {
		_, err := victim.ExecContext(context.Background(), "SELECT SUM(SLEEP(5)) FROM acct")
		done <- err
	}()
	admin := openDB(t, p.dsn("txn_t", ""))
	var pid string
	eventually(t, 5*time.Second, "the merge to show in SHOW PROCESSLIST", func() bool {
		for _, r := range queryStrings(t, admin, "SHOW FULL PROCESSLIST") {
			if strings.Contains(r[7], "SLEEP(5)") {
				pid = r[0]
				return true
			}
		}
		return false
	})
	// Both servers run their subtables' statements.
	for _, s := range backends(t)[:2] {
		d := openDB(t, directDSN(s, "", ""))
		eventually(t, 5*time.Second, "the subtables' statements to run", func() bool {
			return queryValue(t, d, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE 'SELECT SUM(SLEEP(5))%acct_000%'") == "2"
		})
	}
	start := time.Now()
	mustExec(t, admin, "KILL QUERY "+pid)
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("the killed merge succeeded")
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("the merge ended %v after KILL QUERY", d)
		}
		t.Logf("killed merge: %v", err)
	case <-time.After(15 * time.Second):
		t.Fatal("the merge did not end")
	}
	if got := queryValue(t, victim, "SELECT COUNT(*) FROM acct"); got != "8" {
		t.Errorf("the session after KILL QUERY: %s", got)
	}
}

// TestMergeAfterWarnings: a statement with warnings keeps its connection
// for SHOW WARNINGS until the next statement. A cross-node merge right
// after it counted only node2's rows (4 of 8): its targets on node1 were
// seen as sharing the session's connection when the first were sent and
// as not sharing it after the pin ended, and ran in neither pass.
func TestMergeAfterWarnings(t *testing.T) {
	_, db := txnProxy(t, config.TransactionMulti)
	c := conn(t, db)
	for _, q := range []string{
		"SELECT COUNT(*) FROM acct",
		"SELECT COUNT(*) FROM acct WHERE balance = 100",
		"SELECT COUNT(id) FROM acct GROUP BY balance",
		"SELECT MAX(id) FROM acct",
	} {
		// 'abc' compared with an INT: a warning on node1 (id 5).
		mustExec(t, c, "DELETE FROM acct WHERE balance = 'abc' AND id = 5")
		if got := queryValue(t, c, q); got != "8" {
			t.Errorf("%s right after a statement with warnings: %s, want 8", q, got)
		}
	}
}

// TestMultiStatementAcrossNodes: a multi-statement batch (Connector/J's
// rewriteBatchedStatements) is checked for every node it reaches before
// any of it runs, and a refusal leaves the session as it was. Before: a
// batch on an unsharded table tied the session to node1, the next batch
// over both nodes ran its node1 statements and was then refused; and a
// refused cross-node read lost the session's temporary table.
func TestMultiStatementAcrossNodes(t *testing.T) {
	p, _ := txnProxy(t, config.TransactionMulti)
	db := openDB(t, p.dsn("txn_t", "multiStatements=true"))
	c := conn(t, db)
	mustExec(t, c, "INSERT INTO plain (id, note) VALUES (10, 'a'); INSERT INTO plain (id, note) VALUES (11, 'b')",
		"UPDATE acct SET balance = 1 WHERE id = 1; UPDATE acct SET balance = 2 WHERE id = 2")
	if got := balances(t, db); got != "1,1|2,2|5,100|6,100" {
		t.Errorf("after a batch over both nodes: %s", got)
	}

	// State that cannot be repeated on node2: a temporary table on node1.
	mustExec(t, c, "CREATE TEMPORARY TABLE tmp (x INT)", "INSERT INTO tmp VALUES (42)")
	// A batch whose statements read none of it runs on node2 too, as its
	// statements one by one do; one with a statement that reads it there
	// (the connection's id) is refused before any of it runs.
	mustExec(t, c, "UPDATE acct SET balance = 3 WHERE id = 1; UPDATE acct SET balance = 4 WHERE id = 2")
	_, err := c.ExecContext(t.Context(), "UPDATE acct SET balance = 1 WHERE id = 1; SELECT COUNT(*), CONNECTION_ID() FROM acct")
	wantSQLError(t, err, 1235, "42000")
	if got := balances(t, db); got != "1,3|2,4|5,100|6,100" {
		t.Errorf("a refused batch was partly applied: %s", got)
	}
	// A single statement that reads none of that state runs on both
	// nodes, as one MariaDB would run it.
	if got, want := queryValue(t, c, "SELECT COUNT(*) FROM acct"), queryValue(t, db, "SELECT COUNT(*) FROM acct"); got != want {
		t.Errorf("a read on both nodes beside the temporary table: %s rows, want %s", got, want)
	}
	if got := queryValue(t, c, "SELECT x FROM tmp"); got != "42" {
		t.Errorf("temporary table after the refusals: %s", got)
	}
	// Statements for node1 still run there.
	mustExec(t, c, "UPDATE acct SET balance = 100 WHERE id = 1; UPDATE acct SET balance = 100 WHERE id = 5")
	mustExec(t, db, "UPDATE acct SET balance = 100 WHERE id = 2", "DELETE FROM plain")
}

// TestDeadlockEndsTransactionEverywhere: in transaction_mode multi, when a
// node answers a statement with a deadlock (1213), MariaDB has rolled that
// node's part back and ended the transaction; the proxy rolls back the
// parts on the other nodes at once, so they neither hold their locks nor
// get committed by the client's next BEGIN.
func TestDeadlockEndsTransactionEverywhere(t *testing.T) {
	_, db := txnProxy(t, config.TransactionMulti)
	a, b := conn(t, db), conn(t, db)
	// a: 2 on node2, then 1 on node1; b: 5 on node1; a waits for 5, b for 1.
	mustExec(t, a, "BEGIN", "UPDATE acct SET balance = 1 WHERE id = 2", "UPDATE acct SET balance = 1 WHERE id = 1")
	mustExec(t, b, "BEGIN", "UPDATE acct SET balance = 2 WHERE id = 5")
	victim, survivor := deadlock(t, openDB(t, directDSN(backends(t)[0], "", "")), a, b,
		"UPDATE acct SET balance = 1 WHERE id = 5", "UPDATE acct SET balance = 2 WHERE id = 1")
	// The victim begins again: nothing of its first transaction commits.
	mustExec(t, victim, "BEGIN", "ROLLBACK")
	mustExec(t, survivor, "COMMIT")
	want := "1,1|2,1|5,1|6,100" // a survived: its three updates
	if victim == a {
		want = "1,2|2,100|5,2|6,100" // b survived; a's update of 2 (node2) is undone
	}
	if got := balances(t, db); got != want {
		t.Fatalf("balances %s, want %s", got, want)
	}
}

// TestLostNodeCommitsNothing: in transaction_mode multi, a transaction
// whose connection to one node was lost (killed while idle) commits
// nothing, even when the loss is found by a statement on several nodes,
// which reports it as an error of its own: the client connection is
// closed, and a COMMIT never commits the other node's part.
func TestLostNodeCommitsNothing(t *testing.T) {
	_, db := txnProxy(t, config.TransactionMulti)
	cn := conn(t, db)
	mustExec(t, cn, "BEGIN", "UPDATE acct SET balance = 0 WHERE id = 1", "UPDATE acct SET balance = 0 WHERE id = 2")
	node2 := openDB(t, directDSN(backends(t)[1], "", ""))
	time.Sleep(150 * time.Millisecond) // innodb_trx is refreshed after 100 ms unread
	id := queryValue(t, node2, "SELECT t.trx_mysql_thread_id FROM information_schema.innodb_trx t "+
		"JOIN information_schema.processlist p ON p.id = t.trx_mysql_thread_id WHERE p.db = 'txn_t'")
	mustExec(t, node2, "KILL "+id)
	if _, err := cn.ExecContext(context.Background(), "UPDATE acct SET balance = 5 WHERE id IN (1, 2)"); err == nil {
		t.Fatal("a write on the lost connection succeeded")
	}
	if _, err := cn.ExecContext(context.Background(), "COMMIT"); err == nil {
		t.Error("COMMIT succeeded after node2's part was lost")
	}
	if got := balances(t, db); got != "1,100|2,100|5,100|6,100" {
		t.Fatalf("balances %s: part of the transaction committed", got)
	}
}

// TestCommitAnswerLost: when the connection of a one-node transaction
// dies as its COMMIT goes out, the outcome is unknown: the client's
// connection is closed (as the server's crash during COMMIT would close
// it), not answered with an error that would say "not committed".
func TestCommitAnswerLost(t *testing.T) {
	p, db := txnProxy(t, config.TransactionMulti)
	cn := conn(t, db)
	mustExec(t, cn, "BEGIN", "UPDATE acct SET balance = 0 WHERE id = 1") // node1
	node1 := openDB(t, directDSN(backends(t)[0], "", ""))
	time.Sleep(150 * time.Millisecond) // innodb_trx is refreshed after 100 ms unread
	id := queryValue(t, node1, "SELECT t.trx_mysql_thread_id FROM information_schema.innodb_trx t "+
		"JOIN information_schema.processlist p ON p.id = t.trx_mysql_thread_id WHERE p.db = 'txn_t'")
	hook := func(string) { node1.Exec("KILL " + id) }
	p.srv.Knobs().BeforeCommit.Store(&hook)
	defer p.srv.Knobs().BeforeCommit.Store(nil)
	_, err := cn.ExecContext(context.Background(), "COMMIT")
	p.srv.Knobs().BeforeCommit.Store(nil)
	var me *gomysql.MySQLError
	if err == nil || errors.As(err, &me) {
		t.Fatalf("COMMIT with its answer lost: %v, want the connection closed", err)
	}
	if err := cn.PingContext(context.Background()); err == nil {
		t.Fatal("the client connection is still open")
	}
}

// deadlock runs aStmt on a, which must wait for a lock b holds (on the
// server direct reaches), then bStmt on b, which
// must wait for one a holds: the server kills one of them with 1213. It
// returns the victim and the survivor.
func deadlock(t *testing.T, direct *sql.DB, a, b *sql.Conn, aStmt, bStmt string) (victim, survivor *sql.Conn) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := a.ExecContext(context.Background(), aStmt)
		done <- err
	}()
	eventually(t, 10*time.Second, "a's statement to wait for b's lock", func() bool {
		select {
		case err := <-done:
			t.Fatalf("a's %q did not wait for b's lock: %v; transactions: %v", aStmt, err,
				queryStrings(t, direct, "SELECT trx_state, trx_mysql_thread_id, COALESCE(trx_query, '') FROM information_schema.innodb_trx"))
		default:
		}
		// Any UPDATE running on the server now is a's (b's ended), and it
		// cannot finish while b holds the row. The process list is read
		// live; information_schema.innodb_trx is not: InnoDB refreshes that
		// view only when it was last read more than 100 ms ago, so polling
		// it faster sees the first snapshot forever.
		return queryValue(t, direct, "SELECT COUNT(*) FROM information_schema.processlist WHERE info LIKE 'UPDATE%'") != "0"
	})
	_, errB := b.ExecContext(context.Background(), bStmt)
	errA := <-done
	if errA == nil {
		wantSQLError(t, errB, 1213, "40001")
		return b, a
	}
	wantSQLError(t, errA, 1213, "40001")
	return a, b
}
