package mariadbtest

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"
)

// cluster is shared by the tests of this package; nil under -short.
var cluster *Cluster

func TestMain(m *testing.M) {
	Main(m, 2, func(c *Cluster) int {
		cluster = c
		return m.Run()
	})
}

func needCluster(t *testing.T) {
	t.Helper()
	if cluster == nil {
		t.Skip("integration test: needs MariaDB (not run with -short)")
	}
}

func open(t *testing.T, s *Server, db string) *sql.DB {
	t.Helper()
	conn, err := sql.Open("mysql", s.DSN(db))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func mustExec(t *testing.T, db *sql.DB, query string, args ...any) {
	t.Helper()
	if _, err := db.Exec(query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

func TestServersAreIndependent(t *testing.T) {
	needCluster(t)
	if len(cluster.Servers) != 2 {
		t.Fatalf("got %d servers, want 2", len(cluster.Servers))
	}
	s0, s1 := cluster.Servers[0], cluster.Servers[1]
	if s0.Addr == s1.Addr || s0.DataDir == s1.DataDir || s0.Socket == s1.Socket {
		t.Fatalf("servers share an address or directory: %+v %+v", s0, s1)
	}
	db0, db1 := open(t, s0, ""), open(t, s1, "")

	for _, db := range []*sql.DB{db0, db1} {
		var user, charset string
		if err := db.QueryRow("SELECT CURRENT_USER(), @@character_set_server").Scan(&user, &charset); err != nil {
			t.Fatal(err)
		}
		if user != s0.User+"@%" || charset != "utf8mb4" {
			t.Errorf("CURRENT_USER()=%q @@character_set_server=%q; want %q, utf8mb4", user, charset, s0.User+"@%")
		}
	}

	mustExec(t, db0, "DROP DATABASE IF EXISTS indep")
	mustExec(t, db0, "CREATE DATABASE indep")
	mustExec(t, db0, "CREATE TABLE indep.t (id INT PRIMARY KEY)")
	mustExec(t, db0, "INSERT INTO indep.t VALUES (1)")

	var n int
	if err := db0.QueryRow("SELECT COUNT(*) FROM indep.t").Scan(&n); err != nil || n != 1 {
		t.Fatalf("server 0: COUNT(*) = %d, %v; want 1", n, err)
	}
	err := db1.QueryRow("SELECT COUNT(*) FROM indep.t").Scan(&n)
	var myErr *mysqldriver.MySQLError
	if !errors.As(err, &myErr) || myErr.Number != 1146 { // ER_NO_SUCH_TABLE
		t.Fatalf("server 1 sees server 0's table: err = %v, want error 1146", err)
	}
	var name string
	if err := db1.QueryRow("SHOW DATABASES LIKE 'indep'").Scan(&name); err != sql.ErrNoRows {
		t.Fatalf("server 1 sees server 0's database: %q, %v", name, err)
	}
}

func TestKillRestart(t *testing.T) {
	needCluster(t)
	s := cluster.Servers[1]
	db := open(t, s, "")
	mustExec(t, db, "DROP DATABASE IF EXISTS killrestart")
	mustExec(t, db, "CREATE DATABASE killrestart")
	mustExec(t, db, "CREATE TABLE killrestart.t (id INT PRIMARY KEY)")
	mustExec(t, db, "INSERT INTO killrestart.t VALUES (42)")

	// A query in flight when the server dies must fail promptly, not hang.
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var connID int64
	if err := conn.QueryRowContext(context.Background(), "SELECT CONNECTION_ID()").Scan(&connID); err != nil {
		t.Fatal(err)
	}
	queryErr := make(chan error, 1)
	go func() {
		_, err := conn.ExecContext(context.Background(), "SELECT SLEEP(60)")
		queryErr <- err
	}()
	waitForQuery(t, cluster.Servers[1], connID)

	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-queryErr:
		if err == nil {
			t.Fatal("query survived SIGKILL of its server")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("query still running 10s after its server was killed")
	}
	if err := s.Kill(); err == nil {
		t.Error("Kill of a killed server succeeded")
	}
	if err := db.Ping(); err == nil {
		t.Fatal("ping of a killed server succeeded")
	}

	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	var id int
	if err := db.QueryRow("SELECT id FROM killrestart.t").Scan(&id); err != nil || id != 42 {
		t.Fatalf("after restart: id = %d, %v; want 42", id, err)
	}

	// Restart of a running server stops it cleanly first.
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := db.Ping(); err != nil {
		t.Fatalf("ping after second restart: %v", err)
	}
}

// waitForQuery polls the processlist through another connection until connection id runs a statement.
func waitForQuery(t *testing.T, s *Server, id int64) {
	t.Helper()
	db := open(t, s, "")
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var n int
		err := db.QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ? AND INFO LIKE 'SELECT SLEEP%'", id).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			return
		}
		time.Sleep(10 * time.Millisecond) // polling interval, not synchronisation
	}
	t.Fatalf("connection %d never started its query", id)
}

// TestStartInDir covers a caller-owned directory, deep enough that sockets must move to a short path, and root
// access through the socket.
func TestStartInDir(t *testing.T) {
	needCluster(t)
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", maxSocketPath))
	goroutines := runtime.NumGoroutine()
	c, err := Start(dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
		if _, err := os.Stat(dir); err != nil {
			t.Errorf("Stop removed a caller-owned directory: %v", err)
		}
		if _, err := os.Stat(filepath.Dir(c.Servers[0].Socket)); !os.IsNotExist(err) {
			t.Errorf("socket directory left behind: %v", err)
		}
		checkGoroutines(t, goroutines)
	})
	s := c.Servers[0]
	if !strings.HasPrefix(s.DataDir, dir) || len(s.Socket) > maxSocketPath {
		t.Fatalf("DataDir %q not under %q or socket path %q too long", s.DataDir, dir, s.Socket)
	}

	root, err := sql.Open("mysql", "root@unix("+s.Socket+")/")
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	var user string
	if err := root.QueryRow("SELECT CURRENT_USER()").Scan(&user); err != nil || user != "root@localhost" {
		t.Fatalf("root over the socket: CURRENT_USER() = %q, %v", user, err)
	}

	if _, err := Start(dir, 1); err == nil {
		t.Error("second Start in the same directory succeeded")
	}
}

// checkGoroutines fails the test if more than want goroutines are still running once exiting ones had time to
// finish (database/sql closes its connections asynchronously).
func checkGoroutines(t *testing.T, want int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > want {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Errorf("goroutine leak: %d running, want at most %d\n%s", runtime.NumGoroutine(), want, buf[:runtime.Stack(buf, true)])
			return
		}
		time.Sleep(10 * time.Millisecond) // polling interval
	}
}

func TestDSN(t *testing.T) {
	s := &Server{Addr: "127.0.0.1:3306", User: "u", Password: "p"}
	cfg, err := mysqldriver.ParseDSN(s.DSN("db") + "&timeout=5s")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.User != "u" || cfg.Passwd != "p" || cfg.Addr != "127.0.0.1:3306" || cfg.DBName != "db" ||
		cfg.Timeout != 5*time.Second || cfg.InterpolateParams || cfg.ParseTime {
		t.Fatalf("DSN %q parsed as %+v", s.DSN("db"), cfg)
	}
}
