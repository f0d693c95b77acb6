package server_test

import (
	"testing"
	"time"

	"github.com/shardgate/shardgate/config"
)

// TestTrackedSessionVariables: SET of session and user variables costs no
// pooled connection (the session keeps the values and brings every
// connection it uses to them), the values reach every node the session
// touches (a merged read over all subtables sees them on each), and
// another client that gets the same pooled connections sees none of them.
func TestTrackedSessionVariables(t *testing.T) {
	p, _ := txnProxy(t, config.TransactionMulti)
	p.waitPoolIdle(t, 5*time.Second)
	db := openDB(t, p.dsn("txn_t", ""))
	a := conn(t, db)
	mustExec(t, a, "SET time_zone = '+03:00', @who = 'a', SESSION sql_mode = 'ANSI_QUOTES'", "SET @n = 42")
	p.waitPoolIdle(t, 5*time.Second) // the SETs left no connection pinned
	// Every subtable's row sees the session's values, on both nodes.
	if got := joinRows(queryStrings(t, a, `SELECT DISTINCT @@time_zone, @who, @n + 1, @@sql_mode FROM acct`)); got != "+03:00,a,43,ANSI_QUOTES" {
		t.Errorf("session values on every subtable: %s", got)
	}
	// Another client, one connection per node in the pool, sees defaults.
	other := openDB(t, p.dsn("txn_t", ""))
	if got := joinRows(queryStrings(t, other, "SELECT DISTINCT @@time_zone = @@GLOBAL.time_zone, @who IS NULL, @n IS NULL, @@sql_mode = @@GLOBAL.sql_mode FROM acct")); got != "1,1,1,1" {
		t.Errorf("another client sees %s, want defaults", got)
	}
	// Back to a: still its values, after the other client used the same
	// connections.
	if got := joinRows(queryStrings(t, a, "SELECT @@time_zone, @who, @n")); got != "+03:00,a,42" {
		t.Errorf("a after the other client: %s", got)
	}
	// Setting a user variable to NULL and a system variable to DEFAULT.
	mustExec(t, a, "SET @who = NULL, time_zone = DEFAULT")
	if got := joinRows(queryStrings(t, a, "SELECT @@time_zone = @@GLOBAL.time_zone, @who IS NULL, @n")); got != "1,1,42" {
		t.Errorf("after SET NULL/DEFAULT: %s", got)
	}
	// An expression is evaluated once, where the SET ran.
	mustExec(t, a, "SET @s = CONCAT(@n, '-', 'x'), sql_mode = CONCAT(@@sql_mode, ',NO_ZERO_DATE')")
	if got := joinRows(queryStrings(t, a, "SELECT DISTINCT @s, @@sql_mode FROM acct")); got != "42-x,ANSI_QUOTES,NO_ZERO_DATE" {
		t.Errorf("expression values: %s", got)
	}
	// A user variable keeps its type on every connection: a DOUBLE that
	// reads back as "1" stays a DOUBLE (1/3 gives 16 digits, not an
	// integer's 4; mtr main.ctype_binary).
	mustExec(t, a, "SET @d = SQRT(1)")
	if got := joinRows(queryStrings(t, a, "SELECT DISTINCT CONCAT(@d / 3) FROM acct")); got != "0.3333333333333333" {
		t.Errorf("a DOUBLE user variable on every subtable: %s", got)
	}
	// A failing SET changes nothing.
	_, err := a.ExecContext(t.Context(), "SET time_zone = 'Nowhere/Nothing'")
	wantSQLError(t, err, 1298, "HY000")
	if got := queryValue(t, a, "SELECT @@time_zone = @@GLOBAL.time_zone"); got != "1" {
		t.Errorf("after a failed SET: %s", got)
	}
	// SET NAMES is the session's too: the result is in latin1 for a, in
	// the handshake's utf8mb4 for the other client on the same pool.
	mustExec(t, a, "SET NAMES latin1")
	if got := joinRows(queryStrings(t, a, "SELECT DISTINCT @@character_set_client, @@character_set_results, HEX('é') FROM acct")); got != "latin1,latin1,C3A9" {
		t.Errorf("after SET NAMES latin1: %s", got)
	}
	if got := joinRows(queryStrings(t, other, "SELECT DISTINCT @@character_set_client, @@character_set_results FROM acct")); got != "utf8mb4,utf8mb4" {
		t.Errorf("the other client after SET NAMES latin1: %s", got)
	}
	mustExec(t, a, "SET NAMES utf8mb4 COLLATE utf8mb4_bin")
	if got := queryValue(t, a, "SELECT @@collation_connection"); got != "utf8mb4_bin" {
		t.Errorf("after SET NAMES ... COLLATE: %s", got)
	}
	// COM_RESET_CONNECTION (through a new handshake) forgets them: a new
	// client on the same pool sees nothing.
	a.Close()
	if got := joinRows(queryStrings(t, openDB(t, p.dsn("txn_t", "")), "SELECT DISTINCT @n IS NULL, @s IS NULL, @@sql_mode = @@GLOBAL.sql_mode FROM acct")); got != "1,1,1" {
		t.Errorf("a new client after a left: %s", got)
	}
}

// TestCarriedUserVariableTypes: a user variable reaches the session's next
// connection with its type, bytes, character set and collation (mtr
// main.ctype_ucs, main.ctype_binary, main.gis): the SET runs on one pooled
// connection, another client then holds that one, and the session reads
// the variables on a second.
func TestCarriedUserVariableTypes(t *testing.T) {
	s := backends(t)[0]
	cfg := newConfig(t, s)
	cfg.Nodes[0].MaxConnsLimit = 2 // no room for a third: b must take a's
	p := startProxy(t, cfg)
	dbSetup(t, s, "carry_types")
	a := conn(t, openDB(t, p.dsn("carry_types", "")))
	b := conn(t, openDB(t, p.dsn("carry_types", "")))
	c := conn(t, openDB(t, p.dsn("carry_types", "")))
	mustExec(t, a, "SET NAMES latin1",
		"SET @c = _latin1'abc' COLLATE latin1_bin, @g = ST_GeomFromText('POINT(1 2)', 4326), @u = _latin1 0xE9 COLLATE latin1_german1_ci, @d = SQRT(1), @n = 7, @m = 1.50")
	// c holds the pool's other connection; b then takes the connection
	// a used last (the pool is full) and keeps it in a transaction, and
	// a gets c's once c is done.
	self := selfThreadSQL
	first := queryValue(t, a, self)
	mustExec(t, c, "BEGIN")
	queryValue(t, c, "SELECT 1")
	mustExec(t, b, "BEGIN")
	if got := queryValue(t, b, self); got != first {
		t.Logf("b runs on thread %s, a ran on %s", got, first)
	}
	mustExec(t, c, "COMMIT")
	if got := queryValue(t, a, self); got == first {
		t.Fatalf("a still runs on thread %s: the test does not move it", got)
	}
	defer mustExec(t, b, "ROLLBACK")
	want := "latin1_bin,abc,4326,GEOMETRYCOLLECTION(POINT(1 2)),latin1_german1_ci,E9,0.3333333333333333,7,1.50"
	if got := joinRows(queryStrings(t, a, "SELECT COLLATION(@c), @c, ST_SRID(@g), ST_AsText(GeometryCollection(@g)), COLLATION(@u), HEX(@u), CONCAT(@d / 3), @n, @m")); got != want {
		t.Errorf("user variables on the session's next connection:\n got %s\nwant %s", got, want)
	}
}

// selfThreadSQL reads the server thread id of the connection it runs on
// without naming CONNECTION_ID() or @@pseudo_thread_id, which keep a
// session on its connection: the comment is the only text that matches.
const selfThreadSQL = "SELECT ID FROM information_schema.PROCESSLIST WHERE INFO LIKE CONCAT('%', 'self', '_probe%') /* self_probe */"
