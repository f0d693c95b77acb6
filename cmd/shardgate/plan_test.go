package main

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/proxy/admin"
	"github.com/shardgate/shardgate/proxy/server"
)

// TestPrintPlan: each class of a plan is printed in its section; an
// empty plan says so.
func TestPrintPlan(t *testing.T) {
	from := config.ShardRule{DB: "shop", Table: "orders", Key: "id", Type: "hash", Nodes: []string{"node1", "node2"}, Locations: []int{1, 1}}
	to := from
	to.Nodes, to.Locations, to.Generation = []string{"node1", "node2", "node3"}, []int{3, 3, 2}, 1
	p := &admin.Plan{Version: 7, TopologyVersion: 42, NodesAdded: []string{"node3"}, UsersAdded: []string{"report"}, Reload: true,
		Rules:    []admin.PlanRule{{User: "app", Table: "shop.carts", Rule: config.ShardRule{DB: "shop", Table: "carts", Key: "user_id", Type: "hash", Nodes: []string{"node3"}, Locations: []int{4}}}},
		Reshards: []admin.PlanReshard{{User: "app", Table: "shop.orders", From: from, To: to, Rows: 1000000, Bytes: 250 << 20, Estimate: "about 7.8s at 128000 rows/s"}},
		Refused:  []string{"shop.items: the rule changes from hash to global: only hash and range tables can be resharded"}, Seconds: 0.012}
	var b bytes.Buffer
	printPlan(&b, p)
	want := `plan against configuration version 7 (topology version 42), computed in 12 ms
nodes added:    node3
users added:    report
new rules, applied by the reload (their tables have no rows):
  shop.carts (user app): hash(user_id) node3:4
rows to move, one reshard workflow each:
  shop.orders (user app): hash(id) node1:1 node2:1 -> hash(id) node1:3 node2:3 node3:2 g1
    1000000 rows, 250.0 MiB to copy; about 7.8s at 128000 rows/s
cannot change:
  shop.items: the rule changes from hash to global: only hash and range tables can be resharded
`
	if b.String() != want {
		t.Errorf("printPlan:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	printPlan(&b, &admin.Plan{Version: 3, Reshards: []admin.PlanReshard{{Table: "shop.orders", User: "app", From: from, To: to, Workflow: "grow"}}})
	if !strings.Contains(b.String(), "nothing to change") || !strings.Contains(b.String(), "already moving in workflow grow: nothing to start") {
		t.Errorf("a plan whose move runs:\n%s", b.String())
	}
}

// TestWithRulesText: the fleet's apply stores the file with the moving
// tables' rules replaced by the ones in force, the rest as written.
func TestWithRulesText(t *testing.T) {
	text := []byte(`addr: 127.0.0.1:9696
user_list:
  - user: app
    password: pw
nodes:
  - name: node1
    master: 127.0.0.1:3307
    user: root
  - name: node2
    master: 127.0.0.1:3308
    user: root
schema_list:
  - user: app
    nodes: [node1, node2]
    default: node1
    shard:
      - db: shop
        table: orders
        key: id
        type: hash
        nodes: [node1, node2]
        locations: [4, 4]   # the new layout
      - db: shop
        table: carts
        key: id
        type: hash
        nodes: [node1, node2]
        locations: [1, 1]
`)
	old := config.ShardRule{DB: "shop", Table: "orders", Key: "id", Type: "hash", Nodes: []string{"node1", "node2"}, Locations: []int{1, 1}, SequenceBlock: 1000, Sequence: "id"}
	out, err := withRulesText(text, map[string]config.ShardRule{"shop.orders": old})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if got := cfg.Schemas[0].Shard; len(got) != 2 || got[0].Locations[0] != 1 || got[0].Sequence != "id" || got[1].Table != "carts" || cfg.Nodes[1].Master != "127.0.0.1:3308" {
		t.Fatalf("rules after: %+v\n%s", got, out)
	}
}

// TestPlanApplyCommand runs plan and apply -wait against a real proxy
// started from a file: a new user, a rule for an empty table and a rule
// whose table has rows; applying the same file again starts nothing.
func TestPlanApplyCommand(t *testing.T) {
	if cluster == nil {
		t.Skip("integration test: needs MariaDB (skipped under -short)")
	}
	var nodes strings.Builder
	for i, s := range cluster.Servers {
		fmt.Fprintf(&nodes, "  - name: node%d\n    master: %s\n    user: %s\n    password: %s\n    max_conns_limit: 8\n    down_after_noalive: 1\n", i+1, s.Addr, s.User, s.Password)
		db, err := sql.Open("mysql", s.DSN(""))
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{"DROP DATABASE IF EXISTS clp", "DROP DATABASE IF EXISTS clp_sidecar", "CREATE DATABASE clp",
			fmt.Sprintf("CREATE TABLE clp.orders_%04d (id INT PRIMARY KEY, v TEXT)", i),
			fmt.Sprintf("INSERT INTO clp.orders_%04d SELECT seq, REPEAT('x', 100) FROM clp.seq_%d_to_2999_step_2", i, i),
			fmt.Sprintf("ANALYZE TABLE clp.orders_%04d", i)} {
			if _, err := db.Exec(q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		db.Close()
	}
	rule := func(table, locations string) string {
		return fmt.Sprintf("      - db: clp\n        table: %s\n        key: id\n        type: hash\n        nodes: [node1, node2]\n        locations: [%s]\n", table, locations)
	}
	file := func(users string, rules ...string) string {
		return "addr: 127.0.0.1:0\nuser_list:\n  - user: app\n    password: pw\n" + users + "nodes:\n" + nodes.String() +
			"schema_list:\n  - user: app\n    nodes: [node1, node2]\n    default: node1\n    shard:\n" + strings.Join(rules, "") +
			"sidecar:\n  node: node1\n  db: clp_sidecar\n"
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "ks.yaml")
	if err := os.WriteFile(path, []byte(file("", rule("orders", "1, 1"))), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(cfg, server.Options{Log: zaptest.NewLogger(t), ConfigPath: path})
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
	// The edit: a user, a rule for a table that has no rows yet, and the
	// orders table from 1+1 subtables to 2+2.
	edited := filepath.Join(dir, "ks-edited.yaml")
	text := file("  - user: report\n    password: pw\n", rule("orders", "2, 2"), rule("carts", "1, 1"))
	if err := os.WriteFile(edited, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := sh("plan", edited)
	if err != nil {
		t.Fatalf("plan: %v\n%s", err, out)
	}
	t.Logf("$ shardgate plan ks-edited.yaml\n%s", out)
	for _, want := range []string{"users added:    report", "  clp.carts (user app): hash(id) node1:1 node2:1",
		"  clp.orders (user app): hash(id) node1:1 node2:1 -> hash(id) node1:2 node2:2 g1", "    3000 rows, ", "no rate measured yet"} {
		if !strings.Contains(out, want) {
			t.Errorf("plan output lacks %q", want)
		}
	}
	out, err = sh("apply", edited, "-wait")
	if err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	t.Logf("$ shardgate apply ks-edited.yaml -wait\n%s", out)
	for _, want := range []string{"applied: configuration version 2 in force", "workflow clp_orders_", "3000 rows verified, 0 differing ranges", "in sync. Cut over with"} {
		if !strings.Contains(out, want) {
			t.Errorf("apply output lacks %q", want)
		}
	}
	out, err = sh("apply", edited)
	if err != nil {
		t.Fatalf("apply again: %v\n%s", err, out)
	}
	t.Logf("$ shardgate apply ks-edited.yaml\n%s", out)
	if !strings.Contains(out, "nothing to change") || !strings.Contains(out, "already moving in workflow clp_orders_") || strings.Contains(out, "applied:") {
		t.Errorf("the same file applied again:\n%s", out)
	}
}
