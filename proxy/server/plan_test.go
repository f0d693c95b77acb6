package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/internal/mariadbtest"
	"github.com/shardgate/shardgate/move"
	"github.com/shardgate/shardgate/proxy/metrics"
	"github.com/shardgate/shardgate/proxy/server"
)

// planYAML is a ks.yaml over the two servers with the given users (each
// with a schema over both nodes) and shard rules (YAML list items) in the
// first user's schema.
func planYAML(servers []*mariadbtest.Server, sidecar string, users []string, rules ...string) string {
	var b strings.Builder
	b.WriteString("addr: 127.0.0.1:0\nuser_list:\n")
	for _, u := range users {
		fmt.Fprintf(&b, "  - user: %s\n    password: %s\n", u, appPassword)
	}
	b.WriteString("nodes:\n")
	for i, s := range servers {
		fmt.Fprintf(&b, "  - name: node%d\n    master: %s\n    user: %s\n    password: %s\n    max_conns_limit: 16\n    down_after_noalive: 1\n",
			i+1, s.Addr, s.User, s.Password)
	}
	b.WriteString("schema_list:\n")
	for i, u := range users {
		fmt.Fprintf(&b, "  - user: %s\n    nodes: [node1, node2]\n    default: node1\n", u)
		if i == 0 {
			b.WriteString("    shard:\n")
			for _, r := range rules {
				b.WriteString(r)
			}
		}
	}
	fmt.Fprintf(&b, "sidecar:\n  node: node1\n  db: %s\n", sidecar)
	return b.String()
}

// hashRule is a rule item of planYAML.
func hashRule(db, table string, locations string) string {
	return fmt.Sprintf("      - db: %s\n        table: %s\n        key: id\n        type: hash\n        nodes: [node1, node2]\n        locations: [%s]\n", db, table, locations)
}

// startFromFile starts a proxy from the ks.yaml text as cmd/proxy does
// (config.Load of a file), with its admin API.
func startFromFile(t *testing.T, text string) (*proxy, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ks.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	p := startProxyWith(t, cfg, server.Options{ConfigPath: path})
	web := newWeb(t, p)
	return p, web
}

func newWeb(t *testing.T, p *proxy) string {
	t.Helper()
	web := httptest.NewServer(p.srv.AdminHandler())
	t.Cleanup(web.Close)
	return web.URL
}

// plan asks the proxy for the plan of text.
func plan(t *testing.T, web, text string) *move.Plan {
	t.Helper()
	resp, err := http.Post(web+"/admin/plan", "application/yaml", strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var p move.Plan
	if resp.StatusCode != 200 {
		t.Fatalf("plan: %d %s", resp.StatusCode, body)
	}
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatal(err)
	}
	return &p
}

// TestPlanApply: a file that adds a user, adds a rule for an empty table
// and changes the rule of a table with rows is planned with each in its
// class; applying it reloads (the user logs in, the new rule routes) and
// starts one reshard workflow; the same file planned and applied again
// changes nothing, also after the cutover; an apply against a stale
// version gets 409, a file with a change a reload cannot make is refused
// with compareConfigs' reason.
func TestPlanApply(t *testing.T) {
	servers := backends(t)
	for _, s := range servers {
		mustExec(t, openDB(t, directDSN(s, "", "")), "DROP DATABASE IF EXISTS pl", "CREATE DATABASE pl", "DROP DATABASE IF EXISTS pl_sidecar")
	}
	before := planYAML(servers, "pl_sidecar", []string{appUser}, hashRule("pl", "t", "1, 1"))
	p, web := startFromFile(t, before)
	app := openDB(t, p.dsn("pl", ""))
	mustExec(t, app, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(100))")
	for i := 0; i < 2000; i += 200 {
		var vals []string
		for j := i; j < i+200; j++ {
			vals = append(vals, fmt.Sprintf("(%d, REPEAT('x', 50))", j))
		}
		mustExec(t, app, "INSERT INTO t VALUES "+strings.Join(vals, ","))
	}
	for i, s := range servers { // TABLE_ROWS, exact
		mustExec(t, openDB(t, directDSN(s, "pl", "")), fmt.Sprintf("ANALYZE TABLE t_%04d", i))
	}

	after := planYAML(servers, "pl_sidecar", []string{appUser, "newbie"}, hashRule("pl", "t", "2, 2"), hashRule("pl", "e", "1, 1"))
	pl := plan(t, web, after)
	b, _ := json.MarshalIndent(pl, "", "  ")
	t.Logf("plan:\n%s", b)
	if !slices.Equal(pl.UsersAdded, []string{"newbie"}) || len(pl.Rules) != 1 || pl.Rules[0].Table != "pl.e" || len(pl.Refused) != 0 || !pl.Reload {
		t.Fatalf("plan: users added %v, rules %v, refused %v", pl.UsersAdded, pl.Rules, pl.Refused)
	}
	if len(pl.Reshards) != 1 || pl.Reshards[0].Table != "pl.t" || !slices.Equal(pl.Reshards[0].To.Locations, []int{2, 2}) ||
		pl.Reshards[0].To.Generation != 1 || pl.Reshards[0].Rows < 1000 || pl.Reshards[0].Bytes <= 0 || pl.Reshards[0].Estimate != "no rate measured yet" {
		t.Fatalf("plan's reshards: %+v", pl.Reshards)
	}

	// A change a reload cannot make: refused, with compareConfigs' reason.
	moved := strings.Replace(after, servers[1].Addr, "127.0.0.1:1", 1)
	if r := plan(t, web, moved); len(r.Refused) != 1 || !strings.Contains(r.Refused[0], "node node2: only slave may change by reload") {
		t.Fatalf("a moved node: refused %q", r.Refused)
	}
	if code, body := admin(t, web, "POST", "/admin/apply", move.ApplyRequest{Config: moved, Version: pl.Version}, nil); code != 409 || !strings.Contains(body, "nothing changed") {
		t.Fatalf("apply of a refused plan: %d %s", code, body)
	}

	var done move.Applied
	if code, body := admin(t, web, "POST", "/admin/apply", move.ApplyRequest{Config: after, Version: pl.Version}, &done); code != 200 {
		t.Fatalf("apply: %d %s", code, body)
	}
	if !done.Reloaded || done.Version != pl.Version+1 || len(done.Started) != 1 {
		t.Fatalf("apply: %+v", done)
	}
	mustExec(t, openDB(t, userDSN("newbie", appPassword, p.addr, "pl", "")), "SELECT 1")
	mustExec(t, app, "CREATE TABLE e (id INT PRIMARY KEY)", "INSERT INTO e VALUES (1), (2)")
	if got := queryValue(t, openDB(t, directDSN(servers[1], "pl", "")), "SELECT COUNT(*) FROM e_0001"); got != "1" {
		t.Fatalf("the new rule does not route: e_0001 holds %s rows", got)
	}
	if code, body := admin(t, web, "POST", "/admin/apply", move.ApplyRequest{Config: after, Version: pl.Version}, nil); code != 409 || !strings.Contains(body, "plan again") {
		t.Fatalf("apply against a stale version: %d %s", code, body)
	}
	st := waitPhase(t, web, done.Started[0], move.PhaseReady, time.Minute)

	again := plan(t, web, after)
	if !again.Empty() || len(again.Reshards) != 1 || again.Reshards[0].Workflow != done.Started[0] || again.CopyRate <= 0 {
		t.Fatalf("the same file planned again: %+v", again)
	}
	t.Logf("planned again while the workflow runs: %s, estimate %s", again.Reshards[0].Workflow, again.Reshards[0].Estimate)
	var twice move.Applied
	if code, body := admin(t, web, "POST", "/admin/apply", move.ApplyRequest{Config: after, Version: again.Version}, &twice); code != 200 || twice.Reloaded || len(twice.Started) != 0 {
		t.Fatalf("the same file applied again: %d %s", code, body)
	}
	if code, body := admin(t, web, "POST", "/admin/workflows/"+st.Spec.Name+"/cutover", nil, nil); code != 200 {
		t.Fatalf("cutover: %d %s", code, body)
	}
	if last := plan(t, web, after); !last.Empty() || len(last.Reshards) != 0 {
		t.Fatalf("the same file after the cutover: %+v", last)
	}
	if got := queryValue(t, app, "SELECT COUNT(*) FROM t"); got != "2000" {
		t.Fatalf("the proxy counts %s rows", got)
	}
}

// TestPlanHundredRules measures a plan of a file with 100 rules: 50 rules
// in force change (reshards: a size query per node each) and 50 new ones
// for empty tables (checked for rows on each node).
func TestPlanHundredRules(t *testing.T) {
	servers := backends(t)
	for _, s := range servers {
		mustExec(t, openDB(t, directDSN(s, "", "")), "DROP DATABASE IF EXISTS pl100", "CREATE DATABASE pl100")
	}
	var before, after []string
	for i := 0; i < 50; i++ {
		before = append(before, hashRule("pl100", fmt.Sprintf("t%d", i), "1, 1"))
		after = append(after, hashRule("pl100", fmt.Sprintf("t%d", i), "2, 2"), hashRule("pl100", fmt.Sprintf("n%d", i), "2, 2"))
	}
	_, web := startFromFile(t, planYAML(servers, "pl100_sidecar", []string{appUser}, before...))
	text := planYAML(servers, "pl100_sidecar", []string{appUser}, after...)
	var took []time.Duration
	for range 5 {
		began := time.Now()
		p := plan(t, web, text)
		took = append(took, time.Since(began))
		if len(p.Reshards) != 50 || len(p.Rules) != 50 || len(p.Refused) != 0 {
			t.Fatalf("plan: %d reshards, %d rules, refused %v", len(p.Reshards), len(p.Rules), p.Refused)
		}
	}
	slices.Sort(took)
	t.Logf("plan of 100 rules (50 reshards, 50 new rules, 2 nodes): min %v, median %v, max %v over %d runs", took[0], took[len(took)/2], took[len(took)-1], len(took))
}

// TestPlanInFleet: a proxy of a fleet plans with the topology version it
// serves, and refuses an apply through its admin API (the topology is in
// etcd; shardgate -etcd apply writes it there).
func TestPlanInFleet(t *testing.T) {
	servers := backends(t)
	text := planYAML(servers, "plf_sidecar", []string{appUser}, hashRule("plf", "t", "1, 1"))
	path := filepath.Join(t.TempDir(), "ks.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	p := startProxyWith(t, cfg, server.Options{Fleet: &server.FleetOptions{Status: func() *metrics.FleetStats { return &metrics.FleetStats{Applied: 17} }}})
	web := newWeb(t, p)
	edited := planYAML(servers, "plf_sidecar", []string{appUser, "newbie"}, hashRule("plf", "t", "1, 1"))
	if pl := plan(t, web, edited); pl.TopologyVersion != 17 || len(pl.UsersAdded) != 1 {
		t.Fatalf("plan in a fleet: %+v", pl)
	}
	if code, body := admin(t, web, "POST", "/admin/apply", move.ApplyRequest{Config: edited, Version: 1}, nil); code != 409 || !strings.Contains(body, "in a fleet the topology is in etcd") {
		t.Fatalf("apply through a fleet proxy's admin API: %d %s", code, body)
	}
}
