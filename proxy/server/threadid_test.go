package server_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"
)

// TestKillOwnThreadID: the thread id a session reads of itself names it to
// KILL, as on MariaDB, whichever spelling read it and by either protocol.
// Through the proxy @@pseudo_thread_id is, as directly, CONNECTION_ID():
// the id of the backend connection the session then keeps, so that a
// statement it runs later runs there and another session's KILL of that
// id ends it (mtr main.loadxml kills the thread of a client in the middle
// of LOAD XML LOCAL by the @@pseudo_thread_id it read first). The session
// would otherwise have given the connection back to the pool, and the id
// would be the pool's: 1094.
func TestKillOwnThreadID(t *testing.T) {
	s := backends(t)[0]
	p := startProxy(t, newConfig(t, s))
	direct := openDB(t, directDSN(s, "", ""))
	db := openDB(t, p.dsn("", ""))
	reads := []string{
		"SELECT @@pseudo_thread_id",
		"SELECT @@session.pseudo_thread_id",
		"select @@SESSION.PSEUDO_THREAD_ID    ",
		"SELECT @@pseudo_thread_id + 0 AS id",
		"SELECT /* id */ @@Pseudo_Thread_Id FROM DUAL",
		"SELECT CONNECTION_ID()",
	}
	for _, binary := range []bool{false, true} {
		for i, read := range reads {
			name := read
			if binary {
				name = "binary " + read
			}
			t.Run(name, func(t *testing.T) {
				victim := conn(t, db)
				id := readValue(t, victim, read, binary)
				// Long enough for an idle pooled connection to be taken by
				// another session or closed, were the session not keeping it.
				time.Sleep(100 * time.Millisecond)
				sleep := "SELECT SLEEP(30) /* own thread " + string(rune('a'+i)) + map[bool]string{false: "t", true: "b"}[binary] + " */"
				done := make(chan error, 1)
				go func() {
					_, err := victim.ExecContext(context.Background(), sleep)
					done <- err
				}()
				waitBackendQuery(t, direct, sleep)
				// The thread the session runs on is the one it read, as
				// CONNECTION_ID() and @@pseudo_thread_id are on MariaDB.
				if got := queryValue(t, direct, "SELECT ID FROM information_schema.PROCESSLIST WHERE INFO = ?", sleep); got != id {
					t.Errorf("%s read %s, the session's statement runs on thread %s", read, id, got)
				}
				killer := conn(t, db)
				mustExec(t, killer, "KILL "+id)
				select {
				case err := <-done:
					if err == nil {
						t.Fatal("the killed session's statement succeeded")
					}
				case <-time.After(10 * time.Second):
					t.Fatalf("KILL %s (read by %s) did not end the session's statement", id, read)
				}
				if _, err := victim.ExecContext(t.Context(), "SELECT 1"); err == nil {
					t.Errorf("the session is still there after KILL %s", id)
				}
			})
		}
	}
}

// readValue reads the one value q returns on c, in the text protocol or,
// when binary, as a prepared statement (COM_STMT_PREPARE and EXECUTE).
func readValue(t *testing.T, c *sql.Conn, q string, binary bool) string {
	t.Helper()
	if !binary {
		return queryValue(t, c, q)
	}
	ps, err := c.PrepareContext(t.Context(), q)
	if err != nil {
		t.Fatalf("prepare %s: %v", q, err)
	}
	defer ps.Close()
	var v string
	if err := ps.QueryRowContext(t.Context()).Scan(&v); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return v
}

// TestPrepareExecutableComment: PREPARE of a text with an executable
// comment that the server does not parse (unfinished, or cut by a quote)
// gets the server's own syntax error, whichever form holds the text (a
// literal in either quote, a user variable) and whichever spelling the
// comment has; only the literal's text is read, so an executable comment
// inside a string of the text prepared is no comment. A text with one
// that parses stays the proxy's refusal (the server could read it
// otherwise than the proxy): 1235.
func TestPrepareExecutableComment(t *testing.T) {
	s := backends(t)[0]
	p := startProxy(t, newConfig(t, s))
	d := conn(t, openDB(t, directDSN(s, "", "")))
	c := conn(t, openDB(t, p.dsn("", "")))
	mustExec(t, d, "CREATE DATABASE IF NOT EXISTS prep_exec", "CREATE TABLE IF NOT EXISTS prep_exec.t (a INT)")
	t.Cleanup(func() { d.ExecContext(context.Background(), "DROP DATABASE prep_exec") })
	mustExec(t, d, "USE prep_exec")
	mustExec(t, c, "USE prep_exec")
	texts := []string{
		"DELETE FROM t WHERE a = 7 OR 1=1/*! AND 2=2;",
		"DELETE FROM t WHERE a = 7 OR 1=1/*! AND 2=2;*",
		"DELETE FROM t WHERE a = 7 OR 1=1/*!998765' AND b = 'bar';",
		"DELETE FROM t WHERE a = 7 OR 1=1/*!998765' AND b = 'bar';*",
		"SELECT 1 /*M!100000 + 1",
		"SELECT 1 /*m!+1",
		"SELECT 1 /*!50000 + 1 */ /*!",
		"/*!SELECT 1",
		"SELECT 1 /*!40000 + 1 *//*M!' */",
	}
	for _, text := range texts {
		for _, form := range []string{"'", `"`, "@"} {
			t.Run(form+text, func(t *testing.T) {
				var q string
				switch form {
				case "@":
					mustExec(t, d, "SET @prep_text = "+sqlQuote(text, "'"))
					mustExec(t, c, "SET @prep_text = "+sqlQuote(text, "'"))
					q = "PREPARE bar FROM @prep_text"
				default:
					q = "PREPARE bar FROM " + sqlQuote(text, form)
				}
				_, want := d.ExecContext(t.Context(), q)
				_, got := c.ExecContext(t.Context(), q)
				if !strings.HasPrefix(msg(want), "1064 ") {
					t.Fatalf("%s: directly %s, want a syntax error (the test's text)", q, msg(want))
				}
				if msg(got) != msg(want) {
					t.Errorf("%s: proxy %s, direct %s", q, msg(got), msg(want))
				}
			})
		}
	}
	// Parsed by the server: the proxy's refusal, not the server's
	// statement; and the session goes on.
	for _, q := range []string{"PREPARE bar FROM 'SELECT 1 /*!40000 + 1 */'", `PREPARE bar FROM "SELECT 1 /*M!100000 + 1 */"`} {
		_, err := c.ExecContext(t.Context(), q)
		wantSQLError(t, err, 1235, "42000")
	}
	// An executable comment's opening inside a string of the text is text.
	for _, q := range []string{"PREPARE bar FROM 'SELECT ''/*!'' AS x'", `PREPARE bar FROM "SELECT '/*M!1' AS x"`} {
		mustExec(t, c, q)
		mustExec(t, d, q)
		if got, want := queryValue(t, c, "EXECUTE bar"), queryValue(t, d, "EXECUTE bar"); got != want {
			t.Errorf("%s; EXECUTE bar: proxy %q, direct %q", q, got, want)
		}
	}
}

// sqlQuote quotes s as a string literal with quote q (' or "), doubling q
// and escaping backslashes.
func sqlQuote(s, q string) string {
	return q + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), q, q+q) + q
}
