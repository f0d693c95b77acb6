package server_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"

	"github.com/shardgate/shardgate/config"
)

// TestMultiStatementsLend: after a statement that left state on node1
// which no other node can be given (a temporary table, a named lock, a
// prepared statement, a SET that takes a lock), a multi-statement text
// runs exactly when its statements, run one by one on such a session, all
// run: the ones that read none of that state are lent a connection on
// another node (a cross-shard COUNT(*), a write on node2) and the text
// gives the same results as the statements one by one. A text one of
// whose statements would be refused (it reads the held state, or state
// the text itself leaves, on another node) is refused with 1235 before
// any of it runs, also when the session held nothing before it.
func TestMultiStatementsLend(t *testing.T) {
	e := newShardEnv(t, "sg_mlend",
		config.ShardRule{Table: "t", Key: "id", Type: "hash", Nodes: []string{"node1", "node2"}, Locations: []int{2, 2}})
	mustExec(t, e.app, "CREATE TABLE t (id INT NOT NULL PRIMARY KEY, c VARCHAR(20) NOT NULL)",
		"INSERT INTO t (id, c) VALUES (1, 'a'), (2, 'a'), (3, 'a'), (4, 'a'), (5, 'a'), (6, 'a')")
	multi := openDB(t, e.p.dsn(e.db, "multiStatements=true"))
	multi.SetMaxIdleConns(0) // each session ends with its Conn: its state with it
	ctx := context.Background()
	states := []string{
		"CREATE TEMPORARY TABLE tmp (a INT)",
		"SELECT GET_LOCK('sg_mlend', 0)",
		"PREPARE ps FROM 'SELECT 1'",
		"SET @l = GET_LOCK('sg_mlend2', 0)",
		"SET @none = 1", // state the session carries: none held
	}
	texts := []string{
		"SELECT 1; SELECT COUNT(*) FROM t",
		"SELECT COUNT(*) FROM t; SELECT 1",
		"SELECT c FROM t WHERE id = 2; SELECT COUNT(*) FROM t WHERE id IN (1, 2, 3)",
		"UPDATE t SET c = 'b' WHERE id = 2; SELECT id, c FROM t ORDER BY id; UPDATE t SET c = 'a' WHERE id = 2",
		"SELECT COUNT(*) FROM t; SELECT ROW_COUNT(); SELECT FOUND_ROWS()",
		"SELECT id INTO @x FROM t WHERE id = 3; SELECT @x, COUNT(*) FROM t",
		"SET @y = 6; SELECT c FROM t WHERE id = @y; SELECT COUNT(*) FROM t",
		"CREATE TEMPORARY TABLE tmp_in (a INT); SELECT COUNT(*) FROM t; DROP TEMPORARY TABLE tmp_in",
	}
	// run runs q on c and describes its result sets (statements that
	// answer OK add none), then its error code if it fails.
	run := func(c *sql.Conn, q string) []string {
		rows, err := c.QueryContext(ctx, q)
		if err != nil {
			return []string{errCode(err)}
		}
		defer rows.Close()
		var sets []string
		for {
			cols, err := rows.Columns()
			if err != nil {
				return append(sets, errCode(err))
			}
			if len(cols) > 0 {
				var out []string
				for rows.Next() {
					vals := make([]sql.NullString, len(cols))
					ptrs := make([]any, len(cols))
					for i := range vals {
						ptrs[i] = &vals[i]
					}
					if err := rows.Scan(ptrs...); err != nil {
						return append(sets, errCode(err))
					}
					var row []string
					for _, v := range vals {
						row = append(row, v.String)
					}
					out = append(out, strings.Join(row, ","))
				}
				sets = append(sets, strings.Join(out, "|"))
			}
			if !rows.NextResultSet() {
				break
			}
		}
		if err := rows.Err(); err != nil {
			return append(sets, errCode(err))
		}
		return sets
	}
	session := func(state string) *sql.Conn {
		c, err := multi.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.ExecContext(ctx, state); err != nil {
			t.Fatal(state, err)
		}
		return c
	}
	for _, state := range states {
		for _, text := range texts {
			one := session(state)
			var want []string
			for _, q := range strings.Split(text, "; ") {
				want = append(want, run(one, q)...)
			}
			one.Close()
			c := session(state)
			got := strings.Join(run(c, text), " / ")
			// The session still runs a cross-shard statement afterwards.
			after := strings.Join(run(c, "SELECT COUNT(*) FROM t"), " / ")
			c.Close()
			if w := strings.Join(want, " / "); got != w {
				t.Errorf("after %s: %s: proxy %q, one by one %q", state, text, got, w)
			}
			if after != "6" {
				t.Errorf("after %s and %s: SELECT COUNT(*) FROM t: %q", state, text, after)
			}
		}
	}
	// Refused one by one, refused whole: nothing of the text runs.
	for _, state := range states {
		for _, text := range []string{
			"UPDATE t SET c = 'r' WHERE id = 2; SELECT COUNT(*), IS_USED_LOCK('sg_mlend') FROM t",
			"UPDATE t SET c = 'r' WHERE id = 2; SELECT GET_LOCK('sg_mlend3', 0); SELECT COUNT(*), CONNECTION_ID() > 0 FROM t",
		} {
			one := session(state)
			var steps []string
			for _, q := range strings.Split(text, "; ") {
				steps = append(steps, run(one, q)...)
			}
			mustExec(t, one, "UPDATE t SET c = 'a' WHERE id = 2", "DO RELEASE_ALL_LOCKS()")
			one.Close()
			if strings.HasPrefix(state, "SET @none") && strings.Contains(text, "IS_USED_LOCK") {
				continue // nothing held: the statement runs anywhere
			}
			if last := steps[len(steps)-1]; last != "error 1235" {
				t.Fatalf("after %s, one by one %s: %v (the case tests nothing)", state, text, steps)
			}
			c := session(state)
			got := strings.Join(run(c, text), " / ")
			c.Close()
			if got != "error 1235" {
				t.Errorf("after %s: %s: %q, want error 1235", state, text, got)
			}
			if got := fmt.Sprint(queryStrings(t, e.app, "SELECT c FROM t WHERE id = 2")); got != "[[a]]" {
				t.Errorf("after %s: %s ran in part: row 2 is %s", state, text, got)
				mustExec(t, e.app, "UPDATE t SET c = 'a' WHERE id = 2")
			}
		}
	}
}
