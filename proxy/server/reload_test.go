package server_test

import (
	"database/sql"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/internal/mariadbtest"
	"github.com/shardgate/shardgate/proxy/server"
)

// reloadYAML is a ks.yaml for one node over master with the given
// replicas (slave), users and shard rule type for table sh.
func reloadYAML(master *mariadbtest.Server, slave string, users []string, rule string) string {
	var b strings.Builder
	b.WriteString("addr: 127.0.0.1:0\nuser_list:\n")
	for _, u := range users {
		fmt.Fprintf(&b, "  - user: %s\n    password: %s\n", u, appPassword)
	}
	fmt.Fprintf(&b, "nodes:\n  - name: node1\n    master: %s\n    user: %s\n    password: %s\n    max_conns_limit: 16\n    down_after_noalive: 1\n",
		master.Addr, master.User, master.Password)
	if slave != "" {
		fmt.Fprintf(&b, "    slave: %s\n", slave)
	}
	b.WriteString("schema_list:\n")
	for _, u := range users {
		fmt.Fprintf(&b, "  - user: %s\n    nodes: [node1]\n    default: node1\n    shard:\n      - db: rl\n        table: sh\n        key: id\n        type: %s\n        nodes: [node1]\n        locations: [2]\n", u, rule)
		if rule == "range" {
			b.WriteString("        table_row_limit: 100\n")
		}
	}
	b.WriteString("backend:\n  health_interval: 100ms\n  max_replica_lag: 2s\n")
	return b.String()
}

// TestReload: under a steady load of reads and writes, a reload from the
// file (SIGHUP's path, and POST /admin/reload) that adds a user and a
// replica takes effect without dropping a connection or failing a
// statement; a file that does not parse and a moved node change nothing
// and say why (a changed shard rule waits for shardgate apply:
// TestReloadHoldsMoves).
func TestReload(t *testing.T) {
	master, replicas := replicaSet(t)
	path := filepath.Join(t.TempDir(), "ks.yaml")
	write := func(text string) {
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(reloadYAML(master, replicas[0].Addr, []string{appUser}, "hash"))
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	p := startProxyWith(t, cfg, server.Options{ConfigPath: path})
	waitUsable(t, p, replicas[0].Addr, true)
	db := openDB(t, p.dsn("", ""))
	mustExec(t, db, "CREATE DATABASE rl", "CREATE TABLE rl.plain (id INT PRIMARY KEY, v INT)",
		"CREATE TABLE rl.sh_0000 (id INT PRIMARY KEY, v INT)", "CREATE TABLE rl.sh_0001 (id INT PRIMARY KEY, v INT)")

	// The load: four sessions, each its own connection, for the whole test.
	defer writeReadLoad(t, db, "rl.sh", "under the reloads")()
	// And sysbench, as an application: it must end without an error or a
	// reconnect (one thread: two deadlock now and then in oltp_read_write,
	// which sysbench counts as ignored errors).
	mustExec(t, db, "CREATE DATABASE sbrl")
	sb, sbArgs := sysbenchFor(t, p, "sbrl", 1000)
	sbRun := exec.Command(sb, append(slices.Clone(sbArgs), "--threads=1", "--time=4", "--report-interval=0", "run")...)
	var sbOut strings.Builder
	sbRun.Stdout, sbRun.Stderr = &sbOut, &sbOut
	if err := sbRun.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := sbRun.Wait(); err != nil {
			t.Errorf("sysbench under the reloads: %v\n%s", err, sbOut.String())
			return
		}
		out := sbOut.String()
		if !strings.Contains(out, "ignored errors:                      0") || !strings.Contains(out, "reconnects:                          0") {
			t.Errorf("sysbench under the reloads had errors or reconnects:\n%s", out)
		}
		t.Logf("sysbench under the reloads:\n%s", out)
	}()
	time.Sleep(300 * time.Millisecond)

	// Refused: nothing changes, and the error says why.
	refused := []struct{ name, text, want string }{
		{"bad YAML", reloadYAML(master, replicas[0].Addr, []string{appUser}, "hash") + "nodes: [\n", "line"},
		{"moved node", strings.Replace(reloadYAML(master, replicas[0].Addr, []string{appUser}, "hash"), "master: "+master.Addr, "master: "+replicas[1].Addr, 1), "nodes changed"},
	}
	for _, tc := range refused {
		write(tc.text)
		err := p.srv.ReloadFile(path)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "nothing changed") {
			t.Errorf("%s: reload gave %v, want a refusal mentioning %q", tc.name, err, tc.want)
		}
	}
	if got := len(p.srv.Stats().Nodes[0].Replicas); got != 1 {
		t.Errorf("after refused reloads node1 has %d replicas, want 1", got)
	}

	// Accepted, through the admin HTTP endpoint: a new user and replica.
	write(reloadYAML(master, replicas[0].Addr+"@1,"+replicas[1].Addr+"@1", []string{appUser, "app2"}, "hash"))
	rec := httptest.NewRecorder()
	p.srv.AdminHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/admin/reload", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("POST /admin/reload: %d %s", rec.Code, rec.Body)
	}
	t.Logf("POST /admin/reload: %s", strings.TrimSpace(rec.Body.String()))
	waitUsable(t, p, replicas[1].Addr, true)
	db2 := openDB(t, userDSN("app2", appPassword, p.addr, "rl", ""))
	queryValue(t, db2, "SELECT COUNT(*) FROM plain")
	before := comSelect(t, replicas[1])
	for i := 0; i < 200; i++ {
		queryValue(t, db2, "SELECT COUNT(*) FROM plain")
	}
	if got := comSelect(t, replicas[1]) - before; got < 50 {
		t.Errorf("the replica added by the reload served %d of 200 reads", got)
	}

	// And back: removing the replica closes its pool; reads go on.
	write(reloadYAML(master, replicas[0].Addr, []string{appUser, "app2"}, "hash"))
	if err := p.srv.ReloadFile(path); err != nil {
		t.Fatal(err)
	}
	if got := len(p.srv.Stats().Nodes[0].Replicas); got != 1 {
		t.Errorf("after removing a replica node1 has %d, want 1", got)
	}
	time.Sleep(300 * time.Millisecond)
}

// TestReloadAddsNodesAndRules: one reload adds a node, a user whose schema
// uses it and a shard rule on an empty table (for the new user and for the
// existing one, whose schema gains the node): the new user logs in and its
// rows land on the subtables the rule names, a session of the old user
// that began before the reload uses the new rule, and the old user's
// clients run through every reload without an error. A rule for a table
// that has rows, and the removal of a node a schema uses, are refused and
// change nothing; a node no schema uses may come and go.
func TestReloadAddsNodesAndRules(t *testing.T) {
	srvs := backends(t)
	s1, s2 := srvs[0], srvs[1]
	dbSetup(t, s1, "rn")
	dbSetup(t, s2, "rn")
	d1, d2 := openDB(t, directDSN(s1, "rn", "")), openDB(t, directDSN(s2, "rn", ""))
	mustExec(t, d1, "CREATE TABLE plain (id INT PRIMARY KEY, v INT)",
		"CREATE TABLE t_0000 (id INT PRIMARY KEY, v INT)", "CREATE TABLE t_0001 (id INT PRIMARY KEY, v INT)",
		"CREATE TABLE full_0000 (id INT PRIMARY KEY)", "CREATE TABLE full_0001 (id INT PRIMARY KEY)")
	mustExec(t, d2, "CREATE TABLE t_0002 (id INT PRIMARY KEY, v INT)", "CREATE TABLE t_0003 (id INT PRIMARY KEY, v INT)",
		"CREATE TABLE full_0002 (id INT PRIMARY KEY)", "CREATE TABLE full_0003 (id INT PRIMARY KEY)", "INSERT INTO full_0003 VALUES (3)")

	// app3's schema gains the rule later, when t has rows: another schema
	// has it in force already, so it places nothing new.
	app3 := func(cfg *config.Config, rule *config.ShardRule) {
		cfg.Users = append(cfg.Users, config.User{User: "app3", Password: appPassword})
		sc := config.Schema{User: "app3", Nodes: []string{"node1"}, Default: "node1"}
		if rule != nil {
			sc.Nodes, sc.Shard = []string{"node1", "node2"}, []config.ShardRule{*rule}
		}
		cfg.Schemas = append(cfg.Schemas, sc)
	}
	start := newConfig(t, s1)
	app3(start, nil)
	p := startProxy(t, start)
	db := openDB(t, p.dsn("rn", ""))
	before := conn(t, db) // a session of the old user from before the reloads
	queryValue(t, before, "SELECT COUNT(*) FROM plain")

	// The old user's load, for the whole test: each worker its own session.
	stopLoad := writeReadLoad(t, db, "plain", "of the old user under the reloads")
	defer stopLoad()

	// next is the configuration with node2, the user app2 and a rule for
	// table on both nodes, for app2 and app (and app3 with app3Rule).
	next := func(table string, app3Rule bool, extra ...config.Node) *config.Config {
		cfg := newConfig(t, s1, s2)
		cfg.Nodes = append(cfg.Nodes, extra...)
		cfg.Users = append(cfg.Users, config.User{User: "app2", Password: appPassword})
		rule := config.ShardRule{DB: "rn", Table: table, Key: "id", Type: "hash", Nodes: []string{"node1", "node2"}, Locations: []int{2, 2}}
		cfg.Schemas = []config.Schema{
			{User: appUser, Nodes: []string{"node1", "node2"}, Default: "node1", Shard: []config.ShardRule{rule}},
			{User: "app2", Nodes: []string{"node1", "node2"}, Default: "node1", Shard: []config.ShardRule{rule}},
		}
		if app3Rule {
			app3(cfg, &rule)
		} else {
			app3(cfg, nil)
		}
		return cfg
	}
	time.Sleep(200 * time.Millisecond) // the load is running

	// Refused: full_0003 on node2 has a row. Nothing changes, node2's pool
	// included.
	err := p.srv.Reload(next("full", false))
	if err == nil || !strings.Contains(err.Error(), "online resharding") || !strings.Contains(err.Error(), "full_0003 on node node2") ||
		!strings.Contains(err.Error(), "nothing changed") {
		t.Fatalf("a rule for a table with rows: reload gave %v, want a refusal naming full_0003 on node2", err)
	}
	t.Logf("refused: %v", err)
	if n := len(p.srv.Stats().Nodes); n != 1 {
		t.Errorf("after the refused reload the proxy has %d nodes, want 1", n)
	}
	if err := openDB(t, userDSN("app2", appPassword, p.addr, "rn", "")).Ping(); err == nil {
		t.Errorf("app2 logged in after the refused reload")
	}

	// Accepted: node2, app2, and the rule for t.
	begin := time.Now()
	if err := p.srv.Reload(next("t", false)); err != nil {
		t.Fatal(err)
	}
	t.Logf("reload adding 1 node, 1 user and 2 rules (2 nodes checked for rows): %v", time.Since(begin))
	st := p.srv.Stats()
	if len(st.Nodes) != 2 || st.Nodes[1].Name != "node2" || !st.Nodes[1].Up {
		t.Fatalf("after the reload the nodes are %+v, want node1 and node2 up", st.Nodes)
	}
	rec := httptest.NewRecorder()
	p.srv.AdminHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if !strings.Contains(rec.Body.String(), `"node2"`) {
		t.Errorf("/healthz does not list the new node: %s", rec.Body)
	}

	db2 := openDB(t, userDSN("app2", appPassword, p.addr, "rn", ""))
	for id := 0; id < 8; id++ {
		mustExec(t, db2, fmt.Sprintf("INSERT INTO t VALUES (%d, %d)", id, 10*id))
	}
	for _, c := range []struct {
		db   *sql.DB
		sub  string
		want string
	}{{d1, "t_0000", "0,4"}, {d1, "t_0001", "1,5"}, {d2, "t_0002", "2,6"}, {d2, "t_0003", "3,7"}} {
		if got := queryValue(t, c.db, "SELECT GROUP_CONCAT(id ORDER BY id) FROM "+c.sub); got != c.want {
			t.Errorf("%s holds ids %s, want %s", c.sub, got, c.want)
		}
	}
	if got := queryValue(t, db2, "SELECT v FROM t WHERE id = 6"); got != "60" {
		t.Errorf("app2 reads v = %s for id 6 (node2), want 60", got)
	}
	// The old user's session from before the reload follows the new rule
	// to the new node.
	if got := queryValue(t, before, "SELECT COUNT(*) FROM t"); got != "8" {
		t.Errorf("the old session counts %s rows of t, want 8", got)
	}
	mustExec(t, before, "UPDATE t SET v = 0 WHERE id = 7")
	if got := queryValue(t, d2, "SELECT v FROM t_0003 WHERE id = 7"); got != "0" {
		t.Errorf("the old session's update of id 7 left v = %s on node2, want 0", got)
	}

	// Refused: node2 is removed while the schemas in force use it (here
	// with app2, and with node2 and the rule from app's schema: the file
	// validates, the schemas of the sessions connected do not allow it).
	gone := newConfig(t, s1)
	app3(gone, nil)
	gone.Users = append(gone.Users, config.User{User: "app2", Password: appPassword})
	gone.Schemas = append(gone.Schemas, config.Schema{User: "app2", Nodes: []string{"node1"}, Default: "node1"})
	err = p.srv.Reload(gone)
	t.Logf("refused: %v", err)
	if err == nil || !strings.Contains(err.Error(), "a node in use by schema app, app2") {
		t.Errorf("removing node2: reload gave %v, want a refusal naming the schemas that use it", err)
	}
	// A node no schema uses comes and goes.
	spare := config.Node{Name: "node3", Master: s2.Addr, User: s2.User, Password: s2.Password, MaxConnsLimit: 2, DownAfterNoalive: 1}
	if err := p.srv.Reload(next("t", false, spare)); err != nil {
		t.Fatalf("adding an unused node: %v", err)
	}
	if n := len(p.srv.Stats().Nodes); n != 3 {
		t.Errorf("after adding node3 the proxy has %d nodes, want 3", n)
	}
	if err := p.srv.Reload(next("t", false)); err != nil {
		t.Fatalf("removing an unused node: %v", err)
	}
	if n := len(p.srv.Stats().Nodes); n != 2 {
		t.Errorf("after removing node3 the proxy has %d nodes, want 2", n)
	}
	// A changed rule is still a reshard.
	changed := next("t", false)
	changed.Schemas[0].Shard[0].Locations = []int{1, 3}
	if err := p.srv.Reload(changed); err == nil || !strings.Contains(err.Error(), "online resharding") {
		t.Errorf("a changed rule: reload gave %v, want a refusal pointing to online resharding", err)
	}
	// app3 gains the rule app and app2 have, although t has rows now.
	if err := p.srv.Reload(next("t", true)); err != nil {
		t.Fatalf("adding a rule another schema has in force: %v", err)
	}
	if got := queryValue(t, openDB(t, userDSN("app3", appPassword, p.addr, "rn", "")), "SELECT COUNT(*) FROM t"); got != "8" {
		t.Errorf("app3 counts %s rows of t, want 8", got)
	}

	// What a reload costs: 8 nodes added at once (each started and
	// checked), then removed; a rule of 64 subtables (none exists yet:
	// 64 + 2 reads).
	var many []config.Node
	for i := 0; i < 8; i++ {
		s := srvs[i%2]
		many = append(many, config.Node{Name: fmt.Sprintf("extra%d", i), Master: s.Addr, User: s.User, Password: s.Password, MaxConnsLimit: 2, DownAfterNoalive: 1})
	}
	begin = time.Now()
	if err := p.srv.Reload(next("t", true, many...)); err != nil {
		t.Fatal(err)
	}
	t.Logf("reload adding 8 nodes: %v", time.Since(begin))
	begin = time.Now()
	if err := p.srv.Reload(next("t", true)); err != nil {
		t.Fatal(err)
	}
	t.Logf("reload removing 8 unused nodes: %v", time.Since(begin))
	wide := next("t", true)
	wide.Schemas[0].Shard = append(wide.Schemas[0].Shard, config.ShardRule{DB: "rn", Table: "wide", Key: "id", Type: "hash",
		Nodes: []string{"node1", "node2"}, Locations: []int{32, 32}})
	begin = time.Now()
	if err := p.srv.Reload(wide); err != nil {
		t.Fatal(err)
	}
	t.Logf("reload adding a rule of 64 subtables: %v", time.Since(begin))
	time.Sleep(200 * time.Millisecond) // the load runs on after the reloads
	stopLoad()
}

// writeReadLoad runs four sessions, each its own connection of db, that
// insert a row into table and read it back until the returned function is
// called; that function (safe to call twice) stops them and fails the test
// if any statement failed. what names the load in the log.
func writeReadLoad(t *testing.T, db *sql.DB, table, what string) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []string
	ops := 0
	for w := 0; w < 4; w++ {
		wg.Go(func() {
			c, err := db.Conn(t.Context())
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				id := w*1_000_000 + i
				_, err := c.ExecContext(t.Context(), fmt.Sprintf("INSERT INTO %s VALUES (%d, %d)", table, id, w))
				if err == nil {
					var v int
					err = c.QueryRowContext(t.Context(), fmt.Sprintf("SELECT v FROM %s WHERE id = %d", table, id)).Scan(&v)
				}
				mu.Lock()
				ops++
				if err != nil {
					failures = append(failures, err.Error())
				}
				mu.Unlock()
			}
		})
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			wg.Wait()
			t.Logf("%d write-and-read pairs %s, %d failed", ops, what, len(failures))
			if len(failures) > 0 {
				t.Errorf("statements failed (%s): %q", what, failures[:min(len(failures), 5)])
			}
		})
	}
}
