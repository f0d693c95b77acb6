package server_test

import (
	"fmt"
	"testing"

	"github.com/shardgate/shardgate/config"
)

// TestStatementFactsKeepSessionsFree: what a statement is and does is
// read from its tokens, never its text's substrings, so words in string
// literals, quoted names and comments tie the session to no node, and a
// stored program's body (its ';' and its words, which run only when it is
// called) is one statement that leaves nothing on the connection. Each
// case runs on one session, then a statement across both nodes must run
// there (a session tied to one node gets 1235 for it). Stored programs
// are created with the multi-statement option on, as a dump restore
// sends them.
func TestStatementFactsKeepSessionsFree(t *testing.T) {
	e := newShardEnv(t, "facts_t", config.ShardRule{Table: "t", Key: "id", Type: "hash", Nodes: []string{"node1", "node2"}, Locations: []int{2, 2}})
	e.exec("CREATE TABLE t (id INT PRIMARY KEY, note VARCHAR(100))", "CREATE TABLE plain (id INT PRIMARY KEY, note VARCHAR(100))")
	multi := openDB(t, e.p.dsn(e.db, "multiStatements=true"))
	across := "SELECT COUNT(*) FROM t WHERE id IN (1, 2, 3, 4)" // subtables on both nodes
	for i, q := range []string{
		// Literals.
		"INSERT INTO t VALUES (%d, 'a temporary note')",
		"INSERT INTO t VALUES (%d, 'GET_LOCK(''x'', 1) and FOUND_ROWS()')",
		"INSERT INTO t VALUES (%d, 'SELECT 1 INTO @a; LAST_INSERT_ID(5)')",
		"INSERT INTO t VALUES (%d, \"NEXT VALUE FOR s, LASTVAL(s)\")",
		"INSERT INTO t VALUES (%d, 'ROW_COUNT() CONNECTION_ID() SQL_CALC_FOUND_ROWS')",
		// Comments and quoted names.
		"INSERT INTO t /* GET_LOCK('x', 1) */ VALUES (%d, 'c') -- TEMPORARY",
		"INSERT INTO t (`id`, `note`) VALUES (%d, 'x') # FOR UPDATE LOCK IN SHARE MODE",
		// A stored program on an unsharded table, its body holding ';',
		// user variables, locks and temporary tables, as mysqldump writes
		// it before the tables.
		"CREATE TRIGGER plain_bi_%d BEFORE INSERT ON plain FOR EACH ROW BEGIN DECLARE n INT; SET @last := NEW.id; " +
			"IF NEW.note IS NULL THEN SET NEW.note = 'none'; END IF; END",
		"CREATE PROCEDURE p_%d() BEGIN DECLARE x INT DEFAULT 0; CREATE TEMPORARY TABLE tmp (a INT); " +
			"WHILE x < 2 DO SET x = x + 1; END WHILE; SELECT GET_LOCK('l', 0) INTO @got; DROP TEMPORARY TABLE tmp; END",
		"/*!50003 CREATE*/ /*!50003 FUNCTION f_%d() RETURNS INT DETERMINISTIC BEGIN DECLARE v INT; " +
			"SET v = (SELECT CASE WHEN 1 THEN 2 END); RETURN v; END */",
	} {
		id := 100 + i
		stmt := fmt.Sprintf(q, id)
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			c := conn(t, multi)
			if _, err := c.ExecContext(t.Context(), stmt); err != nil {
				t.Fatalf("%s: %v", stmt, err)
			}
			var n int
			if err := c.QueryRowContext(t.Context(), across).Scan(&n); err != nil {
				t.Fatalf("after %s, a statement on both nodes: %v", stmt, err)
			}
		})
	}
	// The programs were created as one statement each, on the default node.
	if got := e.on(0, "SELECT COUNT(*) FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = 'facts_t'"); got != "2" {
		t.Errorf("routines on node1: %s, want 2", got)
	}
	if got := e.on(0, "SELECT COUNT(*) FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = 'facts_t'"); got != "1" {
		t.Errorf("triggers on node1: %s, want 1", got)
	}
	// A statement that does leave state still ties the session, as before.
	c := conn(t, multi)
	if _, err := c.ExecContext(t.Context(), "SELECT 1 INTO @kept"); err != nil {
		t.Fatal(err)
	}
	var v string
	if err := c.QueryRowContext(t.Context(), "SELECT @kept").Scan(&v); err != nil || v != "1" {
		t.Errorf("@kept after SELECT ... INTO: %q, %v", v, err)
	}
}
