package backend_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/mysql"
)

// TestNodeHaltFrozenServer: with the server stopped (SIGSTOP: its sockets
// stay open, nothing answers), Halt ends at once everything the node has
// under way there: a statement on a checked-out connection, one on a
// connection made outside the pool (Dial), a Get and a Dial waiting for
// the server's handshake (dial_timeout is a minute here, so only Halt can
// end them), and the health check. After it Get fails with 1053 without
// trying, and Close waits for nothing. This is what the proxy's shutdown
// does past its deadline (issue 32: SIGTERM took shutdown_timeout + 7.9 s).
func TestNodeHaltFrozenServer(t *testing.T) {
	s := need(t)
	nc, opts := nodeConfig(s, 8)
	opts.DialTimeout = time.Minute
	opts.HealthInterval = 50 * time.Millisecond
	n := backend.NewNode(nc, opts, nil)
	n.Start()
	defer n.Close()
	ctx := context.Background()

	idle, err := n.Get(ctx, 0, "", 45)
	if err != nil {
		t.Fatal(err)
	}
	n.Put(idle)
	busy, err := n.Get(ctx, 0, "", 45)
	if err != nil {
		t.Fatal(err)
	}
	outside, err := n.Dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer outside.Close()
	type result struct {
		what string
		err  error
	}
	results := make(chan result, 4)
	for what, c := range map[string]*backend.Conn{"a statement on a pooled connection": busy, "a statement on a connection of Dial": outside} {
		go func() {
			_, err := c.Exec("SELECT SLEEP(60)")
			results <- result{what, err}
		}()
	}
	direct, err := backend.Dial(ctx, s.Addr, backend.DialOptions{User: s.User, Password: s.Password, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "both SLEEPs to run", func() bool {
		res, err := direct.Exec("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO = 'SELECT SLEEP(60)'")
		return err == nil && len(res.Rows) == 1 && string(res.Rows[0][0]) == "2"
	})
	direct.Close()

	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Resume()
		// The next test needs the server answering again.
		waitFor(t, 30*time.Second, "the server to answer again", func() bool {
			c, err := backend.Dial(context.Background(), s.Addr, backend.DialOptions{User: s.User, Password: s.Password, DialTimeout: 5 * time.Second})
			if err == nil {
				c.Close()
			}
			return err == nil
		})
	})
	dials := n.Stats().Dials
	go func() {
		// Another variant: no idle connection fits, so Get logs in anew.
		c, err := n.Get(ctx, mysql.ClientFoundRows, "", 45)
		if err == nil {
			n.Put(c)
		}
		results <- result{"a Get logging in", err}
	}()
	go func() {
		c, err := n.Dial(ctx)
		if err == nil {
			c.Close()
		}
		results <- result{"a Dial logging in", err}
	}()
	waitFor(t, 10*time.Second, "Get to dial", func() bool { return n.Stats().Dials > dials })

	start := time.Now()
	n.Halt()
	const bound = time.Second
	timeout := time.After(bound)
	for range 4 {
		select {
		case r := <-results:
			if r.err == nil {
				t.Errorf("%s succeeded on a frozen server", r.what)
			}
			t.Logf("%s ended %v after Halt: %v", r.what, time.Since(start).Round(time.Millisecond), r.err)
		case <-timeout:
			t.Fatalf("not everything ended within %v of Halt", bound)
		}
	}
	n.Put(busy)
	var se *mysql.SQLError
	if _, err := n.Get(ctx, 0, "", 45); !errors.As(err, &se) || se.Code != mysql.ErServerShutdown {
		t.Errorf("Get after Halt: %v, want 1053", err)
	}
	closed := make(chan struct{})
	go func() {
		n.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(bound):
		t.Fatalf("Close after Halt still waits after %v", bound)
	}
	t.Logf("Halt and Close took %v with the server frozen", time.Since(start).Round(time.Millisecond))
}

// waitFor polls cond every 10 ms until it holds, failing the test after
// timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
