package server_test

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardgate/shardgate/config"
)

// preparedCount is the sum of Prepared_stmt_count over the servers.
func preparedCount(t *testing.T) int {
	t.Helper()
	n := 0
	for _, s := range backends(t)[:2] {
		d, err := sql.Open("mysql", directDSN(s, "", ""))
		if err != nil {
			t.Fatal(err)
		}
		v := queryStrings(t, d, "SHOW GLOBAL STATUS LIKE 'Prepared_stmt_count'")
		d.Close()
		c, _ := strconv.Atoi(v[0][1])
		n += c
	}
	return n
}

// budgetProxy is txnProxy with pools of 64 connections per node.
func budgetProxy(t *testing.T, edit func(*config.Config)) *proxy {
	t.Helper()
	srvs := backends(t)
	cfg := newConfig(t, srvs[0], srvs[1])
	cfg.TransactionMode = config.TransactionMulti
	for i := range cfg.Nodes {
		cfg.Nodes[i].MaxConnsLimit = 64
	}
	cfg.Schemas[0].Shard = []config.ShardRule{{DB: "txn_t", Table: "acct", Key: "id", Type: "hash",
		Nodes: []string{"node1", "node2"}, Locations: []int{2, 2}}}
	if edit != nil {
		edit(cfg)
	}
	p := startProxy(t, cfg)
	db, err := sql.Open("mysql", p.dsn("", ""))
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	mustExec(t, db, "DROP DATABASE IF EXISTS txn_t", "CREATE DATABASE txn_t", "USE txn_t",
		"CREATE TABLE acct (id INT PRIMARY KEY, balance INT NOT NULL)",
		"CREATE TABLE plain (id INT PRIMARY KEY, note VARCHAR(20))",
		"INSERT INTO acct (id, balance) VALUES (1,100),(2,100),(3,100),(4,100),(5,100),(6,100),(7,100),(8,100)",
		"INSERT INTO plain VALUES (1, 'a'), (2, 'b')")
	// The setup session leaves (a session may keep its connections
	// after DDL): the tests start with an idle pool.
	db.Close()
	t.Cleanup(func() {
		if db, err := sql.Open("mysql", p.dsn("", "")); err == nil {
			db.Exec("DROP DATABASE IF EXISTS txn_t")
			db.Close()
		}
	})
	return p
}

// preparedRoutes are statements of each route a prepared statement takes:
// %d makes each text distinct.
var preparedRoutes = []struct{ name, q string }{
	{"sharded point read", "SELECT balance + %d FROM acct WHERE id = ?"},
	{"sharded point write", "UPDATE acct SET balance = balance + 0 * %d WHERE id = ?"},
	{"cross-shard read", "SELECT COUNT(*) + %d FROM acct WHERE id > ?"},
	{"unsharded", "SELECT LENGTH(note) + %d FROM plain WHERE id = ?"},
}

// prepareCycle prepares q (binary, or text PREPARE/EXECUTE/DEALLOCATE),
// executes it with arg and closes it.
func prepareCycle(ctx context.Context, c *sql.Conn, text bool, q string, arg int) error {
	if text {
		for _, s := range []string{"PREPARE s FROM '" + q + "'", fmt.Sprintf("SET @a = %d", arg), "EXECUTE s USING @a", "DEALLOCATE PREPARE s"} {
			if _, err := c.ExecContext(ctx, s); err != nil {
				return fmt.Errorf("%s: %w", s, err)
			}
		}
		return nil
	}
	st, err := c.PrepareContext(ctx, q)
	if err != nil {
		return fmt.Errorf("prepare %s: %w", q, err)
	}
	defer st.Close()
	if _, err := st.ExecContext(ctx, arg); err != nil {
		return fmt.Errorf("execute %s: %w", q, err)
	}
	return nil
}

// TestPreparedClosedOnBackends: whatever the route (sharded point read and
// write, cross-shard, unsharded), the protocol (binary COM_STMT_PREPARE /
// CLOSE, text PREPARE / EXECUTE / DEALLOCATE) and whether the statements
// run inside transactions, statements eight clients prepare, execute and
// close are closed on the backends: with the clients still connected the
// servers' Prepared_stmt_count is back at its baseline (but for
// connections another client holds), and after they left exactly (issue 32: 64 clients x 400 statements in transactions left
// 29 180 on the two servers).
func TestPreparedClosedOnBackends(t *testing.T) {
	p := budgetProxy(t, nil)
	for _, txn := range []bool{false, true} {
		for _, text := range []bool{false, true} {
			for ri, r := range preparedRoutes {
				name := fmt.Sprintf("%s/txn=%v/text=%v", r.name, txn, text)
				t.Run(name, func(t *testing.T) {
					p.waitPoolIdle(t, 5*time.Second)
					before := preparedCount(t)
					var ready, leave sync.WaitGroup
					ready.Add(8)
					leave.Add(1)
					errs := make(chan error, 8)
					var done sync.WaitGroup
					for k := range 8 {
						done.Go(func() { errs <- closedClient(p, txn, text, r.q, ri*100000+k*1000, &ready, &leave) })
					}
					ready.Wait()
					mid := preparedCount(t)
					leave.Done()
					done.Wait()
					close(errs)
					for err := range errs {
						if err != nil {
							t.Fatal(err)
						}
					}
					p.waitPoolIdle(t, 5*time.Second)
					after := preparedCount(t)
					// Mid-way, a statement prepared on a connection another
					// client still holds (kept for SHOW WARNINGS, say) is
					// closed when that client gives it back.
					if mid > before+8 || after > before {
						t.Errorf("backend prepared statements: %d before, %d with 8 clients that closed 30 each, %d after they left", before, mid, after)
					}
				})
			}
		}
	}
}

// closedClient is one client of TestPreparedClosedOnBackends: 30
// statements prepared, executed and closed, then it waits on leave.
func closedClient(p *proxy, txn, text bool, q string, base int, ready, leave *sync.WaitGroup) error {
	signalled := false
	defer func() {
		if !signalled {
			ready.Done()
		}
	}()
	db, err := sql.Open("mysql", p.dsn("txn_t", ""))
	if err != nil {
		return err
	}
	defer db.Close()
	ctx := context.Background()
	c, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if txn {
		if _, err := c.ExecContext(ctx, "BEGIN"); err != nil {
			return err
		}
	}
	for i := range 30 {
		// Distinct rows (most absent): clients in transactions do not
		// wait for each other's row locks.
		if err := prepareCycle(ctx, c, text, fmt.Sprintf(q, base+i), base+i); err != nil {
			return err
		}
	}
	signalled = true
	ready.Done()
	leave.Wait()
	if txn {
		_, err = c.ExecContext(ctx, "COMMIT")
	}
	return err
}

// TestPreparedStmtCaps: a session may keep max_prepared_stmt_count
// statements (binary and the proxy's text PREPAREs together), all sessions
// max_prepared_stmt_total; past either PREPARE gets MariaDB's 1461
// (42000) naming the limit, the session stays usable, and a statement
// closed (or a session gone) makes room again.
func TestPreparedStmtCaps(t *testing.T) {
	p := budgetProxy(t, func(cfg *config.Config) { cfg.MaxPreparedStmts, cfg.MaxPreparedStmtsTotal = 20, 30 })
	ctx := context.Background()
	dbA := openDB(t, p.dsn("txn_t", ""))
	a := conn(t, dbA)
	var kept []*sql.Stmt
	for i := range 20 {
		r := preparedRoutes[i%len(preparedRoutes)]
		if i%5 == 4 {
			mustExec(t, a, fmt.Sprintf("PREPARE s%d FROM 'SELECT balance + %d FROM acct WHERE id = ?'", i, i))
			continue
		}
		st, err := a.PrepareContext(ctx, fmt.Sprintf(r.q, i))
		if err != nil {
			t.Fatalf("statement %d: %v", i+1, err)
		}
		kept = append(kept, st)
	}
	_, err := a.PrepareContext(ctx, "SELECT balance FROM acct WHERE id = ?")
	me := wantSQLError(t, err, 1461, "42000")
	if !strings.HasSuffix(me.Message, "(current value: 20)") {
		t.Errorf("message %q", me.Message)
	}
	_, err = a.ExecContext(ctx, "PREPARE x FROM 'SELECT balance FROM acct WHERE id = ?'")
	wantSQLError(t, err, 1461, "42000")
	if got := queryValue(t, a, "SELECT balance FROM acct WHERE id = 2"); got != "100" {
		t.Errorf("the session after 1461: %s", got)
	}
	kept[0].Close()
	mustExec(t, a, "DEALLOCATE PREPARE s4")
	st, err := a.PrepareContext(ctx, "SELECT balance FROM acct WHERE id = ?")
	if err != nil {
		t.Fatalf("after a close: %v", err)
	}
	mustExec(t, a, "PREPARE x FROM 'SELECT balance FROM acct WHERE id = ?'", "SET @k = 3", "EXECUTE x USING @k")
	var v int
	if err := st.QueryRowContext(ctx, 5).Scan(&v); err != nil || v != 100 {
		t.Errorf("execution: %d, %v", v, err)
	}
	b := conn(t, openDB(t, p.dsn("txn_t", "")))
	for i := range 10 {
		if _, err := b.PrepareContext(ctx, fmt.Sprintf("SELECT balance + %d FROM acct WHERE id = ?", i)); err != nil {
			t.Fatalf("second session, statement %d: %v", i+1, err)
		}
	}
	_, err = b.PrepareContext(ctx, "SELECT 1 FROM acct WHERE id = ?")
	me = wantSQLError(t, err, 1461, "42000")
	if !strings.HasSuffix(me.Message, "(current value: 30)") {
		t.Errorf("message %q", me.Message)
	}
	a.Close()
	dbA.Close()
	eventually(t, 5*time.Second, "room after the first session left", func() bool {
		st, err := b.PrepareContext(ctx, "SELECT 2 FROM acct WHERE id = ?")
		if err == nil {
			st.Close()
		}
		return err == nil
	})
}

// TestPreparedBackendBudget: 64 clients in transactions keep 20 distinct
// statements each open on a node whose pool has 64 connections; the
// node's connections keep at most backend.prepared_stmt_budget (here 100)
// statements plus one per connection, and every statement still
// executes (prepared again where it was closed to make room).
func TestPreparedBackendBudget(t *testing.T) {
	p := budgetProxy(t, func(cfg *config.Config) { cfg.Backend.PreparedStmtBudget = 100 })
	p.waitPoolIdle(t, 5*time.Second)
	before := preparedCount(t)
	var ready, leave, done sync.WaitGroup
	ready.Add(64)
	leave.Add(1)
	errs := make(chan error, 64)
	for k := range 64 {
		done.Go(func() { errs <- keptClient(p, k, &ready, &leave) })
	}
	ready.Wait()
	mid := preparedCount(t) - before
	leave.Done()
	done.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("64 clients with 20 statements open each: %d prepared on the servers", mid)
	if mid > 2*(100+64) {
		t.Errorf("prepared on the servers: %d, want at most %d", mid, 2*(100+64))
	}
}

// keptClient is one client of TestPreparedBackendBudget.
func keptClient(p *proxy, k int, ready, leave *sync.WaitGroup) error {
	signalled := false
	defer func() {
		if !signalled {
			ready.Done()
		}
	}()
	db, err := sql.Open("mysql", p.dsn("txn_t", ""))
	if err != nil {
		return err
	}
	defer db.Close()
	ctx := context.Background()
	c, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.ExecContext(ctx, "BEGIN"); err != nil {
		return err
	}
	var sts []*sql.Stmt
	for i := range 20 {
		st, err := c.PrepareContext(ctx, fmt.Sprintf("SELECT balance + %d FROM acct WHERE id = ?", k*100+i))
		if err != nil {
			return err
		}
		sts = append(sts, st)
	}
	for i, st := range sts {
		var v int
		if err := st.QueryRowContext(ctx, 1+i%8).Scan(&v); err != nil || v != 100+k*100+i {
			return fmt.Errorf("statement %d: %d, %v", i, v, err)
		}
	}
	signalled = true
	ready.Done()
	leave.Wait()
	_, err = c.ExecContext(ctx, "COMMIT")
	return err
}

// TestPreparedHoard: 7 sessions that prepare without closing hold at
// most max_prepared_stmt_count each and max_prepared_stmt_total together
// (issue 32: 114 674 statements with no proxy-wide cap); the rest get
// 1461. When they leave, the servers hold none of their statements.
func TestPreparedHoard(t *testing.T) {
	p := budgetProxy(t, func(cfg *config.Config) { cfg.MaxPreparedStmts, cfg.MaxPreparedStmtsTotal = 3000, 10000 })
	p.waitPoolIdle(t, 5*time.Second)
	baseline := preparedCount(t)
	before := heapInUse()
	var wg sync.WaitGroup
	var mu sync.Mutex
	total, refused := 0, 0
	var dbs []*sql.DB
	var held []*sql.Conn
	for k := range 7 {
		db := openDB(t, p.dsn("txn_t", ""))
		c := conn(t, db)
		dbs = append(dbs, db)
		held = append(held, c)
		wg.Go(func() {
			for i := range 3001 {
				_, err := c.PrepareContext(context.Background(), fmt.Sprintf("SELECT balance + %d FROM acct WHERE id = ?", k*100000+i))
				mu.Lock()
				if err != nil {
					refused++
					if errCode(err) != "error 1461" {
						t.Errorf("session %d: %v", k, err)
					}
					mu.Unlock()
					return
				}
				total++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	grew := int64(heapInUse()) - int64(before)
	t.Logf("7 sessions hold %d statements; the test's heap (proxy and clients) grew %d MiB; the servers hold %d", total, grew>>20, preparedCount(t))
	if total > 10000+7 || refused != 7 {
		t.Errorf("7 sessions hold %d statements, %d refused: want at most 10000 (+1 per session racing), 7 refusals", total, refused)
	}
	// Leaving, the sessions close what they prepared on the servers.
	for i, db := range dbs {
		held[i].Close()
		db.Close()
	}
	eventually(t, 10*time.Second, "the servers' prepared statements back at their baseline", func() bool { return preparedCount(t) <= baseline })
}
