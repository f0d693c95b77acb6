package server_test

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/config"
)

// TestInsertWithoutColumnList: INSERT INTO t VALUES (...) on a sharded
// table (mysqldump writes it so) routes by the key's place in the table's
// columns, read from the subtables, also after ALTER TABLE through the
// proxy moved it.
func TestInsertWithoutColumnList(t *testing.T) {
	e := newShardEnv(t, "nocols", config.ShardRule{Table: "t", Key: "k", Type: "hash", Nodes: []string{"node1", "node2"}, Locations: []int{2, 2}})
	mustExec(t, e.app, "CREATE TABLE t (a VARCHAR(10), k INT NOT NULL PRIMARY KEY)",
		"INSERT INTO t VALUES ('x', 1), ('y', 2), ('z', 3)")
	if v := queryValue(t, e.direct[1], "SELECT a FROM t_0002"); v != "y" {
		t.Errorf("row k=2 not in t_0002: %q", v)
	}
	// A column added first moves the key: the proxy reads the new order.
	mustExec(t, e.app, "ALTER TABLE t ADD COLUMN b INT FIRST", "INSERT INTO t VALUES (9, 'w', 6)")
	if v := queryValue(t, e.direct[1], "SELECT a FROM t_0002 WHERE k = 6"); v != "w" {
		t.Errorf("row k=6 not in t_0002 after ALTER: %q", v)
	}
	_, err := e.app.Exec("INSERT INTO t VALUES ('short', 7)")
	wantSQLError(t, err, 1136, "21S01")
}

// TestColumnMetadataNamesLogicalTable: column definitions of results on a
// sharded table name the logical table (table and org_table), as the
// server does for the table the client wrote; an alias stays the alias.
func TestColumnMetadataNamesLogicalTable(t *testing.T) {
	e := newShardEnv(t, "colmeta", config.ShardRule{Table: "t", Key: "id", Type: "hash", Nodes: []string{"node1", "node2"}, Locations: []int{2, 2}})
	mustExec(t, e.app, "CREATE TABLE t (id INT PRIMARY KEY, v INT)", "INSERT INTO t (id, v) VALUES (1, 1), (2, 2), (3, 3)")
	c, err := backend.Dial(t.Context(), e.p.addr, backend.DialOptions{User: appUser, Password: appPassword, DB: e.db, DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, tc := range []struct{ sql, table, org string }{
		{"SELECT id, v FROM t WHERE id = 1", "t", "t"},                // one subtable, relayed
		{"SELECT i.id FROM t AS i WHERE i.id = 2", "i", "t"},          // an alias
		{"SELECT id FROM t", "t", "t"},                                // concatenated
		{"SELECT id FROM t ORDER BY v DESC LIMIT 2", "t", "t"},        // merged
		{"SELECT id FROM t WHERE id IN (1, 2) ORDER BY id", "t", "t"}, // merged, two subtables
	} {
		res, err := c.Exec(tc.sql)
		if err != nil {
			t.Fatalf("%s: %v", tc.sql, err)
		}
		for _, col := range res.Columns {
			if col.Table != tc.table || col.OrgTable != tc.org {
				t.Errorf("%s: column %s has table %q, org_table %q; want %q, %q", tc.sql, col.Name, col.Table, col.OrgTable, tc.table, tc.org)
			}
		}
	}
}

// TestInformationSchemaLogical: information_schema's catalog views, as
// GUI tools and Connector/J's DatabaseMetaData read them, show a sharded
// table once under its logical name, with its columns and keys, and no
// subtables.
func TestInformationSchemaLogical(t *testing.T) {
	e := newShardEnv(t, "isl", config.ShardRule{Table: "items", Key: "id", Type: "hash", Nodes: []string{"node1", "node2"}, Locations: []int{2, 2}})
	mustExec(t, e.app, "CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(10), KEY by_name (name))", "CREATE TABLE plain (a INT)")
	for _, tc := range []struct{ sql, want string }{
		{"SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() ORDER BY TABLE_NAME", "items|plain"},
		{"SELECT TABLE_NAME, TABLE_TYPE FROM INFORMATION_SCHEMA.TABLES WHERE TABLE_SCHEMA = 'isl' AND TABLE_NAME = 'items'", "items,BASE TABLE"},
		{"SELECT COLUMN_NAME, COLUMN_TYPE, COLUMN_KEY FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'isl' AND TABLE_NAME LIKE 'items' ORDER BY ORDINAL_POSITION", "id,int(11),PRI|name,varchar(10),MUL"},
		{"SELECT INDEX_NAME, COLUMN_NAME FROM information_schema.STATISTICS s WHERE s.TABLE_SCHEMA = 'isl' AND s.TABLE_NAME = 'items' ORDER BY INDEX_NAME", "PRIMARY,id|by_name,name"},
		{"SELECT TABLE_NAME, CONSTRAINT_NAME FROM information_schema.KEY_COLUMN_USAGE WHERE TABLE_SCHEMA = 'isl'", "items,PRIMARY"},
		// Aggregates see the logical names too.
		{"SELECT GROUP_CONCAT(TABLE_NAME ORDER BY TABLE_NAME) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'isl'", "items,plain"},
		{"SELECT GROUP_CONCAT(DISTINCT TABLE_NAME SEPARATOR ' ') FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'isl' AND TABLE_NAME <> 'plain'", "items"},
		{"SELECT COUNT(*), MIN(TABLE_NAME), MAX(TABLE_NAME) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'isl'", "2,items,plain"},
		{"SELECT JSON_ARRAYAGG(TABLE_NAME) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'isl' AND TABLE_NAME = 'items'", `["items"]`},
	} {
		var rows []string
		for _, r := range queryStrings(t, e.app, tc.sql) {
			rows = append(rows, strings.Join(r, ","))
		}
		slices.Sort(rows)
		want := strings.Split(tc.want, "|")
		slices.Sort(want)
		if !slices.Equal(rows, want) {
			t.Errorf("%s:\n got %q\nwant %q", tc.sql, rows, want)
		}
	}
}

// TestHandshakeCollation: the collation a client names in its handshake
// (go-sql-driver's collation parameter sends its id) is the connection's,
// through the proxy as directly, for every id MariaDB knows.
func TestHandshakeCollation(t *testing.T) {
	s := backends(t)[0]
	p := startProxy(t, newConfig(t, s))
	for _, coll := range []string{"cp1257_general_ci", "latin2_czech_cs", "koi8r_general_ci", "utf8mb4_unicode_ci", "ucs2_unicode_ci"} {
		var got [2]string
		for i, dsn := range []string{p.dsn("", "collation="+coll), directDSN(s, "", "collation="+coll)} {
			db := openDB(t, dsn)
			got[i] = strings.Join(queryStrings(t, db, "SELECT @@collation_connection, @@character_set_client, @@character_set_results")[0], ",")
			db.Close()
		}
		if got[0] != got[1] {
			t.Errorf("collation %s in the handshake: through the proxy %s, directly %s", coll, got[0], got[1])
		}
	}
}

// TestSchemaDrift: subtables whose definitions differ (an ALTER run on one
// of them directly) are reported in the admin statistics once the proxy
// reads the table again, and the report clears when they agree.
func TestSchemaDrift(t *testing.T) {
	e := newShardEnv(t, "drift", config.ShardRule{Table: "t", Key: "id", Type: "hash", Nodes: []string{"node1", "node2"}, Locations: []int{2, 2}})
	mustExec(t, e.app, "CREATE TABLE t (id INT PRIMARY KEY, v INT)")
	if d := e.p.srv.Stats().SchemaDrift; len(d) != 0 {
		t.Fatalf("drift after CREATE TABLE through the proxy: %v", d)
	}
	mustExec(t, e.direct[1], "ALTER TABLE t_0003 MODIFY v BIGINT")
	mustExec(t, e.app, "CREATE INDEX by_v ON t (v)") // DDL through the proxy reads the table again
	d := e.p.srv.Stats().SchemaDrift["drift.t"]
	if len(d) != 1 || !strings.Contains(d[0], "t_0003") || !strings.Contains(d[0], "bigint(20)") {
		t.Errorf("drift: %q", d)
	}
	mustExec(t, e.direct[1], "ALTER TABLE t_0003 MODIFY v INT")
	mustExec(t, e.app, "DROP INDEX by_v ON t")
	if d := e.p.srv.Stats().SchemaDrift; len(d) != 0 {
		t.Errorf("drift after the subtables agree again: %v", d)
	}
}

// TestShowTableStatus: SHOW TABLE STATUS names a sharded table once, its
// subtables' rows and sizes summed, a global table once, and LIKE matches
// the logical names.
func TestShowTableStatus(t *testing.T) {
	e := newShardEnv(t, "tstatus",
		config.ShardRule{Table: "items", Key: "id", Type: "hash", Nodes: []string{"node1", "node2"}, Locations: []int{2, 2}},
		config.ShardRule{Table: "g", Type: "global", Nodes: []string{"node1", "node2"}})
	mustExec(t, e.app, "CREATE TABLE items (id INT PRIMARY KEY, v INT)", "CREATE TABLE g (a INT)", "CREATE TABLE plain (a INT)")
	var vals []string
	for i := 1; i <= 200; i++ {
		vals = append(vals, fmt.Sprintf("(%d, %d)", i, i))
	}
	mustExec(t, e.app, "INSERT INTO items (id, v) VALUES "+strings.Join(vals, ","))
	var want int64
	for _, s := range hashSubs("items") {
		mustExec(t, e.direct[s.node], "ANALYZE TABLE "+s.name)
		r := queryStrings(t, e.direct[s.node], "SHOW TABLE STATUS LIKE '"+s.name+"'")
		n, _ := strconv.ParseInt(r[0][4], 10, 64)
		want += n
	}
	rows := queryStrings(t, e.app, "SHOW TABLE STATUS")
	var names []string
	for _, r := range rows {
		names = append(names, r[0])
		if r[0] == "items" {
			if n, _ := strconv.ParseInt(r[4], 10, 64); n != want {
				t.Errorf("items: Rows %s, the subtables hold %d", r[4], want)
			}
		}
	}
	if got := strings.Join(names, ","); got != "g,items,plain" {
		t.Errorf("SHOW TABLE STATUS names %s, want g,items,plain", got)
	}
	for pat, want := range map[string]string{"it%": "items", "items\\_%": "", "%a%": "plain"} {
		var got []string
		for _, r := range queryStrings(t, e.app, "SHOW TABLE STATUS LIKE '"+pat+"'") {
			got = append(got, r[0])
		}
		if strings.Join(got, ",") != want {
			t.Errorf("LIKE %q: %v, want %q", pat, got, want)
		}
	}
}

// TestCommentOnlyStatements: a statement made only of comments answers as
// the server does (an OK, or 1065 for an empty one), through the proxy as
// directly, and ties the session to nothing.
func TestCommentOnlyStatements(t *testing.T) {
	e := newShardEnv(t, "comments", config.ShardRule{Table: "t", Key: "id", Type: "hash", Nodes: []string{"node1", "node2"}, Locations: []int{2, 2}})
	mustExec(t, e.app, "CREATE TABLE t (id INT PRIMARY KEY)")
	code := func(err error) string {
		if err == nil {
			return "OK"
		}
		var me *gomysql.MySQLError
		if errors.As(err, &me) {
			return strconv.Itoa(int(me.Number))
		}
		return err.Error()
	}
	pc, dc := conn(t, e.app), conn(t, e.direct[0])
	for _, q := range []string{"-- just a comment", "# hash comment", "/* c */", "/*!*/", "/*M!999999\\- enable the sandbox mode */",
		"/*M!999999 later */ -- and a line", " ", ";"} {
		_, perr := pc.ExecContext(t.Context(), q)
		_, derr := dc.ExecContext(t.Context(), q)
		if code(perr) != code(derr) {
			t.Errorf("%q: through the proxy %s, directly %s", q, code(perr), code(derr))
		}
	}
	// Nothing was tied: the session reaches both nodes.
	if v := queryValue(t, pc, "SELECT COUNT(*) FROM t"); v != "0" {
		t.Errorf("count %s", v)
	}
}
