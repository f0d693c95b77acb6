package backend_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/internal/mariadbtest"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/proxy/server"
)

var cluster *mariadbtest.Cluster

func TestMain(m *testing.M) {
	mariadbtest.Main(m, 1, func(c *mariadbtest.Cluster) int {
		cluster = c
		return m.Run()
	})
}

func need(t *testing.T) *mariadbtest.Server {
	t.Helper()
	if cluster == nil {
		t.Skip("integration test: needs MariaDB (skipped under -short)")
	}
	return cluster.Servers[0]
}

func nodeConfig(s *mariadbtest.Server, limit int) (config.Node, config.BackendOptions) {
	opts := config.Default().Backend
	opts.AcquireTimeout = 200 * time.Millisecond
	opts.PoolGrowth = false // limit is the limit (grow_test.go grows)
	return config.Node{Name: "node1", Master: s.Addr, User: s.User, Password: s.Password,
		MaxConnsLimit: limit, DownAfterNoalive: 1}, opts
}

func TestDialNativeAndCommands(t *testing.T) {
	s := need(t)
	ctx := context.Background()
	c, err := backend.Dial(ctx, s.Addr, backend.DialOptions{User: s.User, Password: s.Password, DialTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.ThreadID == 0 || c.ServerVersion == "" {
		t.Fatalf("handshake fields: thread %d version %q", c.ThreadID, c.ServerVersion)
	}
	if err := c.Ping(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec("CREATE DATABASE IF NOT EXISTS backend_t"); err != nil {
		t.Fatal(err)
	}
	if err := c.UseDB("backend_t"); err != nil || c.DB != "backend_t" {
		t.Fatalf("UseDB: %v, db %q", err, c.DB)
	}
	err = c.UseDB("no_such_db")
	var se *mysql.SQLError
	if !errors.As(err, &se) || se.Code != 1049 {
		t.Fatalf("UseDB of a missing database: %v, want 1049", err)
	}
	res, err := c.Exec("SELECT 1, NULL, 'x'; SELECT DATABASE()")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 1 || string(res.Rows[0][0]) != "backend_t" {
		t.Fatalf("multi-result Exec returned %q", res.Rows)
	}
	if err := c.SetMultiStatements(false); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec("SELECT 1; SELECT 2"); !errors.As(err, &se) || se.Code != 1064 {
		t.Fatalf("multi-statement with the option off: %v, want 1064", err)
	}
	if err := c.ResetConnection(45); err != nil {
		t.Fatal(err)
	}
}

func TestDialWrongPassword(t *testing.T) {
	s := need(t)
	_, err := backend.Dial(context.Background(), s.Addr, backend.DialOptions{User: s.User, Password: "wrong", DialTimeout: time.Second})
	var se *mysql.SQLError
	if !errors.As(err, &se) || se.Code != mysql.ErAccessDenied {
		t.Fatalf("got %v, want 1045", err)
	}
}

// TestDialCachingSha2 authenticates the backend client with
// caching_sha2_password against the proxy's own front end (MariaDB has no
// server side for that plugin): full authentication with the RSA key
// exchange first, the fast path after.
func TestDialCachingSha2(t *testing.T) {
	s := need(t)
	cfg := config.Default()
	cfg.Addr = "127.0.0.1:0"
	cfg.DefaultAuthPlugin = mysql.AuthCachingSha2Password
	cfg.Users = []config.User{{User: "app", Password: "s3cret"}}
	n, _ := nodeConfig(s, 4)
	cfg.Nodes = []config.Node{n}
	cfg.Schemas = []config.Schema{{User: "app", Nodes: []string{"node1"}, Default: "node1"}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(cfg, server.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	defer srv.Shutdown(context.Background())
	ctx := context.Background()
	for i, pw := range []string{"wrong", "s3cret", "s3cret", "wrong"} {
		c, err := backend.Dial(ctx, l.Addr().String(), backend.DialOptions{User: "app", Password: pw, DialTimeout: 5 * time.Second})
		if pw == "wrong" {
			var se *mysql.SQLError
			if !errors.As(err, &se) || se.Code != mysql.ErAccessDenied {
				t.Fatalf("login %d with a wrong password: %v, want 1045", i, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("login %d: %v", i, err)
		}
		res, err := c.Exec("SELECT 40+2")
		if err != nil || string(res.Rows[0][0]) != "42" {
			t.Fatalf("query after login %d: %v %+v", i, err, res)
		}
		c.Close()
	}
}

func TestPoolVariantsAndLimit(t *testing.T) {
	s := need(t)
	nc, opts := nodeConfig(s, 2)
	n := backend.NewNode(nc, opts, nil)
	n.Start()
	defer n.Close()
	ctx := context.Background()
	a, err := n.Get(ctx, 0, "", 45)
	if err != nil {
		t.Fatal(err)
	}
	if a.Caps&mysql.ClientDeprecateEOF != 0 {
		t.Fatal("variant 0 connection negotiated DEPRECATE_EOF")
	}
	b, err := n.Get(ctx, mysql.ClientDeprecateEOF|mysql.ClientFoundRows, "", 45)
	if err != nil {
		t.Fatal(err)
	}
	if b.Caps&mysql.ClientDeprecateEOF == 0 || b.Caps&mysql.ClientFoundRows == 0 {
		t.Fatalf("variant caps not negotiated: %#x", b.Caps)
	}
	start := time.Now()
	_, err = n.Get(ctx, 0, "", 45)
	var se *mysql.SQLError
	if !errors.As(err, &se) || se.Code != mysql.ErTooManyConnections {
		t.Fatalf("third Get on a pool of 2: %v, want 1040", err)
	}
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Fatalf("acquire timeout fired after %v, want about 200ms", d)
	}
	n.Put(a)
	n.Put(b)
	// The idle variant-0 connection is reused for variant 0.
	c, err := n.Get(ctx, 0, "", 45)
	if err != nil {
		t.Fatal(err)
	}
	if c.ThreadID != a.ThreadID {
		t.Fatalf("pool dialed a new connection (thread %d) instead of reusing %d", c.ThreadID, a.ThreadID)
	}
	c.MarkBroken()
	n.Put(c)
	if st := n.Stats(); st.InUse != 0 || st.Idle != 1 {
		t.Fatalf("stats after returning: %+v", st)
	}
}

func TestNodeDownAtStart(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	opts := config.Default().Backend
	opts.DialTimeout = 200 * time.Millisecond
	n := backend.NewNode(config.Node{Name: "gone", Master: addr, User: "u", MaxConnsLimit: 2, DownAfterNoalive: 1}, opts, nil)
	n.Start()
	defer n.Close()
	if n.Up() {
		t.Fatal("node with nothing listening is up")
	}
	_, err = n.Get(context.Background(), 0, "", 45)
	var se *mysql.SQLError
	if !errors.As(err, &se) || se.Code != mysql.ErConnectFailed {
		t.Fatalf("Get on a down node: %v, want 1429", err)
	}
}

// BenchmarkPoolGetPut is the pool stage of the funnel in docs/benchmarks.md: check a
// connection out and back in, from as many goroutines as GOMAXPROCS, with
// connections already dialed (the steady state under load).
func BenchmarkPoolGetPut(b *testing.B) {
	if cluster == nil {
		b.Skip("needs MariaDB (skipped under -short)")
	}
	s := cluster.Servers[0]
	nc, opts := nodeConfig(s, 8)
	n := backend.NewNode(nc, opts, nil)
	n.Start()
	defer n.Close()
	ctx := context.Background()
	var conns []*backend.Conn
	for range 8 {
		c, err := n.Get(ctx, mysql.ClientDeprecateEOF, "", 45)
		if err != nil {
			b.Fatal(err)
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		n.Put(c)
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			c, err := n.Get(ctx, mysql.ClientDeprecateEOF, "", 45)
			if err != nil {
				b.Error(err)
				return
			}
			n.Put(c)
		}
	})
}

// BenchmarkHandover: one session's statement on a pooled connection,
// when the connection comes back to the same session (no reset) and when
// it passes to another session (reset first: COM_RESET_CONNECTION and the
// trackers' SET in one round trip), against a real MariaDB. The
// difference is what a handover costs.
func BenchmarkHandover(b *testing.B) {
	if cluster == nil {
		b.Skip("needs MariaDB (skipped under -short)")
	}
	s := cluster.Servers[0]
	nc, opts := nodeConfig(s, 1) // one connection: every Get takes it
	n := backend.NewNode(nc, opts, nil)
	n.Start()
	defer n.Close()
	ctx := context.Background()
	for _, bc := range []struct {
		name   string
		owners int
	}{{"same session", 1}, {"other session", 2}} {
		b.Run(bc.name, func(b *testing.B) {
			owners := make([]*backend.Owner, bc.owners)
			for i := range owners {
				owners[i] = new(backend.Owner)
			}
			i, resets := 0, n.Stats().Resets
			for b.Loop() {
				c, err := n.GetFor(ctx, owners[i%len(owners)], mysql.ClientDeprecateEOF, "", 45)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := c.Exec("SELECT 1"); err != nil {
					b.Fatal(err)
				}
				n.Put(c)
				i++
			}
			b.ReportMetric(float64(n.Stats().Resets-resets)/float64(i), "resets/op")
		})
	}
}
