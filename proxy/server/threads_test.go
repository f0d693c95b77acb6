package server_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shardgate/shardgate/internal/mariadbtest"
)

// TestServerThreadsAfterClients: once its clients have left, the proxy
// keeps no server thread past backend.idle_timeout, whatever the clients
// left behind: an XA transaction prepared (which MariaDB keeps for XA
// RECOVER without a thread), active or ended, a transaction open, a
// temporary table, by either protocol; the proxy's own connections (the
// workflow store in the sidecar, read at start-up) close as the pools'
// do, and the deadlock detector's once no statement waits. The server counts those threads (Threads_connected, what mtr's
// include/wait_until_count_sessions.inc waits on in main.xa and
// main.events_processlist; max_connections). The server is the test's
// own, so that no other test's connection counts.
func TestServerThreadsAfterClients(t *testing.T) {
	backends(t) // skips under -short
	cl, err := mariadbtest.Start("", 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Stop() })
	s := cl.Servers[0]
	cfg := newConfig(t, s)
	cfg.Backend.IdleTimeout = 50 * time.Millisecond
	p := startProxy(t, cfg)
	direct := conn(t, openDB(t, directDSN(s, "", "")))
	mustExec(t, direct, "CREATE DATABASE threads_t", "CREATE TABLE threads_t.t (a INT) ENGINE=InnoDB")
	threads := func() string { return queryStrings(t, direct, "SHOW STATUS LIKE 'Threads_connected'")[0][1] }
	db := openDB(t, p.dsn("threads_t", ""))

	// run runs q on c, as a prepared statement when binary.
	run := func(c *sql.Conn, q string, binary bool) {
		t.Helper()
		if !binary {
			mustExec(t, c, q)
			return
		}
		ps, err := c.PrepareContext(t.Context(), q)
		if err != nil {
			t.Fatalf("prepare %s: %v", q, err)
		}
		defer ps.Close()
		if _, err := ps.ExecContext(t.Context()); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	leftovers := []struct {
		name     string
		stmts    []string
		prepared bool // XA RECOVER lists it once the client left
	}{
		{"XA prepared", []string{"XA START '%s'", "INSERT INTO t VALUES (1)", "XA END '%s'", "XA PREPARE '%s'"}, true},
		{"XA prepared, bqual and format", []string{"XA START '%s', 'b', 7", "INSERT INTO t VALUES (2)", "XA END '%s', 'b', 7", "XA PREPARE '%s', 'b', 7"}, true},
		{"XA prepared, read only", []string{"xa start '%s'", "SELECT * FROM t", "xa end '%s'", "xa prepare '%s'"}, true},
		{"XA active", []string{"XA BEGIN '%s'", "INSERT INTO t VALUES (3)"}, false},
		{"XA idle", []string{"XA START '%s'", "INSERT INTO t VALUES (4)", "XA END '%s'"}, false},
		{"transaction", []string{"BEGIN", "INSERT INTO t VALUES (5)"}, false},
		{"temporary table", []string{"CREATE TEMPORARY TABLE tmp (a INT)"}, false},
		{"nothing", []string{"SELECT 1"}, false},
	}
	for _, binary := range []bool{false, true} {
		for i, l := range leftovers {
			name := l.name
			if binary {
				name = "binary " + name
			}
			t.Run(name, func(t *testing.T) {
				xid := fmt.Sprintf("threads%d%v", i, binary)
				c := conn(t, db)
				for _, q := range l.stmts {
					if strings.Contains(q, "%s") {
						q = fmt.Sprintf(q, xid)
					}
					run(c, q, binary)
				}
				// The client leaves (the connection is discarded, not
				// pooled by database/sql).
				c.Raw(func(any) error { return driver.ErrBadConn })
				c.Close()
				eventually(t, 10*time.Second, "the server's threads to be the direct connection's only", func() bool {
					return threads() == "1"
				})
				recovered := false
				for _, r := range queryStrings(t, direct, "XA RECOVER") {
					if strings.Contains(r[3], xid) {
						recovered = true
						// A read-only branch answers XA_RBROLLBACK (1402), as
						// in main.xa.
						if _, err := direct.ExecContext(t.Context(), "XA ROLLBACK "+xaID(r)); err != nil && !strings.Contains(err.Error(), "1402") {
							t.Errorf("XA ROLLBACK: %v", err)
						}
					}
				}
				if recovered != l.prepared {
					t.Errorf("XA RECOVER lists the client's transaction: %v, want %v", recovered, l.prepared)
				}
			})
		}
	}
	// A transaction's statement waits on another's lock past
	// deadlock_detect_after: the deadlock detector reads the server on a
	// connection of its own, which goes when nothing waits any more.
	t.Run("lock wait", func(t *testing.T) {
		mustExec(t, direct, "INSERT INTO threads_t.t VALUES (100)")
		a, b := conn(t, db), conn(t, db)
		mustExec(t, a, "BEGIN", "SELECT * FROM t WHERE a = 100 FOR UPDATE")
		mustExec(t, b, "BEGIN")
		done := make(chan error, 1)
		go func() {
			_, err := b.ExecContext(context.Background(), "SELECT * FROM t WHERE a = 100 FOR UPDATE /* waits */")
			done <- err
		}()
		before, _ := p.srv.DeadlockStats()
		eventually(t, 10*time.Second, "the detector to read the server", func() bool {
			st, _ := p.srv.DeadlockStats()
			return st.Graphs > before.Graphs
		})
		mustExec(t, a, "COMMIT")
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		mustExec(t, b, "COMMIT")
		for _, c := range []*sql.Conn{a, b} {
			c.Raw(func(any) error { return driver.ErrBadConn })
			c.Close()
		}
		eventually(t, 10*time.Second, "the server's threads to be the direct connection's only", func() bool {
			return threads() == "1"
		})
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	direct.ExecContext(ctx, "DROP DATABASE threads_t")
}

// xaID is the xid of a row of XA RECOVER (formatID, gtrid_length,
// bqual_length, data) as XA ROLLBACK takes it.
func xaID(r []string) string {
	var gl, bl int
	fmt.Sscan(r[1], &gl)
	fmt.Sscan(r[2], &bl)
	return fmt.Sprintf("X'%x', X'%x', %s", r[3][:gl], r[3][gl:gl+bl], r[0])
}
