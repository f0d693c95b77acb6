package server_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shardgate/shardgate/mysql"
)

func TestStatements(t *testing.T) {
	s := backends(t)[0]
	p := startProxy(t, newConfig(t, s))
	root := openDB(t, p.dsn("", ""))
	mustExec(t, root, "DROP DATABASE IF EXISTS stmt_t", "CREATE DATABASE stmt_t")
	db := openDB(t, p.dsn("stmt_t", ""))
	mustExec(t, db, "CREATE TABLE t (id INT AUTO_INCREMENT PRIMARY KEY, name VARCHAR(20) NOT NULL, n INT)")

	t.Run("DML", func(t *testing.T) {
		res, err := db.Exec("INSERT INTO t (name, n) VALUES ('a', 1), ('b', 2), ('c', NULL)")
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := res.RowsAffected(); n != 3 {
			t.Errorf("INSERT affected %d rows", n)
		}
		if id, _ := res.LastInsertId(); id != 1 {
			t.Errorf("INSERT id %d, want 1 (the first row's)", id)
		}
		if got := joinRows(queryStrings(t, db, "SELECT id, name, n FROM t ORDER BY id")); got != "1,a,1|2,b,2|3,c,NULL" {
			t.Errorf("SELECT: %s", got)
		}
		res, err = db.Exec("UPDATE t SET n = n * 10 WHERE n IS NOT NULL")
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := res.RowsAffected(); n != 2 {
			t.Errorf("UPDATE affected %d rows", n)
		}
		res, err = db.Exec("DELETE FROM t WHERE name = 'b'")
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			t.Errorf("DELETE affected %d rows", n)
		}
		if got := joinRows(queryStrings(t, db, "SELECT id, name, n FROM t ORDER BY id")); got != "1,a,10|3,c,NULL" {
			t.Errorf("after UPDATE and DELETE: %s", got)
		}
		_, err = db.Exec("INSERT INTO t (id, name) VALUES (1, 'dup')")
		wantSQLError(t, err, 1062, "23000")
		_, err = db.Exec("SELEKT 1")
		wantSQLError(t, err, 1064, "42000")
		_, err = db.Exec("SELECT * FROM no_such_table")
		wantSQLError(t, err, 1146, "42S02")
	})

	t.Run("transactions", func(t *testing.T) {
		other := conn(t, db)
		count := func() string { return queryValue(t, other, "SELECT COUNT(*) FROM t WHERE name LIKE 'tx%'") }

		tx, err := db.BeginTx(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		mustExec(t, tx, "INSERT INTO t (name) VALUES ('tx1')", "INSERT INTO t (name) VALUES ('tx2')")
		if got := queryValue(t, tx, "SELECT COUNT(*) FROM t WHERE name LIKE 'tx%'"); got != "2" {
			t.Errorf("inside the transaction: %s rows", got)
		}
		if got := count(); got != "0" {
			t.Errorf("uncommitted rows visible to another connection: %s", got)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if got := count(); got != "2" {
			t.Errorf("after COMMIT another connection sees %s rows, want 2", got)
		}

		tx, err = db.BeginTx(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		mustExec(t, tx, "INSERT INTO t (name) VALUES ('tx3')", "DELETE FROM t WHERE name = 'tx1'")
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		if got := joinRows(queryStrings(t, other, "SELECT name FROM t WHERE name LIKE 'tx%' ORDER BY name")); got != "tx1|tx2" {
			t.Errorf("after ROLLBACK: %s", got)
		}

		// Explicit statements rather than the driver's BEGIN/COMMIT.
		c := conn(t, db)
		mustExec(t, c, "START TRANSACTION", "UPDATE t SET n = 99 WHERE name = 'tx2'")
		if got := queryValue(t, other, "SELECT COALESCE(n, 0) FROM t WHERE name = 'tx2'"); got != "0" {
			t.Errorf("uncommitted UPDATE visible: %s", got)
		}
		mustExec(t, c, "ROLLBACK", "SET autocommit = 0", "UPDATE t SET n = 7 WHERE name = 'tx2'")
		if got := queryValue(t, other, "SELECT COALESCE(n, 0) FROM t WHERE name = 'tx2'"); got != "0" {
			t.Errorf("uncommitted UPDATE with autocommit=0 visible: %s", got)
		}
		mustExec(t, c, "COMMIT", "SET autocommit = 1")
		if got := queryValue(t, other, "SELECT n FROM t WHERE name = 'tx2'"); got != "7" {
			t.Errorf("after COMMIT with autocommit=0: %s", got)
		}
	})

	t.Run("USE", func(t *testing.T) {
		if got := queryValue(t, db, "SELECT DATABASE()"); got != "stmt_t" {
			t.Errorf("database from the DSN: %q", got)
		}
		c := conn(t, root)
		mustExec(t, c, "USE stmt_t")
		if got := queryValue(t, c, "SELECT DATABASE()"); got != "stmt_t" {
			t.Errorf("after USE: %q", got)
		}
		if got := queryValue(t, c, "SELECT COUNT(*) >= 0 FROM t"); got != "1" {
			t.Errorf("unqualified table after USE: %q", got)
		}
		// The proxy's own SHOW PROCESSLIST follows the session's database.
		rows := queryStrings(t, c, "SHOW FULL PROCESSLIST")
		if !slices.ContainsFunc(rows, func(r []string) bool { return r[7] == "SHOW FULL PROCESSLIST" && r[3] == "stmt_t" }) {
			t.Errorf("SHOW PROCESSLIST after USE: %q", rows)
		}
		_, err := c.ExecContext(t.Context(), "USE no_such_db")
		wantSQLError(t, err, 1049, "42000")
		wantSQLError(t, openDB(t, p.dsn("no_such_db", "")).PingContext(t.Context()), 1049, "42000")
	})

	t.Run("SHOW", func(t *testing.T) {
		if dbs := queryStrings(t, db, "SHOW DATABASES"); !slices.ContainsFunc(dbs, func(r []string) bool { return r[0] == "stmt_t" }) {
			t.Errorf("SHOW DATABASES: %q", dbs)
		}
		if got := joinRows(queryStrings(t, db, "SHOW TABLES")); got != "t" {
			t.Errorf("SHOW TABLES: %s", got)
		}
		if rows := queryStrings(t, db, "SHOW CREATE TABLE t"); len(rows) != 1 || !strings.Contains(rows[0][1], "AUTO_INCREMENT") {
			t.Errorf("SHOW CREATE TABLE: %q", rows)
		}
		if rows := queryStrings(t, db, "SHOW COLUMNS FROM t"); len(rows) != 3 {
			t.Errorf("SHOW COLUMNS: %q", rows)
		}
		if rows := queryStrings(t, db, "SHOW VARIABLES LIKE 'version'"); len(rows) != 1 || !strings.Contains(rows[0][1], "MariaDB") {
			t.Errorf("SHOW VARIABLES: %q", rows)
		}
		if rows := queryStrings(t, db, "SHOW SESSION STATUS LIKE 'Uptime'"); len(rows) != 1 {
			t.Errorf("SHOW STATUS: %q", rows)
		}
		// SHOW PROCESSLIST lists the proxy's own sessions: this one is
		// executing the SHOW.
		rows := queryStrings(t, db, "SHOW FULL PROCESSLIST")
		if !slices.ContainsFunc(rows, func(r []string) bool { return r[7] == "SHOW FULL PROCESSLIST" && r[1] == appUser }) {
			t.Errorf("SHOW FULL PROCESSLIST: %q", rows)
		}
	})

	t.Run("LAST_INSERT_ID", func(t *testing.T) {
		a, b := conn(t, db), conn(t, db)
		insert := func(c *sql.Conn) int64 {
			res, err := c.ExecContext(t.Context(), "INSERT INTO t (name) VALUES ('lid')")
			if err != nil {
				t.Fatal(err)
			}
			id, _ := res.LastInsertId()
			return id
		}
		ida := insert(a)
		idb := insert(b)
		// Other sessions' inserts on the shared pool in between.
		for range 5 {
			mustExec(t, db, "INSERT INTO t (name) VALUES ('noise')")
		}
		if got := queryValue(t, a, "SELECT LAST_INSERT_ID()"); got != strconv.FormatInt(ida, 10) {
			t.Errorf("session a: LAST_INSERT_ID() = %s, want %d", got, ida)
		}
		if got := queryValue(t, b, "SELECT LAST_INSERT_ID()"); got != strconv.FormatInt(idb, 10) {
			t.Errorf("session b: LAST_INSERT_ID() = %s, want %d", got, idb)
		}
		// A new client connection (a new handle: db's idle connections ran
		// the inserts above) starts at 0.
		if got := queryValue(t, openDB(t, p.dsn("stmt_t", "")), "SELECT LAST_INSERT_ID()"); got != "0" {
			t.Errorf("new session: LAST_INSERT_ID() = %s, want 0", got)
		}
	})

	t.Run("multi-statements", func(t *testing.T) {
		for name, dsn := range map[string]string{
			"direct": directDSN(s, "stmt_t", "multiStatements=true"),
			"proxy":  p.dsn("stmt_t", "multiStatements=true"),
		} {
			t.Run(name, func(t *testing.T) {
				m := openDB(t, dsn)
				sets, err := resultSets(m, "SELECT 1; SELECT 'two', 2; UPDATE t SET n = n WHERE id = -1; SELECT COUNT(*) > 0 FROM t")
				if err != nil {
					t.Fatal(err)
				}
				if got := fmt.Sprint(sets); got != "[[[1]] [[two 2]] [[1]]]" {
					t.Errorf("result sets %s", got)
				}
				sets, err = resultSets(m, "SELECT 1; SELECT * FROM no_such_table; SELECT 3")
				wantSQLError(t, err, 1146, "42S02")
				if got := fmt.Sprint(sets); got != "[[[1]]]" {
					t.Errorf("result sets before the error %s", got)
				}
				c := conn(t, m)
				_, err = c.ExecContext(t.Context(), "INSERT INTO t (name) VALUES ('m1'); INSERT INTO no_such_table VALUES (1); INSERT INTO t (name) VALUES ('m2')")
				wantSQLError(t, err, 1146, "42S02")
				if got := queryValue(t, c, "SELECT COUNT(*) FROM t WHERE name = 'm2'"); got != "0" {
					t.Errorf("statement after the failing one ran: %s rows", got)
				}
				mustExec(t, c, "DELETE FROM t WHERE name = 'm1'")
				if got := queryValue(t, c, "SELECT 5"); got != "5" {
					t.Errorf("connection after a failed multi-statement: %s", got)
				}
			})
		}
	})

	t.Run("KILL QUERY", func(t *testing.T) {
		direct := openDB(t, directDSN(s, "", ""))
		victim := dialRaw(t, p.addr)
		victim.login(rawCaps)
		id := victim.hs.ConnectionID
		const sleep = "SELECT SLEEP(30) /* kill me */"
		done := make(chan error, 1)
		var rows [][]string
		go func() {
			var e *mysql.SQLError
			rows, e = victimQuery(victim, sleep)
			if e != nil {
				done <- e
				return
			}
			done <- nil
		}()
		waitBackendQuery(t, direct, sleep)
		start := time.Now()
		if _, err := db.Exec(fmt.Sprintf("KILL QUERY %d", id)); err != nil {
			t.Fatalf("KILL QUERY %d: %v", id, err)
		}
		select {
		case err := <-done:
			var se *mysql.SQLError
			if !errors.As(err, &se) || se.Code != mysql.ErQueryInterrupted || se.State != "70100" {
				t.Fatalf("killed SLEEP: got %v (rows %q), want ERR 1317 (70100)", err, rows)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the killed query did not return within 5s")
		}
		t.Logf("killed query returned after %v", time.Since(start))
		if rows, e := victim.query("SELECT 'still here'"); e != nil || joinRows(rows) != "still here" {
			t.Fatalf("victim after KILL QUERY: %q %v", rows, e)
		}

		_, err := db.Exec("KILL 99999")
		wantSQLError(t, err, mysql.ErUnknownThread, "HY000")
		_, err = db.Exec("KILL QUERY 99999")
		wantSQLError(t, err, mysql.ErUnknownThread, "HY000")

		// KILL CONNECTION closes the victim.
		if _, err := db.Exec(fmt.Sprintf("KILL %d", id)); err != nil {
			t.Fatalf("KILL %d: %v", id, err)
		}
		victim.expectClosed()
	})
}

// victimQuery runs q on a raw connection from another goroutine; it must
// not call t.Fatal, so it reports protocol surprises as errors.
func victimQuery(r *rawConn, q string) ([][]string, *mysql.SQLError) {
	r.c.ResetSeq()
	if err := r.c.WritePacket(append([]byte{mysql.ComQuery}, q...)); err != nil {
		return nil, mysql.NewError(2013, "%v", err)
	}
	if err := r.c.Flush(); err != nil {
		return nil, mysql.NewError(2013, "%v", err)
	}
	p, err := r.c.ReadPacket()
	if err != nil {
		return nil, mysql.NewError(2013, "%v", err)
	}
	if len(p) > 0 && p[0] == mysql.ErrHeader {
		return nil, mysql.ParseErr(p)
	}
	var rows [][]string
	n, _, _ := mysql.ReadLenEncInt(p)
	for range n {
		if _, err := r.c.ReadPacket(); err != nil {
			return nil, mysql.NewError(2013, "%v", err)
		}
	}
	for {
		p, err := r.c.ReadPacket()
		if err != nil {
			return rows, mysql.NewError(2013, "%v", err)
		}
		if mysql.IsEOF(p) {
			return rows, nil
		}
		if len(p) > 0 && p[0] == mysql.ErrHeader {
			return rows, mysql.ParseErr(p)
		}
		vals, err := mysql.ParseTextRow(p, int(n), nil)
		if err != nil {
			return rows, mysql.NewError(1835, "%v", err)
		}
		row := make([]string, len(vals))
		for i, v := range vals {
			row[i] = string(v)
		}
		rows = append(rows, row)
	}
}

// resultSets runs a query and returns every result set's rows as strings.
func resultSets(db querier, q string, args ...any) ([][][]string, error) {
	rows, err := db.QueryContext(context.Background(), q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var sets [][][]string
	for {
		cols, err := rows.Columns()
		if err != nil {
			return sets, err
		}
		var set [][]string
		for rows.Next() {
			vals := make([]sql.NullString, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				return sets, err
			}
			row := make([]string, len(cols))
			for i, v := range vals {
				row[i] = v.String
			}
			set = append(set, row)
		}
		if err := rows.Err(); err != nil {
			return sets, err
		}
		if len(cols) > 0 {
			sets = append(sets, set)
		}
		if !rows.NextResultSet() {
			return sets, rows.Err()
		}
	}
}
