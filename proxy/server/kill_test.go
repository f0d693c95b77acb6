package server_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/shardgate/shardgate/mysql"
)

// TestKillForms: KILL of an expression and KILL QUERY ID answer as
// MariaDB does, by every route a KILL can come (a query, EXECUTE
// IMMEDIATE, PREPARE and EXECUTE, a binary prepared statement): the id
// is evaluated as the server evaluates it (val_int; tables and stored
// functions refused with 1970, a subquery without tables taken), and
// names a proxy session, or for QUERY ID the session running that query.
func TestKillForms(t *testing.T) {
	s := backends(t)[0]
	p := startProxy(t, newConfig(t, s))
	direct := conn(t, openDB(t, directDSN(s, "", "")))
	db := openDB(t, p.dsn("", ""))
	c := conn(t, db)
	for _, q := range []string{
		"CREATE DATABASE IF NOT EXISTS kill_forms",
		"CREATE SEQUENCE IF NOT EXISTS kill_forms.s",
		"CREATE OR REPLACE FUNCTION kill_forms.f() RETURNS INT DETERMINISTIC RETURN 7",
	} {
		mustExec(t, direct, q)
	}
	t.Cleanup(func() { direct.ExecContext(context.Background(), "DROP DATABASE kill_forms") })
	mustExec(t, c, "USE kill_forms")
	mustExec(t, direct, "USE kill_forms")
	// Errors that do not depend on the ids in use: the same code and
	// message directly and through the proxy.
	for _, q := range []string{
		"KILL 4000000000+1", "KILL (SELECT 4000000001)", "KILL (('x' IN ( SELECT 1)) MOD 44)",
		"KILL -1", "KILL NULL", "KILL 'abc'", "KILL @no_such_var", "KILL 1.5e30", "kill connection 4e9",
		"KILL ( SELECT 1 ) + LASTVAL(s)", "KILL LASTVAL(s)", "KILL f()", "KILL (SELECT COUNT(*) FROM mysql.user)",
		"KILL nosuch", "KILL QUERY ID nosuch", "kill query id user 'foo'", "KILL HARD QUERY ID 0",
		"KILL SOFT QUERY ID 999999999 + 1", "KILL QUERY ID (SELECT 999999999)",
		"EXECUTE IMMEDIATE 'KILL 4000000000 + 2'", "EXECUTE IMMEDIATE CONCAT('KILL QUERY ID ', 999999999)",
		"KILL CONNECTION ID 5", "KILL 1 'foo'",
	} {
		t.Run(q, func(t *testing.T) {
			_, want := direct.ExecContext(t.Context(), q)
			_, got := c.ExecContext(t.Context(), q)
			if msg(want) != msg(got) {
				t.Errorf("%s: proxy %s, direct %s", q, msg(got), msg(want))
			}
		})
	}
	for _, q := range []string{"KILL 4000000000 + 3", "KILL QUERY ID 999999999 * 2"} {
		mustExec(t, c, "PREPARE k FROM '"+q+"'")
		_, err := c.ExecContext(t.Context(), "EXECUTE k")
		_, want := direct.ExecContext(t.Context(), q)
		if msg(err) != msg(want) {
			t.Errorf("PREPARE ... FROM '%s': %s, want %s", q, msg(err), msg(want))
		}
		ps, err := c.PrepareContext(t.Context(), q)
		if err != nil {
			t.Fatal(err)
		}
		if _, err = ps.Exec(); msg(err) != msg(want) {
			t.Errorf("COM_STMT_EXECUTE of %s: %s, want %s", q, msg(err), msg(want))
		}
		ps.Close()
	}

	// The forms that stop a session's statement, or the session.
	kill := func(name, sleep string, stmts func(id int64) []string, query bool) {
		t.Run(name, func(t *testing.T) {
			victim := conn(t, db)
			id, _ := strconv.ParseInt(queryValue(t, victim, "SELECT CONNECTION_ID()"), 10, 64)
			done := make(chan error, 1)
			go func() {
				_, err := victim.ExecContext(context.Background(), sleep)
				done <- err
			}()
			waitBackendQuery(t, openDB(t, directDSN(s, "", "")), sleep)
			killer := conn(t, db)
			mustExec(t, killer, stmts(id)...)
			select {
			case err := <-done:
				if query {
					wantSQLError(t, err, mysql.ErQueryInterrupted, "70100")
				} else if err == nil {
					t.Fatal("the killed connection's statement succeeded")
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the statement did not end")
			}
			_, err := victim.ExecContext(t.Context(), "SELECT 1")
			if query != (err == nil) {
				t.Errorf("the victim after the KILL: %v", err)
			}
		})
	}
	byQueryID := func(sleep string) string {
		return "SELECT QUERY_ID INTO @q FROM information_schema.PROCESSLIST WHERE INFO = '" + sleep + "'"
	}
	kill("KILL QUERY @v", "SELECT SLEEP(30) /* k1 */", func(id int64) []string {
		return []string{fmt.Sprintf("SET @v = %d", id), "KILL QUERY @v"}
	}, true)
	kill("KILL HARD QUERY (SELECT id)", "SELECT SLEEP(30) /* k2 */", func(id int64) []string {
		return []string{fmt.Sprintf("KILL HARD QUERY (SELECT %d)", id)}
	}, true)
	kill("KILL QUERY ID @q", "SELECT SLEEP(30) /* k3 */", func(int64) []string {
		return []string{byQueryID("SELECT SLEEP(30) /* k3 */"), "KILL QUERY ID @q"}
	}, true)
	kill("EXECUTE IMMEDIATE KILL SOFT QUERY ID", "SELECT SLEEP(30) /* k4 */", func(int64) []string {
		return []string{byQueryID("SELECT SLEEP(30) /* k4 */"), "EXECUTE IMMEDIATE CONCAT('KILL SOFT QUERY ID ', @q)"}
	}, true)
	kill("KILL id+0", "SELECT SLEEP(30) /* k5 */", func(id int64) []string {
		return []string{fmt.Sprintf("KILL %d + 0", id)}
	}, false)
}

// msg is an error as "code message" ("OK" for none), to compare answers.
func msg(err error) string {
	if err == nil {
		return "OK"
	}
	var me *gomysql.MySQLError
	if errors.As(err, &me) {
		return fmt.Sprintf("%d %s", me.Number, me.Message)
	}
	return err.Error()
}
