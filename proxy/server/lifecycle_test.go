package server_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/proxy/server"
)

// TestNoGoroutineLeak runs 1000 connect/query/close cycles, sequential and
// concurrent, through every kind of session ending (plain, pinned by
// session state, abandoned transaction, prepared statement, client
// dropping the TCP connection), then checks that the proxy is back to the
// goroutines it had before, and after Shutdown to the test's own.
func TestNoGoroutineLeak(t *testing.T) {
	s := backends(t)[0]
	dbSetup(t, s, "leak_t")
	before := settledGoroutines(t, -1)
	p := startProxy(t, newConfig(t, s))
	dsn := p.dsn("leak_t", "")
	setup := openDB(t, dsn)
	mustExec(t, setup, "CREATE TABLE t (id INT AUTO_INCREMENT PRIMARY KEY, v INT)")
	// Warm up: the pool, the RSA-free auth path, the driver.
	for range 20 {
		queryValue(t, setup, "SELECT 1")
	}
	setup.Close()
	waitSessions(t, p, 0)
	baseline := settledGoroutines(t, -1)

	cycle := func(db *sql.DB, i int) error {
		ctx := context.Background()
		switch i % 5 {
		case 0:
			var n int
			return db.QueryRowContext(ctx, "SELECT ?", i).Scan(&n)
		case 1: // pinned by a user variable
			c, err := db.Conn(ctx)
			if err != nil {
				return err
			}
			defer c.Close()
			var n int
			return c.QueryRowContext(ctx, fmt.Sprintf("SELECT @x := %d", i)).Scan(&n)
		case 2: // a transaction left open
			c, err := db.Conn(ctx)
			if err != nil {
				return err
			}
			defer c.Close()
			if _, err := c.ExecContext(ctx, "BEGIN"); err != nil {
				return err
			}
			_, err = c.ExecContext(ctx, "INSERT INTO t (v) VALUES (1)")
			return err
		case 3: // a prepared statement
			st, err := db.PrepareContext(ctx, "SELECT v FROM t WHERE id = ?")
			if err != nil {
				return err
			}
			defer st.Close()
			rows, err := st.QueryContext(ctx, i)
			if err != nil {
				return err
			}
			return rows.Close()
		default: // the client drops the TCP connection mid-session
			nc, err := net.Dial("tcp", p.addr)
			if err != nil {
				return err
			}
			defer nc.Close()
			c := mysql.NewConn(nc, 0, 0)
			g, err := c.ReadPacket()
			if err != nil {
				return err
			}
			hs, err := mysql.ParseHandshake(g)
			if err != nil {
				return err
			}
			c.WritePacket(mysql.AppendHandshakeResponse(nil, &mysql.HandshakeResponse{
				Capabilities: rawCaps, MaxPacket: 1 << 24, Charset: 45, User: appUser,
				AuthResponse: mysql.ScrambleNative(hs.Salt, appPassword), AuthPlugin: mysql.AuthNativePassword,
			}))
			c.Flush()
			_, err = c.ReadPacket()
			return err
		}
	}
	// Every cycle is a new client connection: no idle connections in the
	// driver's pool.
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxIdleConns(0)
	for i := range 500 {
		if err := cycle(db, i); err != nil {
			t.Fatalf("sequential cycle %d: %v", i, err)
		}
	}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < 500; i += 8 {
				if err := cycle(db, i); err != nil {
					t.Errorf("concurrent cycle %d: %v", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	db.Close()

	waitSessions(t, p, 0)
	p.waitPoolIdle(t, 10*time.Second)
	if st := p.srv.Stats(); st.ConnsTotal < 1000 {
		t.Errorf("only %d connections reached the proxy", st.ConnsTotal)
	}
	after := settledGoroutines(t, baseline)
	t.Logf("goroutines: %d before the proxy, %d after warm-up, %d after 1000 sessions", before, baseline, after)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	<-p.serveDone
	settledGoroutines(t, before)
}

// settledGoroutines waits until the number of goroutines is at most want
// plus a little slack (or, with want < 0, stops changing) and returns it.
func settledGoroutines(t *testing.T, want int) int {
	t.Helper()
	const slack = 2
	deadline := time.Now().Add(10 * time.Second)
	last, stable := -1, 0
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		n := runtime.NumGoroutine()
		if want >= 0 && n <= want+slack {
			return n
		}
		if want < 0 {
			if n == last {
				stable++
			} else {
				stable = 0
			}
			if stable == 10 {
				return n
			}
		}
		last = n
		if time.Now().After(deadline) {
			if want < 0 {
				return n
			}
			var b bytes.Buffer
			pprof.Lookup("goroutine").WriteTo(&b, 1)
			t.Fatalf("%d goroutines, want at most %d+%d:\n%s", n, want, slack, b.String())
		}
		<-tick.C
	}
}

func waitSessions(t *testing.T, p *proxy, n int) {
	t.Helper()
	eventually(t, 10*time.Second, fmt.Sprintf("%d sessions", n), func() bool { return p.srv.Stats().Sessions == n })
}

// TestGracefulShutdown: Shutdown closes idle clients at once, lets a client
// idle inside a transaction commit it and closes it then, lets a running
// statement finish and deliver its result, then closes that client too;
// Serve returns ErrServerClosed.
func TestGracefulShutdown(t *testing.T) {
	s := backends(t)[0]
	p := startProxy(t, newConfig(t, s))
	idle := dialRaw(t, p.addr)
	idle.login(rawCaps)
	idleInTx := dialRaw(t, p.addr)
	idleInTx.login(rawCaps)
	// The proxy opens a transaction on a backend lazily, with its first
	// statement: from then on it holds a connection.
	for _, q := range []string{"BEGIN", "SELECT 1"} {
		if _, e := idleInTx.query(q); e != nil {
			t.Fatal(e)
		}
	}
	busyDB := openDB(t, p.dsn("", ""))
	busy := conn(t, busyDB)
	queryValue(t, busy, "SELECT 1")

	type answer struct {
		v   int
		err error
		at  time.Time
	}
	done := make(chan answer, 1)
	go func() {
		var a answer
		a.err = busy.QueryRowContext(context.Background(), "SELECT SLEEP(1)").Scan(&a.v)
		a.at = time.Now()
		done <- a
	}()
	// The sleep has a backend connection once two are in use (the
	// transaction holds the other).
	eventually(t, 5*time.Second, "the SLEEP to run", func() bool { return p.srv.Stats().Nodes[0].InUse == 2 })

	start := time.Now()
	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		shut <- p.srv.Shutdown(ctx)
	}()
	idle.expectClosed()
	// A session inside a transaction may finish it, and is closed then.
	if _, e := idleInTx.query("COMMIT"); e != nil {
		t.Fatalf("COMMIT of a transaction open at the shutdown: %v", e)
	}
	idleInTx.expectClosed()
	idleClosed := time.Now()
	code, body := getHealth(t, p.srv.AdminHandler())
	if code != http.StatusServiceUnavailable || body.Status != "shutting down" {
		t.Errorf("/healthz during shutdown: %d %+v", code, body)
	}

	a := <-done
	if a.err != nil || a.v != 0 {
		t.Fatalf("SLEEP(1) during shutdown: %d, %v", a.v, a.err)
	}
	// Idle clients do not wait for running statements.
	if !idleClosed.Before(a.at) {
		t.Errorf("idle clients closed %v after Shutdown began, after the running statement finished", idleClosed.Sub(start))
	}
	select {
	case err := <-shut:
		if err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Shutdown did not return 5s after the last statement finished")
	}
	<-p.serveDone
	if !errors.Is(p.serveErr, server.ErrServerClosed) {
		t.Errorf("Serve returned %v, want ErrServerClosed", p.serveErr)
	}
	if _, err := busy.ExecContext(context.Background(), "SELECT 1"); err == nil {
		t.Error("the busy client's connection is still open after Shutdown")
	}
	if c, err := net.DialTimeout("tcp", p.addr, time.Second); err == nil {
		c.Close()
		t.Error("the listener still accepts after Shutdown")
	}
	if st := p.srv.Stats(); st.Sessions != 0 {
		t.Errorf("%d sessions after Shutdown", st.Sessions)
	}
}

// TestShutdownDeadline: a statement that outlives Shutdown's context is cut
// off and Shutdown reports the context's error.
func TestShutdownDeadline(t *testing.T) {
	s := backends(t)[0]
	p := startProxy(t, newConfig(t, s))
	busy := conn(t, openDB(t, p.dsn("", "")))
	done := make(chan error, 1)
	go func() {
		_, err := busy.ExecContext(context.Background(), "SELECT SLEEP(5)")
		done <- err
	}()
	eventually(t, 5*time.Second, "the SLEEP to run", func() bool { return p.srv.Stats().Nodes[0].InUse == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := p.srv.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown: %v, want %v", err, context.DeadlineExceeded)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Shutdown took %v with a 300ms deadline", d)
	}
	if err := <-done; err == nil {
		t.Error("the cut-off statement succeeded")
	}
}

func TestAllowIPs(t *testing.T) {
	s := backends(t)[0]
	cfg := newConfig(t, s)
	cfg.AllowIPs = "10.0.0.1"
	p := startProxy(t, cfg)
	me := wantSQLError(t, openDB(t, p.dsn("", "")).Ping(), mysql.ErHostNotPrivileged, "HY000")
	if !strings.Contains(me.Message, "127.0.0.1") {
		t.Errorf("message %q does not name the client's address", me.Message)
	}
	if st := p.srv.Stats(); st.ConnsRejected != 1 || st.Sessions != 0 {
		t.Errorf("stats after a refused client: %+v", st)
	}

	cfg = newConfig(t, s)
	cfg.AllowIPs = "10.0.0.0/8, 127.0.0.0/8"
	p = startProxy(t, cfg)
	if got := queryValue(t, openDB(t, p.dsn("", "")), "SELECT 1"); got != "1" {
		t.Fatal(got)
	}
}

func TestMaxConnections(t *testing.T) {
	s := backends(t)[0]
	cfg := newConfig(t, s)
	cfg.MaxConnections = 2
	p := startProxy(t, cfg)
	a := conn(t, openDB(t, p.dsn("", "")))
	bdb := openDB(t, p.dsn("", ""))
	b := conn(t, bdb)
	for _, c := range []*sql.Conn{a, b} {
		queryValue(t, c, "SELECT 1")
	}
	third := openDB(t, p.dsn("", ""))
	wantSQLError(t, third.Ping(), mysql.ErTooManyConnections, "08004")
	if got := queryValue(t, a, "SELECT 'a still works'"); got != "a still works" {
		t.Fatal(got)
	}
	b.Close()
	bdb.Close()
	eventually(t, 5*time.Second, "a free connection slot", func() bool { return p.srv.Stats().Sessions == 1 })
	if err := third.Ping(); err != nil {
		t.Fatalf("after a client left: %v", err)
	}
}

// TestPoolAcquireTimeout: with one backend connection held by an open
// transaction, another client's statement waits acquire_timeout and fails
// with 1040 naming the node.
func TestPoolAcquireTimeout(t *testing.T) {
	s := backends(t)[0]
	cfg := newConfig(t, s)
	cfg.Nodes[0].MaxConnsLimit = 1
	cfg.Backend.AcquireTimeout = 300 * time.Millisecond
	p := startProxy(t, cfg)
	holder := conn(t, openDB(t, p.dsn("", "")))
	mustExec(t, holder, "BEGIN")
	queryValue(t, holder, "SELECT 1")

	other := openDB(t, p.dsn("", ""))
	start := time.Now()
	_, err := other.Exec("SELECT 2")
	took := time.Since(start)
	me := wantSQLError(t, err, mysql.ErTooManyConnections, "08004")
	if !strings.Contains(me.Message, "node1") {
		t.Errorf("message %q does not name the node", me.Message)
	}
	if took < 250*time.Millisecond || took > 2*time.Second {
		t.Errorf("failed after %v, want about 300ms", took)
	}
	if st := p.srv.Stats(); st.Nodes[0].AcquireTimeouts != 1 {
		t.Errorf("acquire timeouts %d, want 1", st.Nodes[0].AcquireTimeouts)
	}
	mustExec(t, holder, "COMMIT")
	if got := queryValue(t, other, "SELECT 3"); got != "3" {
		t.Fatal(got)
	}
}
