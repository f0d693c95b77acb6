package server_test

import (
	"fmt"
	"io"
	"strings"
	"testing"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/shardgate/shardgate/config"
)

// TestMultiStatementsSharded: a multi-statement text that touches sharded
// tables is split and each statement routed on its own; the results come
// back in order (writes, merged reads, a transaction), and the first error
// ends the text as in MySQL, leaving later statements unrun.
func TestMultiStatementsSharded(t *testing.T) {
	p, _ := txnProxy(t, config.TransactionMulti)
	db := openDB(t, p.dsn("txn_t", "multiStatements=true"))
	sets, err := resultSets(db, "INSERT INTO acct (id, balance) VALUES (20, 1), (21, 2); "+
		"UPDATE acct SET balance = balance + 10 WHERE id IN (20, 21); "+
		"SELECT id, balance FROM acct WHERE id >= 20 ORDER BY id; "+
		"SELECT COUNT(*), SUM(balance) FROM acct; "+
		"SELECT note FROM plain")
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(sets); got != "[[[20 11] [21 12]] [[10 823]] []]" {
		t.Errorf("result sets: %s", got)
	}
	c := conn(t, db)
	mustExec(t, c, "BEGIN; UPDATE acct SET balance = 0 WHERE id = 20; UPDATE acct SET balance = 0 WHERE id = 21; ROLLBACK")
	if got := joinRows(queryStrings(t, c, "SELECT balance FROM acct WHERE id IN (20, 21) ORDER BY id")); got != "11|12" {
		t.Errorf("after a rolled-back transaction in one text: %s", got)
	}
	_, err = c.ExecContext(t.Context(), "UPDATE acct SET balance = 5 WHERE id = 20; SELECT * FROM no_such_table; UPDATE acct SET balance = 5 WHERE id = 21")
	wantSQLError(t, err, 1146, "42S02")
	if got := joinRows(queryStrings(t, c, "SELECT balance FROM acct WHERE id IN (20, 21) ORDER BY id")); got != "5|12" {
		t.Errorf("after an error in the middle: %s, want the first UPDATE done and the last not run", got)
	}
	mustExec(t, c, "DELETE FROM acct WHERE id >= 20")
}

// TestLastInsertIDAcrossShards: a multi-row INSERT whose rows go to several
// subtables reports, in its OK packet and in LAST_INSERT_ID(), the id
// generated for its first row, as MySQL does.
func TestLastInsertIDAcrossShards(t *testing.T) {
	p, _ := txnProxy(t, config.TransactionMulti)
	c := conn(t, openDB(t, p.dsn("txn_t", "")))
	mustExec(t, c, "CREATE TABLE ev (id INT NOT NULL PRIMARY KEY, seq INT NOT NULL AUTO_INCREMENT, KEY (seq))",
		"INSERT INTO ev (id) VALUES (6), (10)") // ev_0002: seq 1, 2
	res, err := c.ExecContext(t.Context(), "INSERT INTO ev (id) VALUES (2), (1), (5)") // ev_0002 gets 3; ev_0001 1, 2
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := res.LastInsertId(); id != 3 {
		t.Errorf("OK packet insert id %d, want 3 (the first row's)", id)
	}
	if n, _ := res.RowsAffected(); n != 3 {
		t.Errorf("affected rows %d, want 3", n)
	}
	if got := queryValue(t, c, "SELECT LAST_INSERT_ID()"); got != "3" {
		t.Errorf("LAST_INSERT_ID() = %s, want 3", got)
	}
}

// TestMultiStatementsSession: the statements of a split multi-statement
// text take the path a text of one statement takes (the session's Before
// and After): user and session variables set in the text reach the nodes
// its later statements run on, SELECT ... INTO and := assign, SET NAMES and a
// transaction apply to what follows, ROW_COUNT() reads the statement
// before it, and the first error ends the text, a backend's relayed one
// included. Every text, and a read of the session after it, answers
// through the proxy as it does directly on one MariaDB holding the rows.
func TestMultiStatementsSession(t *testing.T) {
	p, _ := txnProxy(t, config.TransactionMulti)
	srvs := backends(t)
	direct := openDB(t, directDSN(srvs[0], "", "multiStatements=true"))
	mustExec(t, direct, "DROP DATABASE IF EXISTS txn_d", "CREATE DATABASE txn_d")
	t.Cleanup(func() { direct.Exec("DROP DATABASE IF EXISTS txn_d") })
	mustExec(t, direct, "CREATE TABLE txn_d.acct (id INT PRIMARY KEY, balance INT NOT NULL)",
		"INSERT INTO txn_d.acct (id, balance) VALUES (1,100),(2,100),(3,100),(4,100),(5,100),(6,100),(7,100),(8,100)")
	const state = "SELECT @a, @b, @e, @@session.sql_mode, @@character_set_client, ROW_COUNT()"
	texts := []string{
		"SET @a = 5; SELECT id, balance FROM acct WHERE id = @a; SET SESSION sql_mode = ''; " +
			"INSERT INTO acct (id, balance) VALUES (30, 'x'), (31, 'y')",
		state,
		"SELECT id, balance FROM acct WHERE id >= 30 ORDER BY id",
		"SELECT @b := balance FROM acct WHERE id = 2; UPDATE acct SET balance = @b + 1 WHERE id = 6; " +
			"SELECT ROW_COUNT(); SELECT @b, balance FROM acct WHERE id = 6",
		"UPDATE acct SET balance = balance + 1 WHERE id IN (1, 2); SELECT ROW_COUNT(), COUNT(*) FROM acct",
		"SET NAMES latin1; SELECT @@character_set_client, COUNT(*) FROM acct WHERE id = 3",
		state,
		"SET NAMES utf8mb4; BEGIN; UPDATE acct SET balance = balance - 10 WHERE id = 1; SET @e = 1; " +
			"UPDATE acct SET balance = balance + 10 WHERE id = 2; SELECT SUM(balance), @e FROM acct; ROLLBACK",
		"SELECT id, balance FROM acct WHERE id IN (1, 2) ORDER BY id",
		"START TRANSACTION; INSERT INTO acct (id, balance) VALUES (40, 1), (41, 2); SET @e = @e + 1; COMMIT; " +
			"SELECT COUNT(*), @e FROM acct WHERE id >= 40",
		// The second statement fails: the proxy's error, then a backend's
		// (relayed: a duplicate key on one shard); later statements do not
		// run.
		"SET @e = 10; SELECT * FROM no_such_table; SET @e = 20",
		state,
		"UPDATE acct SET balance = 7 WHERE id = 3; INSERT INTO acct (id, balance) VALUES (2, 1); SET @e = 30; " +
			"UPDATE acct SET balance = 8 WHERE id = 3",
		"SELECT @e, balance FROM acct WHERE id = 3",
		"BEGIN; UPDATE acct SET balance = 0 WHERE id = 5; INSERT INTO acct (id, balance) VALUES (6, 1); COMMIT",
		"SELECT @@in_transaction; ROLLBACK; SELECT balance FROM acct WHERE id = 5",
		"SET autocommit = 0; UPDATE acct SET balance = 1 WHERE id = 7; UPDATE acct SET balance = 1 WHERE id = 8; " +
			"SELECT @@autocommit, @@in_transaction, SUM(balance) FROM acct; ROLLBACK; SET autocommit = 1",
		"PREPARE p FROM 'SELECT balance FROM acct WHERE id = ?'; SET @i = 4; EXECUTE p USING @i; DEALLOCATE PREPARE p; " +
			"SELECT COUNT(*) FROM acct",
		"SELECT GET_LOCK('multi', 0); UPDATE acct SET balance = balance + 1 WHERE id = 2; SELECT RELEASE_LOCK('multi')",
		"/* a comment */ SET @a = 7; SELECT balance FROM acct WHERE id = @a; USE txn_x; SELECT 1",
		"SELECT COUNT(*), SUM(balance), @a FROM acct",
		"SELECT balance FROM acct WHERE id = 3 INTO @b; UPDATE acct SET balance = @b + 2 WHERE id = 7; " +
			"SELECT balance, id INTO @c, @d FROM acct WHERE id = 7; SELECT @b, @c, @d, ROW_COUNT()",
		"SELECT @b, @c, @d, balance FROM acct WHERE id = @d",
	}
	pc := conn(t, openDB(t, p.dsn("txn_t", "multiStatements=true")))
	dc := conn(t, openDB(t, directDSN(srvs[0], "txn_d", "multiStatements=true")))
	for _, q := range texts {
		got, gerr := resultSets(pc, q)
		want, werr := resultSets(dc, q)
		if fmt.Sprint(got) != fmt.Sprint(want) || multiErr(gerr) != multiErr(werr) {
			t.Errorf("%s\n proxy:    %v %v\n directly: %v %v", q, got, gerr, want, werr)
		}
	}
	pc.Close()
	// Nothing of the session stays on the pooled connections.
	for range 4 {
		c := conn(t, openDB(t, p.dsn("txn_t", "")))
		if got := joinRows(queryStrings(t, c, "SELECT @a, @b, @e, @@session.sql_mode = @@global.sql_mode, @@character_set_client")); got != "NULL,NULL,NULL,1,utf8mb4" {
			t.Errorf("a new session sees %s", got)
		}
		c.Close()
	}
}

// multiErr is a text's error as errCode reads it, "" for none.
func multiErr(err error) string {
	if err == nil {
		return ""
	}
	return errCode(err)
}

// TestMultiStatementsLoadLocal: LOAD DATA LOCAL in a split text, into an
// unsharded table (its file relayed to the server, numbered after the
// responses before it) and into a sharded one (read by the proxy).
func TestMultiStatementsLoadLocal(t *testing.T) {
	p, _ := txnProxy(t, config.TransactionMulti)
	gomysql.RegisterReaderHandler("multi_load", func() io.Reader { return strings.NewReader("50,a\n51,b\n52,c\n") })
	t.Cleanup(func() { gomysql.DeregisterReaderHandler("multi_load") })
	c := conn(t, openDB(t, p.dsn("txn_t", "multiStatements=true")))
	sets, err := resultSets(c, "SET @n = 2; LOAD DATA LOCAL INFILE 'Reader::multi_load' INTO TABLE plain FIELDS TERMINATED BY ','; "+
		"SELECT COUNT(*) FROM acct; LOAD DATA LOCAL INFILE 'Reader::multi_load' INTO TABLE acct FIELDS TERMINATED BY ',' (id, @b) SET balance = @n; "+
		"SELECT COUNT(*), SUM(balance) FROM acct WHERE id >= 50; SELECT COUNT(*) FROM plain")
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(sets); got != "[[[8]] [[3 6]] [[3]]]" {
		t.Errorf("result sets: %s", got)
	}
}
