package main_test

import (
	"context"
	"database/sql"
	"sync"
	"testing"
	"time"

	"github.com/shardgate/shardgate/internal/mariadbtest"
)

// TestProcessShutdownBackendFrozen: the proxy's default node, which also
// holds the sidecar (a global sequence, the XA decision log), is stopped
// with SIGSTOP while statements run on it: a SELECT SLEEP(30), a
// statement over all the subtables of a sharded table, and a transaction
// left open there. SIGTERM must end the process within shutdown_timeout
// plus the documented margin of 1 s, with the backend still frozen:
// nothing of the shutdown may wait for an answer from it (issue 32:
// 17.9 s with shutdown_timeout at 10 s). The backend's own defaults stay
// in force (command_timeout 30 s, dial_timeout 3 s, health_interval 2 s),
// as an operator would have them.
func TestProcessShutdownBackendFrozen(t *testing.T) {
	srvs := servers(t)
	frozen := srvs[1]
	// node1 (default and sidecar) is the server that freezes.
	p := startProxy(t, settings{
		nodes: []*mariadbtest.Server{frozen, srvs[0]},
		schema: "    shard:\n      - db: shut_t\n        table: acct\n        key: id\n        type: hash\n" +
			"        nodes: [node1, node2]\n        locations: [2, 2]\n        sequence: id\n",
		extra: "transaction_mode: xa\nsidecar:\n  node: node1\n  db: shardgate_sidecar\nxa:\n  instance: shutdown-test\n" +
			"  recovery_interval: 500ms\n  lease: 3s\n",
	})
	// Bounds everything of this test that has no tighter bound.
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	var resumeOnce sync.Once
	resume := func() { resumeOnce.Do(func() { frozen.Resume() }) }
	t.Cleanup(func() {
		resume()
		for _, s := range []*mariadbtest.Server{frozen, srvs[0]} {
			if d, err := sql.Open("mysql", s.DSN("")+"&timeout=5s&readTimeout=20s"); err == nil {
				d.Exec("DROP DATABASE IF EXISTS shut_t")
				d.Close()
			}
		}
	})

	db := p.openDB(t, "")
	for _, q := range []string{"DROP DATABASE IF EXISTS shut_t", "CREATE DATABASE shut_t",
		"CREATE TABLE shut_t.acct (id BIGINT PRIMARY KEY, balance INT NOT NULL)",
		"INSERT INTO shut_t.acct (balance) VALUES (100),(100),(100),(100),(100),(100),(100),(100)"} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db = p.openDB(t, "shut_t")
	conn := func() *sql.Conn {
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// A transaction open on both nodes, idle at SIGTERM: the shutdown
	// lets it finish until the deadline.
	inTxn := conn()
	for _, q := range []string{"BEGIN", "UPDATE acct SET balance = 101"} {
		if _, err := inTxn.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// A session holding a named lock on node1, which its client leaves
	// just before SIGTERM: its connection needs a reset nobody answers.
	sticky := conn()
	var got sql.NullInt64
	if err := sticky.QueryRowContext(ctx, "SELECT GET_LOCK('shut_lock', 0)").Scan(&got); err != nil || got.Int64 != 1 {
		t.Fatalf("GET_LOCK: %v, %v", got, err)
	}
	// Statements running on node1 when it stops: one on it alone, one
	// over every subtable.
	running := make(chan error, 2)
	for _, q := range []string{"SELECT SLEEP(30)", "SELECT SUM(SLEEP(10)) FROM acct"} {
		c := conn()
		go func() {
			var v any
			running <- c.QueryRowContext(context.Background(), q).Scan(&v)
		}()
	}
	direct, err := sql.Open("mysql", frozen.DSN("")+"&timeout=5s&readTimeout=10s")
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	// Two subtables of acct live on node1: the single SLEEP and two
	// per-subtable statements.
	waitUntil(t, 20*time.Second, "the statements to run on node1", func() bool {
		var n int
		err := direct.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE 'SELECT%SLEEP(%'").Scan(&n)
		return err == nil && n >= 3
	})
	direct.Close()

	if err := frozen.Pause(); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	sticky.Close()
	if p.exited() {
		t.Fatalf("the proxy exited: %v", p.waitErr)
	}
	p.terminate(t, "node1 froze", stopped)
	// The clients whose statements ran learn of it at once.
	for range 2 {
		select {
		case err := <-running:
			if err == nil {
				t.Errorf("a statement running on the frozen node succeeded")
			}
		case <-time.After(10 * time.Second):
			t.Errorf("a client whose statement ran on the frozen node got no answer 10 s after the proxy exited")
		}
	}
	resume()
	// The server runs again and answers (the next test needs it).
	direct, err = sql.Open("mysql", frozen.DSN("")+"&timeout=5s&readTimeout=10s")
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	waitUntil(t, 30*time.Second, "node1 to answer again", func() bool { return direct.PingContext(ctx) == nil })
}
