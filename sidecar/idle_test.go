package sidecar_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/sidecar"
)

// TestIdleConnectionsClose: the sidecar's connections, kept for the next
// statement, close once idle past its idle timeout (the node's pools' for
// New), after a single statement or a burst of concurrent ones; a
// statement within the timeout reuses the connection; without a timeout
// they stay until Close. The server counts them (Threads_connected).
func TestIdleConnectionsClose(t *testing.T) {
	sc, d := open(t, "idle_sidecar")
	c := &sidecar.Component{Name: "things", Migrations: [][]string{v1}}
	threadOf := func() string { // on sc, whichever it is then
		res, err := sc.Exec(context.Background(), c, "SELECT CONNECTION_ID()")
		if err != nil {
			t.Fatal(err)
		}
		return string(res.Rows[0][0])
	}
	alive := func(ids ...string) int {
		n := 0
		for _, id := range ids {
			if value(t, d, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = "+id) == "1" {
				n++
			}
		}
		return n
	}
	waitGone := func(ids ...string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for alive(ids...) > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%d of the sidecar's connections %v still open", alive(ids...), ids)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	// Kept until Close (New's default here: the node's idle timeout is
	// config.Default's, minutes).
	id := threadOf()
	time.Sleep(200 * time.Millisecond)
	if again := threadOf(); again != id || alive(id) != 1 {
		t.Fatalf("without a short idle timeout the connection changed (%s, then %s) or closed", id, again)
	}

	// The node's pools close idle connections after 300 ms: New's
	// sidecar closes its own as they do.
	srv := cluster.Servers[0]
	bcfg := config.Default().Backend
	bcfg.IdleTimeout = 300 * time.Millisecond
	n := backend.NewNode(config.Node{Name: "node1", Master: srv.Addr, User: srv.User, Password: srv.Password, MaxConnsLimit: 4, DownAfterNoalive: 1}, bcfg, nil)
	n.Start()
	t.Cleanup(n.Close)
	sc = sidecar.New(n, "idle_sidecar")
	t.Cleanup(sc.Close)
	id = threadOf()
	// Reused within the timeout: the same thread.
	time.Sleep(50 * time.Millisecond)
	if again := threadOf(); again != id {
		t.Errorf("a statement within the idle timeout ran on thread %s, not the idle %s", again, id)
	}
	waitGone(id)

	// A burst: several connections at once, all closed once idle.
	var mu sync.Mutex
	ids := map[string]bool{}
	var wg sync.WaitGroup
	for i := 0; i < 6; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := sc.Exec(context.Background(), c, "SELECT CONNECTION_ID(), SLEEP(0.1)")
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			ids[string(res.Rows[0][0])] = true
			mu.Unlock()
		}()
	}
	wg.Wait()
	var list []string
	for id := range ids {
		list = append(list, id)
	}
	if len(list) < 2 {
		t.Fatalf("the burst used %d connection(s): %v", len(list), list)
	}
	waitGone(list...)

	// Used again after they closed: a new connection, which closes too.
	id = threadOf()
	if n, _ := strconv.Atoi(id); n == 0 {
		t.Fatalf("thread id %q", id)
	}
	waitGone(id)
}
