package server_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/move"
	"github.com/shardgate/shardgate/proxy/server"
)

// TestReloadHoldsMoves: a reload of an edited file (POST /admin/reload,
// and SIGHUP's ReloadFile) applies what moves no rows (a new user, a rule
// for an empty table) and keeps the rules in force of the edits that
// would move rows: a changed rule of a table with rows, a rule the file
// dropped, and a new rule for a table that has rows. The answer names
// each; no workflow starts. The reshard starts with an explicit apply of
// the file.
func TestReloadHoldsMoves(t *testing.T) {
	servers := backends(t)
	for _, s := range servers {
		mustExec(t, openDB(t, directDSN(s, "", "")), "DROP DATABASE IF EXISTS rh", "CREATE DATABASE rh", "DROP DATABASE IF EXISTS rh_sidecar")
	}
	path := filepath.Join(t.TempDir(), "ks.yaml")
	write := func(text string) {
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(planYAML(servers, "rh_sidecar", []string{appUser}, hashRule("rh", "t", "1, 1"), hashRule("rh", "gone", "1, 1")))
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	p := startProxyWith(t, cfg, server.Options{ConfigPath: path})
	web := newWeb(t, p)
	app := openDB(t, p.dsn("rh", ""))
	mustExec(t, app, "CREATE TABLE t (id INT PRIMARY KEY, v INT)", "CREATE TABLE gone (id INT PRIMARY KEY)")
	var vals []string
	for i := 0; i < 100; i++ {
		vals = append(vals, fmt.Sprintf("(%d, %d)", i, i))
	}
	mustExec(t, app, "INSERT INTO t VALUES "+strings.Join(vals, ","))
	d1, d2 := openDB(t, directDSN(servers[0], "rh", "")), openDB(t, directDSN(servers[1], "rh", ""))
	mustExec(t, d1, "CREATE TABLE full (id INT PRIMARY KEY)", "INSERT INTO full VALUES (1)")

	// The edit: a new user, a rule for the empty table e, t from 1+1 to
	// 2+2 subtables, gone's rule dropped, a rule for full (which has a
	// row, unsharded on node1).
	edited := planYAML(servers, "rh_sidecar", []string{appUser, "newbie"}, hashRule("rh", "t", "2, 2"), hashRule("rh", "e", "1, 1"), hashRule("rh", "full", "1, 1"))
	write(edited)
	code, body := admin(t, web, http.MethodPost, "/admin/reload", nil, nil)
	t.Logf("POST /admin/reload: %d\n%s", code, body)
	if code != 200 {
		t.Fatalf("POST /admin/reload: %d %s", code, body)
	}
	for _, want := range []string{"waits for shardgate apply: rh.t (user app)", "waits for shardgate apply: rh.gone (user app)",
		"waits for shardgate apply: rh.full (user app): the new rule is left out"} {
		if !strings.Contains(body, want) {
			t.Errorf("the reload's answer does not say %q", want)
		}
	}
	// Applied: the user and the rule of the empty table.
	mustExec(t, openDB(t, userDSN("newbie", appPassword, p.addr, "rh", "")), "SELECT 1")
	mustExec(t, app, "CREATE TABLE e (id INT PRIMARY KEY)", "INSERT INTO e VALUES (1), (2)")
	if got := queryValue(t, d2, "SELECT COUNT(*) FROM e_0001"); got != "1" {
		t.Errorf("the new rule of e does not route: e_0001 holds %s rows", got)
	}
	// Kept: t, gone and full route as before.
	mustExec(t, app, "INSERT INTO t VALUES (101, 101)", "INSERT INTO gone VALUES (1)")
	if got := queryValue(t, d2, "SELECT COUNT(*) FROM t_0001"); got != "51" {
		t.Errorf("t_0001 (the rule in force) holds %s rows, want 51", got)
	}
	if got := queryValue(t, d2, "SELECT COUNT(*) FROM gone_0001"); got != "1" {
		t.Errorf("gone's rule in force does not route: gone_0001 holds %s rows", got)
	}
	if got := queryValue(t, app, "SELECT COUNT(*) FROM full"); got != "1" {
		t.Errorf("full through the proxy counts %s rows, want its 1 on node1", got)
	}
	var flows []move.Status
	if code, body := admin(t, web, http.MethodGet, "/admin/workflows", nil, &flows); code != 200 || len(flows) != 0 {
		t.Fatalf("after the reload: workflows %d %s, want none", code, body)
	}
	// SIGHUP's path: the same file again changes nothing more.
	if err := p.srv.ReloadFile(path); err != nil {
		t.Fatalf("ReloadFile of the same file: %v", err)
	}

	// The explicit apply (of the file without the changes it refuses)
	// starts the reshard the reload kept back.
	applied := planYAML(servers, "rh_sidecar", []string{appUser, "newbie"}, hashRule("rh", "t", "2, 2"), hashRule("rh", "e", "1, 1"), hashRule("rh", "gone", "1, 1"))
	pl := plan(t, web, applied)
	if len(pl.Reshards) != 1 || pl.Reshards[0].Table != "rh.t" || len(pl.Refused) != 0 {
		t.Fatalf("plan after the reload: reshards %+v, refused %q", pl.Reshards, pl.Refused)
	}
	var done move.Applied
	if code, body := admin(t, web, http.MethodPost, "/admin/apply", move.ApplyRequest{Config: applied, Version: pl.Version}, &done); code != 200 || len(done.Started) != 1 {
		t.Fatalf("apply: %d %s", code, body)
	}
	waitPhase(t, web, done.Started[0], move.PhaseReady, time.Minute)
	if code, body := admin(t, web, http.MethodPost, "/admin/workflows/"+done.Started[0]+"/cancel", nil, nil); code != 200 {
		t.Fatalf("cancel: %d %s", code, body)
	}
}
