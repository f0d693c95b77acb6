package server_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/internal/mariadbtest"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/proxy/server"
)

// cluster holds the package's MariaDB servers; nil under -short. Servers[0]
// serves most tests; Servers[1] is killed and restarted by
// TestBackendKilledMidQuery, so no other test relies on it.
var cluster *mariadbtest.Cluster

// appUser and appPassword are the proxy account clients log in with. The
// password is random per test binary, like the backend account's.
var (
	appUser     = "app"
	appPassword string
)

func TestMain(m *testing.M) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	appPassword = hex.EncodeToString(b)
	mariadbtest.Main(m, 2, func(c *mariadbtest.Cluster) int {
		cluster = c
		return m.Run()
	})
}

// backends returns the cluster's servers, skipping the test under -short.
func backends(t *testing.T) []*mariadbtest.Server {
	t.Helper()
	if cluster == nil {
		t.Skip("integration test: needs MariaDB (skipped under -short)")
	}
	return cluster.Servers
}

// newConfig returns a valid configuration with one node per server (named
// node1, node2, ...) and the app user whose schema defaults to node1. The
// pools are small so that pool behaviour shows, and health checks are fast.
func newConfig(t *testing.T, servers ...*mariadbtest.Server) *config.Config {
	t.Helper()
	cfg := config.Default()
	cfg.Addr = "127.0.0.1:0"
	cfg.Users = []config.User{{User: appUser, Password: appPassword}}
	var names []string
	for i, s := range servers {
		name := fmt.Sprintf("node%d", i+1)
		names = append(names, name)
		cfg.Nodes = append(cfg.Nodes, config.Node{Name: name, Master: s.Addr, User: s.User, Password: s.Password,
			MaxConnsLimit: 4, DownAfterNoalive: 1})
	}
	cfg.Schemas = []config.Schema{{User: appUser, Nodes: names, Default: names[0]}}
	cfg.Backend.HealthInterval = 200 * time.Millisecond
	cfg.Backend.DialTimeout = time.Second
	cfg.Backend.PoolGrowth = false // max_conns_limit is the limit (pool_test.go grows)
	return cfg
}

// proxy is a server running in-process on a free port.
type proxy struct {
	srv  *server.Server
	cfg  *config.Config
	addr string

	serveDone chan struct{} // closed when Serve has returned
	serveErr  error         // Serve's result; read after serveDone
}

// startProxy validates cfg, builds a server and serves it on 127.0.0.1:0
// until the test ends.
func startProxy(t *testing.T, cfg *config.Config) *proxy {
	t.Helper()
	return startProxyWith(t, cfg, server.Options{})
}

// startProxyWith is startProxy with options (the log is the test's).
func startProxyWith(t *testing.T, cfg *config.Config, o server.Options) *proxy {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	o.Log = zaptest.NewLogger(t, zaptest.Level(zapcore.InfoLevel))
	srv, err := server.New(cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{srv: srv, cfg: cfg, addr: l.Addr().String(), serveDone: make(chan struct{})}
	go func() {
		defer close(p.serveDone)
		p.serveErr = srv.Serve(l)
	}()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		<-p.serveDone
	})
	return p
}

// dsn returns a go-sql-driver DSN for the app user through the proxy.
func (p *proxy) dsn(db, params string) string {
	return userDSN(appUser, appPassword, p.addr, db, params)
}

func userDSN(user, password, addr, db, params string) string {
	return fmt.Sprintf("%s:%s@tcp(%s)/%s?%s", user, password, addr, db, params)
}

// directDSN returns a DSN straight to a MariaDB server.
func directDSN(s *mariadbtest.Server, db, params string) string {
	return userDSN(s.User, s.Password, s.Addr, db, params)
}

// openDB opens a database handle that is closed when the test ends (before
// the proxy shuts down, as cleanups run last-in first-out).
func openDB(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// conn returns one dedicated client connection of db.
func conn(t *testing.T, db *sql.DB) *sql.Conn {
	t.Helper()
	c, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// Discarded, not returned to db's pool: a test that failed midway may
	// leave its session in a transaction, which must not reach the next.
	t.Cleanup(func() {
		c.Raw(func(any) error { return driver.ErrBadConn })
		c.Close()
	})
	return c
}

type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// mustExec runs statements and fails the test on the first error.
func mustExec(t *testing.T, db execer, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		if _, err := db.ExecContext(context.Background(), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// queryStrings runs a query and returns every row as strings, "NULL" for
// SQL NULL.
func queryStrings(t *testing.T, db querier, q string, args ...any) [][]string {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	out, err := scanStrings(rows)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return out
}

func scanStrings(rows *sql.Rows) ([][]string, error) {
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var out [][]string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		row := make([]string, len(cols))
		for i, v := range vals {
			row[i] = "NULL"
			if v.Valid {
				row[i] = v.String
			}
		}
		out = append(out, row)
	}
	return out, rows.Err()
}

// queryValue runs a query that returns one value.
func queryValue(t *testing.T, db querier, q string, args ...any) string {
	t.Helper()
	rows := queryStrings(t, db, q, args...)
	if len(rows) != 1 || len(rows[0]) != 1 {
		t.Fatalf("%s: got %q, want one value", q, rows)
	}
	return rows[0][0]
}

// wantSQLError checks that err is a MySQL error with the given code and,
// when state is not "", SQLSTATE.
func wantSQLError(t *testing.T, err error, code uint16, state string) *gomysql.MySQLError {
	t.Helper()
	var me *gomysql.MySQLError
	if !errors.As(err, &me) {
		t.Fatalf("got error %v (%T), want MySQL error %d", err, err, code)
	}
	if me.Number != code || (state != "" && string(me.SQLState[:]) != state) {
		t.Fatalf("got error %d (%s) %q, want %d (%s)", me.Number, me.SQLState[:], me.Message, code, state)
	}
	return me
}

// eventually polls cond until it holds, failing the test after timeout.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		<-tick.C
	}
}

// waitPoolIdle waits until no pooled connection of the proxy's nodes is
// checked out.
func (p *proxy) waitPoolIdle(t *testing.T, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, "backend connections to be returned", func() bool {
		for _, n := range p.srv.Stats().Nodes {
			if n.InUse != 0 {
				return false
			}
		}
		return true
	})
}

// waitBackendQuery waits until the MariaDB server runs a statement whose
// text is exactly q.
func waitBackendQuery(t *testing.T, direct *sql.DB, q string) {
	t.Helper()
	eventually(t, 10*time.Second, "backend to run "+q, func() bool {
		var n int
		err := direct.QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO = ?", q).Scan(&n)
		return err == nil && n > 0
	})
}

// rawConn is a hand-driven client connection that speaks the protocol with
// the mysql package's framing, for checks the driver cannot make.
type rawConn struct {
	t        *testing.T
	nc       net.Conn
	c        *mysql.Conn
	hs       *mysql.Handshake // the server greeting
	greeting []byte           // its raw payload
	caps     uint32           // capabilities sent in the handshake response
}

// rawCaps are the capabilities rawConn asks for by default.
const rawCaps = mysql.ClientLongPassword | mysql.ClientLongFlag | mysql.ClientProtocol41 |
	mysql.ClientSecureConnection | mysql.ClientTransactions | mysql.ClientMultiResults |
	mysql.ClientPluginAuth | mysql.ClientPluginAuthLenencClientData | mysql.ClientDeprecateEOF

// dialRaw connects to addr and reads the greeting.
func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(60 * time.Second))
	r := &rawConn{t: t, nc: nc, c: mysql.NewConn(nc, 0, 0)}
	p, err := r.c.ReadPacket()
	if err != nil {
		t.Fatalf("reading greeting: %v", err)
	}
	r.greeting = append([]byte(nil), p...)
	if r.hs, err = mysql.ParseHandshake(p); err != nil {
		t.Fatalf("parsing greeting: %v", err)
	}
	return r
}

// sendHandshakeResponse answers the greeting with a native-password
// response.
func (r *rawConn) sendHandshakeResponse(user, password, db string, caps uint32) {
	r.t.Helper()
	if db != "" {
		caps |= mysql.ClientConnectWithDB
	}
	r.caps = caps
	resp := mysql.AppendHandshakeResponse(nil, &mysql.HandshakeResponse{
		Capabilities: caps,
		MaxPacket:    mysql.MaxPacketPayload,
		Charset:      45,
		User:         user,
		AuthResponse: mysql.ScrambleNative(r.hs.Salt, password),
		Database:     db,
		AuthPlugin:   mysql.AuthNativePassword,
	})
	r.write(resp)
}

// login authenticates with the native password plugin and fails the test
// unless the server answers OK.
func (r *rawConn) login(caps uint32) {
	r.t.Helper()
	r.loginDB("", caps)
}

// loginDB is login with a database selected in the handshake.
func (r *rawConn) loginDB(db string, caps uint32) {
	r.t.Helper()
	r.sendHandshakeResponse(appUser, appPassword, db, caps)
	p := r.read()
	if len(p) == 0 || p[0] != mysql.OKHeader {
		r.t.Fatalf("login: got %v, want OK", describe(p))
	}
	if caps&mysql.ClientCompress != 0 {
		r.c.EnableCompression()
	}
}

// write sends one packet with the connection's next sequence number.
func (r *rawConn) write(p []byte) {
	r.t.Helper()
	if err := r.c.WritePacket(p); err != nil {
		r.t.Fatal(err)
	}
	if err := r.c.Flush(); err != nil {
		r.t.Fatal(err)
	}
}

// command starts a new exchange with packet p.
func (r *rawConn) command(p []byte) {
	r.t.Helper()
	r.c.ResetSeq()
	r.write(p)
}

func (r *rawConn) read() []byte {
	r.t.Helper()
	p, err := r.c.ReadPacket()
	if err != nil {
		r.t.Fatalf("reading packet: %v", err)
	}
	return append([]byte(nil), p...)
}

// expectOK reads a packet that must be OK.
func (r *rawConn) expectOK() {
	r.t.Helper()
	if p := r.read(); len(p) == 0 || p[0] != mysql.OKHeader {
		r.t.Fatalf("got %s, want OK", describe(p))
	}
}

// expectErr reads a packet that must be ERR with code.
func (r *rawConn) expectErr(code uint16) *mysql.SQLError {
	r.t.Helper()
	p := r.read()
	if len(p) == 0 || p[0] != mysql.ErrHeader {
		r.t.Fatalf("got %s, want ERR %d", describe(p), code)
	}
	e := mysql.ParseErr(p)
	if e.Code != code {
		r.t.Fatalf("got %v, want ERR %d", e, code)
	}
	return e
}

// expectClosed checks that the server closes the connection.
func (r *rawConn) expectClosed() {
	r.t.Helper()
	r.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	p, err := r.c.ReadPacket()
	if err == nil {
		r.t.Fatalf("got packet %s, want the connection closed", describe(p))
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		r.t.Fatalf("connection still open after 5s")
	}
}

// query runs a text query and reads one result: rows as strings ("NULL"
// for SQL NULL) or the ERR packet.
func (r *rawConn) query(q string) ([][]string, *mysql.SQLError) {
	r.t.Helper()
	r.command(append([]byte{mysql.ComQuery}, q...))
	p := r.read()
	switch {
	case len(p) == 0:
		r.t.Fatalf("%s: empty response packet", q)
	case p[0] == mysql.ErrHeader:
		return nil, mysql.ParseErr(p)
	case p[0] == mysql.OKHeader:
		return nil, nil
	}
	n, _, k := mysql.ReadLenEncInt(p)
	if k == 0 {
		r.t.Fatalf("%s: bad column count %x", q, p)
	}
	for i := uint64(0); i < n; i++ {
		r.read()
	}
	if r.caps&mysql.ClientDeprecateEOF == 0 {
		if p := r.read(); !mysql.IsEOF(p) {
			r.t.Fatalf("%s: got %s, want EOF after columns", q, describe(p))
		}
	}
	var rows [][]string
	for {
		p := r.read()
		if mysql.IsEOF(p) {
			return rows, nil
		}
		if len(p) > 0 && p[0] == mysql.ErrHeader {
			return rows, mysql.ParseErr(p)
		}
		vals, err := mysql.ParseTextRow(p, int(n), nil)
		if err != nil {
			r.t.Fatalf("%s: %v", q, err)
		}
		row := make([]string, len(vals))
		for i, v := range vals {
			row[i] = "NULL"
			if v != nil {
				row[i] = string(v)
			}
		}
		rows = append(rows, row)
	}
}

// describe names a packet for failure messages.
func describe(p []byte) string {
	switch {
	case len(p) == 0:
		return "empty packet"
	case p[0] == mysql.ErrHeader:
		return "ERR " + mysql.ParseErr(p).Error()
	case p[0] == mysql.OKHeader:
		return "OK"
	}
	if len(p) > 32 {
		return fmt.Sprintf("packet %x...", p[:32])
	}
	return fmt.Sprintf("packet %x", p)
}

// dbSetup creates fresh databases through a direct connection.
func dbSetup(t *testing.T, s *mariadbtest.Server, names ...string) {
	t.Helper()
	db := openDB(t, directDSN(s, "", ""))
	for _, n := range names {
		mustExec(t, db, "DROP DATABASE IF EXISTS "+n, "CREATE DATABASE "+n)
	}
	db.Close()
}

// joinRows flattens rows for compact comparisons.
func joinRows(rows [][]string) string {
	var b strings.Builder
	for i, r := range rows {
		if i > 0 {
			b.WriteByte('|')
		}
		b.WriteString(strings.Join(r, ","))
	}
	return b.String()
}

// sysbenchFor returns the sysbench binary and oltp_read_write's arguments
// for database db through p, with a table of size rows, after running its
// prepare; it fails the test if sysbench is missing.
func sysbenchFor(t *testing.T, p *proxy, db string, size int) (bin string, args []string) {
	t.Helper()
	bin, err := exec.LookPath("sysbench")
	if err != nil {
		t.Fatal("sysbench is not installed: scripts/deps.sh sysbench (or apt-get install -y sysbench)")
	}
	host, port, _ := strings.Cut(p.addr, ":")
	args = []string{"oltp_read_write", "--db-driver=mysql", "--mysql-host=" + host, "--mysql-port=" + port,
		"--mysql-user=" + appUser, "--mysql-password=" + appPassword, "--mysql-db=" + db,
		"--tables=1", "--table-size=" + strconv.Itoa(size)}
	if out, err := exec.Command(bin, append(slices.Clone(args), "prepare")...).CombinedOutput(); err != nil {
		t.Fatalf("sysbench prepare: %v\n%s", err, out)
	}
	return bin, args
}
