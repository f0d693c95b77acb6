package server_test

import (
	"database/sql"
	"database/sql/driver"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/internal/mariadbtest"
	"github.com/shardgate/shardgate/mysql"
)

// opener is one way a client opens a transaction and leaves it open
// (issue 32: idle transactions must not starve the pool, and must end).
type opener struct {
	name  string
	stmts func(id int) []string
	// end ends the transaction (COMMIT when nil). An empty list: the
	// client disconnects (after a client's XA ROLLBACK the session keeps
	// its connection).
	end func(id int) []string
}

// openers is the class of statements that leave a transaction open:
// explicit ones, autocommit off with a write, a read-only one, a locking
// read, and an XA branch.
var openers = []opener{
	{"BEGIN", func(int) []string { return []string{"BEGIN", "SELECT 1"} }, nil},
	{"BEGIN WORK + write", func(id int) []string { return []string{"BEGIN WORK", fmt.Sprintf("INSERT INTO t VALUES (%d)", id)} }, nil},
	{"START TRANSACTION + write", func(id int) []string {
		return []string{"START TRANSACTION", fmt.Sprintf("INSERT INTO t VALUES (%d)", id)}
	}, nil},
	{"START TRANSACTION READ ONLY", func(int) []string { return []string{"START TRANSACTION READ ONLY", "SELECT COUNT(*) FROM t"} }, nil},
	{"SET autocommit=0 + write", func(id int) []string {
		return []string{"SET autocommit = 0", fmt.Sprintf("INSERT INTO t VALUES (%d)", id)}
	}, autocommitOn},
	{"SELECT ... FOR UPDATE", func(id int) []string {
		// A row of l that exists: no gap lock that would block the others' inserts.
		return []string{"SET SESSION autocommit = OFF", fmt.Sprintf("SELECT * FROM l WHERE id = %d FOR UPDATE", id)}
	}, autocommitOn},
	{"XA START + write", func(id int) []string {
		return []string{fmt.Sprintf("XA START 'idle%d'", id), fmt.Sprintf("INSERT INTO t VALUES (%d)", id)}
	}, func(int) []string { return []string{} }},
}

// autocommitOn ends a transaction autocommit = 0 began: with autocommit
// still off, the session would be in the next one.
func autocommitOn(int) []string { return []string{"COMMIT", "SET autocommit = 1"} }

// openIdle opens k clients of db, each inside a transaction begun by
// os in turn (client i with os[i%len], row id base+i), and leaves them
// idle. An opener the proxy refuses is reported and skipped.
func openIdle(t *testing.T, db *sql.DB, k, base int, os []opener) []*sql.Conn {
	t.Helper()
	var out []*sql.Conn
	refused := map[string]bool{}
	for i := 0; len(out) < k; i++ {
		o := os[i%len(os)]
		if refused[o.name] {
			continue
		}
		c := conn(t, db)
		for _, q := range o.stmts(base + i) {
			if _, err := c.ExecContext(t.Context(), q); err != nil {
				if len(refused) == len(os)-1 {
					t.Fatalf("%s: %s: %v", o.name, q, err)
				}
				t.Logf("%s: %s: %v (opener skipped)", o.name, q, err)
				refused[o.name] = true
				break
			}
		}
		if !refused[o.name] {
			out = append(out, c)
		}
	}
	return out
}

// discard ends a client connection instead of returning it to its pool
// (it may be inside a transaction).
func discard(c *sql.Conn) {
	c.Raw(func(any) error { return driver.ErrBadConn })
	c.Close()
}

// idleTables makes database name with the openers' tables: t, empty, and
// l with rows 0 to 999; it returns a direct handle to it.
func idleTables(t *testing.T, s *mariadbtest.Server, name string) *sql.DB {
	t.Helper()
	dbSetup(t, s, name)
	direct := openDB(t, directDSN(s, name, ""))
	mustExec(t, direct, "CREATE TABLE t (id INT PRIMARY KEY)", "CREATE TABLE l (id INT PRIMARY KEY)",
		"INSERT INTO l SELECT seq FROM seq_0_to_999")
	return direct
}

// growConfig is newConfig with the default pool: max_conns_limit 64
// (Parse's default for a node that sets none) and pool_growth on.
func growConfig(t *testing.T) *config.Config {
	cfg := newConfig(t, backends(t)[0])
	cfg.Nodes[0].MaxConnsLimit = 64
	cfg.Backend.PoolGrowth = config.Default().Backend.PoolGrowth
	return cfg
}

// TestPoolIdleTxnCrowd: 72 clients idle inside transactions (every
// opener) hold more connections than max_conns_limit; a new client's
// SELECT 1 (text and prepared) is answered at once because the pool grows
// toward the server's max_connections. Before, it got 1040 after
// acquire_timeout (5 s).
func TestPoolIdleTxnCrowd(t *testing.T) {
	s := backends(t)[0]
	p := startProxy(t, growConfig(t))
	idleTables(t, s, "crowd_t")
	db := openDB(t, p.dsn("crowd_t", ""))
	idle := openIdle(t, db, 72, 0, openers)
	next := conn(t, db)
	start := time.Now()
	if got := queryValue(t, next, "SELECT 1"); got != "1" {
		t.Errorf("SELECT 1: %s", got)
	}
	took := time.Since(start)
	if got := queryValue(t, next, "SELECT ?", 2); got != "2" {
		t.Errorf("SELECT ?: %s", got)
	}
	nd := p.srv.Stats().Nodes[0]
	t.Logf("client %d's SELECT 1 took %v; pool: %d in use, limit %d (max_conns_limit 64)", len(idle)+1, took.Round(time.Microsecond), nd.InUse, nd.Max)
	if took > time.Second || nd.InUse < len(idle) || nd.Max <= 64 || nd.AcquireTimeouts != 0 {
		t.Errorf("took %v; stats %+v", took, nd)
	}
}

// TestPoolFixedLimit: with pool_growth off, max_conns_limit is a hard
// limit, as before: the client past it waits acquire_timeout and gets 1040.
func TestPoolFixedLimit(t *testing.T) {
	s := backends(t)[0]
	cfg := growConfig(t)
	cfg.Nodes[0].MaxConnsLimit = 8
	cfg.Backend.PoolGrowth = false
	cfg.Backend.AcquireTimeout = 300 * time.Millisecond
	p := startProxy(t, cfg)
	idleTables(t, s, "fixed_t")
	db := openDB(t, p.dsn("fixed_t", ""))
	openIdle(t, db, 8, 0, openers)
	_, err := conn(t, openDB(t, p.dsn("", ""))).ExecContext(t.Context(), "SELECT 1")
	me := wantSQLError(t, err, mysql.ErTooManyConnections, "08004")
	if !strings.Contains(me.Message, "max_conns_limit") {
		t.Errorf("message %q does not say which limit", me.Message)
	}
}

// TestPoolUserQuotaClients: a user at its max_backend_conns (its clients
// idle in transactions) gets 1203 for one more client's statement after
// acquire_timeout, while another user's clients are served; once one of
// the first user's transactions ends, its next client is served too.
func TestPoolUserQuotaClients(t *testing.T) {
	s := backends(t)[0]
	cfg := growConfig(t)
	cfg.Users[0].MaxBackendConns = 3
	cfg.Users = append(cfg.Users, config.User{User: "app2", Password: appPassword})
	cfg.Schemas = append(cfg.Schemas, config.Schema{User: "app2", Nodes: []string{"node1"}, Default: "node1"})
	cfg.Backend.AcquireTimeout = 500 * time.Millisecond
	p := startProxy(t, cfg)
	idleTables(t, s, "quota_t")
	app := openDB(t, p.dsn("quota_t", ""))
	// Without a database, logging in takes no connection: the statement
	// meets the quota (a login to a database is refused with 1203 too).
	appNoDB := openDB(t, p.dsn("", ""))
	other := openDB(t, userDSN("app2", appPassword, p.addr, "quota_t", ""))
	for k, o := range openers {
		t.Run(o.name, func(t *testing.T) {
			base := 100 * (k + 1)
			held := openIdle(t, app, 3, base, []opener{o})
			over := conn(t, appNoDB)
			_, err := over.ExecContext(t.Context(), "SELECT 1")
			me := wantSQLError(t, err, mysql.ErTooManyUserConnections, "42000")
			if !strings.Contains(me.Message, "User 'app' already has 3 connections") {
				t.Errorf("message: %q", me.Message)
			}
			if got := queryValue(t, conn(t, other), "SELECT 1"); got != "1" {
				t.Errorf("the other user: %s", got)
			}
			end := []string{"COMMIT"}
			if o.end != nil {
				end = o.end(base)
			}
			mustExec(t, held[0], end...)
			if len(end) == 0 {
				discard(held[0])
			}
			if got := queryValue(t, over, "SELECT 2"); got != "2" {
				t.Errorf("after one transaction ended: %s", got)
			}
			for _, c := range held {
				discard(c) // the sessions end: their transactions roll back
			}
			discard(over)
		})
	}
	if n := p.srv.Stats().Nodes[0]; n.AcquireTimeouts != 0 {
		t.Errorf("pool timeouts: %d (the quota refused, not the pool)", n.AcquireTimeouts)
	}
}

// TestPoolIdleTxnTimeout: every opener's transaction idle for
// idle_in_transaction_timeout is rolled back on the backend (rows gone,
// locks released) without waiting for its client, whose next statement
// gets 1927 (70100); then its connection is closed.
func TestPoolIdleTxnTimeout(t *testing.T) {
	s := backends(t)[0]
	cfg := growConfig(t)
	cfg.IdleInTransactionTimeout = time.Second
	p := startProxy(t, cfg)
	direct := idleTables(t, s, "idlet_t")
	db := openDB(t, p.dsn("idlet_t", ""))
	idle := openIdle(t, db, len(openers), 0, openers)
	eventually(t, 5*time.Second, "the idle transactions to end", func() bool {
		return p.srv.Stats().IdleTxnClosed == uint64(len(idle))
	})
	eventually(t, 5*time.Second, "the backend connections to come back", func() bool {
		return p.srv.Stats().Nodes[0].InUse == 0
	})
	if got := queryValue(t, direct, "SELECT COUNT(*) FROM t"); got != "0" {
		t.Errorf("%s rows of idle transactions committed", got)
	}
	locked := conn(t, direct)
	mustExec(t, locked, "SET SESSION innodb_lock_wait_timeout = 1", "BEGIN")
	for i := range idle {
		mustExec(t, locked, fmt.Sprintf("INSERT INTO t VALUES (%d)", i)) // no lock left behind
	}
	mustExec(t, locked, "ROLLBACK")
	if got := queryValue(t, direct, "SELECT COUNT(*) FROM information_schema.INNODB_TRX"); got != "0" {
		t.Errorf("%s transactions still open on the backend", got)
	}
	if got := queryStrings(t, direct, "XA RECOVER"); len(got) != 0 {
		t.Errorf("XA branches left: %q", got)
	}
	for i, c := range idle {
		_, err := c.ExecContext(t.Context(), "SELECT 1")
		me := wantSQLError(t, err, mysql.ErConnectionKilled, "70100")
		if i == 0 {
			t.Logf("the client's next statement: %v", me)
		}
		if _, err := c.ExecContext(t.Context(), "SELECT 1"); err == nil {
			t.Errorf("client %d: a statement after 1927 succeeded", i)
		}
	}
}
