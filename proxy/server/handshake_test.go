package server_test

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/shardgate/shardgate/mysql"
)

// dialSilent opens a socket that reads the proxy's first packet (the
// greeting, or an ERR) and then sends nothing, as a client that never
// logs in. It reports whether that packet was the greeting.
func dialSilent(t *testing.T, addr string) (net.Conn, bool) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	p, err := mysql.NewConn(nc, 0, 0).ReadPacket()
	if err != nil {
		t.Fatalf("reading the first packet: %v", err)
	}
	nc.SetReadDeadline(time.Time{})
	return nc, len(p) > 0 && p[0] != mysql.ErrHeader
}

// loginTime is how long a new client takes to log in and run SELECT 1,
// retrying while the proxy refuses it, for at most limit. *tries counts
// the attempts.
func loginTime(t *testing.T, dsn string, limit time.Duration, tries *int) (time.Duration, error) {
	t.Helper()
	start := time.Now()
	for {
		*tries++
		db, err := sql.Open("mysql", dsn)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), limit)
		var v int
		err = db.QueryRowContext(ctx, "SELECT 1").Scan(&v)
		cancel()
		db.Close()
		if err == nil && v == 1 {
			return time.Since(start), nil
		}
		if time.Since(start) > limit {
			return time.Since(start), err
		}
		time.Sleep(50 * time.Millisecond) // back-off between login attempts, as a client would
	}
}

// waitClosed reads nc until the proxy closes it; it fails the test if
// the socket is still open after timeout.
func waitClosed(t *testing.T, nc net.Conn, timeout time.Duration) {
	t.Helper()
	nc.SetReadDeadline(time.Now().Add(timeout))
	buf := make([]byte, 512)
	var err error
	for err == nil {
		_, err = nc.Read(buf)
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("a silent socket is still open after %v", timeout)
	}
	if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
		t.Logf("silent socket closed with %v", err)
	}
}

// TestHandshakeEviction (issue 32): sockets that read the greeting and
// send nothing used to hold every slot of max_unauthenticated_connections
// for their 10 s, and a real client got 1040 meanwhile. Now a new
// connection at the limit closes the oldest handshake, and handshakes
// begun above half the limit get the shorter deadline: with three times
// the limit of silent sockets open, a real client logs in and runs
// SELECT 1 at once, every silent socket is closed by the proxy within a
// few seconds, and the count of connections logging in returns to 0.
func TestHandshakeEviction(t *testing.T) {
	const limit = 20
	s := backends(t)[0]
	cfg := newConfig(t, s)
	cfg.MaxUnauthenticated = limit
	p := startProxy(t, cfg)
	var silent []net.Conn
	greeted := 0
	for range 3 * limit {
		nc, ok := dialSilent(t, p.addr)
		silent = append(silent, nc)
		if ok {
			greeted++
		}
	}
	if greeted != 3*limit {
		t.Errorf("%d of %d silent sockets got the greeting, want all (the oldest handshake makes room)", greeted, 3*limit)
	}
	tries := 0
	took, err := loginTime(t, p.dsn("", ""), 15*time.Second, &tries)
	t.Logf("a real client logged in and ran SELECT 1 in %v (%d attempts) with %d silent sockets and max_unauthenticated_connections %d", took.Round(time.Millisecond), tries, 3*limit, limit)
	if err != nil {
		t.Fatalf("the real client: %v", err)
	}
	if took > 3*time.Second {
		t.Errorf("the real client took %v, want under 3 s", took)
	}
	// The oldest are closed by eviction at once, the rest by their
	// shortened deadline.
	for _, nc := range silent {
		waitClosed(t, nc, 5*time.Second)
	}
	eventually(t, 5*time.Second, "no connection logging in", func() bool { return p.srv.Stats().Unauthenticated == 0 })
	st := p.srv.Stats()
	if st.UnauthenticatedEvicted < 2*limit {
		t.Errorf("unauthenticated_evicted = %d, want at least %d", st.UnauthenticatedEvicted, 2*limit)
	}
	if st.UnauthenticatedRejected != 0 {
		t.Errorf("unauthenticated_rejected = %d, want 0", st.UnauthenticatedRejected)
	}
}

// TestHandshakeEvictionFlood: while silent sockets keep arriving from
// several goroutines (each new one evicting the oldest), real clients
// still log in, the count of connections logging in never passes the
// limit, and it returns to 0 once the flood stops.
func TestHandshakeEvictionFlood(t *testing.T) {
	const limit = 20
	s := backends(t)[0]
	cfg := newConfig(t, s)
	cfg.MaxUnauthenticated = limit
	p := startProxy(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var mu sync.Mutex
	var over int64
	for range 4 {
		wg.Go(func() {
			var mine []net.Conn
			defer func() {
				for _, nc := range mine {
					nc.Close()
				}
			}()
			for ctx.Err() == nil {
				nc, err := net.DialTimeout("tcp", p.addr, 5*time.Second)
				if err != nil {
					continue
				}
				mine = append(mine, nc)
				if n := p.srv.Stats().Unauthenticated; n > limit {
					mu.Lock()
					over = max(over, n)
					mu.Unlock()
				}
				if len(mine) > 100 {
					mine[0].Close()
					mine = mine[1:]
				}
			}
		})
	}
	// Each login starts after the flood has evicted another 200.
	var times []time.Duration
	tries := 0
	for range 5 {
		from := p.srv.Stats().UnauthenticatedEvicted
		eventually(t, 10*time.Second, "the flood to evict 200 handshakes", func() bool { return p.srv.Stats().UnauthenticatedEvicted >= from+200 })
		took, err := loginTime(t, p.dsn("", ""), 5*time.Second, &tries)
		if err != nil {
			t.Errorf("a login during the flood: %v", err)
			break
		}
		times = append(times, took.Round(time.Millisecond))
	}
	cancel()
	wg.Wait()
	st := p.srv.Stats()
	t.Logf("5 logins during the flood took %v (%d attempts); %d handshakes evicted", times, tries, st.UnauthenticatedEvicted)
	if over > 0 {
		t.Errorf("%d connections logging in seen, over the limit %d", over, limit)
	}
	eventually(t, 10*time.Second, "no connection logging in", func() bool { return p.srv.Stats().Unauthenticated == 0 })
}
