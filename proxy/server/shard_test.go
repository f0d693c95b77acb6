package server_test

import (
	"cmp"
	"database/sql"
	"fmt"
	"hash/crc32"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/internal/mariadbtest"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/router"
)

// These tests run shard rules end to end: statements go through the proxy
// to both MariaDB servers (node1 and node2, node1 the default), and where
// rows and tables land is checked on each server directly, not through
// the proxy.

// shardEnv is a proxy over both servers whose schema has shard rules on a
// database of the test's own. The database is created through the proxy
// (CREATE DATABASE fans out to every node) and dropped directly on both
// servers when the test ends.
type shardEnv struct {
	t       *testing.T
	db      string
	servers []*mariadbtest.Server
	p       *proxy
	app     *sql.DB   // through the proxy, current database db
	direct  []*sql.DB // straight to node1 and node2, current database db
}

func newShardEnv(t *testing.T, db string, rules ...config.ShardRule) *shardEnv {
	t.Helper()
	return newShardEnvWith(t, db, nil, rules...)
}

// newShardEnvWith is newShardEnv with the proxy's configuration changed by
// edit (nil: unchanged) before it starts.
func newShardEnvWith(t *testing.T, db string, edit func(*config.Config), rules ...config.ShardRule) *shardEnv {
	t.Helper()
	servers := backends(t)[:2]
	for _, s := range servers {
		if err := dropDirect(s, db); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, s := range servers {
			if err := dropDirect(s, db); err != nil {
				t.Error(err)
			}
		}
	})
	cfg := newConfig(t, servers...)
	for i := range rules {
		rules[i].DB = db
	}
	cfg.Schemas[0].Shard = rules
	if edit != nil {
		edit(cfg)
	}
	e := &shardEnv{t: t, db: db, servers: servers, p: startProxy(t, cfg)}
	root := openDB(t, e.p.dsn("", ""))
	mustExec(t, root, "CREATE DATABASE "+db)
	root.Close()
	e.app = openDB(t, e.p.dsn(db, ""))
	for _, s := range servers {
		e.direct = append(e.direct, openDB(t, directDSN(s, db, "")))
	}
	return e
}

// run runs f as a subtest whose failures the helpers report.
func (e *shardEnv) run(name string, f func(t *testing.T)) {
	parent := e.t
	defer func() { e.t = parent }()
	parent.Run(name, func(t *testing.T) {
		e.t = t
		f(t)
	})
}

// dropDirect drops database db on server s, if it exists.
func dropDirect(s *mariadbtest.Server, db string) error {
	c, err := sql.Open("mysql", directDSN(s, "", ""))
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.Exec("DROP DATABASE IF EXISTS " + db); err != nil {
		return fmt.Errorf("dropping %s on %s: %w", db, s.Addr, err)
	}
	return nil
}

// sub is a physical subtable and the node (0 for node1, 1 for node2) that
// should hold it.
type sub struct {
	node int
	name string
}

// hashSubs returns the subtables of a rule on node1 and node2 with
// locations [2, 2]: table_0000 and _0001 on node1, _0002 and _0003 on node2.
func hashSubs(table string) []sub {
	var out []sub
	for i := 0; i < 4; i++ {
		out = append(out, sub{i / 2, fmt.Sprintf("%s_%04d", table, i)})
	}
	return out
}

// tables lists the tables of the test database on a node, read directly,
// in name order.
func (e *shardEnv) tables(node int) string {
	e.t.Helper()
	var names []string
	for _, r := range queryStrings(e.t, e.direct[node], "SHOW TABLES") {
		names = append(names, r[0])
	}
	slices.Sort(names)
	return strings.Join(names, "|")
}

// wantTables checks the tables each node holds, read directly.
func (e *shardEnv) wantTables(what string, node1, node2 string) {
	e.t.Helper()
	for i, want := range []string{node1, node2} {
		if got := e.tables(i); got != want {
			e.t.Errorf("%s: node%d has tables %q, want %q", what, i+1, got, want)
		}
	}
}

// layout describes, read directly from each subtable on its node, which
// values of column col it holds: "t_0000@node1:4,8 t_0001@node1:1 ...".
// Values are sorted with sortValues.
func (e *shardEnv) layout(col string, subs []sub) string {
	e.t.Helper()
	return e.layoutWhere(col, "TRUE", subs)
}

// layoutWhere is layout restricted to the rows that satisfy cond.
func (e *shardEnv) layoutWhere(col, cond string, subs []sub) string {
	e.t.Helper()
	got := map[string][]string{}
	for _, s := range subs {
		for _, r := range queryStrings(e.t, e.direct[s.node], fmt.Sprintf("SELECT %s FROM %s WHERE %s", col, s.name, cond)) {
			got[s.name] = append(got[s.name], r[0])
		}
	}
	return describeLayout(subs, got)
}

// describeLayout formats values per subtable as layout does.
func describeLayout(subs []sub, vals map[string][]string) string {
	var parts []string
	for _, s := range subs {
		v := slices.Clone(vals[s.name])
		sortValues(v)
		parts = append(parts, fmt.Sprintf("%s@node%d:%s", s.name, s.node+1, strings.Join(v, ",")))
	}
	return strings.Join(parts, " ")
}

// sortValues sorts integers numerically, before other strings, and other
// strings (and equal integers spelled differently) bytewise.
func sortValues(v []string) { slices.SortFunc(v, compareValues) }

func compareValues(a, b string) int {
	x, errA := strconv.ParseInt(a, 10, 64)
	y, errB := strconv.ParseInt(b, 10, 64)
	switch {
	case errA == nil && errB == nil:
		if c := cmp.Compare(x, y); c != 0 {
			return c
		}
		return strings.Compare(a, b) // "007" and "7"
	case errA == nil:
		return -1
	case errB == nil:
		return 1
	}
	return strings.Compare(a, b)
}

// rows runs a query through the proxy and returns its rows sorted
// (column by column, in sortValues order), then joined: cross-shard reads
// without ORDER BY come back in subtable order.
func (e *shardEnv) rows(q string) string {
	e.t.Helper()
	rows := queryStrings(e.t, e.app, q)
	slices.SortFunc(rows, func(a, b []string) int {
		for i := range min(len(a), len(b)) {
			if c := compareValues(a[i], b[i]); c != 0 {
				return c
			}
		}
		return len(a) - len(b)
	})
	return joinRows(rows)
}

// wantRows checks rows(q).
func (e *shardEnv) wantRows(q, want string) {
	e.t.Helper()
	if got := e.rows(q); got != want {
		e.t.Errorf("%s: got %q, want %q", q, got, want)
	}
}

// on runs a query directly on a node and joins its rows.
func (e *shardEnv) on(node int, q string) string {
	e.t.Helper()
	return joinRows(queryStrings(e.t, e.direct[node], q))
}

// exec runs statements through the proxy.
func (e *shardEnv) exec(stmts ...string) {
	e.t.Helper()
	mustExec(e.t, e.app, stmts...)
}

// affected runs a write through the proxy and checks its affected rows.
func (e *shardEnv) affected(q string, want int64) {
	e.t.Helper()
	res, err := e.app.Exec(q)
	if err != nil {
		e.t.Fatalf("%s: %v", q, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != want {
		e.t.Errorf("%s: %d rows affected (%v), want %d", q, n, err, want)
	}
}

// refused runs a statement through the proxy that must fail with code and
// returns the error message.
func (e *shardEnv) refused(q string, code uint16) string {
	e.t.Helper()
	_, err := e.app.Exec(q)
	if err == nil {
		e.t.Fatalf("%s: succeeded, want error %d", q, code)
	}
	state := ""
	switch code {
	case mysql.ErNotSupported:
		state = "42000"
	case router.ErNoPartition:
		state = "HY000"
	}
	me := wantSQLError(e.t, err, code, state)
	return me.Message
}

// wantMessage checks that msg contains every part.
func wantMessage(t *testing.T, q, msg string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(msg, p) {
			t.Errorf("%s: error %q does not mention %q", q, msg, p)
		}
	}
}

// hashIndex is kingshard's hash rule for integer keys: the key, negative
// keys as the uint64 of their two's complement, modulo the subtables.
func hashIndex(k int64, n int) int { return int(uint64(k) % uint64(n)) }

// hashStringIndex is kingshard's hash rule for string keys: strings that
// parse as unsigned integers by their value, others by CRC-32 (IEEE).
func hashStringIndex(s string, n int) int {
	if u, err := strconv.ParseUint(s, 10, 64); err == nil {
		return int(u % uint64(n))
	}
	return int(crc32.ChecksumIEEE([]byte(s)) % uint32(n))
}

func TestShardHash(t *testing.T) {
	e := newShardEnv(t, "sh_hash",
		config.ShardRule{Table: "acct", Key: "id", Type: "hash", Nodes: []string{"node1", "node2"}, Locations: []int{2, 2}},
		config.ShardRule{Table: "tag", Key: "k", Type: "hash", Nodes: []string{"node1", "node2"}, Locations: []int{2, 2}},
	)
	subs := hashSubs("acct")
	const create = "CREATE TABLE acct (id BIGINT NOT NULL PRIMARY KEY, v VARCHAR(20) NOT NULL, n INT NOT NULL DEFAULT 0)"

	e.run("create", func(t *testing.T) {
		e.exec(create)
		e.wantTables("CREATE TABLE", "acct_0000|acct_0001", "acct_0002|acct_0003")
		// Re-running with IF NOT EXISTS converges after a partial
		// failure: a subtable lost on node2 comes back.
		e.exec("CREATE TABLE IF NOT EXISTS acct (id BIGINT NOT NULL PRIMARY KEY, v VARCHAR(20) NOT NULL, n INT NOT NULL DEFAULT 0)")
		mustExec(t, e.direct[1], "DROP TABLE acct_0003")
		// Without IF NOT EXISTS every existing subtable fails, but DDL
		// runs on every target, so the missing one is created and the
		// error says where it failed and where it applied.
		msg := e.refused(create, 1050)
		wantMessage(t, create, msg, "failed on 3 of 4 targets", "already applied on: node2 acct_0003")
		e.wantTables("CREATE TABLE after a lost subtable", "acct_0000|acct_0001", "acct_0002|acct_0003")
		mustExec(t, e.direct[1], "DROP TABLE acct_0002")
		e.exec("CREATE TABLE IF NOT EXISTS acct (id BIGINT NOT NULL PRIMARY KEY, v VARCHAR(20) NOT NULL, n INT NOT NULL DEFAULT 0)")
		e.wantTables("CREATE TABLE IF NOT EXISTS re-run", "acct_0000|acct_0001", "acct_0002|acct_0003")
	})

	e.run("insert split", func(t *testing.T) {
		keys := []int64{1, 2, 3, 4, 5, 6, 7, 8, -1, 1 << 40}
		var vals []string
		want := map[string][]string{}
		for _, k := range keys {
			vals = append(vals, fmt.Sprintf("(%d, 'v%d')", k, k))
			s := subs[hashIndex(k, 4)].name
			want[s] = append(want[s], strconv.FormatInt(k, 10))
		}
		e.affected("INSERT INTO acct (id, v) VALUES "+strings.Join(vals, ", "), int64(len(keys)))
		wantLayout := describeLayout(subs, want)
		// Spelled out: -1 is 2^64-1 as uint64, 3 mod 4; 2^40 is 0 mod 4.
		const spelled = "acct_0000@node1:4,8,1099511627776 acct_0001@node1:1,5 acct_0002@node2:2,6 acct_0003@node2:-1,3,7"
		if wantLayout != spelled {
			t.Fatalf("expected layout %q, spelled out %q", wantLayout, spelled)
		}
		if got := e.layout("id", subs); got != wantLayout {
			t.Errorf("rows landed as %s, want %s", got, wantLayout)
		}
		e.wantRows("SELECT id FROM acct", "-1|1|2|3|4|5|6|7|8|1099511627776")
	})

	e.run("point", func(t *testing.T) {
		e.wantRows("SELECT id, v FROM acct WHERE id = 6", "6,v6")
		e.wantRows("SELECT id, v FROM acct WHERE id = -1", "-1,v-1")
		e.wantRows("SELECT id, v FROM acct WHERE id = '6'", "6,v6")
		e.wantRows("SELECT id, v FROM acct WHERE id = 100", "")
		e.affected("UPDATE acct SET n = 10 WHERE id = 6", 1)
		if got := e.on(1, "SELECT id, n FROM acct_0002 WHERE n <> 0"); got != "6,10" {
			t.Errorf("after UPDATE by key, acct_0002 on node2 has %q", got)
		}
		e.affected("DELETE FROM acct WHERE id = 8", 1)
		e.affected("DELETE FROM acct WHERE id = 8", 0)
		if got := e.on(0, "SELECT id FROM acct_0000 ORDER BY id"); got != "4|1099511627776" {
			t.Errorf("after DELETE by key, acct_0000 on node1 has %q", got)
		}
		e.affected("INSERT INTO acct (id, v) VALUES (8, 'v8')", 1)
	})

	e.run("plan cache", func(t *testing.T) {
		// Point statements repeated with other literals are routed from
		// the plan cache: rows must land, change and read back exactly
		// as the planner would place them.
		before := e.p.srv.Stats().PlanCacheHits
		want := map[string][]string{}
		for k := int64(100); k < 140; k++ {
			e.affected(fmt.Sprintf("INSERT INTO acct (id, v) VALUES (%d, 'c%d')", k, k), 1)
			e.affected(fmt.Sprintf("UPDATE acct SET n = n + %d WHERE id = %d", k, k), 1)
			e.wantRows(fmt.Sprintf("SELECT id, v, n FROM acct WHERE id = %d", k), fmt.Sprintf("%d,c%d,%d", k, k, k))
			e.wantRows(fmt.Sprintf("SELECT v FROM acct WHERE id = '%d'", k), fmt.Sprintf("c%d", k))
			s := subs[hashIndex(k, 4)].name
			want[s] = append(want[s], strconv.FormatInt(k, 10))
		}
		if got, w := e.layoutWhere("id", "id >= 100 AND id < 140", subs), describeLayout(subs, want); got != w {
			t.Errorf("rows landed as %s, want %s", got, w)
		}
		for k := int64(100); k < 140; k += 2 {
			e.affected(fmt.Sprintf("DELETE FROM acct WHERE id = %d", k), 1)
		}
		e.wantRows("SELECT COUNT(*) FROM acct WHERE id >= 100 AND id < 140", "20")
		if hits := e.p.srv.Stats().PlanCacheHits - before; hits < 150 {
			t.Errorf("plan cache answered %d of the 180 statements", hits)
		}
		e.exec("DELETE FROM acct WHERE id >= 100 AND id < 140")
	})

	e.run("in lists", func(t *testing.T) {
		e.wantRows("SELECT id, v FROM acct WHERE id IN (1, 2, 3, 7, 100)", "1,v1|2,v2|3,v3|7,v7")
		e.wantRows("SELECT id FROM acct WHERE id IN (4, 5) OR id = 6", "4|5|6")
		e.affected("UPDATE acct SET n = n + 1 WHERE id IN (1, 3, 7, 100)", 3)
		want := "acct_0000@node1: acct_0001@node1:1 acct_0002@node2:6 acct_0003@node2:3,7"
		if got := e.layoutWhere("id", "n <> 0", subs); got != want {
			t.Errorf("rows with n <> 0: %s, want %s", got, want)
		}
	})

	e.run("shard key update", func(t *testing.T) {
		q := "UPDATE acct SET id = 2 WHERE id = 1"
		msg := e.refused(q, mysql.ErNotSupported)
		wantMessage(t, q, msg, "acct_0002", "acct_0001")
		e.refused("UPDATE acct SET id = id + 4 WHERE id = 1", mysql.ErNotSupported)
		e.refused("UPDATE acct SET id = 9", mysql.ErNotSupported)
		// 9 mod 4 = 1: the same subtable as 1.
		e.affected("UPDATE acct SET id = 9 WHERE id = 1", 1)
		if got := e.on(0, "SELECT id FROM acct_0001 ORDER BY id"); got != "5|9" {
			t.Errorf("acct_0001 on node1 holds %q after moving 1 to 9", got)
		}
		e.affected("UPDATE acct SET id = 1 WHERE id = 9", 1)
	})

	e.run("insert without key", func(t *testing.T) {
		for _, q := range []string{
			"INSERT INTO acct (v) VALUES ('x')",
			"INSERT INTO acct SET v = 'x'",
			"INSERT INTO acct VALUES (NULL, 'x', 0)", // no column list: the key is NULL
			"INSERT INTO acct (id, v) VALUES (NULL, 'x')",
		} {
			msg := e.refused(q, mysql.ErNotSupported)
			wantMessage(t, q, msg, "shard key id")
		}
		e.wantRows("SELECT id FROM acct WHERE v = 'x'", "")
	})

	e.run("multi-target writes", func(t *testing.T) {
		// Every row of every subtable changes: 10 rows in 4 subtables.
		e.affected("UPDATE acct SET v = CONCAT(v, '!')", 10)
		if got := e.on(1, "SELECT v FROM acct_0003 ORDER BY id"); got != "v-1!|v3!|v7!" {
			t.Errorf("acct_0003 after UPDATE of every row: %q", got)
		}
		e.affected("UPDATE acct SET n = 0 WHERE n <> 0", 4)
		e.affected("DELETE FROM acct WHERE id IN (2, 3, 4, 5, 100)", 4)
		e.affected("DELETE FROM acct WHERE id > 6", 3) // 7, 8, 2^40
		e.wantRows("SELECT id FROM acct", "-1|1|6")
		e.affected("DELETE FROM acct", 3)
		e.wantRows("SELECT id FROM acct", "")
	})

	e.run("string keys", func(t *testing.T) {
		tsubs := hashSubs("tag")
		e.exec("CREATE TABLE tag (k VARCHAR(32) NOT NULL PRIMARY KEY, v INT NOT NULL)")
		e.wantTables("CREATE TABLE tag", "acct_0000|acct_0001|tag_0000|tag_0001", "acct_0002|acct_0003|tag_0002|tag_0003")
		keys := []string{"7", "12", "13", "007", "18446744073709551615", "-5", "abc", "hello", "shardgate", "12a", "x"}
		var vals []string
		want := map[string][]string{}
		for i, k := range keys {
			vals = append(vals, fmt.Sprintf("('%s', %d)", k, i))
			s := tsubs[hashStringIndex(k, 4)].name
			want[s] = append(want[s], k)
		}
		e.affected("INSERT INTO tag (k, v) VALUES "+strings.Join(vals, ", "), int64(len(keys)))
		wantLayout := describeLayout(tsubs, want)
		if got := e.layout("k", tsubs); got != wantLayout {
			t.Errorf("string keys landed as %s, want %s", got, wantLayout)
		}
		// Numeric strings by value: '12' and 12 are both in tag_0000.
		if got := e.on(0, "SELECT k FROM tag_0000 WHERE k = '12'"); got != "12" {
			t.Errorf("'12' is not in tag_0000 on node1: %q", got)
		}
		// crc32("abc") = 0x352441c2, 2 mod 4.
		if got := e.on(1, "SELECT k FROM tag_0002 WHERE k = 'abc'"); got != "abc" {
			t.Errorf("'abc' is not in tag_0002 on node2: %q", got)
		}
		for i, k := range keys {
			e.wantRows(fmt.Sprintf("SELECT k, v FROM tag WHERE k = '%s'", k), fmt.Sprintf("%s,%d", k, i))
		}
		e.wantRows("SELECT v FROM tag WHERE k = 13", "2")
		e.affected("UPDATE tag SET v = v + 100 WHERE k IN ('abc', 'hello', '7')", 3)
		e.wantRows("SELECT k, v FROM tag WHERE v >= 100", "7,100|abc,106|hello,107")
		e.affected("DELETE FROM tag WHERE k = 'shardgate'", 1)
		e.wantRows("SELECT COUNT(*) FROM tag WHERE k = 'shardgate'", "0")
	})

	e.run("partial failure", func(t *testing.T) {
		e.affected("INSERT INTO acct (id, v) VALUES (2, 'b')", 1)
		// Subtables run in index order: acct_0001 takes 1, then
		// acct_0002 refuses the duplicate 2 and the statement stops.
		q := "INSERT INTO acct (id, v) VALUES (1, 'a'), (2, 'dup'), (3, 'c')"
		_, err := e.app.Exec(q)
		me := wantSQLError(t, err, 1062, "23000")
		wantMessage(t, q, me.Message, "failed on 1 of 3 targets", "node2 acct_0002", "already applied on: node1 acct_0001")
		if got := e.layout("id", subs); got != "acct_0000@node1: acct_0001@node1:1 acct_0002@node2:2 acct_0003@node2:" {
			t.Errorf("after a partly applied INSERT: %s", got)
		}
		e.affected("DELETE FROM acct", 2)
	})

	e.run("qualified names", func(t *testing.T) {
		// A session without a current database names the table with
		// its database.
		other := openDB(t, e.p.dsn("", ""))
		c := conn(t, other)
		mustExec(t, c, "INSERT INTO sh_hash.acct (id, v) VALUES (10, 'q'), (11, 'r'), (12, 's')")
		if got := e.layout("id", subs); got != "acct_0000@node1:12 acct_0001@node1: acct_0002@node2:10 acct_0003@node2:11" {
			t.Errorf("qualified INSERT landed as %s", got)
		}
		if got := joinRows(queryStrings(t, c, "SELECT id, v FROM sh_hash.acct WHERE sh_hash.acct.id = 11")); got != "11,r" {
			t.Errorf("qualified point SELECT: %q", got)
		}
		mustExec(t, c, "UPDATE sh_hash.acct SET v = 'Q' WHERE id = 10", "DELETE FROM sh_hash.acct WHERE id IN (11, 12)")
		if got := joinRows(queryStrings(t, c, "SELECT id, v FROM sh_hash.acct")); got != "10,Q" {
			t.Errorf("qualified SELECT over every subtable: %q", got)
		}
		if got := joinRows(queryStrings(t, c, "SHOW TABLES FROM sh_hash")); got != "acct|tag" {
			t.Errorf("SHOW TABLES FROM sh_hash: %q", got)
		}
		if got := queryStrings(t, c, "SHOW CREATE TABLE sh_hash.acct"); len(got) != 1 || got[0][0] != "acct" || !strings.HasPrefix(got[0][1], "CREATE TABLE `acct` (") {
			t.Errorf("SHOW CREATE TABLE sh_hash.acct: %q", got)
		}
		mustExec(t, c, "DELETE FROM sh_hash.acct")
	})

	e.run("DDL fan-out", func(t *testing.T) {
		e.affected("INSERT INTO acct (id, v) VALUES (1, 'a'), (2, 'b'), (3, 'c'), (4, 'd')", 4)
		e.exec("TRUNCATE TABLE acct")
		if got := e.layout("id", subs); got != "acct_0000@node1: acct_0001@node1: acct_0002@node2: acct_0003@node2:" {
			t.Errorf("after TRUNCATE: %s", got)
		}
		e.exec("ALTER TABLE acct ADD COLUMN extra INT NOT NULL DEFAULT 7")
		colsQ := "SELECT table_name FROM information_schema.columns WHERE table_schema = DATABASE() AND column_name = 'extra' ORDER BY table_name"
		if got := e.on(0, colsQ) + " " + e.on(1, colsQ); got != "acct_0000|acct_0001 acct_0002|acct_0003" {
			t.Errorf("after ALTER TABLE ADD COLUMN, subtables with the column: %s", got)
		}
		e.affected("INSERT INTO acct (id, v) VALUES (5, 'e'), (6, 'f')", 2)
		e.wantRows("SELECT id, extra FROM acct", "5,7|6,7")

		idxQ := "SELECT DISTINCT table_name FROM information_schema.statistics WHERE table_schema = DATABASE() AND index_name = 'ix_v' ORDER BY table_name"
		e.exec("CREATE INDEX ix_v ON acct (v)")
		if got := e.on(0, idxQ) + " " + e.on(1, idxQ); got != "acct_0000|acct_0001 acct_0002|acct_0003" {
			t.Errorf("after CREATE INDEX, subtables with the index: %s", got)
		}
		e.exec("DROP INDEX ix_v ON acct")
		if got := e.on(0, idxQ) + " " + e.on(1, idxQ); got != " " {
			t.Errorf("after DROP INDEX, subtables with the index: %s", got)
		}
		e.exec("ALTER TABLE acct DROP COLUMN extra")
		if got := e.on(0, colsQ) + " " + e.on(1, colsQ); got != " " {
			t.Errorf("after ALTER TABLE DROP COLUMN, subtables with the column: %s", got)
		}
	})

	e.run("rename refused", func(t *testing.T) {
		for _, q := range []string{"RENAME TABLE acct TO acct2", "ALTER TABLE acct RENAME TO acct2", "RENAME TABLE tag TO acct2"} {
			msg := e.refused(q, mysql.ErNotSupported)
			wantMessage(t, q, msg, "rule")
		}
		e.wantTables("after refused renames", "acct_0000|acct_0001|tag_0000|tag_0001", "acct_0002|acct_0003|tag_0002|tag_0003")
	})

	e.run("drop", func(t *testing.T) {
		e.exec("DROP TABLE acct, tag")
		e.wantTables("DROP TABLE", "", "")
		e.exec("DROP TABLE IF EXISTS acct")
		_, err := e.app.Exec("DROP TABLE acct")
		wantSQLError(t, err, 1051, "42S02")
	})
}

func TestShardRangeAndDate(t *testing.T) {
	e := newShardEnv(t, "sh_range",
		// rng_000i holds ids [100*i, 100*(i+1)): 0-199 on node1, 200-399 on node2.
		config.ShardRule{Table: "rng", Key: "id", Type: "range", Nodes: []string{"node1", "node2"}, Locations: []int{2, 2}, TableRowLimit: 100},
		config.ShardRule{Table: "logm", Key: "ctime", Type: "date_month", Nodes: []string{"node1", "node2"}, DateRange: []string{"201603-201605", "201606-201608"}},
		config.ShardRule{Table: "logd", Key: "ctime", Type: "date_day", Nodes: []string{"node1", "node2"}, DateRange: []string{"20160306-20160307", "20160308-20160309"}},
	)

	e.run("range", func(t *testing.T) {
		subs := hashSubs("rng")
		e.exec("CREATE TABLE rng (id INT NOT NULL PRIMARY KEY, v VARCHAR(10) NOT NULL)")
		e.wantTables("CREATE TABLE rng", "rng_0000|rng_0001", "rng_0002|rng_0003")
		e.affected("INSERT INTO rng (id, v) VALUES (0, 'a'), (99, 'b'), (100, 'c'), (250, 'd'), (399, 'e'), (199, 'f'), (200, 'g')", 7)
		const want = "rng_0000@node1:0,99 rng_0001@node1:100,199 rng_0002@node2:200,250 rng_0003@node2:399"
		if got := e.layout("id", subs); got != want {
			t.Errorf("range rows landed as %s, want %s", got, want)
		}
		for _, q := range []string{
			"INSERT INTO rng (id, v) VALUES (400, 'x')",
			"INSERT INTO rng (id, v) VALUES (-1, 'x')",
			"INSERT INTO rng (id, v) VALUES (5, 'ok'), (1000, 'x')",
			"SELECT v FROM rng WHERE id = 400",
			"UPDATE rng SET id = 400 WHERE id = 399",
		} {
			msg := e.refused(q, router.ErNoPartition)
			wantMessage(t, q, msg, "outside every range", "rng", "id in [0, 400)")
		}
		// The refused multi-row INSERT wrote nothing.
		if got := e.layout("id", subs); got != want {
			t.Errorf("after refused statements: %s, want %s", got, want)
		}
		e.wantRows("SELECT id, v FROM rng WHERE id = 250", "250,d")
		e.wantRows("SELECT id FROM rng WHERE id BETWEEN 90 AND 110", "99|100")
		e.wantRows("SELECT id FROM rng WHERE id >= 199 AND id < 300", "199|200|250")
		e.wantRows("SELECT id FROM rng WHERE id < 100 OR id > 300", "0|99|399")
		e.wantRows("SELECT id FROM rng WHERE id >= 350", "399")
		e.wantRows("SELECT id FROM rng WHERE id < 0", "")
		e.wantRows("SELECT id FROM rng WHERE id = 99 AND id = 100", "")
		e.affected("UPDATE rng SET id = 150 WHERE id = 100", 1)
		e.refused("UPDATE rng SET id = 50 WHERE id = 150", mysql.ErNotSupported)
		e.affected("DELETE FROM rng WHERE id >= 199", 4)
		if got := e.layout("id", subs); got != "rng_0000@node1:0,99 rng_0001@node1:150 rng_0002@node2: rng_0003@node2:" {
			t.Errorf("after UPDATE and DELETE: %s", got)
		}
	})

	e.run("date_month", func(t *testing.T) {
		subs := []sub{{0, "logm_201603"}, {0, "logm_201604"}, {0, "logm_201605"}, {1, "logm_201606"}, {1, "logm_201607"}, {1, "logm_201608"}}
		e.exec("CREATE TABLE logm (ctime DATETIME NOT NULL, msg VARCHAR(20) NOT NULL, KEY (ctime))")
		e.wantTables("CREATE TABLE logm", "logm_201603|logm_201604|logm_201605|rng_0000|rng_0001", "logm_201606|logm_201607|logm_201608|rng_0002|rng_0003")
		e.affected("INSERT INTO logm (ctime, msg) VALUES ('2016-03-01 00:00:00', 'mar'), ('2016-04-30 23:59:59', 'apr'), ('2016-06-15', 'jun'), (TIMESTAMP '2016-08-31 12:00:00', 'aug')", 4)
		const want = "logm_201603@node1:mar logm_201604@node1:apr logm_201605@node1: logm_201606@node2:jun logm_201607@node2: logm_201608@node2:aug"
		if got := e.layout("msg", subs); got != want {
			t.Errorf("date_month rows landed as %s, want %s", got, want)
		}
		for _, q := range []string{
			"INSERT INTO logm (ctime, msg) VALUES ('2016-09-01', 'sep')",
			"INSERT INTO logm (ctime, msg) VALUES ('2016-02-29 23:59:59', 'feb')",
		} {
			msg := e.refused(q, router.ErNoPartition)
			wantMessage(t, q, msg, "outside every range", "logm", "ctime from logm_201603 to logm_201608")
		}
		e.refused("INSERT INTO logm (ctime, msg) VALUES (NOW(), 'now')", mysql.ErNotSupported)
		e.wantRows("SELECT msg FROM logm WHERE ctime = '2016-06-15 00:00:00'", "jun")
		e.wantRows("SELECT msg FROM logm WHERE ctime >= '2016-04-01' AND ctime < '2016-07-01'", "apr|jun")
		e.wantRows("SELECT msg FROM logm", "apr|aug|jun|mar")
		e.affected("UPDATE logm SET ctime = '2016-04-01' WHERE ctime = '2016-04-30 23:59:59'", 1)
		e.refused("UPDATE logm SET ctime = '2016-05-01' WHERE ctime = '2016-04-01'", mysql.ErNotSupported)
		if got := e.on(0, "SELECT ctime FROM logm_201604"); got != "2016-04-01 00:00:00" {
			t.Errorf("logm_201604 after UPDATE within the month: %q", got)
		}
	})

	e.run("date_day", func(t *testing.T) {
		subs := []sub{{0, "logd_20160306"}, {0, "logd_20160307"}, {1, "logd_20160308"}, {1, "logd_20160309"}}
		e.exec("CREATE TABLE logd (ctime DATETIME NOT NULL, msg VARCHAR(20) NOT NULL)")
		e.affected("INSERT INTO logd (ctime, msg) VALUES (DATE '2016-03-08', 'd8'), ('2016-03-06 08:00:00', 'd6'), ('2016-03-09 23:59:59', 'd9'), ('2016-03-06 23:00:00', 'd6b')", 4)
		const want = "logd_20160306@node1:d6,d6b logd_20160307@node1: logd_20160308@node2:d8 logd_20160309@node2:d9"
		if got := e.layout("msg", subs); got != want {
			t.Errorf("date_day rows landed as %s, want %s", got, want)
		}
		q := "INSERT INTO logd (ctime, msg) VALUES ('2016-03-10', 'd10')"
		msg := e.refused(q, router.ErNoPartition)
		wantMessage(t, q, msg, "outside every range", "logd")
		e.refused("SELECT msg FROM logd WHERE ctime = '2016-03-05'", router.ErNoPartition)
		e.wantRows("SELECT msg FROM logd WHERE ctime BETWEEN '2016-03-06 12:00:00' AND '2016-03-08 12:00:00'", "d6b|d8")
		e.affected("DELETE FROM logd WHERE ctime < '2016-03-08'", 2)
		if got := e.layout("msg", subs); got != "logd_20160306@node1: logd_20160307@node1: logd_20160308@node2:d8 logd_20160309@node2:d9" {
			t.Errorf("after DELETE by date: %s", got)
		}
		e.exec("DROP TABLE logd, logm, rng")
		e.wantTables("DROP TABLE", "", "")
	})
}

func TestShardGlobal(t *testing.T) {
	e := newShardEnv(t, "sh_global",
		config.ShardRule{Table: "region", Type: "global", Nodes: []string{"node1", "node2"}},
		config.ShardRule{Table: "acct", Key: "id", Type: "hash", Nodes: []string{"node1", "node2"}, Locations: []int{2, 2}},
		config.ShardRule{Table: "member", Key: "id", Type: "hash", Nodes: []string{"node1", "node2"}, Locations: []int{2, 2}},
	)
	both := func(what, q, want string) {
		t.Helper()
		for i := range e.direct {
			if got := e.on(i, q); got != want {
				t.Errorf("%s: node%d has %q, want %q", what, i+1, got, want)
			}
		}
	}
	e.exec("CREATE TABLE region (id INT NOT NULL PRIMARY KEY, name VARCHAR(20) NOT NULL)")
	e.wantTables("CREATE TABLE of a global table", "region", "region")
	// The client sees one copy's affected rows, not the sum over copies.
	e.affected("INSERT INTO region (id, name) VALUES (1, 'eu'), (2, 'us'), (3, 'ap')", 3)
	both("INSERT", "SELECT id, name FROM region ORDER BY id", "1,eu|2,us|3,ap")
	e.affected("UPDATE region SET name = 'EU' WHERE id = 1", 1)
	e.affected("DELETE FROM region WHERE id = 2", 1)
	both("UPDATE and DELETE", "SELECT id, name FROM region ORDER BY id", "1,EU|3,ap")
	e.wantRows("SELECT id, name FROM region", "1,EU|3,ap")
	e.wantRows("SELECT name FROM region WHERE id = 3", "ap")

	// Reads go to one copy, the default node's: a row only node2's copy
	// has is not seen.
	mustExec(t, e.direct[1], "INSERT INTO region (id, name) VALUES (9, 'stray')")
	e.wantRows("SELECT id FROM region", "1|3")
	mustExec(t, e.direct[1], "DELETE FROM region WHERE id = 9")

	// A sharded table joins its node's copy on every subtable.
	e.exec("CREATE TABLE acct (id INT NOT NULL PRIMARY KEY, region_id INT NOT NULL)")
	e.affected("INSERT INTO acct (id, region_id) VALUES (1, 1), (2, 3), (3, 1), (4, 3)", 4)
	e.wantRows("SELECT a.id, r.name FROM acct a JOIN region r ON r.id = a.region_id", "1,EU|2,ap|3,EU|4,ap")
	e.wantRows("SELECT a.id, r.name FROM acct a JOIN region r ON r.id = a.region_id WHERE a.id = 2", "2,ap")

	// A write to a global table cannot read a sharded one.
	e.refused("INSERT INTO region (id, name) SELECT id, 'x' FROM acct WHERE id = 1", mysql.ErNotSupported)

	// Constraints on subtables: CHECK (MariaDB has no ENFORCED
	// attribute), foreign keys to the global table's copy on each node.
	e.exec("CREATE TABLE plain (id INT NOT NULL PRIMARY KEY)")
	for _, q := range []string{
		"CREATE TABLE member (id INT NOT NULL PRIMARY KEY, region_id INT, CONSTRAINT fk_region FOREIGN KEY (region_id) REFERENCES region (id))",
		"CREATE TABLE member (id INT NOT NULL PRIMARY KEY, p INT, FOREIGN KEY (p) REFERENCES plain (id))",
	} {
		msg := e.refused(q, mysql.ErNotSupported)
		wantMessage(t, q, msg, "foreign key")
	}
	e.wantTables("after refused foreign keys", "acct_0000|acct_0001|plain|region", "acct_0002|acct_0003|region")
	e.exec("CREATE TABLE member (id INT NOT NULL PRIMARY KEY, age INT CHECK (age >= 0), region_id INT, CONSTRAINT ck_id CHECK (id > 0), FOREIGN KEY (region_id) REFERENCES region (id))")
	e.wantTables("CREATE TABLE with constraints", "acct_0000|acct_0001|member_0000|member_0001|plain|region", "acct_0002|acct_0003|member_0002|member_0003|region")
	e.affected("INSERT INTO member (id, age, region_id) VALUES (1, 30, 1), (2, 40, 3)", 2)
	_, err := e.app.Exec("INSERT INTO member (id, age, region_id) VALUES (3, -1, 1)")
	wantSQLError(t, err, 4025, "23000") // ER_CONSTRAINT_FAILED
	_, err = e.app.Exec("INSERT INTO member (id, age, region_id) VALUES (6, 1, 5)")
	wantSQLError(t, err, 1452, "23000") // ER_NO_REFERENCED_ROW_2 from member_0002's node
	e.exec("ALTER TABLE member ADD CONSTRAINT ck_age CHECK (age < 150)")
	_, err = e.app.Exec("UPDATE member SET age = 200 WHERE id = 2")
	wantSQLError(t, err, 4025, "23000")
	e.wantRows("SELECT id, age, region_id FROM member", "1,30,1|2,40,3")
	e.exec("DROP TABLE member, plain")

	e.exec("ALTER TABLE region ADD COLUMN code CHAR(2) NOT NULL DEFAULT 'zz'")
	both("ALTER TABLE", "SELECT id, code FROM region ORDER BY id", "1,zz|3,zz")
	e.exec("TRUNCATE TABLE region")
	both("TRUNCATE", "SELECT COUNT(*) FROM region", "0")
	e.exec("DROP TABLE region, acct")
	e.wantTables("DROP TABLE", "", "")
}

func TestShardMetadata(t *testing.T) {
	e := newShardEnv(t, "sh_meta",
		config.ShardRule{Table: "acct", Key: "id", Type: "hash", Nodes: []string{"node1", "node2"}, Locations: []int{2, 2}},
		config.ShardRule{Table: "region", Type: "global", Nodes: []string{"node1", "node2"}},
	)
	e.exec(
		"CREATE TABLE acct (id INT NOT NULL PRIMARY KEY, v VARCHAR(20) NOT NULL DEFAULT '', KEY ix_v (v))",
		"CREATE TABLE region (id INT NOT NULL PRIMARY KEY)",
		"CREATE TABLE plain (id INT NOT NULL PRIMARY KEY, label VARCHAR(10))",
		"CREATE VIEW plain_v AS SELECT id FROM plain",
	)
	e.wantTables("setup", "acct_0000|acct_0001|plain|plain_v|region", "acct_0002|acct_0003|region")
	a1, a2 := e.servers[0].Addr, e.servers[1].Addr

	e.run("SHOW TABLES", func(t *testing.T) {
		e.wantRows("SHOW TABLES", "acct|plain|plain_v|region")
		e.wantRows("SHOW TABLES FROM sh_meta", "acct|plain|plain_v|region")
		e.wantRows("SHOW FULL TABLES", "acct,BASE TABLE|plain,BASE TABLE|plain_v,VIEW|region,BASE TABLE")
		e.wantRows("SHOW TABLES LIKE 'ac%'", "acct")
		e.wantRows("SHOW TABLES LIKE 'acct'", "acct")
		e.wantRows("SHOW TABLES LIKE 'pl%'", "plain|plain_v")
		e.wantRows("SHOW TABLES LIKE 'reg%'", "region")
		// Patterns are about logical names: subtable names do not match.
		e.wantRows("SHOW TABLES LIKE 'acct_%'", "")
		e.wantRows("SHOW FULL TABLES LIKE 'acct_000_'", "")
		e.wantRows("SHOW TABLES LIKE '%a%'", "acct|plain|plain_v")
		// Column names as MySQL gives them.
		rows, err := e.app.Query("SHOW FULL TABLES")
		if err != nil {
			t.Fatal(err)
		}
		cols, err := rows.Columns()
		rows.Close()
		if err != nil || strings.Join(cols, ",") != "Tables_in_sh_meta,Table_type" {
			t.Errorf("SHOW FULL TABLES columns %q (%v)", cols, err)
		}
		// A table that only node2 holds and no rule names cannot be
		// used through the proxy (unsharded tables live on the default
		// node), so it is not listed.
		mustExec(t, e.direct[1], "CREATE TABLE stray (id INT)")
		defer mustExec(t, e.direct[1], "DROP TABLE stray")
		e.refused("SELECT * FROM stray", 1146)
		e.wantRows("SHOW TABLES", "acct|plain|plain_v|region")
		e.wantRows("SHOW TABLES LIKE 's%'", "")
	})

	e.run("SHOW CREATE TABLE", func(t *testing.T) {
		got := queryStrings(t, e.app, "SHOW CREATE TABLE acct")
		direct := queryStrings(t, e.direct[0], "SHOW CREATE TABLE acct_0000")
		want := [][]string{{"acct", strings.Replace(direct[0][1], "CREATE TABLE `acct_0000`", "CREATE TABLE `acct`", 1)}}
		if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
			t.Errorf("SHOW CREATE TABLE acct: got %q, want %q", got, want)
		}
		if !strings.HasPrefix(want[0][1], "CREATE TABLE `acct` (") {
			t.Errorf("unexpected direct SHOW CREATE TABLE: %q", direct)
		}
		got = queryStrings(t, e.app, "SHOW CREATE TABLE sh_meta.acct")
		if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
			t.Errorf("SHOW CREATE TABLE sh_meta.acct: got %q, want %q", got, want)
		}
		if got := queryStrings(t, e.app, "SHOW CREATE TABLE region"); len(got) != 1 || got[0][0] != "region" {
			t.Errorf("SHOW CREATE TABLE region: %q", got)
		}
	})

	e.run("DESCRIBE and SHOW COLUMNS", func(t *testing.T) {
		want := joinRows(queryStrings(t, e.direct[0], "DESCRIBE acct_0000"))
		if !strings.HasPrefix(want, "id,int(11),NO,PRI") {
			t.Fatalf("unexpected direct DESCRIBE: %q", want)
		}
		for _, q := range []string{"DESCRIBE acct", "DESC acct", "EXPLAIN acct", "SHOW COLUMNS FROM acct", "SHOW FIELDS FROM acct FROM sh_meta"} {
			if got := joinRows(queryStrings(t, e.app, q)); got != want {
				t.Errorf("%s: got %q, want %q", q, got, want)
			}
		}
		wantFull := joinRows(queryStrings(t, e.direct[0], "SHOW FULL COLUMNS FROM acct_0000"))
		if got := joinRows(queryStrings(t, e.app, "SHOW FULL COLUMNS FROM acct")); got != wantFull {
			t.Errorf("SHOW FULL COLUMNS: got %q, want %q", got, wantFull)
		}
		wantID := joinRows(queryStrings(t, e.direct[0], "DESCRIBE acct_0000 id"))
		if got := joinRows(queryStrings(t, e.app, "DESCRIBE acct id")); got != wantID {
			t.Errorf("DESCRIBE acct id: got %q, want %q", got, wantID)
		}
	})

	e.run("SHOW INDEX", func(t *testing.T) {
		rows := queryStrings(t, e.app, "SHOW INDEX FROM acct")
		var got []string
		for _, r := range rows {
			got = append(got, strings.Join(r[:5], ","))
		}
		want := "acct,0,PRIMARY,1,id|acct,1,ix_v,1,v"
		if strings.Join(got, "|") != want {
			t.Errorf("SHOW INDEX FROM acct: got %q, want %q", got, want)
		}
		rows = queryStrings(t, e.app, "SHOW KEYS FROM acct IN sh_meta")
		got = got[:0]
		for _, r := range rows {
			got = append(got, strings.Join(r[:5], ","))
		}
		if strings.Join(got, "|") != want {
			t.Errorf("SHOW KEYS FROM acct IN sh_meta: got %q, want %q", got, want)
		}
	})

	e.run("EXPLAIN FORMAT shard", func(t *testing.T) {
		check := func(q string, want [][]string) {
			t.Helper()
			got := queryStrings(t, e.app, q)
			if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
				t.Errorf("%s:\n got %q\nwant %q", q, got, want)
			}
		}
		check("EXPLAIN FORMAT='shard' SELECT v FROM acct WHERE id = 6", [][]string{
			{"node2", a2, "acct_0002", "no: the result cache is off (cache: in ks.yaml)", "SELECT `v` FROM `acct_0002` WHERE `id`=6"},
		})
		check("EXPLAIN FORMAT='shard' SELECT v FROM acct WHERE id IN (1, 2, 5)", [][]string{
			{"node1", a1, "acct_0001", "no: reads 2 subtables (one only in this version)", "SELECT `v` FROM `acct_0001` WHERE `id` IN (1,5)"},
			{"node2", a2, "acct_0002", "no: reads 2 subtables (one only in this version)", "SELECT `v` FROM `acct_0002` WHERE `id` IN (2)"},
		})
		check("EXPLAIN FORMAT='shard' INSERT INTO acct (id, v) VALUES (3, 'c'), (4, 'd')", [][]string{
			{"node1", a1, "acct_0000", "", "INSERT INTO `acct_0000` (`id`,`v`) VALUES (4,'d')"},
			{"node2", a2, "acct_0003", "", "INSERT INTO `acct_0003` (`id`,`v`) VALUES (3,'c')"},
		})
		check("EXPLAIN FORMAT='shard' TRUNCATE TABLE acct", [][]string{
			{"node1", a1, "acct_0000", "", "TRUNCATE TABLE `acct_0000`"},
			{"node1", a1, "acct_0001", "", "TRUNCATE TABLE `acct_0001`"},
			{"node2", a2, "acct_0002", "", "TRUNCATE TABLE `acct_0002`"},
			{"node2", a2, "acct_0003", "", "TRUNCATE TABLE `acct_0003`"},
		})
		check("EXPLAIN FORMAT='shard' DELETE FROM region WHERE id = 1", [][]string{
			{"node1", a1, "region", "", "DELETE FROM region WHERE id = 1"},
			{"node2", a2, "region", "", "DELETE FROM region WHERE id = 1"},
		})
		check("EXPLAIN FORMAT='shard' SELECT label FROM plain WHERE id = 1", [][]string{
			{"node1", a1, "NULL", "no: table has no shard rule", "SELECT label FROM plain WHERE id = 1"},
		})
		// EXPLAIN does not run the statement.
		e.wantRows("/*node1*/ SELECT COUNT(*) FROM acct_0000", "0")
		e.wantRows("SELECT id FROM acct", "")
		_, err := e.app.Exec("EXPLAIN FORMAT='shard' INSERT INTO acct (v) VALUES ('x')")
		wantSQLError(t, err, mysql.ErNotSupported, "42000")
	})

	e.run("DROP TABLE of every kind", func(t *testing.T) {
		e.exec("DROP TABLE IF EXISTS plain, acct, region, nothere")
		e.wantTables("DROP TABLE", "plain_v", "")
		e.wantRows("SHOW FULL TABLES", "plain_v,VIEW")
		e.exec("DROP VIEW plain_v")
	})
}

func TestShardHints(t *testing.T) {
	e := newShardEnv(t, "sh_hint",
		config.ShardRule{Table: "acct", Key: "id", Type: "hash", Nodes: []string{"node1", "node2"}, Locations: []int{2, 2}},
	)
	p1, p2 := strconv.Itoa(e.servers[0].Port), strconv.Itoa(e.servers[1].Port)
	for q, want := range map[string]string{
		"SELECT @@port":                    p1,
		"/*node2*/ SELECT @@port":          p2,
		"/* node2 */ SELECT @@port":        p2,
		"SELECT /*node2*/ @@port":          p2,
		"/*node1*/ SELECT @@port":          p1,
		"-- note\n/*node2*/ SELECT @@port": p2,
		"SELECT @@port /*node2*/":          p1, // not a hint: too late
		"/*node9*/ SELECT @@port":          p1, // not a node: a comment
	} {
		if got := queryValue(t, e.app, q); got != want {
			t.Errorf("%q: @@port %s, want %s", q, got, want)
		}
	}

	e.exec("CREATE TABLE acct (id INT NOT NULL PRIMARY KEY, v VARCHAR(10) NOT NULL)")
	e.affected("INSERT INTO acct (id, v) VALUES (2, 'b'), (6, 'f'), (1, 'a')", 3)
	mustExec(t, e.direct[1], "CREATE TABLE only2 (v VARCHAR(10))", "INSERT INTO only2 VALUES ('here')")

	// The statement reaches node2 verbatim: physical names work there,
	// logical names of sharded tables are not rewritten.
	e.wantRows("/*node2*/ SELECT v FROM only2", "here")
	e.wantRows("/*node2*/ SELECT id, v FROM acct_0002", "2,b|6,f")
	e.wantRows("SELECT /*node2*/ id FROM acct_0002 WHERE id = 6", "6")
	e.refused("/*node2*/ SELECT id FROM acct", 1146)
	e.refused("SELECT v FROM only2", 1146)                // the default node has no such table
	e.refused("/*node1*/ SELECT id FROM acct_0002", 1146) // acct_0002 lives on node2
	e.wantRows("/*node1*/ SELECT id, v FROM acct_0001", "1,a")

	e.affected("/*node2*/ INSERT INTO only2 VALUES ('again')", 1)
	if got := e.on(1, "SELECT v FROM only2 ORDER BY v"); got != "again|here" {
		t.Errorf("only2 on node2 after a hinted INSERT: %q", got)
	}
	e.affected("/*node2*/ UPDATE acct_0002 SET v = 'F' WHERE id = 6", 1)
	e.wantRows("SELECT v FROM acct WHERE id = 6", "F")
}

func TestShardJoins(t *testing.T) {
	e := newShardEnv(t, "sh_join",
		config.ShardRule{Table: "acct", Key: "id", Type: "hash", Nodes: []string{"node1", "node2"}, Locations: []int{2, 2}},
		// Co-located with acct: same type, nodes and locations.
		config.ShardRule{Table: "note", Key: "acct_id", Type: "hash", Nodes: []string{"node1", "node2"}, Locations: []int{2, 2}},
		// Not co-located: evt_0000 on node1, evt_0001-0003 on node2.
		config.ShardRule{Table: "evt", Key: "id", Type: "hash", Nodes: []string{"node1", "node2"}, Locations: []int{1, 3}},
	)
	e.exec(
		"CREATE TABLE acct (id INT NOT NULL PRIMARY KEY, name VARCHAR(10) NOT NULL)",
		"CREATE TABLE note (id INT NOT NULL PRIMARY KEY, acct_id INT NOT NULL, body VARCHAR(10) NOT NULL)",
		"CREATE TABLE evt (id INT NOT NULL PRIMARY KEY, what VARCHAR(10) NOT NULL)",
		"CREATE TABLE plain (id INT NOT NULL PRIMARY KEY, label VARCHAR(10) NOT NULL)",
	)
	e.wantTables("setup", "acct_0000|acct_0001|evt_0000|note_0000|note_0001|plain", "acct_0002|acct_0003|evt_0001|evt_0002|evt_0003|note_0002|note_0003")
	e.affected("INSERT INTO acct (id, name) VALUES (1, 'one'), (2, 'two'), (3, 'three'), (4, 'four'), (5, 'five')", 5)
	e.affected("INSERT INTO note (id, acct_id, body) VALUES (1, 1, 'n1'), (2, 2, 'n2'), (3, 3, 'n3'), (4, 5, 'n5'), (5, 5, 'n5b')", 5)
	e.affected("INSERT INTO evt (id, what) VALUES (1, 'e1'), (2, 'e2'), (3, 'e3'), (4, 'e4')", 4)
	e.affected("INSERT INTO plain (id, label) VALUES (1, 'p1'), (2, 'p2'), (5, 'p5')", 3)
	if got := e.layout("id", []sub{{0, "evt_0000"}, {1, "evt_0001"}, {1, "evt_0002"}, {1, "evt_0003"}}); got != "evt_0000@node1:4 evt_0001@node2:1 evt_0002@node2:2 evt_0003@node2:3" {
		t.Errorf("evt rows landed as %s", got)
	}

	e.run("sharded with unsharded", func(t *testing.T) {
		// acct_0001 is on node1, the default node, where plain lives.
		e.wantRows("SELECT a.id, a.name, p.label FROM acct a JOIN plain p ON p.id = a.id WHERE a.id = 1", "1,one,p1")
		e.wantRows("SELECT a.id, p.label FROM acct a JOIN plain p ON p.id = a.id WHERE a.id = 5", "5,p5")
		e.wantRows("SELECT name FROM acct WHERE id = 1 AND id IN (SELECT id FROM plain)", "one")
		// acct_0002 is on node2, which has no plain: the exact fallback
		// copies acct to the default node.
		e.wantRows("SELECT a.id, p.label FROM acct a JOIN plain p ON p.id = a.id WHERE a.id = 2", "2,p2")
		e.wantRows("SELECT a.id, p.label FROM acct a JOIN plain p ON p.id = a.id", "1,p1|2,p2|5,p5")
	})

	e.run("co-located", func(t *testing.T) {
		e.wantRows("SELECT a.id, n.body FROM acct a JOIN note n ON n.acct_id = a.id", "1,n1|2,n2|3,n3|5,n5|5,n5b")
		e.wantRows("SELECT a.id, n.body FROM acct a JOIN note n ON n.acct_id = a.id WHERE a.id = 5", "5,n5|5,n5b")
		e.wantRows("SELECT a.id FROM acct a WHERE EXISTS (SELECT 1 FROM note n WHERE n.acct_id = a.id)", "1|2|3|5")
		e.wantRows("SELECT a.id FROM acct a WHERE NOT EXISTS (SELECT 1 FROM note n WHERE n.acct_id = a.id)", "4")
		e.wantRows("SELECT a.id, n.body FROM acct a LEFT JOIN note n ON n.acct_id = a.id WHERE a.id IN (4, 5)", "4,NULL|5,n5|5,n5b")
		// INSERT ... SELECT within one subtable index of co-located tables.
		e.affected("INSERT INTO note (id, acct_id, body) SELECT id + 100, id, name FROM acct WHERE id = 4", 1)
		if got := e.on(0, "SELECT id, acct_id, body FROM note_0000"); got != "104,4,four" {
			t.Errorf("note_0000 on node1 after INSERT ... SELECT: %q", got)
		}
		e.refused("INSERT INTO note (id, acct_id, body) SELECT id + 100, id, name FROM acct", mysql.ErNotSupported)
	})

	e.run("not co-located", func(t *testing.T) {
		// Not co-located, or not joined on the keys: the exact fallback.
		e.wantRows("SELECT a.id, e.what FROM acct a JOIN evt e ON e.id = a.id", "1,e1|2,e2|3,e3|4,e4")
		// Both pinned to subtables on node2: one statement there.
		e.wantRows("SELECT a.id, e.what FROM acct a JOIN evt e ON e.id = a.id WHERE a.id = 2 AND e.id = 2", "2,e2")
		// Pinned to subtables on different nodes.
		e.wantRows("SELECT a.id, e.what FROM acct a JOIN evt e ON e.id = a.id WHERE a.id = 1 AND e.id = 1", "1,e1")
		e.wantRows("SELECT a.id FROM acct a, note n WHERE n.body = a.name", "4") // note 104 (co-located above)
	})
}

func TestShardUnsharded(t *testing.T) {
	e := newShardEnv(t, "sh_plain",
		config.ShardRule{Table: "acct", Key: "id", Type: "hash", Nodes: []string{"node1", "node2"}, Locations: []int{2, 2}},
	)
	e.exec("CREATE TABLE plain (id INT NOT NULL AUTO_INCREMENT PRIMARY KEY, label VARCHAR(10) NOT NULL)")
	e.wantTables("CREATE TABLE of an unsharded table", "plain", "")
	res, err := e.app.Exec("INSERT INTO plain (label) VALUES ('a'), ('b'), ('c')")
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := res.LastInsertId(); id != 1 {
		t.Errorf("LastInsertId %d, want 1", id)
	}
	if got := e.on(0, "SELECT id, label FROM plain ORDER BY id"); got != "1,a|2,b|3,c" {
		t.Errorf("plain on node1: %q", got)
	}
	// MariaDB syntax the parser does not know still works on tables
	// without rules.
	if got := joinRows(queryStrings(t, e.app, "INSERT INTO plain (label) VALUES ('d') RETURNING id, label")); got != "4,d" {
		t.Errorf("INSERT ... RETURNING: %q", got)
	}
	e.affected("UPDATE plain SET label = UPPER(label) WHERE id <= 2", 2)
	e.affected("DELETE FROM plain WHERE id = 3", 1)
	e.wantRows("SELECT id, label FROM plain", "1,A|2,B|4,d")
	if got := queryValue(t, e.app, "SELECT /* unchanged */ @@port"); got != strconv.Itoa(e.servers[0].Port) {
		t.Errorf("statement without tables ran on port %s, want node1's", got)
	}
	// The plan sends the client's text unchanged.
	const q = "SELECT  label FROM plain /* kept */ WHERE id=1"
	got := queryStrings(t, e.app, "EXPLAIN FORMAT='shard' "+q)
	if want := [][]string{{"node1", e.servers[0].Addr, "NULL", "no: table has no shard rule", q}}; fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
		t.Errorf("EXPLAIN FORMAT='shard' %s: got %q, want %q", q, got, want)
	}
	e.exec("DROP TABLE plain")
	e.wantTables("DROP TABLE", "", "")
}

func TestShardSubtableMissing(t *testing.T) {
	e := newShardEnv(t, "sh_missing",
		config.ShardRule{Table: "acct", Key: "id", Type: "hash", Nodes: []string{"node1", "node2"}, Locations: []int{2, 2}},
	)
	e.exec("CREATE TABLE acct (id INT NOT NULL PRIMARY KEY, v VARCHAR(10) NOT NULL)")
	e.affected("INSERT INTO acct (id, v) VALUES (1, 'a'), (2, 'b'), (3, 'c'), (4, 'd')", 4)
	mustExec(t, e.direct[1], "DROP TABLE acct_0003")
	c := conn(t, e.app)

	// The last subtable's error ends a result whose rows have started:
	// the client gets the rows so far, then the backend's error.
	rows, err := c.QueryContext(t.Context(), "SELECT id FROM acct")
	if err != nil {
		t.Fatal(err)
	}
	got, err := scanStrings(rows)
	wantSQLError(t, err, 1146, "42S02")
	if joinRows(got) != "4|1|2" {
		t.Errorf("rows before the error: %q, want those of acct_0000, acct_0001, acct_0002", got)
	}
	// The connection is in step afterwards.
	if got := joinRows(queryStrings(t, c, "SELECT id, v FROM acct WHERE id IN (1, 2)")); got != "1,a|2,b" {
		t.Errorf("after the error: %q", got)
	}
	// Writes run target by target and stop at the failure.
	q := "UPDATE acct SET v = 'x'"
	_, err = c.ExecContext(t.Context(), q)
	me := wantSQLError(t, err, 1146, "42S02")
	wantMessage(t, q, me.Message, "failed on 1 of 4 targets: node2 acct_0003", "already applied on: node1 acct_0000, node1 acct_0001, node2 acct_0002")
	if got := joinRows(queryStrings(t, c, "SELECT id, v FROM acct WHERE id IN (1, 2, 4)")); got != "4,x|1,x|2,x" {
		t.Errorf("after a partly applied UPDATE: %q", got)
	}
	// Re-running the DDL with IF NOT EXISTS repairs the layout.
	e.exec("CREATE TABLE IF NOT EXISTS acct (id INT NOT NULL PRIMARY KEY, v VARCHAR(10) NOT NULL)")
	e.affected("UPDATE acct SET v = 'y'", 3)
}
