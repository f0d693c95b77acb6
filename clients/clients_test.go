package clients_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/internal/mariadbtest"
	"github.com/shardgate/shardgate/proxy/server"
)

// db is the database every case runs in. Directly it lives on node1 only and both tables are plain; through
// the proxy it exists on both nodes and items is sharded.
const db = "cm"

// Tables: plain is unsharded (it lives on the schema's default node, node1), items is hash-sharded on id over
// node1 and node2, two subtables each. Both have the same columns, which every client's cases use.
//
// Every variant writes explicit ids in a range of its own below 1,000,000 (see base in TestClientMatrix), and
// the clients run concurrently. AUTO_INCREMENT starts far above those ranges so that an explicit id never moves
// the counter: otherwise one client's generated key could take the id another client is about to insert.
var tables = []string{"plain", "items"}

const tableDDL = `CREATE TABLE %s (
	id BIGINT NOT NULL AUTO_INCREMENT,
	name VARCHAR(64) NOT NULL,
	qty INT NOT NULL,
	price DECIMAL(10,2) NOT NULL,
	flag TINYINT(1) NOT NULL DEFAULT 0,
	created DATETIME NULL,
	note TEXT NULL,
	PRIMARY KEY (id)
) ENGINE=InnoDB AUTO_INCREMENT=10000000 DEFAULT CHARSET=utf8mb4`

// cluster holds node1 and node2; nil under -short.
var cluster *mariadbtest.Cluster

// appUser and appPassword are the proxy account the clients log in with; the password is random per test binary.
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
		code := m.Run()
		if leaked := leakedGoroutines(); code == 0 && leaked != "" {
			fmt.Fprintf(os.Stderr, "leaked goroutines:\n%s\n", leaked)
			code = 1
		}
		return code
	})
}

// leakedGoroutines returns the stacks of goroutines that run the proxy's code or hold a database/sql pool open
// after the tests: the proxy and every handle are closed by then. mariadbtest's own goroutines (the servers'
// processes and its interrupt watcher) live until Main stops the servers. Goroutines that are already finishing
// get a short grace period; this polls for a leak, it does not synchronise with anything.
func leakedGoroutines() string {
	deadline := time.Now().Add(2 * time.Second)
	for {
		var leaked []string
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		for _, g := range strings.Split(string(buf), "\n\n") {
			ours := strings.Contains(g, "github.com/shardgate/shardgate/") || strings.Contains(g, "database/sql.(*DB)")
			if ours && !strings.Contains(g, "internal/mariadbtest.") && !strings.Contains(g, "clients_test.TestMain") &&
				!strings.Contains(g, "clients_test.leakedGoroutines") {
				leaked = append(leaked, g)
			}
		}
		if len(leaked) == 0 {
			return ""
		}
		if time.Now().After(deadline) {
			return strings.Join(leaked, "\n\n")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// result is one case of one client on one table, as the client reports it (the scripts print it as a JSON line).
type result struct {
	Client   string `json:"client"`
	Case     string `json:"case"`
	Table    string `json:"table"`
	OK       bool   `json:"ok"`
	Error    string `json:"error,omitempty"`
	Observed string `json:"observed,omitempty"` // what must be the same through the proxy as directly
}

// key names the case as known.txt does: client/case/table.
func (r result) key() string { return r.Client + "/" + r.Case + "/" + r.Table }

// target is where one run of the matrix connects: node1 directly, or the proxy.
type target struct {
	name           string
	host, port     string
	user, password string
}

func (tg target) addr() string { return net.JoinHostPort(tg.host, tg.port) }

// client is one library of the matrix. Its variants (driver options that change what goes on the wire) run in
// one process per target, each on its own id range starting at base[variant].
type client struct {
	name     string
	variants []string
	run      func(ctx context.Context, tg target, base map[string]int64) ([]result, error)
}

// errMissing marks a client whose library is not installed: the test fails at once with the install hint.
var errMissing = errors.New("client library missing: run scripts/deps.sh clients")

func TestClientMatrix(t *testing.T) {
	if cluster == nil {
		t.Skip("integration test: needs MariaDB and the client libraries (skipped under -short)")
	}
	start := time.Now()
	node1, node2 := cluster.Servers[0], cluster.Servers[1]
	known := readKnown(t)
	for _, s := range cluster.Servers {
		t.Cleanup(func() {
			if err := execDirect(s, "", "DROP DATABASE IF EXISTS "+db); err != nil {
				t.Error(err)
			}
		})
	}

	// Compiling the Java client takes seconds; it overlaps with the Go client's direct run.
	javaDir := t.TempDir()
	javaDone := make(chan error, 1)
	go func() { javaDone <- compileJava(javaDir) }()
	javaCompiled := sync.OnceValue(func() error { return <-javaDone })
	t.Cleanup(func() { javaCompiled() }) // the compiler is waited for even when the test stops early

	clients := []client{
		{"go", []string{"go-prepared", "go-interpolate"}, runGo},
		{"python", []string{"pymysql", "mysqlclient"}, runPython},
		{"java", []string{"connectorj-serverps", "connectorj-clientps"}, func(ctx context.Context, tg target, base map[string]int64) ([]result, error) {
			if err := javaCompiled(); err != nil {
				return nil, err
			}
			return runJava(ctx, javaDir, tg, base)
		}},
		{"php", []string{"pdo-emulate", "pdo-native", "mysqli"}, runPHP},
	}
	base := map[string]int64{}
	for _, c := range clients {
		for _, v := range c.variants {
			base[v] = int64(len(base)+1) * 100_000
		}
	}
	if len(base) > 9 {
		t.Fatalf("%d variants: explicit ids would reach AUTO_INCREMENT's start (see tables)", len(base))
	}

	direct := directTarget(node1)
	for _, s := range cluster.Servers {
		if err := execDirect(s, "", "DROP DATABASE IF EXISTS "+db); err != nil {
			t.Fatal(err)
		}
	}
	stmts := []string{"CREATE DATABASE " + db, "USE " + db}
	for _, tb := range tables {
		stmts = append(stmts, fmt.Sprintf(tableDDL, tb))
	}
	if err := execDirect(node1, "", stmts...); err != nil {
		t.Fatal(err)
	}
	directResults := runAll(t, clients, direct, base)

	// The same database through the proxy: dropped on both nodes, then created by the proxy, which creates
	// items_0000 and items_0001 on node1 and items_0002 and items_0003 on node2.
	proxyAddr := startProxy(t, node1, node2)
	for _, s := range cluster.Servers {
		if err := execDirect(s, "", "DROP DATABASE IF EXISTS "+db); err != nil {
			t.Fatal(err)
		}
	}
	host, port, _ := net.SplitHostPort(proxyAddr)
	proxied := target{name: "proxy", host: host, port: port, user: appUser, password: appPassword}
	if err := execOn(proxied, "", stmts...); err != nil {
		t.Fatalf("creating %s through the proxy: %v", db, err)
	}
	proxyResults := runAll(t, clients, proxied, base)

	compare(t, directResults, proxyResults, known)
	t.Logf("client matrix: %d cases per target in %v", len(directResults), time.Since(start).Round(time.Millisecond))
}

// runAll runs every client against tg concurrently and returns their results by key. A client that cannot run
// at all fails the test.
func runAll(t *testing.T, clients []client, tg target, base map[string]int64) map[string]result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 75*time.Second)
	defer cancel()
	type outcome struct {
		c   client
		res []result
		err error
	}
	outcomes := make([]outcome, len(clients))
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Go(func() {
			own := map[string]int64{}
			for _, v := range c.variants {
				own[v] = base[v]
			}
			res, err := c.run(ctx, tg, own)
			outcomes[i] = outcome{c, res, err}
		})
	}
	wg.Wait()
	all := map[string]result{}
	for _, o := range outcomes {
		if errors.Is(o.err, errMissing) {
			t.Fatalf("%s: %v", o.c.name, o.err)
		}
		if o.err != nil {
			t.Errorf("%s %s: %v", o.c.name, tg.name, o.err)
		}
		for _, r := range o.res {
			if !slices.Contains(o.c.variants, r.Client) {
				t.Errorf("%s %s: result for unknown variant %q", o.c.name, tg.name, r.Client)
			}
			if _, dup := all[r.key()]; dup {
				t.Errorf("%s %s: %s reported twice", o.c.name, tg.name, r.key())
			}
			all[r.key()] = r
		}
	}
	return all
}

// compare checks the proxy's results against the direct ones and known.txt, one subtest per case.
func compare(t *testing.T, direct, proxied map[string]result, known map[string]string) {
	keys := make([]string, 0, len(direct))
	for k := range direct {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		t.Run(k, func(t *testing.T) {
			d := direct[k]
			if !d.OK {
				t.Fatalf("fails directly, so the case's expectation is wrong: %s", d.Error)
			}
			p, ok := proxied[k]
			var diff string
			switch {
			case !ok:
				diff = "no result through the proxy (the client stopped before this case)"
			case !p.OK:
				diff = p.Error
			case p.Observed != d.Observed:
				diff = fmt.Sprintf("observed through the proxy:\n\t%s\ndirectly:\n\t%s", p.Observed, d.Observed)
			}
			reason, listed := known[k]
			switch {
			case diff != "" && !listed:
				t.Errorf("differs through the proxy (not in known.txt): %s", diff)
			case diff == "" && listed:
				t.Errorf("passes through the proxy now: remove its line from known.txt (%s)", reason)
			case diff != "":
				t.Logf("known difference: %s", diff)
			}
		})
	}
	for k := range proxied {
		if _, ok := direct[k]; !ok {
			t.Errorf("%s: reported through the proxy only", k)
		}
	}
	for k := range known {
		if _, ok := direct[k]; !ok {
			t.Errorf("known.txt lists %s, which no client runs", k)
		}
	}
}

// readKnown reads known.txt: "client/case/table : reason" per line; blank lines and lines starting with # are
// comments.
func readKnown(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile("known.txt")
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]string{}
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, reason, ok := strings.Cut(line, " : ")
		key = strings.TrimSpace(key)
		if !ok || strings.Count(key, "/") != 2 || strings.TrimSpace(reason) == "" {
			t.Fatalf("known.txt:%d: want \"client/case/table : reason\", got %q", i+1, line)
		}
		if _, dup := known[key]; dup {
			t.Fatalf("known.txt:%d: %s listed twice", i+1, key)
		}
		known[key] = strings.TrimSpace(reason)
	}
	return known
}

// startProxy runs the proxy in-process on a free port until the test ends. Its configuration is YAML through
// config.Parse, as an operator writes it, so that keys config does not know yet are refused as they would be.
func startProxy(t *testing.T, node1, node2 *mariadbtest.Server) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "addr: 127.0.0.1:0\nuser_list:\n  - user: %s\n    password: %q\nnodes:\n", appUser, appPassword)
	for i, s := range []*mariadbtest.Server{node1, node2} {
		fmt.Fprintf(&b, "  - name: node%d\n    master: %q\n    user: %q\n    password: %q\n", i+1, s.Addr, s.User, s.Password)
	}
	fmt.Fprintf(&b, `schema_list:
  - user: %s
    nodes: [node1, node2]
    default: node1
    shard:
      - db: %s
        table: items
        key: id
        type: hash
        nodes: [node1, node2]
        locations: [2, 2]
        sequence: id
sidecar:
  node: node1
`, appUser, db)
	cfg, err := config.Parse([]byte(b.String()))
	if err != nil {
		t.Fatalf("proxy configuration: %v", err)
	}
	srv, err := server.New(cfg, server.Options{Log: zaptest.NewLogger(t, zaptest.Level(zapcore.WarnLevel))})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serveDone := make(chan error, 1)
	go func() { serveDone <- srv.Serve(l) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-serveDone; err != nil && !errors.Is(err, server.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return l.Addr().String()
}

// directTarget is server s with its administrative account.
func directTarget(s *mariadbtest.Server) target {
	host, port, _ := net.SplitHostPort(s.Addr)
	return target{name: "direct", host: host, port: port, user: s.User, password: s.Password}
}

// execDirect runs statements on one connection to s as its administrative account.
func execDirect(s *mariadbtest.Server, dbname string, stmts ...string) error {
	return execOn(directTarget(s), dbname, stmts...)
}

// execOn runs statements on one connection to tg.
func execOn(tg target, dbname string, stmts ...string) error {
	h, err := sql.Open("mysql", fmt.Sprintf("%s:%s@tcp(%s)/%s?timeout=10s&readTimeout=30s", tg.user, tg.password, tg.addr(), dbname))
	if err != nil {
		return err
	}
	defer h.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := h.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	for _, s := range stmts {
		if _, err := c.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("%s: %s: %w", tg.name, s, err)
		}
	}
	return nil
}

// scriptEnv is the environment a client script reads: where to connect and which variants to run.
func scriptEnv(tg target, base map[string]int64) []string {
	var vs []string
	for v, b := range base {
		vs = append(vs, fmt.Sprintf("%s=%d", v, b))
	}
	slices.Sort(vs)
	return append(os.Environ(),
		"CM_HOST="+tg.host, "CM_PORT="+tg.port, "CM_USER="+tg.user, "CM_PASSWORD="+tg.password, "CM_DB="+db,
		"CM_TABLES="+strings.Join(tables, ","), "CM_VARIANTS="+strings.Join(vs, ","))
}

// runScript runs one client process and parses the JSON lines it prints. Exit status 3 is the scripts' way of
// saying their library is missing.
func runScript(ctx context.Context, tg target, base map[string]int64, name string, args ...string) ([]result, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = scriptEnv(tg, base)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var res []result
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r result
		if jerr := json.Unmarshal(sc.Bytes(), &r); jerr != nil {
			return res, fmt.Errorf("%s: bad output line %q: %v\nstderr:\n%s", name, sc.Text(), jerr, stderr.String())
		}
		res = append(res, r)
	}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee) && ee.ExitCode() == 3:
		return nil, fmt.Errorf("%w: %s", errMissing, strings.TrimSpace(stderr.String()))
	case err != nil:
		return res, fmt.Errorf("%s %s: %v\nstderr:\n%s", name, strings.Join(args, " "), err, stderr.String())
	}
	return res, nil
}

// pythonBin is Debian's interpreter: the python3-* packages install their modules for it, not for a pyenv
// python that may come first in PATH.
const pythonBin = "/usr/bin/python3"

func runPython(ctx context.Context, tg target, base map[string]int64) ([]result, error) {
	if _, err := os.Stat(pythonBin); err != nil {
		return nil, fmt.Errorf("%w: %v (Debian's python3)", errMissing, err)
	}
	return runScript(ctx, tg, base, pythonBin, "testdata/matrix.py")
}

func runPHP(ctx context.Context, tg target, base map[string]int64) ([]result, error) {
	php, err := exec.LookPath("php")
	if err != nil {
		return nil, fmt.Errorf("%w: %v (Debian's php-cli)", errMissing, err)
	}
	// mysqlnd's read timeout bounds PDO's waits too (PDO has no option of its own for it).
	return runScript(ctx, tg, base, php, "-d", "mysqlnd.net_read_timeout=20", "testdata/matrix.php")
}

// connectorJ is where Debian's libmariadb-java installs MariaDB Connector/J.
const connectorJ = "/usr/share/java/mariadb-java-client.jar"

// compileJava compiles testdata/Matrix.java into dir.
func compileJava(dir string) error {
	if _, err := os.Stat(connectorJ); err != nil {
		return fmt.Errorf("%w: %v (Debian's libmariadb-java)", errMissing, err)
	}
	javac, err := exec.LookPath("javac")
	if err != nil {
		return fmt.Errorf("%w: %v (Debian's default-jdk-headless)", errMissing, err)
	}
	out, err := exec.Command(javac, "-nowarn", "-encoding", "UTF-8", "-cp", connectorJ, "-d", dir, "testdata/Matrix.java").CombinedOutput()
	if err != nil {
		return fmt.Errorf("javac testdata/Matrix.java: %v\n%s", err, out)
	}
	return nil
}

func runJava(ctx context.Context, dir string, tg target, base map[string]int64) ([]result, error) {
	java, err := exec.LookPath("java")
	if err != nil {
		return nil, fmt.Errorf("%w: %v (Debian's default-jdk-headless)", errMissing, err)
	}
	// A small heap and no JIT tiers beyond the first: the cases are short, and the machine has two cores.
	return runScript(ctx, tg, base, java, "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-Xmx128m",
		"-cp", dir+string(filepath.ListSeparator)+connectorJ, "Matrix")
}
