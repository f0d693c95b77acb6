package server_test

import (
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
// statement; a file that does not parse, a changed shard rule and a moved
// node change nothing and say why.
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
	stop := make(chan struct{})
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
				case <-stop:
					return
				default:
				}
				id := w*1_000_000 + i
				_, err := c.ExecContext(t.Context(), fmt.Sprintf("INSERT INTO rl.sh VALUES (%d, %d)", id, w))
				if err == nil {
					var v int
					err = c.QueryRowContext(t.Context(), fmt.Sprintf("SELECT v FROM rl.sh WHERE id = %d", id)).Scan(&v)
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
	defer func() {
		close(stop)
		wg.Wait()
		t.Logf("%d write-and-read pairs under the reloads, %d failed", ops, len(failures))
		if len(failures) > 0 {
			t.Errorf("statements failed during the reloads: %q", failures[:min(len(failures), 5)])
		}
	}()
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
		{"rule change", reloadYAML(master, replicas[0].Addr, []string{appUser}, "range"), "online resharding"},
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
