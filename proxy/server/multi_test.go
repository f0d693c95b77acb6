package server_test

import (
	"fmt"
	"testing"

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
