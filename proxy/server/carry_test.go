package server_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shardgate/shardgate/config"
)

// carryEnv is a table t hash-sharded over both nodes through the proxy,
// and the same rows in a plain table t straight on node1: what one
// MariaDB answers. Each node's pool holds one connection, so every
// session reuses the connection the one before it used.
func carryEnv(t *testing.T, db string) (*shardEnv, *sql.DB) {
	e := newShardEnvWith(t, db, func(c *config.Config) {
		for i := range c.Nodes {
			c.Nodes[i].MaxConnsLimit = 2
		}
	}, config.ShardRule{Table: "t", Key: "id", Type: "hash", Nodes: []string{"node1", "node2"}, Locations: []int{2, 2}})
	rows := "INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c'), (4, 'd'), (5, 'e')"
	e.exec("CREATE TABLE t (id INT PRIMARY KEY, note VARCHAR(40) CHARACTER SET utf8mb4)", rows)
	mustExec(t, e.direct[0], "CREATE TABLE t (id INT PRIMARY KEY, note VARCHAR(40) CHARACTER SET utf8mb4)", rows)
	return e, e.direct[0]
}

// across is a statement on both nodes: a session tied to one node gets
// 1235 for it.
const across = "SELECT COUNT(*) FROM t WHERE id IN (1, 2, 3, 4)"

// TestSessionCounts: ROW_COUNT() and FOUND_ROWS() answer what one MariaDB
// answers after every kind of statement (writes on several shards,
// reads, SET, errors), under several spellings, with the column names
// MariaDB gives them, and reading them ties the session to no node.
func TestSessionCounts(t *testing.T) {
	e, direct := carryEnv(t, "carry_counts")
	px, dx := conn(t, e.app), conn(t, direct)
	// FOUND_ROWS() is compared after SELECT only: after other statements
	// MariaDB's value is what the statement's execution left (after an
	// INSERT of 3 rows, 2), which no client can rely on.
	probes := []string{"SELECT ROW_COUNT()", "select row_count() AS r", "SELECT /* c */ ROW_COUNT() + 0, 1"}
	reads := []string{
		"SELECT ROW_COUNT(), FOUND_ROWS()",
		"select row_count() AS r, found_rows() f",
		"SELECT /* c */ ROW_COUNT() + 0, IF(FOUND_ROWS() > 1, 'many', 'few')",
		"SELECT FOUND_ROWS(), ROW_COUNT()",
	}
	for i, q := range []string{
		"INSERT INTO t VALUES (6, 'f'), (7, 'g'), (8, 'h')",
		"UPDATE t SET note = 'x' WHERE id IN (1, 2, 3)",
		"UPDATE t SET note = 'x' WHERE id IN (1, 2, 3)",
		"SELECT * FROM t WHERE id > 1",
		"SELECT * FROM t WHERE id = 2",
		"DELETE FROM t WHERE id IN (7, 8)",
		"SET @q = 1",
		"SELECT COUNT(*) FROM t",
		"DO 1",
		"SELECT * FROM t WHERE id < 0",
		"INSERT INTO t VALUES (1, 'duplicate')",
		"REPLACE INTO t VALUES (2, 'r'), (9, 'n')",
		"SELECT SQL_CALC_FOUND_ROWS * FROM t WHERE id = 3 LIMIT 0",
		"SELECT SQL_CALC_FOUND_ROWS note FROM t WHERE id IN (2) ORDER BY note LIMIT 1",
		"SELECT SQL_CALC_FOUND_ROWS id FROM t WHERE id > 1 ORDER BY id LIMIT 2", // over both nodes
	} {
		probe := probes[i%len(probes)]
		if strings.HasPrefix(q, "SELECT") {
			probe = reads[i%len(reads)]
		}
		want, wantErr := statementThen(dx, q, probe)
		got, gotErr := statementThen(px, q, probe)
		if (wantErr == nil) != (gotErr == nil) {
			t.Fatalf("%s: through the proxy %v, directly %v", q, gotErr, wantErr)
		}
		if got != want {
			t.Errorf("after %s, %s:\n through the proxy %s\n directly          %s", q, probe, got, want)
		}
	}
	var n int
	if err := px.QueryRowContext(t.Context(), across).Scan(&n); err != nil {
		t.Errorf("a statement on both nodes after ROW_COUNT(): %v", err)
	}
}

// TestSessionCountsPrepared: ROW_COUNT() and FOUND_ROWS() after a
// prepared statement's execution (COM_STMT_EXECUTE) are MariaDB's.
func TestSessionCountsPrepared(t *testing.T) {
	e, direct := carryEnv(t, "carry_counts_ps")
	px, dx := conn(t, e.app), conn(t, direct)
	for _, q := range []string{
		"INSERT INTO t VALUES (6, 'f'), (7, 'g'), (8, 'h')",
		"UPDATE t SET note = 'x' WHERE id IN (1, 2, 3)",
		"SELECT * FROM t WHERE id > 1",
		"SELECT * FROM t WHERE id = 2",
		"DELETE FROM t WHERE id IN (7, 8)",
		"SELECT * FROM t WHERE id < 0",
		"UPDATE t SET note = 'y' WHERE id = 1",
		"SELECT SQL_CALC_FOUND_ROWS note FROM t WHERE id IN (2) ORDER BY note LIMIT 1",
	} {
		probe := "SELECT ROW_COUNT()"
		if strings.HasPrefix(q, "SELECT") {
			probe = "SELECT ROW_COUNT(), FOUND_ROWS()"
		}
		want, wantErr := preparedThen(dx, q, probe)
		got, gotErr := preparedThen(px, q, probe)
		if (wantErr == nil) != (gotErr == nil) {
			t.Fatalf("%s: through the proxy %v, directly %v", q, gotErr, wantErr)
		}
		if got != want {
			t.Errorf("after the execution of %s, %s:\n through the proxy %s\n directly          %s", q, probe, got, want)
		}
	}
}

// preparedThen executes q as a prepared statement, then runs probe as
// text (statementThen).
func preparedThen(c *sql.Conn, q, probe string) (string, error) {
	return statementThen(c, q, probe, true)
}

// statementThen runs q (its error returned) then probe on c, and returns
// probe's column names and row; prepared: q is executed as a prepared
// statement.
func statementThen(c *sql.Conn, q, probe string, prepared ...bool) (string, error) {
	ctx := context.Background()
	var qerr error
	var rows *sql.Rows
	if len(prepared) > 0 && prepared[0] {
		st, err := c.PrepareContext(ctx, q)
		if err == nil {
			rows, err = st.QueryContext(ctx)
			st.Close()
		}
		qerr = err
	} else {
		rows, qerr = c.QueryContext(ctx, q)
	}
	if qerr == nil {
		for rows.Next() {
		}
		rows.Close()
	}
	rows, err := c.QueryContext(ctx, probe)
	if err != nil {
		return "probe failed: " + err.Error(), qerr
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	var out []string
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return "scan: " + err.Error(), qerr
		}
		for i, v := range vals {
			out = append(out, cols[i]+"="+v.String)
		}
	}
	return strings.Join(out, " "), qerr
}

// TestAssignedVariablesCarried: a user variable assigned outside SET
// (SELECT ... INTO in every position and spelling, :=, on sharded and
// plain tables) is read back and carried like a SET's: the session keeps
// its value on every node, runs statements on both nodes after it, and
// the next client of the same pooled connection does not see it.
func TestAssignedVariablesCarried(t *testing.T) {
	e, direct := carryEnv(t, "carry_vars")
	for i, q := range []string{
		"SELECT note INTO @v FROM t WHERE id = 2",
		"SELECT note FROM t WHERE id = 3 INTO @v",
		"SELECT note INTO /* a comment */ @v FROM t WHERE id = 4",
		"SELECT note\nINTO\n\t@`v` FROM t WHERE id = 1 ",
		"SELECT id, note FROM t WHERE id = 2 INTO @a, @v",
		"SELECT @v := note FROM t WHERE id = 3",
		"SELECT 'plain' INTO @v",
		"SELECT CONCAT(note, 'é') INTO @'v' FROM t WHERE id = 4",
		"SELECT 1.5 INTO @v",
		"SELECT 2e0, -7 INTO @v, @a",
		"SELECT note FROM t WHERE id = 1 FOR UPDATE INTO @v",
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			probe := "SELECT @v, @a, CHARSET(@v)"
			dx := conn(t, direct)
			mustExec(t, dx, "SET @v = NULL, @a = NULL", q)
			wantWarnings := joinRows(queryStrings(t, dx, "SHOW WARNINGS"))
			want := joinRows(queryStrings(t, dx, probe))
			client := openDB(t, e.p.dsn(e.db, ""))
			px := conn(t, client)
			if _, err := px.ExecContext(t.Context(), q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			// The read-back keeps the statement's warnings (INTO at the
			// end is deprecated: 1287), also on the other node; not those
			// of an exact fallback's statement (its temporary tables are
			// dropped after it: docs/sharding.md).
			if got := joinRows(queryStrings(t, px, "SHOW WARNINGS")); got != wantWarnings && !strings.Contains(q, "id < 1000") {
				t.Errorf("after %s, SHOW WARNINGS: %q through the proxy, %q directly", q, got, wantWarnings)
			}
			var n int
			if err := px.QueryRowContext(t.Context(), across).Scan(&n); err != nil {
				t.Fatalf("after %s, a statement on both nodes: %v", q, err)
			}
			if got := joinRows(queryStrings(t, px, probe)); got != want {
				t.Errorf("after %s: %s through the proxy, %s directly", q, got, want)
			}
			// On the other node too: the sharded table's row 1 lives on
			// one node, row 2 on the other.
			for _, id := range []int{1, 2} {
				if got := joinRows(queryStrings(t, px, fmt.Sprintf("SELECT @v FROM t WHERE id = %d", id))); !strings.HasPrefix(want, got) {
					t.Errorf("after %s: @v on the node of row %d is %s, want %s", q, id, got, want)
				}
			}
			px.Close()
			client.Close() // the client disconnects
			next := conn(t, e.app)
			if got := joinRows(queryStrings(t, next, "SELECT @v, @a FROM t WHERE id IN (1, 2) LIMIT 1")); got != "NULL,NULL" {
				t.Errorf("after %s, the next client sees %s", q, got)
			}
			next.Close()
		})
	}
}

// TestIntoVariablesErrors: SELECT ... INTO variables of more than one row
// fails as on MariaDB (1172), over one shard and over several.
func TestIntoVariablesErrors(t *testing.T) {
	e, direct := carryEnv(t, "carry_into_err")
	for _, q := range []string{"SELECT note INTO @v FROM t WHERE id IN (1, 5)", "SELECT note FROM t WHERE id IN (5, 1) INTO @v"} {
		_, derr := direct.ExecContext(t.Context(), q)
		_, perr := e.app.ExecContext(t.Context(), q)
		if fmt.Sprint(derr) != fmt.Sprint(perr) {
			t.Errorf("%s: through the proxy %v, directly %v", q, perr, derr)
		}
	}
}

// TestIntoVariablesAcrossShards: SELECT ... INTO @variables whose row the
// proxy computes over several shards (aggregates, ORDER BY ... LIMIT, a
// filter that leaves one row, none, or several) assigns what MariaDB
// assigns, with its types and character sets, answers its errors and
// warnings (1172, 1222, 1329), and the values are carried: the session
// goes on on both nodes and the next client sees none of them. (Not
// compared: AVG() or a division, whose variable MariaDB keeps with more
// digits than its result set shows; docs/mariadb-differences.md.)
func TestIntoVariablesAcrossShards(t *testing.T) {
	e, direct := carryEnv(t, "carry_into_across")
	probe := "SELECT @v, @a, CHARSET(@v), COLLATION(@v), @v + 0, CONCAT(@a)"
	for i, q := range []string{
		"SELECT COUNT(*) INTO @v FROM t",
		"SELECT COUNT(*), MAX(note) FROM t INTO @a, @v",
		"SELECT SUM(id) - 3, MIN(note) INTO @v, @a FROM t WHERE id > 1",
		"SELECT note INTO /* c */ @v FROM t ORDER BY id DESC LIMIT 1",
		"SELECT note, id FROM t WHERE note IN ('c', 'x') INTO @v, @a",
		"select count(distinct note), group_concat(note order by note) into @a, @v from t",
		"SELECT note INTO @v FROM t WHERE id IN (1, 2, 3, 4) ORDER BY id",
		"SELECT note INTO @v FROM t WHERE id > 100",
		"SELECT id, note INTO @v FROM t WHERE id IN (1, 2) LIMIT 1",
		"SELECT MAX(id) * 1.5e0, CAST(MIN(id) AS DECIMAL(10,3)) INTO @v, @a FROM t",
		"SELECT CAST(note AS BINARY), id INTO @v, @a FROM t WHERE id IN (1, 2) ORDER BY id LIMIT 1",
		"SELECT DATE('2024-02-29') + INTERVAL id DAY, COUNT(*) INTO @v, @a FROM t WHERE id IN (2, 3) GROUP BY id ORDER BY id LIMIT 1",
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			dx := conn(t, direct)
			mustExec(t, dx, "SET @v = 'before', @a = 7")
			_, derr := dx.ExecContext(t.Context(), q)
			wantWarnings := joinRows(queryStrings(t, dx, "SHOW WARNINGS"))
			want := joinRows(queryStrings(t, dx, probe))
			client := openDB(t, e.p.dsn(e.db, ""))
			px := conn(t, client)
			mustExec(t, px, "SET @v = 'before', @a = 7")
			_, perr := px.ExecContext(t.Context(), q)
			if fmt.Sprint(derr) != fmt.Sprint(perr) {
				t.Fatalf("%s: through the proxy %v, directly %v", q, perr, derr)
			}
			if derr == nil {
				if got := joinRows(queryStrings(t, px, "SHOW WARNINGS")); got != wantWarnings {
					t.Errorf("after %s, SHOW WARNINGS: %q through the proxy, %q directly", q, got, wantWarnings)
				}
			}
			if got := joinRows(queryStrings(t, px, probe)); got != want {
				t.Errorf("after %s: %s through the proxy, %s directly", q, got, want)
			}
			var n int
			if err := px.QueryRowContext(t.Context(), across).Scan(&n); err != nil {
				t.Fatalf("after %s, a statement on both nodes: %v", q, err)
			}
			for _, id := range []int{1, 2} { // rows 1 and 2 live on different nodes
				got := joinRows(queryStrings(t, px, fmt.Sprintf("SELECT @v, @a FROM t WHERE id = %d", id)))
				if wantV := joinRows(queryStrings(t, dx, "SELECT @v, @a")); got != wantV {
					t.Errorf("after %s: @v, @a on the node of row %d are %s, want %s", q, id, got, wantV)
				}
			}
			px.Close()
			client.Close()
			next := conn(t, e.app)
			if got := joinRows(queryStrings(t, next, "SELECT @v, @a FROM t WHERE id IN (1, 2) LIMIT 1")); got != "NULL,NULL" {
				t.Errorf("after %s, the next client sees %s", q, got)
			}
			next.Close()
		})
	}
	// Prepared in SQL, and with the binary protocol (go-sql-driver
	// prepares a statement with arguments on the server).
	px := conn(t, e.app)
	mustExec(t, px, "PREPARE s FROM 'SELECT MAX(note) INTO @v FROM t WHERE id < ?'", "SET @lim = 5", "EXECUTE s USING @lim")
	if got := joinRows(queryStrings(t, px, "SELECT @v FROM t WHERE id IN (1, 2)")); got != "d|d" {
		t.Errorf("after EXECUTE of SELECT ... INTO over several shards: %q, want d on both nodes", got)
	}
	// The binary protocol (go-sql-driver prepares a statement with
	// arguments on the server): assigned and carried as well; 1172 as
	// MariaDB's after assigning the first row.
	if _, err := px.ExecContext(t.Context(), "SELECT COUNT(*) INTO @a FROM t WHERE id > ?", 1); err != nil {
		t.Fatalf("binary SELECT ... INTO over several shards: %v", err)
	}
	_, err := px.ExecContext(t.Context(), "SELECT note INTO @v FROM t WHERE id > ? ORDER BY id", 2)
	wantSQLError(t, err, 1172, "42000")
	if got := joinRows(queryStrings(t, px, "SELECT @v, @a FROM t WHERE id IN (1, 2)")); got != "c,4|c,4" {
		t.Errorf("after binary SELECT ... INTO over several shards: %q, want c,4 on both nodes", got)
	}
}

// TestRoutineStateStaysWithSession: a stored function or procedure may
// take named locks, assign user variables or advance sequences without
// the server reporting it; the session keeps the connection it ran on
// (and can still run statements on both nodes), and when the client
// leaves, its locks are released and its variables and sequence values
// reach no one, as when a client of one MariaDB disconnects.
func TestRoutineStateStaysWithSession(t *testing.T) {
	e, _ := carryEnv(t, "carry_routines")
	multi := openDB(t, e.p.dsn(e.db, "multiStatements=true"))
	mustExec(t, multi,
		"CREATE TABLE plain (id INT PRIMARY KEY)",
		"CREATE SEQUENCE s",
		"CREATE PROCEDURE proc_it() BEGIN SET @leak = 43; DO GET_LOCK('proc_lock', 0); END",
		"CREATE FUNCTION seq_it() RETURNS BIGINT DETERMINISTIC RETURN NEXT VALUE FOR s")
	// The functions a statement on the sharded table calls on both nodes.
	for _, db := range []*sql.DB{multi, e.direct[1]} {
		mustExec(t, db,
			"CREATE FUNCTION lock_it(n VARCHAR(20)) RETURNS INT DETERMINISTIC RETURN GET_LOCK(n, 0)",
			"CREATE FUNCTION set_it() RETURNS INT DETERMINISTIC BEGIN SET @leak = 42; RETURN 1; END")
	}
	for i, c := range []struct {
		stmt, lock string
		vars       bool
	}{
		{stmt: "SELECT lock_it('k1')", lock: "k1"},
		{stmt: "SELECT `lock_it`('k2') FROM t WHERE id = 1", lock: "k2"},
		{stmt: "DO carry_routines.lock_it('k3')", lock: "k3"},
		{stmt: "SET @x = lock_it('k4')", lock: "k4"},
		{stmt: "SET @x = GET_LOCK('k5', 0)", lock: "k5"},
		{stmt: "SELECT id FROM plain WHERE lock_it('k6') = 1", lock: "k6"},
		{stmt: "SELECT set_it()", vars: true},
		{stmt: "SELECT set_it() FROM t WHERE id IN (1, 2)"}, // on both nodes: nothing reaches the next client
		{stmt: "SELECT lock_it('k8') FROM t WHERE id IN (1, 2, 3, 4)", lock: "k8"},
		{stmt: "INSERT INTO plain VALUES (set_it() + 10)", vars: true},
		{stmt: "CALL proc_it()", lock: "proc_lock", vars: true},
		{stmt: "SELECT seq_it()"},
		{stmt: "SET @x = NEXT VALUE FOR s"},
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			client := openDB(t, e.p.dsn(e.db, ""))
			px := conn(t, client)
			if _, err := px.ExecContext(t.Context(), c.stmt); err != nil {
				t.Fatalf("%s: %v", c.stmt, err)
			}
			var n int
			if err := px.QueryRowContext(t.Context(), across).Scan(&n); err != nil {
				t.Errorf("after %s, a statement on both nodes: %v", c.stmt, err)
			}
			if c.vars {
				if got := joinRows(queryStrings(t, px, "SELECT @leak IS NOT NULL")); got != "1" {
					t.Errorf("after %s the session's own @leak is lost", c.stmt)
				}
				// Read back and carried: on the other node too (rows 1
				// and 2 live on different nodes).
				if got := joinRows(queryStrings(t, px, "SELECT @leak IS NOT NULL FROM t WHERE id IN (1, 2)")); got != "1|1" {
					t.Errorf("after %s, @leak on both nodes: %s", c.stmt, got)
				}
			}
			px.Close()
			client.Close() // the client disconnects
			if c.lock != "" {
				deadline := time.Now().Add(3 * time.Second)
				for e.on(0, "SELECT IS_USED_LOCK('"+c.lock+"') IS NULL") != "1" {
					if time.Now().After(deadline) {
						t.Fatalf("after %s and the client's exit, lock %s is still held", c.stmt, c.lock)
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
			next := conn(t, e.app)
			if got := joinRows(queryStrings(t, next, "SELECT @leak, @x, LASTVAL(s), IS_USED_LOCK('"+c.lock+"')")); got != "NULL,NULL,NULL,NULL" {
				t.Errorf("after %s, the next client sees %s", c.stmt, got)
			}
			next.Close()
		})
	}
}

// TestHeldSessionRunsAcrossNodes: a session that keeps state on one node
// the proxy cannot repeat on another (a temporary table, a named lock, a
// sequence's last value) still runs a statement on both nodes that reads
// none of it, as one MariaDB would; a statement that reads user variables
// set where they cannot follow is refused (1235).
func TestHeldSessionRunsAcrossNodes(t *testing.T) {
	e, _ := carryEnv(t, "carry_held")
	mustExec(t, e.app, "CREATE SEQUENCE s")
	for _, first := range []string{
		"CREATE TEMPORARY TABLE tmp (a INT)",
		"SELECT GET_LOCK('held', 0)",
		"SELECT NEXT VALUE FOR s",
		"SELECT 1 FROM t WHERE id = 1 FOR UPDATE", // no state: just a read
	} {
		t.Run(first, func(t *testing.T) {
			px := conn(t, e.app)
			defer px.Close()
			mustExec(t, px, first)
			for _, q := range []string{across, "SELECT note FROM t WHERE id = 2", "SELECT note FROM t WHERE id = 1", across} {
				if _, err := px.ExecContext(t.Context(), q); err != nil {
					t.Errorf("after %s: %s: %v", first, q, err)
				}
			}
		})
	}
}

// TestHeldSessionRunsAcrossNodesPrepared is TestHeldSessionRunsAcrossNodes
// for binary prepared statements: after a stored function that sets a
// user variable and takes a named lock ran on node1 (state the server
// does not report: the session keeps that connection), prepared
// statements execute on node2's rows and on both nodes' as the same
// statements sent as text do, as one MariaDB would. The state stays on
// node1's connection; node2's connection, lent for each execution, goes
// back to its pool with nothing of the session's; and when the client
// leaves, its lock is released and its variable reaches no one.
func TestHeldSessionRunsAcrossNodesPrepared(t *testing.T) {
	e, _ := carryEnv(t, "carry_held_ps")
	for _, db := range []*sql.DB{e.app, e.direct[1]} {
		mustExec(t, db, "CREATE FUNCTION f_setvar(v INT) RETURNS INT DETERMINISTIC BEGIN SET @held = v; RETURN GET_LOCK('carry_held_ps', 0); END")
	}
	const lock = "SELECT IS_USED_LOCK('carry_held_ps') IS NOT NULL"
	for _, first := range []string{"SELECT f_setvar(7) FROM t WHERE id = 1", "SELECT f_setvar(7)"} {
		t.Run(first, func(t *testing.T) {
			client := openDB(t, e.p.dsn(e.db, "")) // arguments: server-side prepared statements
			px := conn(t, client)
			mustExec(t, px, first)
			for _, c := range []struct {
				q    string
				args []any
				want string
			}{
				{"SELECT note FROM t WHERE id = ?", []any{2}, "b"}, // node2
				{"SELECT note FROM t WHERE id = ?", []any{1}, "a"}, // node1, where the state is
				{"SELECT note FROM t WHERE id = ? AND note <> ?", []any{4, "x"}, "d"},
				{"SELECT COUNT(*) FROM t WHERE id IN (?, ?, ?, ?)", []any{1, 2, 3, 4}, "4"}, // both
				{"SELECT @held FROM t WHERE id = ?", []any{2}, "7"},                         // read back after the call: carried
				{"SELECT note FROM t WHERE id = ?", []any{2}, "b"},
			} {
				ps, err := px.PrepareContext(t.Context(), c.q)
				if err != nil {
					t.Fatalf("prepare %s: %v", c.q, err)
				}
				for range 2 {
					var got string
					if err := ps.QueryRowContext(t.Context(), c.args...).Scan(&got); err != nil || got != c.want {
						t.Errorf("after %s, %s %v: %q, %v; want %q", first, c.q, c.args, got, err, c.want)
					}
				}
				ps.Close()
			}
			if got := e.on(0, lock); got != "1" {
				t.Errorf("after the executions the session's lock is gone: %s", got)
			}
			if got := joinRows(queryStrings(t, px, "SELECT @held, IS_USED_LOCK('carry_held_ps') = CONNECTION_ID()")); got != "7,1" {
				t.Errorf("the session's variable and lock after the executions: %s", got)
			}
			px.Close()
			client.Close() // the client disconnects
			eventually(t, 3*time.Second, "the leaving client's lock to be released", func() bool { return e.on(0, lock) == "0" })
			next := conn(t, e.app)
			defer next.Close()
			if got := joinRows(queryStrings(t, next, "SELECT @held FROM t WHERE id IN (1, 2)")); got != "NULL|NULL" {
				t.Errorf("after %s, the next client sees @held %s", first, got)
			}
		})
	}
}
