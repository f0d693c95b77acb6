package backend_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/mysql"
)

// growNode is a started node of the test server with max_conns_limit
// base and pool_growth on.
func growNode(t *testing.T, base, headroom int) *backend.Node {
	t.Helper()
	cfg, opts := nodeConfig(need(t), base)
	opts.PoolGrowth, opts.ServerHeadroom = true, headroom
	opts.HealthInterval = time.Minute // the limit stays what Start read
	n := backend.NewNode(cfg, opts, nil)
	n.Start()
	t.Cleanup(n.Close)
	return n
}

func getN(t *testing.T, ctx context.Context, n *backend.Node, k int) []*backend.Conn {
	t.Helper()
	var out []*backend.Conn
	for range k {
		c, err := n.Get(ctx, 0, "", 0)
		if err != nil {
			t.Fatalf("Get %d: %v", len(out)+1, err)
		}
		out = append(out, c)
	}
	return out
}

func putAll(n *backend.Node, cs []*backend.Conn) {
	for _, c := range cs {
		n.Put(c)
	}
}

func wantCode(t *testing.T, err error, code uint16, contains string) {
	t.Helper()
	var se *mysql.SQLError
	if !errors.As(err, &se) || se.Code != code || !strings.Contains(se.Message, contains) {
		t.Fatalf("got %v, want %d with %q", err, code, contains)
	}
}

// TestPoolGrowsToServer: past max_conns_limit the pool keeps checking out
// connections up to the server's max_connections less the headroom (read
// at Start), and shrinks back to max_conns_limit once they are idle.
func TestPoolGrowsToServer(t *testing.T) {
	n := growNode(t, 2, 0)
	st := n.Stats()
	if st.ServerMax == 0 || st.Max != st.ServerMax-max(10, st.ServerMax/10) || st.Base != 2 {
		t.Fatalf("stats after Start: %+v; want the limit max_connections less a tenth", st)
	}
	start := time.Now()
	cs := getN(t, t.Context(), n, 8)
	if d := time.Since(start); d > time.Second {
		t.Errorf("8 connections with max_conns_limit 2 took %v", d)
	}
	if st := n.Stats(); st.InUse != 8 || st.AcquireTimeouts != 0 {
		t.Errorf("stats with 8 out: %+v", st)
	}
	putAll(n, cs)
	if st := n.Stats(); st.Idle != 8 || st.InUse != 0 {
		t.Errorf("stats with 8 back: %+v", st)
	}
	n.TrimGrownForTest(time.Now().Add(11 * time.Second))
	if st := n.Stats(); st.Idle != 2 {
		t.Errorf("idle after the grown connections' idle time: %d, want max_conns_limit 2", st.Idle)
	}

	cfg, opts := nodeConfig(need(t), 2) // pool_growth false
	fixed := backend.NewNode(cfg, opts, nil)
	fixed.Start()
	defer fixed.Close()
	if st := fixed.Stats(); st.Max != st.Base || st.ServerMax == 0 {
		t.Errorf("limit without growth: %d, want max_conns_limit %d", st.Max, st.Base)
	}
}

// TestPoolServerFull: when the server refuses a connection (1040: its
// max_connections is taken by others) while the pool is past its base,
// the caller waits for one of the pool's connections instead of getting
// the server's error, and the limit drops to what the pool holds.
func TestPoolServerFull(t *testing.T) {
	s := need(t)
	admin, err := backend.Dial(t.Context(), s.Addr, backend.DialOptions{User: s.User, Password: s.Password, DialTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	res, err := admin.Exec("SELECT @@max_connections")
	if err != nil {
		t.Fatal(err)
	}
	old := string(res.Rows[0][0])
	if _, err := admin.Exec("SET GLOBAL max_connections = 30"); err != nil {
		t.Fatal(err)
	}
	defer admin.Exec("SET GLOBAL max_connections = " + old)
	for range 10 { // the server's other clients
		c, err := backend.Dial(t.Context(), s.Addr, backend.DialOptions{User: s.User, Password: s.Password, DialTimeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	n := growNode(t, 2, 1) // limit 29: more than the server has left
	if st := n.Stats(); st.Max != 29 {
		t.Fatalf("limit %d, want 29", st.Max)
	}
	var cs []*backend.Conn
	defer func() { putAll(n, cs) }()
	for len(cs) < 40 {
		c, err := n.Get(t.Context(), 0, "", 0)
		if err != nil {
			wantCode(t, err, mysql.ErTooManyConnections, "timed out")
			break
		}
		cs = append(cs, c)
	}
	st := n.Stats()
	t.Logf("the pool held %d connections when the server was full; limit now %d", len(cs), st.Max)
	if len(cs) < 3 || len(cs) >= 29 || st.Max != len(cs) {
		t.Errorf("held %d, limit %d: want more than the base, fewer than 29, and the limit at what is held", len(cs), st.Max)
	}
	done := make(chan error, 1)
	go func() {
		c, err := n.Get(context.Background(), 0, "", 0)
		if err == nil {
			n.Put(c)
		}
		done <- err
	}()
	n.Put(cs[0])
	cs = cs[1:]
	if err := <-done; err != nil {
		t.Errorf("Get after a connection came back: %v", err)
	}
}

// TestPoolUserQuota: one user's sessions hold at most its quota of the
// node's connections (waiting, then 1203); other users and callers
// without a quota are served meanwhile, and the user's next session gets
// a connection once one of its own comes back.
func TestPoolUserQuota(t *testing.T) {
	n := growNode(t, 4, 0)
	a := backend.WithQuota(t.Context(), backend.Quota{User: "a", Max: 2})
	b := backend.WithQuota(t.Context(), backend.Quota{User: "b", Share: 1}) // 1% of the limit: at least one
	held := getN(t, a, n, 2)
	start := time.Now()
	_, err := n.Get(a, 0, "", 0)
	wantCode(t, err, mysql.ErTooManyUserConnections, "User 'a' already has 2 connections to backend node node1")
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Errorf("refused after %v, before the acquire timeout", d)
	}
	if st := n.Stats(); st.QuotaRefusals != 1 || st.AcquireTimeouts != 0 {
		t.Errorf("stats: %+v", st)
	}
	hb := getN(t, b, n, n.Stats().Max/100)
	hn := getN(t, t.Context(), n, 3) // no quota
	done := make(chan error, 1)
	go func() {
		c, err := n.Get(a, 0, "", 0)
		if err == nil {
			n.Put(c)
		}
		done <- err
	}()
	n.Put(held[0])
	if err := <-done; err != nil {
		t.Errorf("a's Get after one of its connections came back: %v", err)
	}
	putAll(n, held[1:])
	putAll(n, hb)
	putAll(n, hn)
	if st := n.Stats(); st.InUse != 0 {
		t.Errorf("in use after all came back: %d", st.InUse)
	}
	getN(t, a, n, 2) // the quota's count came back with the connections
}
