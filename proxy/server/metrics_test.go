package server_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/digest"
)

// scrape reads /metrics into name{labels} -> value.
func scrape(t *testing.T, base string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if l == "" || l[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(l, ' ')
		v, err := strconv.ParseFloat(l[i+1:], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", l, err)
		}
		out[l[:i]] = v
	}
	return out
}

// metricsEnv is a proxy over both servers with mx.t hash-sharded into 4
// subtables, its admin handler, and sysbench's table in mx too.
func metricsEnv(t *testing.T, name string) (*proxy, *httptest.Server) {
	t.Helper()
	servers := backends(t)
	cfg := newConfig(t, servers...)
	for i := range cfg.Nodes {
		cfg.Nodes[i].MaxConnsLimit = 16
	}
	for _, s := range servers {
		mustExec(t, openDB(t, directDSN(s, "", "")), "DROP DATABASE IF EXISTS "+name, "CREATE DATABASE "+name)
	}
	cfg.Schemas[0].Shard = []config.ShardRule{{DB: name, Table: "t", Key: "id", Type: "hash", Nodes: []string{"node1", "node2"}, Locations: []int{2, 2}},
		{DB: name, Table: "sbtest1", Key: "id", Type: "hash", Nodes: []string{"node1", "node2"}, Locations: []int{1, 1}, Sequence: "id", SequenceBlock: 1000}}
	cfg.Sidecar = config.Sidecar{Node: "node1", DB: name + "_sidecar"}
	p := startProxy(t, cfg)
	web := httptest.NewServer(p.srv.AdminHandler())
	t.Cleanup(web.Close)
	return p, web
}

// TestMetricsUnderLoad: while sysbench oltp_read_only reads through the
// proxy, the test sends statements of kinds sysbench does not (updates
// by key, deletes without one, statements that fail with known codes);
// /metrics counts exactly those, by kind, route and error code, and the
// digest has their shapes with exactly those counts.
func TestMetricsUnderLoad(t *testing.T) {
	p, web := metricsEnv(t, "mx")
	db := openDB(t, p.dsn("mx", ""))
	mustExec(t, db, "CREATE TABLE t (id INT PRIMARY KEY, v INT)")
	for i := 0; i < 100; i++ {
		mustExec(t, db, fmt.Sprintf("INSERT INTO t VALUES (%d, 0)", i))
	}
	bin, args := sysbenchFor(t, p, "mx", 2000)
	bench := exec.Command(bin, append([]string{"oltp_read_only"}, append(slices.Clone(args[1:]), "--threads=2", "--time=0", "--events=0", "--skip-trx=on", "run")...)...)
	if err := bench.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		bench.Process.Signal(os.Interrupt)
		bench.Wait()
	}()
	time.Sleep(time.Second) // sysbench is reading
	before := scrape(t, web.URL)
	const updates, deletes, missing, syntax = 37, 11, 7, 3
	for i := 0; i < updates; i++ {
		mustExec(t, db, fmt.Sprintf("UPDATE t SET v = v + 1 WHERE id = %d", i))
	}
	for i := 0; i < deletes; i++ {
		mustExec(t, db, fmt.Sprintf("DELETE FROM t WHERE v = %d", 1000+i))
	}
	for i := 0; i < missing; i++ {
		_, err := db.Exec(fmt.Sprintf("SELECT * FROM no_such_table WHERE x = %d", i))
		wantSQLError(t, err, 1146, "42S02")
	}
	for i := 0; i < syntax; i++ {
		_, err := db.Exec("SELEC 1")
		wantSQLError(t, err, 1064, "42000")
	}
	after := scrape(t, web.URL)
	delta := func(k string) float64 { return after[k] - before[k] }
	for k, want := range map[string]float64{
		`shardgate_statements_total{kind="update",route="single"}`:  updates,
		`shardgate_statements_total{kind="delete",route="scatter"}`: deletes,
		`shardgate_client_errors_total{code="1146"}`:                missing,
		`shardgate_client_errors_total{code="1064"}`:                syntax,
	} {
		if got := delta(k); got != want {
			t.Errorf("%s grew by %v, want %v", k, got, want)
		}
	}
	if got := delta(`shardgate_statements_total{kind="select",route="single"}`); got <= 0 {
		t.Errorf("sysbench's point selects were not counted: %v", got)
	}
	if got := delta(`shardgate_statements_total{kind="select",route="merge"}`); got <= 0 {
		t.Errorf("sysbench's ordered range selects were not counted as merges: %v", got)
	}
	if after[`shardgate_backend_statements_total{node="node1",role="master"}`] <= 0 || after[`shardgate_backend_up{node="node2"}`] != 1 {
		t.Errorf("per node: %v %v", after[`shardgate_backend_statements_total{node="node1",role="master"}`], after[`shardgate_backend_up{node="node2"}`])
	}
	if after[`shardgate_statement_duration_seconds_count{route="single"}`] <= before[`shardgate_statement_duration_seconds_count{route="single"}`] {
		t.Error("the latency histogram did not grow")
	}
	// The digest: the test's shapes with their exact counts.
	resp, err := http.Get(web.URL + "/admin/digest")
	if err != nil {
		t.Fatal(err)
	}
	var rows []digest.Row
	json.NewDecoder(resp.Body).Decode(&rows)
	resp.Body.Close()
	want := map[string]uint64{"update t set v=v+? where id=?": updates, "delete from t where v=?": deletes, "select*from no_such_table where x=?": missing}
	for _, r := range rows {
		if n, ok := want[r.Fingerprint]; ok {
			if r.Count != n || r.User != appUser || r.Schema != "mx" {
				t.Errorf("digest %q: %+v, want count %d", r.Fingerprint, r, n)
			}
			if r.Fingerprint == "select*from no_such_table where x=?" && r.Errors != missing {
				t.Errorf("digest %q: %d errors, want %d", r.Fingerprint, r.Errors, missing)
			}
			delete(want, r.Fingerprint)
		}
	}
	if len(want) > 0 {
		var fps []string
		for _, r := range rows {
			fps = append(fps, r.Fingerprint)
		}
		t.Errorf("digest lacks %v; it has %q", want, fps)
	}
	// The same through admin SQL is for admin_user only.
	_, err = db.Exec("show shardgate digest")
	wantSQLError(t, err, 1227, "42000")
	resp, _ = http.Post(web.URL+"/admin/digest?reset=1", "text/plain", nil)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

// TestGrafanaDashboard: every metric the dashboard in etc/ queries is one
// the proxy exports (those of replicas and workflows only while they
// exist, client errors once there was one).
func TestGrafanaDashboard(t *testing.T) {
	_, web := metricsEnv(t, "graf")
	b, err := os.ReadFile("../../etc/grafana-shardgate.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(web.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	exposed, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	re := regexp.MustCompile(`shardgate_[a-z_]+`)
	n := 0
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, name := range re.FindAllString(tg.Expr, -1) {
				n++
				if strings.HasPrefix(name, "shardgate_replica_") || strings.HasPrefix(name, "shardgate_workflow_") || strings.HasPrefix(name, "shardgate_xa_") ||
					name == "shardgate_client_errors_total" {
					continue
				}
				if !strings.Contains(string(exposed), "# TYPE "+strings.TrimSuffix(name, "_bucket")+" ") {
					t.Errorf("panel %q queries %s, which /metrics does not export", p.Title, name)
				}
			}
		}
	}
	if len(dash.Panels) < 10 || n < 20 {
		t.Fatalf("%d panels, %d metric references", len(dash.Panels), n)
	}
}
