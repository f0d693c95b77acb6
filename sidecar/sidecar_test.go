package sidecar_test

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/internal/mariadbtest"
	"github.com/shardgate/shardgate/sidecar"
)

var cluster *mariadbtest.Cluster

func TestMain(m *testing.M) {
	mariadbtest.Main(m, 1, func(c *mariadbtest.Cluster) int {
		cluster = c
		return m.Run()
	})
}

// open returns a sidecar in database name, dropped first, on a node of
// its own (as each proxy has its own), and a direct connection.
func open(t *testing.T, name string) (*sidecar.Sidecar, *sql.DB) {
	t.Helper()
	if cluster == nil {
		t.Skip("integration test: needs MariaDB (skipped under -short)")
	}
	d := direct(t)
	if _, err := d.Exec("DROP DATABASE IF EXISTS " + name); err != nil {
		t.Fatal(err)
	}
	return another(t, name), d
}

func another(t *testing.T, name string) *sidecar.Sidecar {
	s := cluster.Servers[0]
	n := backend.NewNode(config.Node{Name: "node1", Master: s.Addr, User: s.User, Password: s.Password, MaxConnsLimit: 4, DownAfterNoalive: 1},
		config.Default().Backend, nil)
	n.Start()
	t.Cleanup(n.Close)
	sc := sidecar.New(n, name)
	t.Cleanup(sc.Close)
	return sc
}

func direct(t *testing.T) *sql.DB {
	t.Helper()
	d, err := sql.Open("mysql", cluster.Servers[0].DSN(""))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func value(t *testing.T, d *sql.DB, q string) string {
	t.Helper()
	var v sql.NullString
	if err := d.QueryRow(q).Scan(&v); err != nil && !errors.Is(err, sql.ErrNoRows) {
		t.Fatalf("%s: %v", q, err)
	}
	return v.String
}

var v1 = []string{"CREATE TABLE IF NOT EXISTS things (id INT NOT NULL PRIMARY KEY) ENGINE=InnoDB"}
var v2 = []string{"ALTER TABLE things ADD COLUMN IF NOT EXISTS label VARCHAR(20) NULL"}

// TestMigrations: a component's tables are created on first use and its
// version recorded; a proxy that knows one more migration runs only that
// one; the rows stay.
func TestMigrations(t *testing.T) {
	const db = "sidecar_t_migrate"
	sc, d := open(t, db)
	c := &sidecar.Component{Name: "things", Migrations: [][]string{v1}}
	if _, err := sc.Exec(context.Background(), c, "INSERT INTO "+sc.Table("things")+" VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	if v := value(t, d, "SELECT version FROM "+db+".sidecar_migrations WHERE component = 'things'"); v != "1" {
		t.Fatalf("version %q after the first use, want 1", v)
	}
	if v := value(t, d, "SELECT version FROM "+db+".sidecar_version WHERE id = 1"); v != "1" {
		t.Fatalf("sidecar_version %q, want 1", v)
	}
	newer := &sidecar.Component{Name: "things", Migrations: [][]string{v1, v2}}
	if _, err := another(t, db).Exec(context.Background(), newer, "UPDATE "+sc.Table("things")+" SET label = 'x'"); err != nil {
		t.Fatal(err)
	}
	if v := value(t, d, "SELECT version FROM "+db+".sidecar_migrations WHERE component = 'things'"); v != "2" {
		t.Fatalf("version %q after the newer proxy, want 2", v)
	}
	if v := value(t, d, "SELECT CONCAT(id, label) FROM "+db+".things"); v != "1x" {
		t.Fatalf("row %q, want 1x", v)
	}
	// A proxy that knows only version 1 leaves tables at version 2 alone.
	if _, err := another(t, db).Exec(context.Background(), c, "SELECT 1"); err == nil || !strings.Contains(err.Error(), "upgrade the proxy") {
		t.Fatalf("a proxy that knows version 1 of tables at version 2: %v", err)
	}
}

// TestAdoptsOldTables: tables written by a proxy from before
// sidecar_migrations are adopted with their rows.
func TestAdoptsOldTables(t *testing.T) {
	const db = "sidecar_t_adopt"
	sc, d := open(t, db)
	for _, q := range []string{"CREATE DATABASE " + db, "CREATE TABLE " + db + ".things (id INT NOT NULL PRIMARY KEY, label VARCHAR(20) NULL)",
		"INSERT INTO " + db + ".things VALUES (7, 'old')"} {
		if _, err := d.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	c := &sidecar.Component{Name: "things", Migrations: [][]string{v1, v2}}
	res, err := sc.Exec(context.Background(), c, "SELECT label FROM "+sc.Table("things")+" WHERE id = 7")
	if err != nil || len(res.Rows) != 1 || string(res.Rows[0][0]) != "old" {
		t.Fatalf("%v %v", res, err)
	}
	if v := value(t, d, "SELECT version FROM "+db+".sidecar_migrations WHERE component = 'things'"); v != "2" {
		t.Fatalf("version %q, want 2", v)
	}
}

// TestNewerRefused: tables at a version above what the proxy knows, or a
// sidecar layout above Version, are not touched.
func TestNewerRefused(t *testing.T) {
	const db = "sidecar_t_newer"
	for _, tc := range []struct{ table, row string }{
		{"sidecar_migrations (component VARCHAR(64) NOT NULL PRIMARY KEY, version INT UNSIGNED NOT NULL)", "('things', 3)"},
		{"sidecar_version (id TINYINT UNSIGNED NOT NULL PRIMARY KEY, version INT UNSIGNED NOT NULL)", "(1, 2)"},
	} {
		sc, d := open(t, db)
		name, _, _ := strings.Cut(tc.table, " ")
		for _, q := range []string{"CREATE DATABASE " + db, "CREATE TABLE " + db + "." + tc.table, "INSERT INTO " + db + "." + name + " VALUES " + tc.row} {
			if _, err := d.Exec(q); err != nil {
				t.Fatal(err)
			}
		}
		c := &sidecar.Component{Name: "things", Migrations: [][]string{v1, v2}}
		_, err := sc.Exec(context.Background(), c, "SELECT 1")
		if err == nil || !strings.Contains(err.Error(), "upgrade the proxy") {
			t.Fatalf("%s %s: %v", name, tc.row, err)
		}
		if v := value(t, d, "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = '"+db+"' AND TABLE_NAME = 'things'"); v != "0" {
			t.Errorf("%s %s: the table was created", name, tc.row)
		}
	}
}

// TestConcurrentProxies: proxies that start together migrate the same
// tables at once; every one succeeds.
func TestConcurrentProxies(t *testing.T) {
	const db = "sidecar_t_together"
	_, d := open(t, db)
	c := &sidecar.Component{Name: "things", Migrations: [][]string{v1, v2}}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		sc := another(t, db)
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := sc.Exec(context.Background(), c, "INSERT INTO "+sc.Table("things")+" VALUES ("+strconv.Itoa(i)+", 'p')")
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if v := value(t, d, "SELECT COUNT(*) FROM "+db+".things"); v != "8" {
		t.Errorf("%s rows, want 8", v)
	}
}

// TestReadCreatesNothing: a read before anything was written answers no
// rows and leaves the server as it was.
func TestReadCreatesNothing(t *testing.T) {
	const db = "sidecar_t_read"
	sc, d := open(t, db)
	c := &sidecar.Component{Name: "things", Migrations: [][]string{v1}}
	res, err := sc.Read(context.Background(), c, "SELECT id FROM "+sc.Table("things"))
	if err != nil || len(res.Rows) != 0 {
		t.Fatalf("%v %v", res, err)
	}
	if v := value(t, d, "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = '"+db+"'"); v != "0" {
		t.Error("a read created the database")
	}
	if _, err := sc.Exec(context.Background(), c, "INSERT INTO "+sc.Table("things")+" VALUES (3)"); err != nil {
		t.Fatal(err)
	}
	if res, err := sc.Read(context.Background(), c, "SELECT id FROM "+sc.Table("things")); err != nil || len(res.Rows) != 1 {
		t.Fatalf("%v %v", res, err)
	}
}

// TestContextBoundsStatement: a statement outliving its context fails
// when the context ends, and the sidecar goes on with a new connection.
func TestContextBoundsStatement(t *testing.T) {
	const db = "sidecar_t_ctx"
	sc, _ := open(t, db)
	c := &sidecar.Component{Name: "things", Migrations: [][]string{v1}}
	if _, err := sc.Exec(context.Background(), c, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := sc.Exec(ctx, c, "SELECT SLEEP(20)")
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 10*time.Second {
		t.Fatalf("after %v: %v", time.Since(start), err)
	}
	if res, err := sc.Exec(context.Background(), c, "SELECT 2"); err != nil || string(res.Rows[0][0]) != "2" {
		t.Fatalf("after the context ended: %v %v", res, err)
	}
}
