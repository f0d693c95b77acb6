package server_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/shardgate/shardgate/config"
)

// Values bound to a statement's placeholders, differentially: the same
// statements run through the proxy on a hash-sharded table and directly on
// one MariaDB that holds all the rows, and the affected counts and the rows
// must match. The values are strings the server compares with the INT
// shard key by reading a number from them ('05', '6.0', ' 7'), numbers,
// and bytes that are not UTF-8, on one subtable and across several.

// boundEnv is a sharded table t (hash on id, four subtables on two nodes)
// through the proxy, and the same table in one database read directly.
type boundEnv struct {
	*shardEnv
	ref *sql.DB
}

func newBoundEnv(t *testing.T, db string) *boundEnv {
	e := newShardEnv(t, db,
		config.ShardRule{Table: "t", Key: "id", Type: "hash", Nodes: []string{"node1", "node2"}, Locations: []int{2, 2}})
	refDB := db + "_ref"
	dbSetup(t, e.servers[0], refDB)
	t.Cleanup(func() {
		if err := dropDirect(e.servers[0], refDB); err != nil {
			t.Error(err)
		}
	})
	b := &boundEnv{shardEnv: e, ref: openDB(t, directDSN(e.servers[0], refDB, ""))}
	const create = "CREATE TABLE t (id INT NOT NULL PRIMARY KEY, c VARCHAR(20) NOT NULL, b VARBINARY(20))"
	const fill = "INSERT INTO t (id, c) VALUES (1, 'a'), (2, 'a'), (3, 'a'), (4, 'a'), (5, 'a'), (6, 'a'), (7, 'a'), (8, 'a')"
	for _, db := range []*sql.DB{e.app, b.ref} {
		mustExec(t, db, create, fill)
	}
	return b
}

// same checks that q answers alike on both sides.
func (b *boundEnv) same(t *testing.T, what, q string, args ...any) {
	t.Helper()
	got, want := answer(b.app, q, args...), answer(b.ref, q, args...)
	if got != want {
		t.Errorf("%s: %s: proxy %q, MariaDB %q", what, q, got, want)
	}
}

// TestBoundUserVariables runs SQL-level PREPARE and EXECUTE ... USING @k
// with @k set to strings and numbers, by key, in IN lists and as values.
func TestBoundUserVariables(t *testing.T) {
	b := newBoundEnv(t, "sg_bound_vars")
	ctx := context.Background()
	side := func(db *sql.DB) *sql.Conn {
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	proxy, ref := side(b.app), side(b.ref)
	for _, c := range []*sql.Conn{proxy, ref} {
		for _, q := range []string{
			"PREPARE u FROM 'UPDATE t SET c = CONCAT(c, ''x'') WHERE id = ?'",
			"PREPARE s FROM 'SELECT id, c FROM t WHERE id = ?'",
			"PREPARE ui FROM 'UPDATE t SET c = CONCAT(c, ''y'') WHERE id IN (?, 8)'",
			"PREPARE si FROM 'SELECT id, c FROM t WHERE id IN (1, ?) ORDER BY id'",
			"PREPARE uv FROM 'UPDATE t SET c = ? WHERE id = 2'",
		} {
			if _, err := c.ExecContext(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	}
	for _, lit := range []string{"'5'", "'05'", "'6.0'", "' 7'", "'\t3'", "'+4'", "'5e0 '", "'9'",
		"5", "5.0", "6e0", "-1", "NULL", "_latin1 '6'", "_binary '07'", "X'36'", "_utf8mb4 X'2035' COLLATE utf8mb4_bin"} {
		run := func(c *sql.Conn, kind, q string) string {
			if _, err := c.ExecContext(ctx, "SET @k = "+lit); err != nil {
				t.Fatalf("SET @k = %s: %v", lit, err)
			}
			if kind == "UPDATE" {
				r, err := c.ExecContext(ctx, q)
				if err != nil {
					return "error " + err.Error()
				}
				n, _ := r.RowsAffected()
				return fmt.Sprint(n, " affected")
			}
			rows, err := c.QueryContext(ctx, q)
			if err != nil {
				return "error " + err.Error()
			}
			defer rows.Close()
			out, err := scanStrings(rows)
			if err != nil {
				return "error " + err.Error()
			}
			return joinRows(out)
		}
		for _, name := range []string{"u", "s", "ui", "si", "uv"} {
			stmt := "EXECUTE " + name + " USING @k"
			kind := stmt // an UPDATE's outcome is its affected count
			if name[0] == 'u' {
				kind = "UPDATE"
			}
			got, want := run(proxy, kind, stmt), run(ref, kind, stmt)
			if got != want {
				t.Errorf("@k = %s, %s: proxy %q, MariaDB %q", lit, stmt, got, want)
			}
		}
		b.same(t, "@k = "+lit, "SELECT id, c, HEX(b) FROM t ORDER BY id")
	}
}

// TestBoundBinaryParameters runs binary prepared statements (go-sql-driver
// prepares on the server by default) with []byte values that are not
// UTF-8, a UTF-8 string, and strings for the key.
func TestBoundBinaryParameters(t *testing.T) {
	b := newBoundEnv(t, "sg_bound_bin")
	for _, v := range []any{[]byte{0xff}, []byte{0, 0xff, 0x80}, []byte("h\xc3\xa9llo"), "w\xc3\xb6rld", []byte{}} {
		what := fmt.Sprintf("%q", v)
		for _, q := range []string{
			"UPDATE t SET b = ? WHERE id = 1",       // one subtable
			"UPDATE t SET b = ? WHERE id IN (1, 4)", // two, on one node
			"UPDATE t SET b = ? WHERE id IN (2, 5)", // two nodes
		} {
			got, want := execAffected(t, b.app, q, v), execAffected(t, b.ref, q, v)
			if got != want {
				t.Errorf("%s: %s: proxy %s, MariaDB %s", what, q, got, want)
			}
			b.same(t, what, "SELECT id, HEX(b) FROM t ORDER BY id")
		}
		b.same(t, what, "SELECT id, HEX(b) FROM t WHERE b = ? ORDER BY id", v)
		b.same(t, what, "SELECT id, HEX(b) FROM t WHERE id IN (1, 3) AND b = ? ORDER BY id", v)
		b.same(t, what, "SELECT id, HEX(b) FROM t WHERE id = 2 AND b = ?", v)
		b.same(t, what, "SELECT COUNT(*), HEX(MAX(b)) FROM t WHERE b = ?", v)
		b.same(t, what, "SELECT HEX(?)", v)
		// A text column: compared with the bytes, and refused (strict
		// mode) or stored as the server decides.
		b.same(t, what, "SELECT id FROM t WHERE c = ? ORDER BY id", v)
		b.same(t, what, "SELECT id FROM t WHERE id IN (3, 6) AND c <> ? ORDER BY id", v)
		q := "UPDATE t SET c = ? WHERE id IN (3, 6)"
		got, want := execCode(b.app, q, v), execCode(b.ref, q, v)
		if got != want {
			t.Errorf("%s: %s: proxy %s, MariaDB %s", what, q, got, want)
		}
		b.same(t, what, "SELECT id, HEX(c) FROM t ORDER BY id")
	}
	// Strings for the key, bound as strings.
	for _, k := range []any{"5", "05", "6.0", " 7", "+3", "5e0", " 6 ", 5, 5.0, int64(6)} {
		what := fmt.Sprintf("key %#v", k)
		for _, q := range []string{
			"UPDATE t SET c = CONCAT(c, 'k') WHERE id = ?",
			"UPDATE t SET c = CONCAT(c, 'l') WHERE id IN (?, 8)",
		} {
			got, want := execAffected(t, b.app, q, k), execAffected(t, b.ref, q, k)
			if got != want {
				t.Errorf("%s: %s: proxy %s, MariaDB %s", what, q, got, want)
			}
		}
		b.same(t, what, "SELECT id, c FROM t WHERE id = ?", k)
		b.same(t, what, "SELECT id, c FROM t WHERE id IN (1, ?) ORDER BY id", k)
		b.same(t, what, "SELECT id, c FROM t ORDER BY id")
	}
	// Rows inserted with such keys are where their integers are looked
	// for, and the other way round.
	for i, k := range []any{" 9", "10.0", "+11", "012", "1.3e1 "} {
		n := 9 + i
		what := fmt.Sprintf("insert key %#v", k)
		q := "INSERT INTO t (id, c) VALUES (?, 'n')"
		got, want := execAffected(t, b.app, q, k), execAffected(t, b.ref, q, k)
		if got != want {
			t.Errorf("%s: %s: proxy %s, MariaDB %s", what, q, got, want)
		}
		b.same(t, what, "SELECT id, c FROM t WHERE id = ?", n)
		b.same(t, what, fmt.Sprintf("SELECT id, c FROM t WHERE id = %d", n))
		b.same(t, what, "SELECT id, c FROM t WHERE id = ?", k)
		b.same(t, what, "SELECT id, c FROM t WHERE id IN (2, ?) ORDER BY id", k)
	}
	b.same(t, "after inserts", "SELECT id, c FROM t ORDER BY id")
}

// execAffected runs q with args and describes the outcome.
func execAffected(t *testing.T, db *sql.DB, q string, args ...any) string {
	t.Helper()
	r, err := db.Exec(q, args...)
	if err != nil {
		return "error " + err.Error()
	}
	n, err := r.RowsAffected()
	if err != nil {
		return "error " + err.Error()
	}
	return fmt.Sprint(n, " affected")
}

// execCode runs q with args and describes the outcome by the affected
// count or the error code (an error's message names the subtable).
func execCode(db *sql.DB, q string, args ...any) string {
	r, err := db.Exec(q, args...)
	var me *gomysql.MySQLError
	switch {
	case errors.As(err, &me):
		return fmt.Sprint("error ", me.Number)
	case err != nil:
		return "error " + err.Error()
	}
	n, err := r.RowsAffected()
	if err != nil {
		return "error " + err.Error()
	}
	return fmt.Sprint(n, " affected")
}

// answer runs query q with args and describes its rows or its error code.
func answer(db *sql.DB, q string, args ...any) string {
	rows, err := db.Query(q, args...)
	if err == nil {
		var out [][]string
		out, err = scanStrings(rows)
		rows.Close()
		if err == nil {
			return joinRows(out)
		}
	}
	var me *gomysql.MySQLError
	if errors.As(err, &me) {
		return fmt.Sprint("error ", me.Number)
	}
	return "error " + err.Error()
}
