package server_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shardgate/shardgate/config"
)

// TestFallback: reads no streaming merge answers run as an exact fallback
// (aggregates in expressions, COUNT(DISTINCT), GROUP_CONCAT with ORDER BY,
// derived tables, joins with an unsharded table, window functions), with
// the answers of one server holding all rows; past fallback_max_rows the
// client gets 1235 naming the limit; after a failure the connection holds
// no temporary table (the node's pool has one connection, so a leftover
// would make the next copy fail); a global table with no copy on the
// default node is copied too.
func TestFallback(t *testing.T) {
	e := newShardEnvWith(t, "fb", func(cfg *config.Config) {
		cfg.FallbackMaxRows = 150
		for i := range cfg.Nodes {
			cfg.Nodes[i].MaxConnsLimit = 1
		}
	}, config.ShardRule{Table: "t", Key: "id", Type: "hash", Nodes: []string{"node1", "node2"}, Locations: []int{2, 2}},
		config.ShardRule{Table: "g", Type: "global", Nodes: []string{"node2"}},
		config.ShardRule{Table: "u", Key: "id", Type: "hash", Nodes: []string{"node1", "node2"}, Locations: []int{1, 1}})
	mustExec(t, e.app, "CREATE TABLE t (id INT PRIMARY KEY, k INT, s VARCHAR(10))", "CREATE TABLE plain (k INT, label VARCHAR(10))",
		"CREATE TABLE g (k INT, name VARCHAR(10))", "CREATE TABLE u (id INT PRIMARY KEY, k INT)")
	mustExec(t, e.direct[0], "CREATE TABLE ref (id INT PRIMARY KEY, k INT, s VARCHAR(10))")
	var vals []string
	for i := 1; i <= 100; i++ {
		vals = append(vals, fmt.Sprintf("(%d, %d, 's%d')", i, i%7, i%5))
	}
	mustExec(t, e.app, "INSERT INTO t (id, k, s) VALUES "+strings.Join(vals, ","),
		"INSERT INTO plain VALUES (0, 'zero'), (1, 'one'), (2, 'two')", "INSERT INTO g VALUES (1, 'uno'), (3, 'tres')",
		"INSERT INTO u (id, k) VALUES "+uvals())
	mustExec(t, e.direct[0], "INSERT INTO ref (id, k, s) VALUES "+strings.Join(vals, ","))
	for _, q := range []string{
		"SELECT SUM(k) / COUNT(*), MAX(id) - MIN(id), ROUND(AVG(k), 2) FROM %s",
		"SELECT COUNT(DISTINCT k), SUM(DISTINCT k) FROM %s",
		"SELECT k, GROUP_CONCAT(id ORDER BY id SEPARATOR '-') FROM %s GROUP BY k ORDER BY k",
		"SELECT COUNT(*) FROM (SELECT k FROM %s WHERE id > 10) AS x",
		"SELECT x.k, p.label, COUNT(*) FROM %s x JOIN plain p ON p.k = x.k GROUP BY x.k, p.label ORDER BY x.k",
		"SELECT id, ROW_NUMBER() OVER (PARTITION BY k ORDER BY id DESC) AS rn FROM %s ORDER BY id LIMIT 12",
		"SELECT k, COUNT(*) FROM %s GROUP BY k WITH ROLLUP",
	} {
		got := queryStrings(t, e.app, fmt.Sprintf(q, "t"))
		want := queryStrings(t, e.direct[0], fmt.Sprintf(q, "ref"))
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s:\n through the proxy %v\n directly          %v", fmt.Sprintf(q, "t"), got, want)
		}
	}
	// A global table whose only copy is on node2, joined with the sharded one.
	if got := queryStrings(t, e.app, "SELECT g.name, COUNT(*) FROM t JOIN g ON g.k = t.k GROUP BY g.name ORDER BY g.name"); fmt.Sprint(got) != "[[tres 14] [uno 15]]" {
		t.Errorf("join with the global table: %v", got)
	}
	// The limit: copies of t and u are 200 rows.
	_, err := e.app.Exec("SELECT COUNT(*) FROM t JOIN u ON u.k = t.id")
	if me := wantSQLError(t, err, 1235, "42000"); me != nil && !strings.Contains(me.Message, "fallback_max_rows (150)") {
		t.Errorf("limit message: %s", me.Message)
	}
	// An error in the statement itself (the copy succeeded).
	_, err = e.app.Exec("SELECT nosuch FROM (SELECT k FROM t) x")
	if me := wantSQLError(t, err, 1054, "42S22"); me != nil && strings.Contains(me.Message, "00000000") {
		t.Errorf("the error names the temporary table: %s", me.Message)
	}
	// Nothing left behind: the same copy works again on the node's one connection.
	if v := queryValue(t, e.app, "SELECT COUNT(DISTINCT k) FROM t"); v != "7" {
		t.Errorf("after failures: %s", v)
	}
	// Inside a transaction the copy reads what the transaction reads: its
	// own uncommitted row, on node2's subtable.
	tx, err := e.app.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec("INSERT INTO t (id, k, s) VALUES (1002, 99, 'new')"); err != nil {
		t.Fatal(err)
	}
	if v := queryValue(t, tx, "SELECT COUNT(DISTINCT k) FROM t"); v != "8" {
		t.Errorf("in the transaction: %s distinct k, want 8", v)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if v := queryValue(t, e.app, "SELECT COUNT(DISTINCT k) FROM t"); v != "7" {
		t.Errorf("after the rollback: %s", v)
	}
	// EXPLAIN shows the copies.
	var sqls []string
	for _, r := range queryStrings(t, e.app, "EXPLAIN FORMAT='shard' SELECT COUNT(DISTINCT k) FROM t") {
		sqls = append(sqls, r[len(r)-1])
	}
	if len(sqls) != 5 || !strings.Contains(sqls[0], "copied into temporary table t_00000000") || !strings.Contains(sqls[4], "COUNT(DISTINCT `k`)") {
		t.Errorf("EXPLAIN: %q", sqls)
	}
}

func uvals() string {
	var v []string
	for i := 1; i <= 100; i++ {
		v = append(v, fmt.Sprintf("(%d, %d)", i, i%7))
	}
	return strings.Join(v, ",")
}

// TestFallbackLimits: fallback_max_bytes bounds what is copied through the
// proxy, fallback_max_time the whole fallback (MariaDB's
// max_statement_time on its statements: ERROR 1969); after either, the
// next fallback works.
func TestFallbackLimits(t *testing.T) {
	e := newShardEnvWith(t, "fblim", func(cfg *config.Config) {
		cfg.FallbackMaxBytes = 2000
		cfg.FallbackMaxTime = 700 * time.Millisecond
		for i := range cfg.Nodes {
			cfg.Nodes[i].MaxConnsLimit = 1
		}
	}, config.ShardRule{Table: "t", Key: "id", Type: "hash", Nodes: []string{"node1", "node2"}, Locations: []int{2, 2}},
		config.ShardRule{Table: "u", Key: "id", Type: "hash", Nodes: []string{"node1", "node2"}, Locations: []int{2, 2}})
	mustExec(t, e.app, "CREATE TABLE t (id INT PRIMARY KEY, k INT, pad VARCHAR(100))", "CREATE TABLE u (id INT PRIMARY KEY, k INT)",
		"INSERT INTO u (id, k) VALUES (1, 1), (2, 2), (3, 0), (4, 1)")
	var vals []string
	for i := 1; i <= 40; i++ {
		vals = append(vals, fmt.Sprintf("(%d, %d, REPEAT('x', 100))", i, i%3))
	}
	mustExec(t, e.app, "INSERT INTO t (id, k, pad) VALUES "+strings.Join(vals, ","))
	_, err := e.app.Exec("SELECT COUNT(DISTINCT pad) FROM t")
	if me := wantSQLError(t, err, 1235, "42000"); me != nil && !strings.Contains(me.Message, "fallback_max_bytes (2000)") {
		t.Errorf("bytes limit: %s", me.Message)
	}
	start := time.Now()
	_, err = e.app.Exec("SELECT COUNT(DISTINCT k), SLEEP(2) FROM u")
	wantSQLError(t, err, 1969, "70100")
	if d := time.Since(start); d > 1900*time.Millisecond {
		t.Errorf("the time limit stopped the fallback after %v", d)
	}
	if v := queryValue(t, e.app, "SELECT COUNT(DISTINCT k) FROM u"); v != "3" {
		t.Errorf("after the limits: %s", v)
	}
	// A table with a generated column cannot be copied: a clear refusal.
	mustExec(t, e.app, "ALTER TABLE u ADD COLUMN k2 INT AS (k * 2) VIRTUAL")
	_, err = e.app.Exec("SELECT COUNT(DISTINCT k2) FROM u")
	if me := wantSQLError(t, err, 1235, "42000"); me != nil && !strings.Contains(me.Message, "generated columns") {
		t.Errorf("generated column: %s", me.Message)
	}
}

// TestFallbackKill: KILL QUERY stops an exact fallback whenever it lands
// (during a copy, between two steps, during the statement); the client
// gets 1317 and the next fallback works (no temporary table left).
func TestFallbackKill(t *testing.T) {
	e := newShardEnvWith(t, "fbkill", func(cfg *config.Config) {
		for i := range cfg.Nodes {
			cfg.Nodes[i].MaxConnsLimit = 2
		}
	}, config.ShardRule{Table: "u", Key: "id", Type: "hash", Nodes: []string{"node1", "node2"}, Locations: []int{2, 2}})
	mustExec(t, e.app, "CREATE TABLE u (id INT PRIMARY KEY, k INT)", "INSERT INTO u (id, k) VALUES (1, 1), (2, 2), (3, 0), (4, 1)")
	c := conn(t, e.app)
	done := make(chan error, 1)
	go func() {
		_, err := c.ExecContext(t.Context(), "SELECT COUNT(DISTINCT k), SLEEP(20) FROM u")
		done <- err
	}()
	killer := openDB(t, e.p.dsn(e.db, ""))
	// KILL QUERY until the statement ends: like a KILL of a statement
	// forwarded as it is, one that lands the instant before the backend
	// starts the statement is lost there (MariaDB drops a KILL QUERY for
	// an idle thread).
	deadline := time.Now().Add(10 * time.Second)
	var err error
wait:
	for time.Now().Before(deadline) {
		for _, r := range queryStrings(t, killer, "SHOW FULL PROCESSLIST") {
			if len(r) > 7 && strings.Contains(r[7], "SLEEP(20)") {
				killer.Exec("KILL QUERY " + r[0])
			}
		}
		select {
		case err = <-done:
			break wait
		case <-time.After(300 * time.Millisecond):
		}
	}
	if time.Now().After(deadline) {
		t.Fatal("KILL QUERY did not stop the fallback")
	}
	wantSQLError(t, err, 1317, "70100")
	if v := queryValue(t, c, "SELECT COUNT(DISTINCT k) FROM u"); v != "3" {
		t.Errorf("after the KILL: %s", v)
	}
}
