package server_test

import (
	"database/sql"
	"testing"
)

// TestSessionCountsKeptStatements: an execution of a statement the backend
// keeps on the session's connection (a prepared statement that leaves
// state there: EXPLAIN of an INSERT that sets LAST_INSERT_ID(expr), a CALL)
// sets what ROW_COUNT() answers next, as on MariaDB (mtr
// main.myisam_explain_non_select_all under --ps-protocol: the INSERT's
// count stayed).
func TestSessionCountsKeptStatements(t *testing.T) {
	e, direct := carryEnv(t, "carry_kept")
	setup := []string{"CREATE TABLE k1 (id INT PRIMARY KEY, i INT)", "CREATE TABLE k2 (a INT, b INT)",
		"CREATE PROCEDURE kp() BEGIN SELECT 1; END"}
	mustExec(t, direct, setup...) // node1, the proxy's default node: the same tables
	px, dx := conn(t, e.app), conn(t, direct)
	for i, q := range []string{
		"EXPLAIN INSERT INTO k1 SELECT * FROM k2 ON DUPLICATE KEY UPDATE id=LAST_INSERT_ID(id)",
		"EXPLAIN EXTENDED INSERT INTO k1 SELECT * FROM k2 ON DUPLICATE KEY UPDATE id=LAST_INSERT_ID(id)",
		"CALL kp()",
	} {
		var got, want string
		for _, c := range []struct {
			db  *sql.Conn
			out *string
		}{{px, &got}, {dx, &want}} {
			mustExec(t, c.db, "DELETE FROM k2", "INSERT INTO k2 VALUES (1,10), (3,10), (7,11), (3,11)")
			st, err := c.db.PrepareContext(t.Context(), q)
			if err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			rows, err := st.QueryContext(t.Context())
			if err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			for rows.Next() {
			}
			rows.Close()
			st.Close()
			// ROW_COUNT() only: FOUND_ROWS() after anything but a SELECT
			// is what the execution left (TestSessionCounts).
			*c.out = joinRows(queryStrings(t, c.db, "SELECT ROW_COUNT()"))
		}
		if got != want {
			t.Errorf("%d: after a prepared %s, ROW_COUNT(): %s through the proxy, %s directly", i, q, got, want)
		}
	}
}
