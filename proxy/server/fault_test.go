package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/shardgate/shardgate/config"
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
