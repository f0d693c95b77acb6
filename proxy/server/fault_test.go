package server_test

import (
	"context"
	"database/sql"
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/internal/mariadbtest"
	"github.com/shardgate/shardgate/mysql"
)

// TestFaultBackendPaused: a backend that stops answering (SIGSTOP: its
// sockets stay open, nothing replies) must not take the proxy with it.
// Clients of the other node are unaffected; a statement running on the
// paused node and a new one sent to it fail within a bounded time (the
// health check marks the node down and aborts what runs there); a client
// that leaves while its connection to the paused node carries state (the
// proxy resets it with COM_CHANGE_USER) does not hold shutdown, which
// returns within its deadline plus a second. Before, pings, the reset and
// state sync had no deadline and shutdown waited for ever.
func TestFaultBackendPaused(t *testing.T) {
	srvs := backends(t)
	paused := srvs[1] // node2: acct ids 2 and 6
	p, db := txnProxy(t, config.TransactionMulti)

	running := conn(t, db)
	sticky := conn(t, db)
	// A lock taken on node2 (id 2 lives there): the session keeps that
	// connection, and it must be reset when the client leaves.
	queryValue(t, sticky, "SELECT GET_LOCK('fault_lock', 0) FROM acct WHERE id = 2")
	other := conn(t, db)

	runErr := make(chan error, 1)
	runStart := make(chan struct{})
	go func() {
		close(runStart)
		var v any
		runErr <- running.QueryRowContext(context.Background(), "SELECT SLEEP(30) FROM acct WHERE id = 2").Scan(&v)
	}()
	<-runStart
	time.Sleep(300 * time.Millisecond) // the SLEEP is running on node2
	if err := paused.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			paused.Resume()
		}
	}
	defer resume()
	stopped := time.Now()

	// The other node answers at once.
	if got := queryValue(t, other, "SELECT balance FROM acct WHERE id = 1"); got != "100" {
		t.Errorf("node1: %s", got)
	}
	// The statement running on node2 fails.
	select {
	case err := <-runErr:
		if err == nil {
			t.Errorf("the statement on the paused node succeeded")
		}
		t.Logf("the running statement failed after %v: %v", time.Since(stopped).Round(time.Millisecond), err)
	case <-time.After(15 * time.Second):
		t.Fatalf("the statement on the paused node still runs after 15 s")
	}
	// A new statement to node2 fails too.
	start := time.Now()
	fresh := conn(t, db)
	var v any
	err := fresh.QueryRowContext(t.Context(), "SELECT balance FROM acct WHERE id = 6").Scan(&v)
	if err == nil {
		t.Errorf("a statement to the paused node succeeded")
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("a statement to the paused node failed only after %v", d)
	}
	t.Logf("a new statement failed after %v: %v", time.Since(start).Round(time.Millisecond), err)
	if got := queryValue(t, other, "SELECT balance FROM acct WHERE id = 5"); got != "100" {
		t.Errorf("node1 afterwards: %s", got)
	}

	// The sticky client leaves: its connection to node2 needs a reset the
	// paused server will not answer.
	sticky.Close()
	const timeout = 2 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start = time.Now()
	p.srv.Shutdown(ctx)
	if d := time.Since(start); d > timeout+time.Second {
		t.Errorf("shutdown took %v with a %v deadline", d, timeout)
	}
	t.Logf("shutdown returned after %v", time.Since(start).Round(time.Millisecond))
	resume()
}

// TestFaultKilledBetweenCommits: a transaction across two nodes commits on
// node1, then node2's server dies (kill -9) before its COMMIT. The client
// gets 1180 naming what committed and what failed; a client of node1 is
// unaffected; after node2 restarts, node1 kept the write and node2's was
// rolled back by crash recovery; no pooled connection is left checked out.
func TestFaultKilledBetweenCommits(t *testing.T) {
	srvs := backends(t)
	doomed := srvs[1] // node2
	p, db := txnProxy(t, config.TransactionMulti)
	other := conn(t, db)
	c := conn(t, db)
	mustExec(t, c, "BEGIN", "UPDATE acct SET balance = 1 WHERE id = 1", "UPDATE acct SET balance = 2 WHERE id = 2")
	hook := func(node string) {
		if node == "node2" {
			doomed.Kill()
		}
	}
	p.srv.Knobs().BeforeCommit.Store(&hook)
	defer p.srv.Knobs().BeforeCommit.Store(nil)
	restarted := false
	defer func() {
		if !restarted {
			doomed.Restart()
		}
	}()
	_, err := c.ExecContext(t.Context(), "COMMIT")
	p.srv.Knobs().BeforeCommit.Store(nil)
	wantSQLError(t, err, mysql.ErErrorDuringCommit, "HY000")
	if msg := err.Error(); !strings.Contains(msg, "committed on node1") || !strings.Contains(msg, "failed on node2") {
		t.Errorf("the error does not say what committed: %v", err)
	}
	if got := queryValue(t, other, "SELECT balance FROM acct WHERE id = 5"); got != "100" {
		t.Errorf("node1 for another client: %s", got)
	}
	restarted = true
	afterRecovery(t, p, doomed, other, "1,1|2,100|5,100|6,100") // node1's write kept, node2's rolled back
}

// TestFaultKilledMidTransaction: node2's server dies inside a transaction
// that wrote on both nodes. The client's next statement fails (1430 or a
// closed connection: its transaction is gone); node1's write is rolled
// back when the session ends; other clients are unaffected and no pooled
// connection leaks.
func TestFaultKilledMidTransaction(t *testing.T) {
	srvs := backends(t)
	doomed := srvs[1]
	p, db := txnProxy(t, config.TransactionMulti)
	other := conn(t, db)
	c := conn(t, db)
	mustExec(t, c, "BEGIN", "UPDATE acct SET balance = 1 WHERE id = 1", "UPDATE acct SET balance = 2 WHERE id = 2")
	if err := doomed.Kill(); err != nil {
		t.Fatal(err)
	}
	restarted := false
	defer func() {
		if !restarted {
			doomed.Restart()
		}
	}()
	_, err := c.ExecContext(t.Context(), "UPDATE acct SET balance = 3 WHERE id = 6")
	if err == nil || !lostBackend(err) {
		t.Errorf("the next statement: %v, want the backend lost", err)
	}
	if _, err := c.ExecContext(t.Context(), "COMMIT"); err == nil {
		t.Errorf("COMMIT succeeded after the node died mid-transaction")
	}
	c.Close()
	if got := queryValue(t, other, "SELECT balance FROM acct WHERE id = 5"); got != "100" {
		t.Errorf("node1 for another client: %s", got)
	}
	eventually(t, 5*time.Second, "node1's write to be rolled back", func() bool {
		return queryValue(t, other, "SELECT balance FROM acct WHERE id = 1") == "100"
	})
	restarted = true
	afterRecovery(t, p, doomed, other, "1,100|2,100|5,100|6,100")
}

// afterRecovery restarts the killed node2, waits until other reaches it,
// checks the balances left after crash recovery, and that no pooled
// connection stays checked out (other's own, at most).
func afterRecovery(t *testing.T, p *proxy, doomed *mariadbtest.Server, other *sql.Conn, want string) {
	t.Helper()
	if err := doomed.Restart(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "node2 to be back", func() bool {
		var v string
		return other.QueryRowContext(t.Context(), "SELECT balance FROM acct WHERE id = 2").Scan(&v) == nil
	})
	if got := balances(t, other); got != want {
		t.Errorf("after recovery: %s, want %s", got, want)
	}
	eventually(t, 5*time.Second, "no connection left checked out", func() bool {
		for _, n := range p.srv.Stats().Nodes {
			if n.InUse > 1 {
				return false
			}
		}
		return true
	})
}

// TestFaultClientLeavesMidStatement: a client that disconnects while its
// statement runs has the statement stopped on the backend (KILL QUERY),
// as MariaDB stops its own clients' statements; before, a SLEEP(20) kept
// running, holding a pooled connection, for its 20 s.
func TestFaultClientLeavesMidStatement(t *testing.T) {
	s := backends(t)[0]
	p := startProxy(t, newConfig(t, s))
	direct := openDB(t, directDSN(s, "", ""))
	for _, q := range []string{
		"SELECT SLEEP(20) /* leaves text */",
		"SELECT SLEEP(20), seq FROM mysql.seq_1_to_3 /* leaves rows */",
	} {
		r := dialRaw(t, p.addr)
		r.login(rawCaps)
		r.command(append([]byte{mysql.ComQuery}, q...))
		runningThread(t, direct, q)
		time.Sleep(1500 * time.Millisecond) // past the watch's start
		r.nc.Close()
		start := time.Now()
		eventually(t, 5*time.Second, "the statement to stop on the server", func() bool {
			return queryValue(t, direct, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO = '"+q+"'") == "0"
		})
		t.Logf("%s stopped %v after the client left", q, time.Since(start).Round(time.Millisecond))
	}
	// A prepared statement waiting for a lock another session holds
	// (COM_STMT_EXECUTE of SELECT GET_LOCK): the client leaves abruptly,
	// the wait stops on the server and the lock is never granted to it.
	holder := conn(t, direct)
	if got := queryValue(t, holder, "SELECT GET_LOCK('sg_fault_lock', 0)"); got != "1" {
		t.Fatalf("GET_LOCK in the holding session: %s", got)
	}
	q := "SELECT GET_LOCK('sg_fault_lock', 20)"
	r := dialRaw(t, p.addr)
	r.login(rawCaps)
	id, resp := r.prepare(q)
	if id == 0 {
		t.Fatalf("prepare %s: %s", q, describe(resp[0]))
	}
	r.command(append(binary.LittleEndian.AppendUint32([]byte{mysql.ComStmtExecute}, id), 0, 1, 0, 0, 0))
	runningThread(t, direct, q)
	time.Sleep(1500 * time.Millisecond)
	r.nc.Close()
	eventually(t, 5*time.Second, "the prepared GET_LOCK to stop waiting on the server", func() bool {
		return queryValue(t, direct, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO = \""+q+"\"") == "0"
	})
	if _, err := holder.ExecContext(context.Background(), "DO RELEASE_LOCK('sg_fault_lock')"); err != nil {
		t.Fatal(err)
	}
	if got := queryValue(t, direct, "SELECT COALESCE(IS_USED_LOCK('sg_fault_lock'), 'free')"); got != "free" {
		t.Errorf("after the holder released the lock, thread %s holds it: the departed client's GET_LOCK went on", got)
	}
	eventually(t, 5*time.Second, "the pool to be free", func() bool { return p.srv.Stats().Nodes[0].InUse == 0 })
	// A statement that outlives the watch's start still works for a
	// client that stays, and the next command reads normally.
	c := conn(t, openDB(t, p.dsn("", "")))
	if got := queryValue(t, c, "SELECT SLEEP(1.5) + 1"); got != "1" {
		t.Errorf("a long statement: %s", got)
	}
	if got := queryValue(t, c, "SELECT 2"); got != "2" {
		t.Errorf("the next one: %s", got)
	}
}
