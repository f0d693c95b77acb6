package server_test

import (
	"database/sql"
	"database/sql/driver"
	"strconv"
	"testing"
	"time"
)

// TestSessionStatusOwnConnection: a session's per-connection status
// (Last_query_cost, Com_select, Handler_read_*: what MariaDB keeps for as
// long as the client is connected, and mtr's main.greedy_optimizer and
// main.column_compression read) stays the session's while the client
// thinks longer than backend.idle_timeout between two statements, by
// either protocol, and while two sessions take turns: the pooled
// connection a session used last is its own again and is not closed for
// idleness while the client is connected. Before, the idle timeout closed
// it (the next statement ran on a new connection: Last_query_cost 0) and
// two sessions took turns on the connection returned last (each counted
// the other's statements).
func TestSessionStatusOwnConnection(t *testing.T) {
	s := backends(t)
	cfg := newConfig(t, s[0])
	const idle = 50 * time.Millisecond
	cfg.Backend.IdleTimeout = idle
	p := startProxy(t, cfg)
	direct := openDB(t, directDSN(s[0], "", ""))
	mustExec(t, direct, "DROP DATABASE IF EXISTS ownconn", "CREATE DATABASE ownconn",
		"CREATE TABLE ownconn.t (a INT PRIMARY KEY, b INT)",
		"INSERT INTO ownconn.t SELECT seq, seq % 7 FROM ownconn.seq_1_to_200")
	t.Cleanup(func() { direct.Exec("DROP DATABASE IF EXISTS ownconn") })
	db := openDB(t, p.dsn("ownconn", ""))
	// A proxy whose idle connections outlive the test's pauses: the one a
	// session left must still be there for the next.
	kept := startProxy(t, newConfig(t, s[0]))
	keptDB := openDB(t, kept.dsn("ownconn", ""))

	status := func(c querier, name string) string {
		t.Helper()
		rows := queryStrings(t, c, "SHOW SESSION STATUS LIKE '"+name+"'")
		if len(rows) != 1 {
			t.Fatalf("SHOW STATUS LIKE '%s': %v", name, rows)
		}
		return rows[0][1]
	}
	count := func(c querier, name string) int {
		t.Helper()
		n, err := strconv.Atoi(status(c, name))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	const q = "SELECT COUNT(*) FROM t x, t y WHERE x.b = y.a AND y.b > ?"
	for _, binary := range []bool{false, true} {
		name := "text"
		run := func(c *sql.Conn) {
			t.Helper()
			// Text: the argument is written into the text by the test.
			queryStrings(t, c, "SELECT COUNT(*) FROM t x, t y WHERE x.b = y.a AND y.b > 2")
		}
		if binary {
			name = "binary"
			run = func(c *sql.Conn) {
				t.Helper()
				// go-sql-driver prepares a statement with arguments on
				// the server (COM_STMT_PREPARE, COM_STMT_EXECUTE).
				queryStrings(t, c, q, 2)
			}
		}
		t.Run(name+" idle past idle_timeout", func(t *testing.T) {
			c := conn(t, db)
			run(c)
			cost := status(c, "Last_query_cost")
			reads := count(c, "Handler_read_key")
			if cost == "0.000000" || reads == 0 {
				t.Fatalf("after the join: Last_query_cost %s, Handler_read_key %d; want both above 0", cost, reads)
			}
			// The client thinks: its connection is idle for several idle
			// timeouts (and health intervals, when idle connections are
			// reaped).
			time.Sleep(max(4*idle, 2*cfg.Backend.HealthInterval))
			if got := status(c, "Last_query_cost"); got != cost {
				t.Errorf("Last_query_cost after the client was idle: %s, want %s (the session's)", got, cost)
			}
			run(c)
			if got := count(c, "Handler_read_key"); got != 2*reads {
				t.Errorf("Handler_read_key after a second join: %d, want %d", got, 2*reads)
			}
		})
		t.Run(name+" two sessions take turns", func(t *testing.T) {
			a, b := conn(t, db), conn(t, db)
			// Two pooled connections: b's first statement runs while a's
			// transaction holds one.
			mustExec(t, a, "BEGIN")
			run(a)
			run(b)
			mustExec(t, a, "COMMIT")
			a0, b0 := count(a, "Com_select"), count(b, "Com_select")
			const rounds = 3
			for range rounds {
				run(a)
				run(b)
				run(b)
			}
			if got := count(a, "Com_select") - a0; got != rounds {
				t.Errorf("a's Com_select went up by %d, want %d (its own statements)", got, rounds)
			}
			if got := count(b, "Com_select") - b0; got != 2*rounds {
				t.Errorf("b's Com_select went up by %d, want %d (its own statements)", got, 2*rounds)
			}
		})
		t.Run(name+" a new session while another is connected", func(t *testing.T) {
			// a's connection is idle while a thinks; b's statements must
			// neither read a's counters nor leave a reading b's
			// (main.empty_table, main.memory_used: mysqltest keeps its
			// first connection while it opens others).
			a := conn(t, keptDB)
			run(a)
			queryStrings(t, a, "SELECT a FROM t WHERE a < 0")
			aSel, aEmpty := count(a, "Com_select"), count(a, "Empty_queries")
			if aSel == 0 || aEmpty == 0 {
				t.Fatal("a's counters did not count its statements")
			}
			b := conn(t, keptDB)
			for _, name := range []string{"Com_select", "Empty_queries", "Handler_read_key"} {
				if got := count(b, name); got != 0 {
					t.Errorf("a new session reads %s %d, want 0", name, got)
				}
			}
			queryStrings(t, b, "SELECT a FROM t WHERE a < 0")
			if got := count(a, "Com_select"); got != aSel {
				t.Errorf("a's Com_select %d after b's statements, want %d (its own)", got, aSel)
			}
			if got := count(a, "Empty_queries"); got != aEmpty {
				t.Errorf("a's Empty_queries %d after b's statements, want %d", got, aEmpty)
			}
			if got := count(b, "Empty_queries"); got != 1 {
				t.Errorf("b's Empty_queries %d, want 1", got)
			}
		})
		t.Run(name+" a new session after another left", func(t *testing.T) {
			// The connection a left goes to the next session reset.
			sessions := kept.srv.Stats().Sessions
			a := conn(t, keptDB)
			run(a)
			a.Raw(func(any) error { return driver.ErrBadConn }) // the client leaves
			a.Close()
			eventually(t, 5*time.Second, "a's session to end", func() bool { return kept.srv.Stats().Sessions <= sessions })
			before := kept.srv.Stats().Nodes[0].Resets
			b := conn(t, keptDB)
			if got := count(b, "Com_select"); got != 0 {
				t.Errorf("a new session reads Com_select %d, want 0", got)
			}
			if kept.srv.Stats().Nodes[0].Resets == before {
				t.Error("the new session got the connection another session left without a reset")
			}
		})
	}
}
