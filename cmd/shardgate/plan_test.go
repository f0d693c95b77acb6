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
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/internal/etcdtest"
	"github.com/shardgate/shardgate/move"
	"github.com/shardgate/shardgate/proxy/metrics"
	"github.com/shardgate/shardgate/proxy/server"
	"github.com/shardgate/shardgate/topo"
)

// TestPrintPlan: each class of a plan is printed in its section; an
// empty plan says so.
func TestPrintPlan(t *testing.T) {
	from := config.ShardRule{DB: "shop", Table: "orders", Key: "id", Type: "hash", Nodes: []string{"node1", "node2"}, Locations: []int{1, 1}}
	to := from
	to.Nodes, to.Locations, to.Generation = []string{"node1", "node2", "node3"}, []int{3, 3, 2}, 1
	p := &move.Plan{Version: 7, TopologyVersion: 42, NodesAdded: []string{"node3"}, UsersAdded: []string{"report"}, Reload: true,
		Rules:    []move.PlanRule{{User: "app", Table: "shop.carts", Rule: config.ShardRule{DB: "shop", Table: "carts", Key: "user_id", Type: "hash", Nodes: []string{"node3"}, Locations: []int{4}}}},
		Reshards: []move.PlanReshard{{User: "app", Table: "shop.orders", From: from, To: to, Rows: 1000000, Bytes: 250 << 20, Estimate: "about 7.8s at 128000 rows/s"}},
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
	printPlan(&b, &move.Plan{Version: 3, Reshards: []move.PlanReshard{{Table: "shop.orders", User: "app", From: from, To: to, Workflow: "grow"}}})
	if !strings.Contains(b.String(), "nothing to change") || !strings.Contains(b.String(), "already moving in workflow grow: nothing to start") {
		t.Errorf("a plan whose move runs:\n%s", b.String())
	}
}

// planEnv is a database db on the package's servers whose table orders
// has 3000 rows in subtables orders_0000 (node1) and orders_0001 (node2),
// and the ks.yaml texts over it.
type planEnv struct {
	db, dir string
	nodes   string // the nodes: section
}

func newPlanEnv(t *testing.T, db string) *planEnv {
	t.Helper()
	if cluster == nil {
		t.Skip("integration test: needs MariaDB (skipped under -short)")
	}
	e := &planEnv{db: db, dir: t.TempDir()}
	var nodes strings.Builder
	for i, s := range cluster.Servers {
		fmt.Fprintf(&nodes, "  - name: node%d\n    master: %s\n    user: %s\n    password: %s\n    max_conns_limit: 8\n    down_after_noalive: 1\n", i+1, s.Addr, s.User, s.Password)
		conn, err := sql.Open("mysql", s.DSN(""))
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{"DROP DATABASE IF EXISTS " + db, "DROP DATABASE IF EXISTS " + db + "_sidecar", "CREATE DATABASE " + db,
			fmt.Sprintf("CREATE TABLE %s.orders_%04d (id INT PRIMARY KEY, v TEXT)", db, i),
			fmt.Sprintf("INSERT INTO %s.orders_%04d SELECT seq, REPEAT('x', 100) FROM %s.seq_%d_to_2999_step_2", db, i, db, i),
			fmt.Sprintf("ANALYZE TABLE %s.orders_%04d", db, i)} {
			if _, err := conn.Exec(q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		conn.Close()
	}
	e.nodes = nodes.String()
	return e
}

// rule is a hash rule item over both nodes.
func (e *planEnv) rule(table, locations string) string {
	return fmt.Sprintf("      - db: %s\n        table: %s\n        key: id\n        type: hash\n        nodes: [node1, node2]\n        locations: [%s]\n", e.db, table, locations)
}

// file is a ks.yaml with user app (and the users items given) and rules.
func (e *planEnv) file(users string, rules ...string) string {
	return "addr: 127.0.0.1:0\nuser_list:\n  - user: app\n    password: pw\n" + users + "nodes:\n" + e.nodes +
		"schema_list:\n  - user: app\n    nodes: [node1, node2]\n    default: node1\n    shard:\n" + strings.Join(rules, "") +
		"sidecar:\n  node: node1\n  db: " + e.db + "_sidecar\n"
}

// write writes text to the file name in e's directory.
func (e *planEnv) write(t *testing.T, name, text string) string {
	t.Helper()
	path := filepath.Join(e.dir, name)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// start starts a proxy from text (as ks.yaml) and returns it and a
// function that runs shardgate against its admin API.
func (e *planEnv) start(t *testing.T, text string, o server.Options) (*server.Server, func(args ...string) (string, error)) {
	t.Helper()
	path := e.write(t, "ks.yaml", text)
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	o.Log, o.ConfigPath = zaptest.NewLogger(t), path
	srv, err := server.New(cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	web := httptest.NewServer(srv.AdminHandler())
	t.Cleanup(web.Close)
	return srv, func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(append([]string{"-admin", web.URL}, args...), &out)
		return out.String(), err
	}
}

// TestPlanApplyCommand runs plan and apply -wait against a real proxy
// started from a file: a new user, a rule for an empty table and a rule
// whose table has rows; applying the same file again starts nothing.
func TestPlanApplyCommand(t *testing.T) {
	e := newPlanEnv(t, "clp")
	_, sh := e.start(t, e.file("", e.rule("orders", "1, 1")), server.Options{})
	// The edit: a user, a rule for a table that has no rows yet, and the
	// orders table from 1+1 subtables to 2+2.
	edited := e.write(t, "ks-edited.yaml", e.file("  - user: report\n    password: pw\n", e.rule("orders", "2, 2"), e.rule("carts", "1, 1")))
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

// TestPlanApplyFleet: with -etcd the plan is refused unless the proxy
// serves etcd's topology version; apply stores the file in etcd with the
// moving table keeping its rule (compare-and-swap on the planned
// revision) and starts the workflow through the proxy. The proxy here is
// not driven by a fleet agent: the test reloads it with what etcd holds.
func TestPlanApplyFleet(t *testing.T) {
	e := newPlanEnv(t, "clf")
	etcd := etcdtest.Start(t)
	ctx := t.Context()
	st, err := topo.Open(ctx, topo.Options{Endpoints: etcd.Endpoints(), Prefix: "/clf"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	before := e.file("", e.rule("orders", "1, 1"))
	rev, err := st.Put(ctx, []byte(before), -1)
	if err != nil {
		t.Fatal(err)
	}
	var served atomic.Int64
	served.Store(rev)
	srv, sh := e.start(t, before, server.Options{Fleet: &server.FleetOptions{Status: func() *metrics.FleetStats {
		return &metrics.FleetStats{Applied: served.Load()}
	}}})
	fleet := []string{"-etcd", etcd.Endpoints()[0], "-cluster", "/clf"}
	edited := e.write(t, "ks-edited.yaml", e.file("  - user: report\n    password: pw\n", e.rule("orders", "2, 2"), e.rule("carts", "1, 1")))
	out, err := sh(append(fleet, "plan", edited)...)
	if err != nil || !strings.Contains(out, fmt.Sprintf("(topology version %d)", rev)) {
		t.Fatalf("plan: %v\n%s", err, out)
	}
	out, err = sh(append(fleet, "apply", edited)...)
	if err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	t.Logf("$ shardgate -etcd ... apply ks-edited.yaml\n%s", out)
	v, err := st.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, fmt.Sprintf("applied: topology version %d stored", v.Rev)) || !strings.Contains(out, "workflow clf_orders_") {
		t.Fatalf("apply output:\n%s", out)
	}
	cfg, err := config.Parse(v.YAML)
	if err != nil {
		t.Fatal(err)
	}
	if r := cfg.Schemas[0].Shard; len(r) != 2 || r[0].Table != "orders" || r[0].Locations[0] != 1 || r[1].Table != "carts" || len(cfg.Users) != 2 {
		t.Fatalf("etcd holds rules %+v, users %+v", r, cfg.Users)
	}
	// The proxy has not applied the new version: plans are refused.
	if out, err := sh(append(fleet, "apply", edited)...); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("serves topology version %d, etcd holds version %d", rev, v.Rev)) {
		t.Fatalf("apply while the proxy serves an older version: %v\n%s", err, out)
	}
	if err := srv.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	served.Store(v.Rev)
	out, err = sh(append(fleet, "apply", edited)...)
	if err != nil || !strings.Contains(out, "nothing to change") || strings.Contains(out, "applied:") {
		t.Fatalf("the same file applied again: %v\n%s", err, out)
	}
	if v2, _ := st.Get(ctx); v2.Rev != v.Rev {
		t.Fatalf("the second apply wrote etcd: revision %d -> %d", v.Rev, v2.Rev)
	}
}
