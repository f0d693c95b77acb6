package server_test

import (
	"database/sql"
	"fmt"
	"testing"

	"github.com/shardgate/shardgate/config"
)

// TestIntegerKeyStrings: a string compared with an INT shard key is
// compared by MariaDB as the DOUBLE it converts to ('7abc' equals 7 with
// warning 1292, ” and 'abc' equal 0, '7.5' equals nothing), and the proxy,
// which knows the key column's type from the table's definition, routes it
// there. The same statements run through the proxy on a hash-sharded
// table and directly on one MariaDB that holds all the rows, as text and
// as binary executions with string parameters; rows, affected counts and
// error codes must match.
func TestIntegerKeyStrings(t *testing.T) {
	e := newShardEnv(t, "sg_intkey",
		config.ShardRule{Table: "t", Key: "id", Type: "hash", Nodes: []string{"node1", "node2"}, Locations: []int{2, 2}},
		config.ShardRule{Table: "r", Key: "id", Type: "range", Nodes: []string{"node1", "node2"}, Locations: []int{2, 2}, TableRowLimit: 3})
	refDB := "sg_intkey_ref"
	dbSetup(t, e.servers[0], refDB)
	t.Cleanup(func() {
		if err := dropDirect(e.servers[0], refDB); err != nil {
			t.Error(err)
		}
	})
	ref := openDB(t, directDSN(e.servers[0], refDB, ""))
	for _, db := range []*sql.DB{e.app, ref} {
		mustExec(t, db,
			"CREATE TABLE t (id INT NOT NULL PRIMARY KEY, c VARCHAR(500) NOT NULL)",
			"INSERT INTO t (id, c) VALUES (0, 'a'), (1, 'a'), (2, 'a'), (3, 'a'), (4, 'a'), (5, 'a'), (6, 'a'), (7, 'a'), (8, 'a'), (-6, 'a')",
			// Range: subtable i holds ids [3i, 3i+3).
			"CREATE TABLE r (id BIGINT NOT NULL PRIMARY KEY, c VARCHAR(500) NOT NULL)",
			"INSERT INTO r (id, c) VALUES (0, 'a'), (1, 'a'), (2, 'a'), (3, 'a'), (4, 'a'), (5, 'a'), (6, 'a'), (7, 'a'), (8, 'a'), (11, 'a')")
	}
	// outcome is a statement's rows, or its affected count, or its error code.
	outcome := func(db *sql.DB, update bool, q string, args ...any) string {
		if update {
			r, err := db.Exec(q, args...)
			if err != nil {
				return errCode(err)
			}
			n, _ := r.RowsAffected()
			return fmt.Sprint(n, " affected")
		}
		rows, err := db.Query(q, args...)
		if err != nil {
			return errCode(err)
		}
		defer rows.Close()
		out, err := scanStrings(rows)
		if err != nil {
			return errCode(err)
		}
		return joinRows(out)
	}
	values := []string{"7abc", " 7", "07", "7.0", "7.5", "7e0", "", "abc", "\t-6x", "1e30", "1e999", "0x7", "3 ", "+5.", ".7e1", "7.00000000000000000001", "8.9999999999999999999", "9007199254740993"}
	statements := []struct {
		q      string
		update bool
	}{
		{"SELECT id, c FROM %s WHERE id = %s", false},
		{"SELECT id FROM %s WHERE id < %s ORDER BY id", false},
		{"SELECT id FROM %s WHERE id BETWEEN %s AND 8 ORDER BY id", false},
		{"SELECT COUNT(*) FROM %s WHERE %s = id", false},
		{"SELECT id FROM %s WHERE id IN (%s, 4) ORDER BY id", false},
		{"UPDATE %s SET c = CONCAT(c, 'x') WHERE id = %s", true},
		{"UPDATE %s SET c = CONCAT(c, 'y') WHERE id IN (%s, 8)", true},
	}
	for _, tbl := range []string{"t", "r"} {
		for _, v := range values {
			lit := "'" + v + "'"
			for _, st := range statements {
				q := fmt.Sprintf(st.q, tbl, lit)
				if got, want := outcome(e.app, st.update, q), outcome(ref, st.update, q); got != want {
					t.Errorf("text %s: proxy %q, MariaDB %q", q, got, want)
				}
				q = fmt.Sprintf(st.q, tbl, "?")
				if got, want := outcome(e.app, st.update, q, v), outcome(ref, st.update, q, v); got != want {
					t.Errorf("binary %s with %q: proxy %q, MariaDB %q", q, v, got, want)
				}
			}
			if got, want := outcome(e.app, false, "SELECT id, c FROM "+tbl+" ORDER BY id"), outcome(ref, false, "SELECT id, c FROM "+tbl+" ORDER BY id"); got != want {
				t.Fatalf("%s after %q: proxy %q, MariaDB %q", tbl, v, got, want)
			}
		}
	}
	// IN lists mixing strings and numbers, then deletes.
	for _, tbl := range []string{"t", "r"} {
		for _, q := range []string{
			"SELECT id FROM " + tbl + " WHERE id IN ('3x', 4) ORDER BY id",
			"SELECT id FROM " + tbl + " WHERE id IN ('3x', '5.5', ' 6', '') ORDER BY id",
		} {
			if got, want := outcome(e.app, false, q), outcome(ref, false, q); got != want {
				t.Errorf("%s: proxy %q, MariaDB %q", q, got, want)
			}
		}
		for _, v := range []string{"7.5", "7abc", " 6", "", "1e30", "02"} {
			q := "DELETE FROM " + tbl + " WHERE id = '" + v + "'"
			if got, want := outcome(e.app, true, q), outcome(ref, true, q); got != want {
				t.Errorf("%s: proxy %q, MariaDB %q", q, got, want)
			}
		}
		for _, v := range []string{"3x", "5.0"} {
			q := "DELETE FROM " + tbl + " WHERE id IN (?, 1)"
			if got, want := outcome(e.app, true, q, v), outcome(ref, true, q, v); got != want {
				t.Errorf("binary %s with %q: proxy %q, MariaDB %q", q, v, got, want)
			}
		}
		// A string written to the key is stored rounded ('9.5' is 10):
		// the row goes where a lookup by that integer finds it.
		for _, q := range []string{
			"INSERT INTO " + tbl + " (id, c) VALUES ('9.5', 'i')",
			"INSERT INTO " + tbl + " (id, c) VALUES (' 10.6e0', 'i')",
			"INSERT INTO " + tbl + " (id, c) VALUES ('9abc', 'i')",
			"SELECT id, c FROM " + tbl + " WHERE id = 10",
			"SELECT id, c FROM " + tbl + " WHERE id IN (10, 11) ORDER BY id",
		} {
			if got, want := outcome(e.app, q[0] == 'I', q), outcome(ref, q[0] == 'I', q); got != want {
				t.Errorf("%s: proxy %q, MariaDB %q", q, got, want)
			}
		}
		if got, want := outcome(e.app, false, "SELECT id, c FROM "+tbl+" ORDER BY id"), outcome(ref, false, "SELECT id, c FROM "+tbl+" ORDER BY id"); got != want {
			t.Errorf("%s at the end: proxy %q, MariaDB %q", tbl, got, want)
		}
	}
}
