package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"go.uber.org/zap/zaptest"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/internal/mariadbtest"
	"github.com/shardgate/shardgate/move"
	"github.com/shardgate/shardgate/proxy/server"
)

var cluster *mariadbtest.Cluster

func TestMain(m *testing.M) {
	mariadbtest.Main(m, 2, func(c *mariadbtest.Cluster) int {
		cluster = c
		return m.Run()
	})
}

// TestCommandLine drives a reshard with the command a user types: start
// with -wait (progress until in sync), status, cutover (which prints the
// rule for ks.yaml), complete; and the errors a user gets for a bad table
// and for a command the workflow's phase does not take.
func TestCommandLine(t *testing.T) {
	if cluster == nil {
		t.Skip("integration test: needs MariaDB (skipped under -short)")
	}
	cfg := config.Default()
	cfg.Addr = "127.0.0.1:0"
	cfg.Users = []config.User{{User: "app", Password: "pw"}}
	for i, s := range cluster.Servers {
		cfg.Nodes = append(cfg.Nodes, config.Node{Name: fmt.Sprintf("node%d", i+1), Master: s.Addr, User: s.User, Password: s.Password,
			MaxConnsLimit: 8, DownAfterNoalive: 1})
		db, err := sql.Open("mysql", s.DSN(""))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec("CREATE DATABASE cli"); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(fmt.Sprintf("CREATE TABLE cli.t_%04d (id INT PRIMARY KEY, v TEXT)", i)); err != nil {
			t.Fatal(err)
		}
		for j := 0; j < 3000; j++ {
			if j%2 == i {
				if _, err := db.Exec("INSERT INTO cli.t_"+fmt.Sprintf("%04d", i)+" VALUES (?, 'x')", j); err != nil {
					t.Fatal(err)
				}
			}
		}
		db.Close()
	}
	cfg.Schemas = []config.Schema{{User: "app", Nodes: []string{"node1", "node2"}, Default: "node1",
		Shard: []config.ShardRule{{DB: "cli", Table: "t", Key: "id", Type: "hash", Nodes: []string{"node1", "node2"}, Locations: []int{1, 1}}}}}
	cfg.Sidecar = config.Sidecar{Node: "node1", DB: "shardgate_sidecar"}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(cfg, server.Options{Log: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	}()
	web := httptest.NewServer(srv.AdminHandler())
	defer web.Close()
	sh := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(append([]string{"-admin", web.URL}, args...), &out)
		return out.String(), err
	}

	if _, err := sh("reshard", "cli.nope", "-nodes", "node1", "-locations", "2"); err == nil || !strings.Contains(err.Error(), "has no shard rule") {
		t.Fatalf("a table without a rule: %v", err)
	}
	out, err := sh("reshard", "cli.t", "-nodes", "node1,node2", "-locations", "2,2", "-name", "cli", "-wait")
	if err != nil {
		t.Fatalf("reshard: %v\n%s", err, out)
	}
	for _, want := range []string{"workflow cli started: reshard cli.t", "ready", "3000 rows verified, 0 differing ranges", "in sync. Cut over with: shardgate cutover cli"} {
		if !strings.Contains(out, want) {
			t.Errorf("reshard -wait output lacks %q:\n%s", want, out)
		}
	}
	if _, err := sh("complete", "cli"); err == nil || !strings.Contains(err.Error(), "has not cut over yet") {
		t.Fatalf("complete before the cutover: %v", err)
	}
	out, err = sh("status")
	if err != nil || !strings.Contains(out, "cli reshard cli.t: ready") {
		t.Fatalf("status: %v\n%s", err, out)
	}
	out, err = sh("cutover", "cli")
	if err != nil {
		t.Fatalf("cutover: %v\n%s", err, out)
	}
	for _, want := range []string{"cli reshard cli.t: switched", "put it in ks.yaml", "locations: [2, 2]", "generation: 1"} {
		if !strings.Contains(out, want) {
			t.Errorf("cutover output lacks %q:\n%s", want, out)
		}
	}
	// status NAME for a person, -json for scripts, from the real admin API.
	out, err = sh("status", "cli")
	for _, want := range []string{"cli reshard cli.t: switched", "phase     switched (running: yes)", "3,000 of 3,000 rows (100%)",
		"new rule  hash on id, 4 subtables (node1: 2, node2: 2), generation 1", "verify    3,000 rows in ", "next: shardgate complete cli"} {
		if err != nil || !strings.Contains(out, want) {
			t.Errorf("status cli lacks %q (%v):\n%s", want, err, out)
		}
	}
	t.Logf("shardgate status cli:\n%s", out)
	out, err = sh("status", "cli", "-json")
	var st move.Status
	if err != nil || json.Unmarshal([]byte(out), &st) != nil || st.State.Phase != move.PhaseSwitched || st.State.RowsCopied != 3000 {
		t.Errorf("status cli -json: %v\n%s", err, out)
	}
	if out, err = sh("complete", "cli"); err != nil || !strings.Contains(out, "completed") {
		t.Fatalf("complete: %v\n%s", err, out)
	}
	d1, _ := sql.Open("mysql", cluster.Servers[0].DSN("cli"))
	defer d1.Close()
	var n int
	if err := d1.QueryRow("SELECT COUNT(*) FROM t_g1_0000").Scan(&n); err != nil || n != 750 {
		t.Fatalf("t_g1_0000 holds %d rows (%v), want 750", n, err)
	}
	if err := d1.QueryRow("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'cli' AND TABLE_NAME = 't_0000'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("complete left the old subtable t_0000 (%d, %v)", n, err)
	}
	t.Logf("command output of the cutover:\n%s", out)
}
