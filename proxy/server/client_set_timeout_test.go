package server_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"testing"
	"time"

	"github.com/shardgate/shardgate/config"
)

// TestClientSetOutlivesCommandTimeout: command_timeout bounds the proxy's
// own commands, not the client's statements. A client's SET whose
// expression runs longer than it (SLEEP(2) against 1 s), sent as text (of
// user variables, with a variable the session does not carry, repeated on
// its other connections, of a session tracker), as a binary prepared
// statement with and without parameters, through SQL PREPARE and EXECUTE,
// and as the expression EXECUTE IMMEDIATE and PREPARE FROM evaluate, with
// the session on one node and inside a transaction that reached both,
// succeeds with MariaDB's values and the session goes on: its variables
// are read on both nodes afterwards (before 41643ac the proxy gave up on
// the backend connection after 1 s and the client lost its session).
func TestClientSetOutlivesCommandTimeout(t *testing.T) {
	e := newShardEnvWith(t, "sg_settimeout", func(cfg *config.Config) {
		cfg.Backend.CommandTimeout = time.Second
	}, config.ShardRule{Table: "t", Key: "id", Type: "hash", Nodes: []string{"node1", "node2"}, Locations: []int{2, 2}})
	mustExec(t, e.app, "CREATE TABLE t (id INT NOT NULL PRIMARY KEY, c INT NOT NULL)",
		"INSERT INTO t (id, c) VALUES (1, 1), (2, 2), (3, 3), (4, 4)")
	ctx := context.Background()
	type form struct {
		name string
		run  func(c *sql.Conn) error
		// xy is SELECT @x, @y after it (both 5 before), sum their sum.
		xy, sum string
	}
	exec := func(q string, args ...any) func(c *sql.Conn) error {
		return func(c *sql.Conn) error { _, err := c.ExecContext(ctx, q, args...); return err }
	}
	forms := []form{
		{"text SET @x", exec("SET @x = (SELECT SLEEP(2))"), "0,5", "5"},
		{"text SET @y", exec("SET @y = (SELECT SLEEP(2) + 1)"), "5,1", "6"},
		// With a variable the proxy does not carry: the session keeps
		// its connections, and the SET runs on each of them.
		{"text SET @x with timestamp", exec("SET @x = (SELECT SLEEP(2)), timestamp = DEFAULT"), "0,5", "5"},
		// A session tracker the client sets (track.go). (A SET of a tracker
		// and a user variable together leaves the variable stale on the
		// other node, timeout or not: not covered here.)
		{"text SET of a tracker", exec("SET session_track_schema = (SELECT SLEEP(2)) + 1"), "5,5", "10"},
		// The proxy evaluates the text to run first (immediate.go).
		{"EXECUTE IMMEDIATE of an expression", exec("EXECUTE IMMEDIATE CONCAT('SET @y = ', SLEEP(2) + 1)"), "5,1", "6"},
		{"PREPARE FROM an expression", func(c *sql.Conn) error {
			for _, q := range []string{"PREPARE p FROM CONCAT('SET @y = ', SLEEP(2) + 1)", "EXECUTE p", "DEALLOCATE PREPARE p"} {
				if _, err := c.ExecContext(ctx, q); err != nil {
					return err
				}
			}
			return nil
		}, "5,1", "6"},
		{"binary SET with a parameter", exec("SET @y = (SELECT SLEEP(?) + 1)", 2), "5,1", "6"},
		{"binary SET without parameters", func(c *sql.Conn) error {
			st, err := c.PrepareContext(ctx, "SET @x = (SELECT SLEEP(2))")
			if err != nil {
				return err
			}
			defer st.Close()
			_, err = st.ExecContext(ctx)
			return err
		}, "0,5", "5"},
		{"SQL PREPARE and EXECUTE", func(c *sql.Conn) error {
			for _, q := range []string{"PREPARE p FROM 'SET @y = (SELECT SLEEP(2) + 1)'", "EXECUTE p", "DEALLOCATE PREPARE p"} {
				if _, err := c.ExecContext(ctx, q); err != nil {
					return err
				}
			}
			return nil
		}, "5,1", "6"},
	}
	check := func(f form, inTxn bool, c *sql.Conn) {
		mustExec(t, c, "SET @x = 5, @y = 5")
		if inTxn {
			// The transaction reaches both nodes first.
			mustExec(t, c, "BEGIN")
			if got := joinRows(queryStrings(t, c, "SELECT COUNT(*) FROM t")); got != "4" {
				t.Fatalf("COUNT(*) in the transaction: %s", got)
			}
		}
		start := time.Now()
		if err := f.run(c); err != nil {
			t.Errorf("%s (transaction %v): %v", f.name, inTxn, err)
			return
		}
		if took := time.Since(start); took < 2*time.Second {
			t.Errorf("%s (transaction %v) took %v: the expression did not run", f.name, inTxn, took)
		}
		if inTxn {
			mustExec(t, c, "COMMIT")
		}
		want, sum := f.xy, f.sum
		// On the default node, then on every node.
		if got := joinRows(queryStrings(t, c, "SELECT @x, @y")); got != want {
			t.Errorf("%s (transaction %v): SELECT @x, @y = %s, want %s", f.name, inTxn, got, want)
		}
		if got, w := joinRows(queryStrings(t, c, "SELECT id, @x + @y FROM t ORDER BY id")), "1,"+sum+"|2,"+sum+"|3,"+sum+"|4,"+sum; got != w {
			t.Errorf("%s (transaction %v): across shards %s, want %s", f.name, inTxn, got, w)
		}
		if got := joinRows(queryStrings(t, c, "SELECT id FROM t WHERE id IN (1, 2, 3, 4) ORDER BY id")); got != "1|2|3|4" {
			t.Errorf("%s (transaction %v): the session after the SET: %s", f.name, inTxn, got)
		}
	}
	for _, inTxn := range []bool{false, true} {
		for _, f := range forms {
			// One session per form, ended before the next (the pool has
			// 4 connections per node).
			c, err := e.app.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			check(f, inTxn, c)
			c.Raw(func(any) error { return driver.ErrBadConn })
			c.Close()
		}
	}
}
