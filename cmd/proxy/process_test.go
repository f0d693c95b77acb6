package main_test

// Process-level tests: the proxy binary runs as a child process, against
// real MariaDB servers, and is measured from outside (its RSS in
// /proc/<pid>/status, its descriptors in /proc/<pid>/fd, its exit), as an
// operator would see it. The in-process tests of proxy/server prove the
// logic; these prove the numbers issue 13 asks for hold for the real
// process, with the Go runtime's own overheads.

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/shardgate/shardgate/internal/mariadbtest"
	"github.com/shardgate/shardgate/mysql"
)

// cluster holds the package's MariaDB servers; nil under -short.
// Servers[1] is paused by TestProcessBackendPaused, so only that test uses
// it.
var cluster *mariadbtest.Cluster

// proxyBin is the proxy binary TestMain built; "" under -short.
var proxyBin string

// appUser and appPassword are the account clients log in to the proxy
// with; the password is random per test binary.
const appUser = "app"

var appPassword = rand.Text()

func TestMain(m *testing.M) {
	mariadbtest.Main(m, 2, func(c *mariadbtest.Cluster) int {
		if c == nil {
			return m.Run()
		}
		cluster = c
		dir, err := os.MkdirTemp("", "shardgate-proxy-test")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		bin, err := buildProxy(dir)
		if err != nil {
			fmt.Fprintf(os.Stderr, "\n*** cmd/proxy: building the proxy binary: %v\n\n", err)
			return 1
		}
		proxyBin = bin
		return m.Run()
	})
}

// buildProxy builds the proxy binary into dir with the go tool on PATH.
func buildProxy(dir string) (string, error) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "proxy")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, goTool, "build", "-o", bin, "github.com/shardgate/shardgate/cmd/proxy").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%v\n%s", err, out)
	}
	return bin, nil
}

// servers returns the cluster's servers, skipping the test under -short.
func servers(t *testing.T) []*mariadbtest.Server {
	t.Helper()
	if cluster == nil {
		t.Skip("process test: needs MariaDB and the proxy binary (skipped under -short)")
	}
	return cluster.Servers
}

// freeAddr returns a 127.0.0.1 address with a port that was free a moment
// ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	handedMu.Lock()
	defer handedMu.Unlock()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		// The kernel may hand a port just closed out again: a proxy's
		// listen and metrics addresses once came back equal, and it
		// could not start. Each address goes to one caller.
		if !handed[addr] {
			handed[addr] = true
			return addr
		}
	}
	t.Fatal("no free address not handed out already")
	return ""
}

// handed are the addresses freeAddr returned in this process.
var (
	handedMu sync.Mutex
	handed   = map[string]bool{}
)

// settings are what a test changes in the generated ks.yaml.
type settings struct {
	nodes     []*mariadbtest.Server // node1, node2, ...
	extra     string                // more top-level YAML, appended as is
	nodeExtra string                // more keys for every node, indented by the caller
	schema    string                // more keys of the schema (a shard list)
	wrap      []string              // argv prefix that execs the proxy ("sh -c ... $0")
	env       []string              // more environment variables (NAME=value)
	args      []string              // more command-line arguments, after -config
}

// proc is the proxy binary running as a child process.
type proc struct {
	cmd     *exec.Cmd
	addr    string // client listener
	metrics string // prometheus_addr
	logPath string // its stdout and stderr
	cfgPath string // its ks.yaml

	shutdownTimeout time.Duration // as written in its ks.yaml

	done    chan struct{} // closed once the process has been waited for
	waitErr error         // cmd.Wait's result; read after done
}

// terminate sends SIGTERM and checks that the process exits within its
// shutdown_timeout plus the 1 s margin Shutdown promises, with status 0.
// what and since describe what froze and when, for the log.
func (p *proc) terminate(t *testing.T, what string, since time.Time) {
	t.Helper()
	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	bound := p.shutdownTimeout + time.Second
	select {
	case <-p.done:
	case <-time.After(bound + 30*time.Second):
		t.Fatalf("the proxy still runs %v after SIGTERM (shutdown_timeout %v)", time.Since(start).Round(time.Millisecond), p.shutdownTimeout)
	}
	took := time.Since(start)
	t.Logf("SIGTERM %v after %s: the proxy exited after %v (%v), shutdown_timeout %v",
		start.Sub(since).Round(time.Millisecond), what, took.Round(time.Millisecond), p.waitErr, p.shutdownTimeout)
	if took > bound {
		t.Errorf("the proxy took %v to exit after SIGTERM, want at most shutdown_timeout + 1 s = %v", took.Round(time.Millisecond), bound)
	}
	if p.waitErr != nil {
		t.Errorf("the proxy exited with %v, want status 0", p.waitErr)
	}
}

// spawn starts argv as p's process, its output in dir/proxy.log (p.logPath),
// with env added to the environment. The process dies with the test
// binary, and is killed when the test ends if it still runs.
func (p *proc) spawn(t *testing.T, dir string, argv, env []string) {
	t.Helper()
	p.logPath = filepath.Join(dir, "proxy.log")
	logf, err := os.Create(p.logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	p.cmd = exec.Command(argv[0], argv[1:]...)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	if len(env) > 0 {
		p.cmd.Env = append(os.Environ(), env...)
	}
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(p.done)
		p.waitErr = p.cmd.Wait()
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("proxy %s output:\n%s", p.addr, tail(p.logPath, 4000))
		}
	})
}

// startProxy writes a ks.yaml for s into t.TempDir and starts the proxy
// binary on it, returning once the proxy sends a greeting. The process is
// killed when the test ends, if it still runs.
func startProxy(t *testing.T, s settings) *proc {
	t.Helper()
	dir := t.TempDir()
	p := &proc{addr: freeAddr(t), metrics: freeAddr(t), done: make(chan struct{}), shutdownTimeout: 3 * time.Second}
	var b strings.Builder
	fmt.Fprintf(&b, "addr: %s\nprometheus_addr: %s\nlog_level: warn\nshutdown_timeout: %v\n", p.addr, p.metrics, p.shutdownTimeout)
	fmt.Fprintf(&b, "user_list:\n  - user: %s\n    password: %q\n", appUser, appPassword)
	b.WriteString("nodes:\n")
	var names []string
	for i, srv := range s.nodes {
		name := fmt.Sprintf("node%d", i+1)
		names = append(names, name)
		fmt.Fprintf(&b, "  - name: %s\n    master: %s\n    user: %q\n    password: %q\n%s", name, srv.Addr, srv.User, srv.Password, s.nodeExtra)
	}
	fmt.Fprintf(&b, "schema_list:\n  - user: %s\n    nodes: [%s]\n    default: node1\n%s", appUser, strings.Join(names, ", "), s.schema)
	b.WriteString(s.extra)
	cfgPath := filepath.Join(dir, "ks.yaml")
	if err := os.WriteFile(cfgPath, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	p.cfgPath = cfgPath
	argv := append(append(append([]string(nil), s.wrap...), proxyBin, "-config", cfgPath), s.args...)
	p.spawn(t, dir, argv, s.env)

	deadline := time.Now().Add(20 * time.Second)
	for {
		if p.greets() {
			return p
		}
		select {
		case <-p.done:
			t.Fatalf("the proxy exited at start: %v\n%s", p.waitErr, tail(p.logPath, 4000))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the proxy does not answer on %s after 20 s\n%s", p.addr, tail(p.logPath, 4000))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// greets reports whether the proxy sends a greeting on a new connection.
func (p *proc) greets() bool {
	nc, err := net.DialTimeout("tcp", p.addr, time.Second)
	if err != nil {
		return false
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(2 * time.Second))
	c := mysql.NewConn(nc, 0, 0)
	pk, err := c.ReadPacket()
	return err == nil && len(pk) > 0 && pk[0] == mysql.ProtocolVersion
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// exited reports whether the process has ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// rss returns the process's resident set size in bytes (VmRSS).
func (p *proc) rss(t *testing.T) int64 {
	t.Helper()
	n, err := readRSS(p.pid())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func readRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

// peakRSS samples the process's RSS every 10 ms until stop is called,
// which returns the highest value seen. The sampling goroutine is owned by
// the caller through stop.
func (p *proc) peakRSS(t *testing.T) (stop func() int64) {
	t.Helper()
	quit := make(chan struct{})
	result := make(chan int64, 1)
	pid := p.pid()
	peak := p.rss(t)
	go func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			if n, err := readRSS(pid); err == nil {
				peak = max(peak, n)
			}
			select {
			case <-quit:
				result <- peak
				return
			case <-tick.C:
			}
		}
	}()
	var once sync.Once
	var got int64
	stop = func() int64 {
		once.Do(func() {
			close(quit)
			got = <-result
		})
		return got
	}
	t.Cleanup(func() { stop() })
	return stop
}

// openFDs counts the process's open descriptors.
func (p *proc) openFDs() int {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p.pid()))
	if err != nil {
		return -1
	}
	return len(ents)
}

// metric scrapes one unlabelled metric from the proxy's /metrics.
func (p *proc) metric(t *testing.T, name string) float64 {
	t.Helper()
	hc := &http.Client{Timeout: 5 * time.Second}
	resp, err := hc.Get("http://" + p.metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatalf("metric %s not found", name)
	return 0
}

// dsn returns a go-sql-driver DSN for the app user through the proxy,
// with timeouts so that no statement of a test waits unbounded.
func (p *proc) dsn(db string) string {
	return fmt.Sprintf("%s:%s@tcp(%s)/%s?timeout=5s&readTimeout=30s&writeTimeout=30s", appUser, appPassword, p.addr, db)
}

// login opens a new client connection (a full handshake) with
// go-sql-driver and runs SELECT 1 on it, all within 10 s.
func (p *proc) login() error {
	db, err := sql.Open("mysql", p.dsn(""))
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var v int
	if err := db.QueryRowContext(ctx, "SELECT 1").Scan(&v); err != nil {
		return err
	}
	if v != 1 {
		return fmt.Errorf("SELECT 1 returned %d", v)
	}
	return nil
}

// openDB opens a handle through the proxy, closed when the test ends.
func (p *proc) openDB(t *testing.T, db string) *sql.DB {
	t.Helper()
	h, err := sql.Open("mysql", p.dsn(db))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// tail returns the last n bytes of the file at path.
func tail(path string, n int64) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) == 0 {
		return "(nothing)"
	}
	if int64(len(b)) > n {
		b = b[int64(len(b))-n:]
	}
	return string(b)
}

// mib formats a byte count in MiB for logs.
func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// rssLimit is the bound issue 13 sets for the proxy's RSS (and its
// growth): 100 MB.
const rssLimit = 100_000_000

// TestProcessPreAuthFlood: 500 sockets each send the header of a 16 MiB
// packet (ff ff ff 01) before logging in, then trickle a byte every 100 ms
// each; the attacker also replaces 25 of them with new ones every 100 ms.
// The proxy used to allocate the declared 16 MiB for each; the kernel
// makes pages resident only when touched, so the recycling is what shows
// it: the runtime zeroes a freed 16 MiB buffer when it hands it to the
// next socket (the proxy reached 4 GB that way). Its RSS must stay under
// 100 MB throughout, while new logins keep working.
func TestProcessPreAuthFlood(t *testing.T) {
	srv := servers(t)[0]
	p := startProxy(t, settings{nodes: []*mariadbtest.Server{srv}})
	if err := p.login(); err != nil {
		t.Fatalf("a login before the flood: %v", err)
	}
	before := p.rss(t)
	stop := p.peakRSS(t)

	const n, recycle = 500, 25
	f := &flood{addr: p.addr}
	t.Cleanup(f.closeAll)
	for range n {
		if err := f.open(); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	floodDone := make(chan error, 1)
	go func() { floodDone <- f.run(ctx, recycle) }()

	var loginTimes []time.Duration
	for range 8 {
		time.Sleep(500 * time.Millisecond) // spread the logins over the flood
		start := time.Now()
		err := p.login()
		loginTimes = append(loginTimes, time.Since(start).Round(time.Millisecond))
		if err != nil {
			t.Errorf("a login during the flood: %v", err)
			break
		}
	}
	cancel()
	if err := <-floodDone; err != nil {
		t.Errorf("the flood: %v", err)
	}
	peak := stop()
	after := p.rss(t)

	t.Logf("proxy RSS: %s before, %s peak during %d sockets announcing 16 MiB and trickling (%d opened in all), %s after; logins took %v; the proxy had closed %d of the sockets when they trickled",
		mib(before), mib(peak), n, f.opened, mib(after), loginTimes, f.closedSeen)
	if peak >= rssLimit {
		t.Errorf("proxy RSS reached %s with %d unauthenticated sockets, want under 100 MB", mib(peak), n)
	}
	if p.exited() {
		t.Fatalf("the proxy exited: %v", p.waitErr)
	}
}

// flood is the attacker of TestProcessPreAuthFlood: sockets that announce
// a 16 MiB packet and trickle. Its fields belong to the goroutine that
// calls its methods (the test, then run, then the test again).
type flood struct {
	addr       string
	socks      []floodSock // oldest first
	opened     int         // sockets opened in all
	closedSeen int         // sockets a write found closed by the proxy
}

type floodSock struct {
	nc     net.Conn
	closed bool // a write failed: the proxy closed it
}

// open connects a new socket and sends the header ff ff ff 01.
func (f *flood) open() error {
	nc, err := net.DialTimeout("tcp", f.addr, 5*time.Second)
	if err != nil {
		return fmt.Errorf("socket %d: %w", f.opened, err)
	}
	f.socks = append(f.socks, floodSock{nc: nc})
	f.opened++
	nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
	nc.Write([]byte{0xff, 0xff, 0xff, 0x01}) // a socket the proxy closed at once is fine
	return nil
}

// run trickles one byte into every socket and replaces the recycle oldest
// ones every 100 ms until ctx ends.
func (f *flood) run(ctx context.Context, recycle int) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		for _, s := range f.socks[:recycle] {
			s.nc.Close()
		}
		f.socks = f.socks[recycle:]
		for range recycle {
			if err := f.open(); err != nil {
				return err
			}
		}
		for i := range f.socks {
			s := &f.socks[i]
			if s.closed {
				continue
			}
			s.nc.SetWriteDeadline(time.Now().Add(time.Second))
			if _, err := s.nc.Write([]byte{'x'}); err != nil {
				s.closed = true
				f.closedSeen++
			}
		}
	}
}

func (f *flood) closeAll() {
	for _, s := range f.socks {
		s.nc.Close()
	}
	f.socks = nil
}

// TestProcessCompressionBomb: a logged-in client with CLIENT_COMPRESS
// sends 64 zlib frames of about 16 KiB that each inflate to 16 MiB: one
// logical packet of 1 GiB. The proxy used to allocate each frame's
// declared size; it must answer with an error (1153) or close the
// connection, its RSS must grow by less than 100 MB, and it must keep
// serving logins.
func TestProcessCompressionBomb(t *testing.T) {
	srv := servers(t)[0]
	p := startProxy(t, settings{nodes: []*mariadbtest.Server{srv}})
	if err := p.login(); err != nil {
		t.Fatalf("a login before the bomb: %v", err)
	}
	bomb, inflated := compressionBomb(64)
	if len(bomb) > 2<<20 {
		t.Fatalf("the bomb is %d bytes on the wire; it should be small", len(bomb))
	}

	nc := rawLogin(t, p.addr, mysql.ClientCompress)
	before := p.rss(t)
	stop := p.peakRSS(t)
	start := time.Now()
	nc.SetDeadline(time.Now().Add(60 * time.Second))
	_, werr := nc.Write(bomb)
	reply, rerr := readCompressedPacket(nc)
	took := time.Since(start).Round(time.Millisecond)
	peak := stop()
	after := p.rss(t)

	var outcome string
	switch {
	case rerr == nil && len(reply) > 0 && reply[0] == mysql.ErrHeader:
		e := mysql.ParseErr(reply)
		outcome = "ERR " + e.Error()
		if e.Code != mysql.ErNetPacketTooLarge {
			t.Errorf("the bomb got %v, want ERR 1153 or the connection closed", e)
		}
	case rerr != nil && isTimeout(rerr):
		t.Fatalf("no answer to the bomb within 60 s (write: %v)", werr)
	case rerr != nil:
		outcome = fmt.Sprintf("connection closed (write: %v, read: %v)", werr, rerr)
	default:
		t.Errorf("the bomb got %s, want ERR 1153 or the connection closed", describe(reply))
	}
	t.Logf("a %d-byte bomb inflating to %s: %s after %v; proxy RSS %s before, %s peak, %s after (growth %s)",
		len(bomb), mib(inflated), outcome, took, mib(before), mib(peak), mib(after), mib(peak-before))
	if peak-before >= rssLimit {
		t.Errorf("proxy RSS grew by %s for a compression bomb (max_allowed_packet at its default), want under 100 MB", mib(peak-before))
	}
	if err := p.login(); err != nil {
		t.Errorf("a login after the bomb: %v", err)
	}
}

// compressionBomb returns the compressed-protocol stream of one COM_QUERY
// of packets*16 MiB (all zeros after the command byte) and that logical
// size. Each physical packet travels as a 5-byte uncompressed frame (its
// header and first payload byte) and one zlib frame of the rest, which is
// the same for every packet and so compressed once.
func compressionBomb(packets int) (stream []byte, inflated int64) {
	const F = mysql.MaxPacketPayload
	var zb bytes.Buffer
	zw := zlib.NewWriter(&zb)
	zw.Write(make([]byte, F-1))
	zw.Close()
	z := zb.Bytes()
	var seq uint8 // the compression layer's sequence
	frame := func(body []byte, ulen int) {
		n := len(body)
		stream = append(stream, byte(n), byte(n>>8), byte(n>>16), seq, byte(ulen), byte(ulen>>8), byte(ulen>>16))
		stream = append(stream, body...)
		seq++
	}
	for i := range packets {
		first := byte(0)
		if i == 0 {
			first = mysql.ComQuery
		}
		frame([]byte{0xff, 0xff, 0xff, byte(i), first}, 0)
		frame(z, F-1)
		inflated += F
	}
	frame([]byte{0, 0, 0, byte(packets)}, 0) // the empty packet that ends it
	return stream, inflated
}

// rawLogin connects to addr and logs in as the app user with the native
// password plugin and the extra capabilities; it returns the connection
// right after the OK packet. The connection is closed when the test ends.
func rawLogin(t *testing.T, addr string, caps uint32) net.Conn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	c := mysql.NewConn(nc, 0, 0)
	pk, err := c.ReadPacket()
	if err != nil {
		t.Fatalf("reading the greeting: %v", err)
	}
	hs, err := mysql.ParseHandshake(pk)
	if err != nil {
		t.Fatalf("parsing the greeting: %v", err)
	}
	caps |= mysql.ClientLongPassword | mysql.ClientLongFlag | mysql.ClientProtocol41 | mysql.ClientSecureConnection |
		mysql.ClientTransactions | mysql.ClientMultiResults | mysql.ClientPluginAuth | mysql.ClientDeprecateEOF
	resp := mysql.AppendHandshakeResponse(nil, &mysql.HandshakeResponse{
		Capabilities: caps,
		MaxPacket:    mysql.MaxPacketPayload,
		Charset:      45,
		User:         appUser,
		AuthResponse: mysql.ScrambleNative(hs.Salt, appPassword),
		AuthPlugin:   mysql.AuthNativePassword,
	})
	if err := c.WritePacket(resp); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	if pk, err = c.ReadPacket(); err != nil || len(pk) == 0 || pk[0] != mysql.OKHeader {
		t.Fatalf("login: got %s, %v; want OK", describe(pk), err)
	}
	if c.Buffered() != 0 {
		t.Fatalf("%d unexpected bytes after the login's OK", c.Buffered())
	}
	return nc
}

// readCompressedPacket reads the first logical packet of a
// compressed-protocol reply from nc and returns its payload.
func readCompressedPacket(nc net.Conn) ([]byte, error) {
	var h [7]byte
	if _, err := io.ReadFull(nc, h[:]); err != nil {
		return nil, err
	}
	clen := int(h[0]) | int(h[1])<<8 | int(h[2])<<16
	ulen := int(h[4]) | int(h[5])<<8 | int(h[6])<<16
	body := make([]byte, clen)
	if _, err := io.ReadFull(nc, body); err != nil {
		return nil, err
	}
	if ulen > 0 {
		zr, err := zlib.NewReader(bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		if body, err = io.ReadAll(io.LimitReader(zr, int64(ulen))); err != nil {
			return nil, err
		}
	}
	if len(body) < 4 {
		return nil, fmt.Errorf("frame of %d bytes holds no packet", len(body))
	}
	n := int(body[0]) | int(body[1])<<8 | int(body[2])<<16
	if len(body) < 4+n {
		return nil, fmt.Errorf("packet of %d bytes in a frame of %d", n, len(body))
	}
	return body[4 : 4+n], nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
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
	case len(p) > 32:
		return fmt.Sprintf("packet %x...", p[:32])
	}
	return fmt.Sprintf("packet %x", p)
}

// TestProcessAcceptEMFILE: the proxy runs with RLIMIT_NOFILE 256 (soft and
// hard, so the Go runtime cannot raise it) and 300 idle sockets connect:
// Accept runs out of descriptors (EMFILE). That used to end the process;
// it must keep listening, and once the sockets close a login must work.
func TestProcessAcceptEMFILE(t *testing.T) {
	srv := servers(t)[0]
	p := startProxy(t, settings{
		nodes: []*mariadbtest.Server{srv},
		wrap:  []string{"/bin/sh", "-c", `ulimit -n 256 && exec "$0" "$@"`},
	})
	limits, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", p.pid()))
	if err != nil {
		t.Fatal(err)
	}
	if !openFilesLimitIs(string(limits), 256) {
		t.Fatalf("the proxy does not run with 256 descriptors:\n%s", limits)
	}
	if err := p.login(); err != nil {
		t.Fatalf("a login before the sockets: %v", err)
	}

	const n = 300
	socks := make([]net.Conn, 0, n)
	closeAll := func() {
		for _, nc := range socks {
			nc.Close()
		}
		socks = socks[:0]
	}
	t.Cleanup(closeAll)
	for range n {
		// The kernel completes connections in the listen backlog even
		// when the proxy cannot accept them.
		nc, err := net.DialTimeout("tcp", p.addr, 5*time.Second)
		if err != nil {
			t.Fatalf("socket %d: %v", len(socks), err)
		}
		socks = append(socks, nc)
	}
	most := 0
	deadline := time.Now().Add(10 * time.Second)
	for most < 250 && time.Now().Before(deadline) && !p.exited() {
		most = max(most, p.openFDs())
		time.Sleep(10 * time.Millisecond)
	}
	if most < 250 {
		t.Fatalf("the proxy holds at most %d descriptors with %d sockets open; it never ran out (exited: %v)", most, n, p.exited())
	}
	// Stay out of descriptors a while: Accept fails and backs off.
	time.Sleep(time.Second)
	if p.exited() {
		t.Fatalf("the proxy exited when it ran out of descriptors: %v\n%s", p.waitErr, tail(p.logPath, 2000))
	}
	closeAll()

	start := time.Now()
	var lerr error
	for time.Since(start) < 15*time.Second {
		if lerr = p.login(); lerr == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if lerr != nil {
		t.Fatalf("no login within 15 s after the sockets closed: %v", lerr)
	}
	acceptErrors := p.metric(t, "shardgate_accept_errors_total")
	t.Logf("the proxy held up to %d of its 256 descriptors; %v accept errors waited out; a login worked %v after the sockets closed",
		most, acceptErrors, time.Since(start).Round(time.Millisecond))
	if acceptErrors == 0 {
		t.Errorf("no accept error counted: the test did not exhaust the proxy's descriptors")
	}
	if p.exited() {
		t.Fatalf("the proxy exited: %v", p.waitErr)
	}
}

// openFilesLimitIs reports whether a /proc/<pid>/limits text sets both
// limits of "Max open files" to n.
func openFilesLimitIs(limits string, n int) bool {
	for _, line := range strings.Split(limits, "\n") {
		if rest, ok := strings.CutPrefix(line, "Max open files"); ok {
			f := strings.Fields(rest)
			return len(f) >= 2 && f[0] == strconv.Itoa(n) && f[1] == strconv.Itoa(n)
		}
	}
	return false
}

// TestProcessBackendPaused: one of two backends is stopped with SIGSTOP
// for 30 s (its sockets stay open, nothing answers). A statement running
// on it when it stopped and one sent to it just after fail within 10 s;
// then, once a second until shortly before the pause ends, statements to
// the other node keep working and statements to the stopped one fail
// within 5 s. SIGTERM to the proxy during the pause, with a client just
// gone whose connection to the stopped node needs a reset, a transaction
// open there and a statement sent there, ends the process within
// shutdown_timeout + 1 s; once the node runs again the transaction is
// found rolled back. Before, pings, resets and state sync had no deadline
// and shutdown waited for ever.
func TestProcessBackendPaused(t *testing.T) {
	srvs := servers(t)
	paused := srvs[1] // node2: acct ids 2, 3, 6, 7
	p := startProxy(t, settings{
		nodes: srvs[:2],
		// A node is down after a second of failed health checks; every
		// command the proxy sends on its own gives up after 2 s.
		nodeExtra: "    down_after_noalive: 1\n",
		schema: "    shard:\n      - db: pause_t\n        table: acct\n        key: id\n        type: hash\n" +
			"        nodes: [node1, node2]\n        locations: [2, 2]\n",
		extra: "backend:\n  dial_timeout: 1s\n  health_interval: 200ms\n  command_timeout: 2s\n  acquire_timeout: 3s\n",
	})
	db := p.openDB(t, "")
	// Bounds everything of this test that has no tighter bound.
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for _, q := range []string{"DROP DATABASE IF EXISTS pause_t", "CREATE DATABASE pause_t",
		"CREATE TABLE pause_t.acct (id INT PRIMARY KEY, balance INT NOT NULL)",
		"INSERT INTO pause_t.acct (id, balance) VALUES (1,100),(2,100),(3,100),(4,100),(5,100),(6,100),(7,100),(8,100)"} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() {
		for _, s := range srvs[:2] {
			if d, err := sql.Open("mysql", s.DSN("")+"&timeout=5s&readTimeout=10s"); err == nil {
				d.Exec("DROP DATABASE IF EXISTS pause_t")
				d.Close()
			}
		}
	})
	db = p.openDB(t, "pause_t")
	conn := func() *sql.Conn {
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	node1 := conn()
	// A lock taken through node2 (id 2 lives there): the session keeps
	// that connection, and must reset it once the client leaves.
	sticky := conn()
	var got sql.NullInt64
	if err := sticky.QueryRowContext(ctx, "SELECT GET_LOCK('pause_lock', 0) FROM acct WHERE id = 2").Scan(&got); err != nil || got.Int64 != 1 {
		t.Fatalf("GET_LOCK on node2: %v, %v", got, err)
	}
	// A transaction open on node2 when it stops, idle until the shutdown.
	inTxn := conn()
	for _, q := range []string{"BEGIN", "UPDATE acct SET balance = 101 WHERE id = 7"} {
		if _, err := inTxn.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// A statement running on node2 when it stops.
	running := conn()
	runErr := make(chan error, 1)
	go func() {
		var v any
		runErr <- running.QueryRowContext(context.Background(), "SELECT SLEEP(60) FROM acct WHERE id = 3").Scan(&v)
	}()
	direct, err := sql.Open("mysql", paused.DSN("")+"&timeout=5s&readTimeout=10s")
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	waitUntil(t, 10*time.Second, "the SLEEP to run on node2", func() bool {
		var n int
		err := direct.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE 'SELECT SLEEP(60)%'").Scan(&n)
		return err == nil && n > 0
	})
	direct.Close()

	const pause = 30 * time.Second
	if err := paused.Pause(); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	var resumeOnce sync.Once
	resume := func() { resumeOnce.Do(func() { paused.Resume() }) }
	t.Cleanup(resume)

	// A statement sent to node2 right after it stopped, before the proxy
	// can know.
	sentErr := make(chan error, 1)
	go func() {
		_, err := timed(time.Minute, func(ctx context.Context) error {
			fresh, err := sql.Open("mysql", p.dsn("pause_t"))
			if err != nil {
				return err
			}
			defer fresh.Close()
			var v any
			return fresh.QueryRowContext(ctx, "SELECT balance FROM acct WHERE id = 6").Scan(&v)
		})
		sentErr <- err
	}()

	// Both fail, within a bound well under the pause.
	const firstBound = 10 * time.Second
	timeout := time.After(firstBound)
	for _, w := range []struct {
		what string
		errc chan error
	}{{"the statement running on node2", runErr}, {"a statement sent to node2 as it stopped", sentErr}} {
		select {
		case err := <-w.errc:
			if err == nil {
				t.Errorf("%s succeeded", w.what)
			}
			t.Logf("%s failed %v after the stop: %v", w.what, time.Since(stopped).Round(time.Millisecond), err)
		case <-timeout:
			t.Fatalf("%s has not failed %v after the stop", w.what, firstBound)
		}
	}

	// Until shortly before the pause ends, once a second: node1 answers;
	// node2 fails fast, on a pooled client connection and on a new one.
	const node2Bound = 5 * time.Second
	var node1Max, node2Max time.Duration
	node2Errs := map[string]int{} // error text without addresses -> count
	rounds := 0
	for time.Since(stopped) < pause-5*time.Second {
		rounds++
		at := time.Since(stopped).Round(time.Millisecond)
		var b int
		d, err := timed(10*time.Second, func(ctx context.Context) error {
			return node1.QueryRowContext(ctx, "SELECT balance FROM acct WHERE id = 1").Scan(&b)
		})
		node1Max = max(node1Max, d)
		if err != nil || b != 100 {
			t.Errorf("node1 %v into the pause: %d, %v", at, b, err)
		}
		for _, try := range []func(ctx context.Context) error{
			func(ctx context.Context) error {
				return db.QueryRowContext(ctx, "SELECT balance FROM acct WHERE id = 2").Scan(&b)
			},
			func(ctx context.Context) error {
				fresh, err := sql.Open("mysql", p.dsn("pause_t"))
				if err != nil {
					return err
				}
				defer fresh.Close()
				return fresh.QueryRowContext(ctx, "SELECT balance FROM acct WHERE id = 6").Scan(&b)
			},
		} {
			d, err := timed(20*time.Second, try)
			node2Max = max(node2Max, d)
			switch {
			case err == nil:
				t.Errorf("a statement to the stopped node succeeded %v into the pause", at)
			case d > node2Bound:
				t.Errorf("a statement to the stopped node failed only after %v (%v)", d.Round(time.Millisecond), err)
			}
			if err != nil {
				node2Errs[addrRE.ReplaceAllString(err.Error(), "ADDR")]++
			}
		}
		time.Sleep(time.Second)
	}
	t.Logf("%d rounds over %v of the pause: node1 answered within %v at most; node2 statements failed within %v at most, with %v",
		rounds, time.Since(stopped).Round(time.Millisecond), node1Max.Round(time.Millisecond), node2Max.Round(time.Millisecond), node2Errs)

	// Shutdown during the pause: the sticky client leaves (its node2
	// connection needs a reset nobody answers), another sends a statement
	// to node2, and a transaction there is still open.
	sticky.Close()
	waiting := make(chan error, 1)
	go func() {
		var v any
		waiting <- db.QueryRowContext(ctx, "SELECT balance FROM acct WHERE id = 3").Scan(&v)
	}()
	time.Sleep(100 * time.Millisecond) // both reach the proxy
	if p.exited() {
		t.Fatalf("the proxy exited during the pause: %v", p.waitErr)
	}
	p.terminate(t, "the pause began", stopped)
	select {
	case <-waiting:
	case <-time.After(10 * time.Second):
		t.Errorf("the client waiting on node2 got no answer 10 s after the proxy exited")
	}
	time.Sleep(time.Until(stopped.Add(pause)))
	resume()

	// The open transaction ends rolled back once node2 runs again and
	// sees the proxy's connections gone (id 7 is in subtable 3 of 4).
	direct, err = sql.Open("mysql", paused.DSN("pause_t")+"&timeout=5s&readTimeout=10s")
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	var balance int
	waitUntil(t, 10*time.Second, "the open transaction to be rolled back", func() bool {
		return direct.QueryRowContext(ctx, "SELECT balance FROM acct_0003 WHERE id = 7").Scan(&balance) == nil && balance == 100
	})
}

// addrRE matches the host:port addresses in error texts.
var addrRE = regexp.MustCompile(`\d+\.\d+\.\d+\.\d+:\d+`)

// timed runs f with a context that times out after limit and returns how
// long it took.
func timed(limit time.Duration, f func(ctx context.Context) error) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	start := time.Now()
	err := f(ctx)
	return time.Since(start), err
}

// waitUntil polls cond every 10 ms until it holds, failing the test after
// timeout.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
