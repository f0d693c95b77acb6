package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/fleet"
	"github.com/shardgate/shardgate/internal/etcdtest"
	"github.com/shardgate/shardgate/internal/mariadbtest"
	"github.com/shardgate/shardgate/proxy/metrics"
	"github.com/shardgate/shardgate/proxy/server"
	"github.com/shardgate/shardgate/topo"
)

// TestStatusPageInBrowser loads the status page in headless Chromium,
// driven over the DevTools protocol, against a proxy under load: two
// sharded nodes and a third with two read replicas, in a fleet of two
// proxies; point reads, a merge,
// multi-row INSERTs of 1 to 40 rows, a change stream open. It checks what
// the page rendered (nodes, replicas, charts, the digest with the
// multi-row INSERT as one shape) and its layout, read from the rendered
// page's boxes: in every table each cell's text lies under its column's
// heading (their x-ranges overlap) and inside its cell, every row has as
// many columns as the heading, the page does not overflow sideways, and
// every chart has a time axis and a value axis whose labels carry a unit.
//
// STATUS_SCREENSHOT=dir (absolute: the test runs in proxy/server) also runs sysbench oltp_read_write, a reshard of
// sbtest1 and a replica held behind, waits STATUS_SECONDS (default 40) so
// that the charts fill, and saves dir/status.png (the whole page) and
// dir/status-*.png (its sections): docs/status*.png.
func TestStatusPageInBrowser(t *testing.T) {
	browser, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium is not installed: scripts/deps.sh chromium (or apt-get install -y chromium)")
	}
	shots := os.Getenv("STATUS_SCREENSHOT")
	p, web, masters, replicas := statusEnv(t)
	db := openDB(t, p.dsn("status", ""))
	mustExec(t, db, "CREATE TABLE t (id INT PRIMARY KEY, v INT)", "CREATE TABLE r (id INT PRIMARY KEY, v INT)", "CREATE TABLE log (id INT PRIMARY KEY, v INT)")
	for i := 0; i < 50; i++ {
		mustExec(t, db, fmt.Sprintf("INSERT INTO t VALUES (%d, %d)", i, i), fmt.Sprintf("INSERT INTO r VALUES (%d, %d)", i, i))
	}
	// Point reads the result cache keeps and answers (its table).
	for i := 0; i < 40; i++ {
		queryStrings(t, db, fmt.Sprintf("SELECT v FROM t WHERE id = %d", i%10))
	}

	// A change stream of status.log, read to the end by a client.
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() {
		stop()
		wg.Wait()
	}()
	// It starts at each node's position of now: a reader from the first
	// binary log meets a data race in go-mysql (v1.13.0 BinlogSyncer keeps
	// &event.GTID of the first event of each domain and server in its set
	// and moves it forward in place while changestream reads the event).
	from := ""
	for i, m := range masters {
		from += fmt.Sprintf("&from=node%d=%s", i+1, queryValue(t, openDB(t, directDSN(m, "", "")), "SELECT @@gtid_binlog_pos"))
	}
	req, _ := http.NewRequestWithContext(ctx, "GET", web.URL+"/changes?table=status.log"+from, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /changes: %v %v", resp, err)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
		}
	}()

	load := func(f func(i int)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				f(i)
			}
		}()
	}
	for g := 0; g < 3; g++ {
		load(func(i int) {
			var v int
			db.QueryRowContext(ctx, fmt.Sprintf("SELECT v FROM t WHERE id = %d", i%50)).Scan(&v)
			db.QueryRowContext(ctx, fmt.Sprintf("SELECT v FROM r WHERE id = %d", i%50)).Scan(&v)
			if i%10 == 0 {
				db.ExecContext(ctx, "SELECT SUM(v) FROM t")
			}
		})
	}
	next := 0
	load(func(i int) {
		// Multi-row INSERTs of 1 to 40 rows, as an application batches them:
		// one shape in the digest, not 40.
		n := 1 + i%40
		var vals []string
		for k := 0; k < n; k++ {
			vals = append(vals, fmt.Sprintf("(%d, %d)", next, k))
			next++
		}
		db.ExecContext(ctx, "INSERT INTO log (id, v) VALUES "+strings.Join(vals, ", "))
		db.ExecContext(ctx, fmt.Sprintf("UPDATE r SET v = v + 1 WHERE id = %d", i%50))
		time.Sleep(20 * time.Millisecond)
	})

	wait := 4 * time.Second // a few seconds of series
	if shots != "" {
		wait = screenshotLoad(t, ctx, &wg, p, web, replicas)
	}

	c := startChromium(t, browser)
	c.call("Emulation.setDeviceMetricsOverride", map[string]any{"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": false}, nil)
	c.call("Page.enable", nil, nil)
	c.call("Page.navigate", map[string]any{"url": web.URL + "/"}, nil) // / serves the page
	deadline := time.Now().Add(wait + 15*time.Second)
	for ready := time.Now().Add(wait); ; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the page did not become ready: %s", c.eval(`document.getElementById("updated").textContent`))
		}
		if time.Now().After(ready) && c.eval(`document.body && document.body.dataset.ready || ""`) == "1" {
			break
		}
	}
	time.Sleep(2500 * time.Millisecond) // one more refresh after the last load change

	dom := c.eval(`document.documentElement.outerHTML`)
	for _, want := range []string{
		"<td>node1</td>", "<td>node2</td>", "<td>node3</td>", // the nodes table
		`<span class="up">up</span>`, ">replica<", // masters and replicas
		`class="line"`,               // the charts' polylines
		"select v from t where id=?", // the digest's shapes
		"select sum(v)from t",
		"insert into log(id,v)values(?,?),...",                 // the multi-row INSERTs, one shape
		"<td>status.log</td>",                                  // the change stream
		"<code>a</code> (leader)", "<code>b</code>", "in sync", // the fleet
		`<span class="up">reading</span>`, // the result cache's readers
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("the rendered page lacks %q", want)
		}
	}
	if n := strings.Count(dom, "insert into log("); n > 2 { // one row; several rows
		t.Errorf("the multi-row INSERTs make %d shapes, want at most 2", n)
	}
	if strings.Contains(dom, `id="updated">error:`) {
		t.Errorf("the page reports an error")
	}

	var layout struct {
		Problems []string
		Tables   []struct {
			ID            string
			Columns, Rows int
			Checked       int
		}
		Charts []struct {
			ID           string
			XTicks       []string
			YTicks       []string
			Unit, XLabel string
		}
	}
	if err := json.Unmarshal([]byte(c.eval(layoutCheck)), &layout); err != nil {
		t.Fatal(err)
	}
	for _, pr := range layout.Problems {
		t.Errorf("layout: %s", pr)
	}
	for _, tb := range layout.Tables {
		t.Logf("table %s: %d columns, %d rows, %d cells checked under their headings", tb.ID, tb.Columns, tb.Rows, tb.Checked)
	}
	if len(layout.Tables) < 5 {
		t.Errorf("%d tables checked, want the nodes, digest, workflows, streams and fleet tables", len(layout.Tables))
	}
	for _, ch := range layout.Charts {
		t.Logf("chart %s: time axis %v (%s), value axis %v", ch.ID, ch.XTicks, ch.XLabel, ch.YTicks)
		if len(ch.XTicks) < 2 || !strings.Contains(ch.XLabel, "time") {
			t.Errorf("chart %s: time axis %v %q, want labelled times", ch.ID, ch.XTicks, ch.XLabel)
		}
		for _, y := range ch.YTicks {
			if ch.Unit == "" || !strings.HasSuffix(y, ch.Unit) {
				t.Errorf("chart %s: value label %q has no unit (%q)", ch.ID, y, ch.Unit)
			}
		}
	}
	if len(layout.Charts) != 4 {
		t.Errorf("%d charts, want 4", len(layout.Charts))
	}
	if t.Failed() {
		t.Logf("rendered DOM:\n%s", dom)
	}
	if shots != "" {
		c.screenshots(t, shots)
	}
}

// statusEnv is a proxy over node1 and node2 (the package's servers) and
// node3, a master with two read replicas, with the admin listener, in a
// fleet with a second proxy; the tables of database status: t and
// sbtest1 on node1 and node2, r and log on node3.
func statusEnv(t *testing.T) (p *proxy, web *httptest.Server, masters, reps []*mariadbtest.Server) {
	t.Helper()
	servers := backends(t)
	master, reps := replicaSet(t)
	masters = append(append(masters, servers[:2]...), master)
	var slave []string
	for _, r := range reps {
		slave = append(slave, r.Addr+"@1")
	}
	for _, s := range append(servers, master) {
		mustExec(t, openDB(t, directDSN(s, "", "")), "DROP DATABASE IF EXISTS status", "CREATE DATABASE status")
	}
	// The fleet's topology in etcd, as shardgate topo load stores it; both
	// proxies start from it and the page shows its version.
	node := func(name string, s *mariadbtest.Server, slave string) string {
		return fmt.Sprintf("  - {name: %s, master: %q, user: %q, password: %q, slave: %q, max_conns_limit: 16, down_after_noalive: 1}\n",
			name, s.Addr, s.User, s.Password, slave)
	}
	text := fmt.Sprintf(`addr: 127.0.0.1:0
user_list:
  - {user: %s, password: %s}
nodes:
%s%s%sschema_list:
  - user: %s
    nodes: [node1, node2, node3]
    default: node1
    shard:
      - {db: status, table: t, key: id, type: hash, nodes: [node1, node2], locations: [2, 2]}
      - {db: status, table: r, key: id, type: hash, nodes: [node3], locations: [1]}
      - {db: status, table: log, key: id, type: hash, nodes: [node3], locations: [2]}
      - {db: status, table: sbtest1, key: id, type: hash, nodes: [node1, node2], locations: [1, 1], sequence: id, sequence_block: 1000}
backend: {health_interval: 200ms, dial_timeout: 1s, pool_growth: false, max_replica_lag: 5s}
sidecar: {node: node1, db: status_sidecar}
cache: {tables: [status.t]}
`, appUser, appPassword, node("node1", servers[0], ""), node("node2", servers[1], ""), node("node3", master, strings.Join(slave, ",")), appUser)
	cfg, err := config.Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	etcd := etcdtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := topo.Open(ctx, topo.Options{Endpoints: etcd.Endpoints(), Prefix: statusPrefix, DialTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Put(ctx, []byte(text), -1); err != nil {
		t.Fatal(err)
	}
	p, web = statusMember(t, etcd, cfg, "a")
	eventually(t, 10*time.Second, "a to lead the fleet", func() bool {
		f := p.srv.Stats().Fleet
		return f != nil && f.Leader == "a"
	})
	cfgB := *cfg
	statusMember(t, etcd, &cfgB, "b")
	eventually(t, 10*time.Second, "both proxies to serve the topology", func() bool {
		f := p.srv.Stats().Fleet
		if f == nil || f.ApplyError != "" || len(f.Members) != 2 || f.Latest == 0 {
			return false
		}
		for _, m := range f.Members {
			if m.Applied != f.Latest {
				return false
			}
		}
		return true
	})
	return p, web, masters, reps
}

// statusPrefix is where the status test's fleet keeps its topology in etcd.
const statusPrefix = "/shardgate/status-test"

// statusMember starts a proxy on cfg with its admin listener and joins it
// to the fleet in etcd as id, publishing both addresses; /stats carries
// the fleet as its agent sees it (as cmd/proxy wires it).
func statusMember(t *testing.T, etcd *etcdtest.Server, cfg *config.Config, id string) (*proxy, *httptest.Server) {
	t.Helper()
	var agent atomic.Pointer[fleet.Agent]
	p := startProxyWith(t, cfg, server.Options{Fleet: &server.FleetOptions{
		Cutover: func(ctx context.Context, db, table string, hold time.Duration) (func(context.Context) []string, func(*config.ShardRule), error) {
			return agent.Load().Cutover(ctx, db, table, hold)
		},
		Status: func() *metrics.FleetStats {
			a := agent.Load()
			if a == nil {
				return nil
			}
			st := a.Status()
			out := &metrics.FleetStats{ID: st.ID, EtcdReachable: st.Reachable, EtcdError: st.Error, Leader: st.Leader,
				Applied: st.Applied, Latest: st.Latest, ApplyError: st.ApplyError, Drift: st.Drift, Checked: st.Checked}
			for _, m := range st.Members {
				out.Members = append(out.Members, metrics.FleetMember{ID: m.ID, Addr: m.Addr, AdminAddr: m.AdminAddr,
					Applied: m.Applied, Started: m.Started, Error: m.Err})
			}
			return out
		},
	}})
	web := httptest.NewServer(p.srv.AdminHandler())
	t.Cleanup(web.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := topo.Open(ctx, topo.Options{Endpoints: etcd.Endpoints(), Prefix: statusPrefix, DialTimeout: time.Second, LeaseTTL: 2})
	if err != nil {
		t.Fatal(err)
	}
	log := zaptest.NewLogger(t, zaptest.Level(zapcore.InfoLevel))
	ag, err := fleet.Join(ctx, fleet.Options{Store: st, Member: topo.Member{ID: id, Addr: p.addr, AdminAddr: web.Listener.Addr().String(), Started: time.Now()},
		Log: log, Interval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	agent.Store(ag)
	t.Cleanup(ag.Close) // before the server's Shutdown (cleanups run last first)
	ag.Run(p.srv)
	return p, web
}

// screenshotLoad adds what the screenshots show beyond the layout test:
// sysbench oltp_read_write, a reshard of sbtest1 (started shortly before the
// screenshots, to catch it copying), and the first replica held behind by
// a row lock on the rows the load updates.
// It returns how long to let the charts fill.
func screenshotLoad(t *testing.T, ctx context.Context, wg *sync.WaitGroup, p *proxy, web *httptest.Server, replicas []*mariadbtest.Server) time.Duration {
	bin, args := sysbenchFor(t, p, "status", 200000)
	bench := exec.CommandContext(ctx, bin, append([]string{"oltp_read_write"}, append(args[1:], "--threads=2", "--time=0", "--events=0", "--rate=150", "run")...)...)
	if err := bench.Start(); err != nil {
		t.Fatal(err)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		bench.Wait()
	}()
	d := 40 * time.Second
	if v, err := time.ParseDuration(os.Getenv("STATUS_SECONDS") + "s"); err == nil && v > 0 {
		d = v
	}
	// The reshard starts about 8 s before the screenshots (the page waits d,
	// then one more refresh), to be caught copying.
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-time.After(max(0, d-4*time.Second)):
		case <-ctx.Done():
			return
		}
		req, _ := json.Marshal(map[string]any{"table": "status.sbtest1", "name": "grow", "nodes": []string{"node1", "node2"}, "locations": []int{2, 2},
			"options": map[string]any{"CopyWorkers": 1, "BatchRows": 20}})
		resp, err := http.Post(web.URL+"/admin/workflows", "application/json", bytes.NewReader(req))
		if err != nil || resp.StatusCode != 200 {
			t.Logf("no reshard on the screenshots: %v %v", resp, err)
		}
		if err == nil {
			resp.Body.Close()
		}
	}()
	// The replicated UPDATEs of r waits behind this lock: the replica's lag
	// grows until it is no longer usable (max_replica_lag 5 s).
	rep := openDB(t, directDSN(replicas[0], "status", ""))
	tx, err := rep.BeginTx(ctx, nil)
	if err == nil {
		_, err = tx.Exec("SELECT v FROM r_0000 WHERE id >= 0 FOR UPDATE")
	}
	if err != nil {
		t.Logf("no replica lag on the screenshots: %v", err)
	} else {
		t.Cleanup(func() { tx.Rollback() })
	}
	return d
}

// layoutCheck is evaluated in the page: it returns, as JSON, the layout
// problems found (see TestStatusPageInBrowser), the tables checked and
// the charts' axis labels.
const layoutCheck = `(() => {
  const problems = [], tables = [], charts = [];
  const text = el => { const r = document.createRange(); r.selectNodeContents(el); return r.getBoundingClientRect(); };
  const px = r => Math.round(r.left) + "-" + Math.round(r.right);
  const doc = document.documentElement;
  if (doc.scrollWidth > doc.clientWidth) problems.push("the page overflows sideways: " + doc.scrollWidth + " px wide in " + doc.clientWidth);
  for (const sec of document.querySelectorAll("section")) {
    if (sec.scrollWidth > sec.clientWidth) problems.push("section " + sec.querySelector("h2").textContent + " overflows: " + sec.scrollWidth + " px in " + sec.clientWidth);
  }
  for (const t of document.querySelectorAll("table")) {
    if (t.closest("[hidden]")) continue;
    const heads = [...t.tHead.rows[0].cells].map(th => ({name: th.textContent, text: text(th)}));
    let checked = 0;
    for (const row of t.tBodies[0].rows) {
      let col = 0;
      for (const td of row.cells) {
        const h = heads[col], c = text(td), box = td.getBoundingClientRect();
        col += td.colSpan;
        if (td.colSpan !== 1 || c.width === 0 || !h) continue;
        if (c.left >= h.text.right || c.right <= h.text.left) {
          problems.push(t.id + ": " + JSON.stringify(td.textContent.slice(0, 40)) + " at x " + px(c) + " is not under its heading " + JSON.stringify(h.name) + " at x " + px(h.text));
        }
        if (c.left < box.left - 1 || c.right > box.right + 1) {
          problems.push(t.id + ": " + JSON.stringify(td.textContent.slice(0, 40)) + " at x " + px(c) + " overflows its cell at x " + px(box));
        }
        checked++;
      }
      if (col !== heads.length) problems.push(t.id + ": a row of " + col + " columns under " + heads.length + " headings");
    }
    tables.push({id: t.id, columns: heads.length, rows: t.tBodies[0].rows.length, checked});
  }
  for (const svg of document.querySelectorAll("svg.chart")) {
    const box = svg.getBoundingClientRect();
    const labels = cls => [...svg.querySelectorAll("text." + cls)];
    for (const l of svg.querySelectorAll("text")) {
      const r = l.getBoundingClientRect();
      if (r.left < box.left - 1 || r.right > box.right + 1 || r.top < box.top - 1 || r.bottom > box.bottom + 1) {
        problems.push(svg.id + ": label " + JSON.stringify(l.textContent) + " is cut off by the chart's edge");
      }
    }
    charts.push({id: svg.id, unit: svg.dataset.unit || "", xTicks: labels("xtick").map(l => l.textContent),
      yTicks: labels("ytick").map(l => l.textContent), xLabel: labels("xlabel").map(l => l.textContent).join("")});
  }
  return JSON.stringify({problems, tables, charts});
})()`

// chromium is a headless Chromium driven over the DevTools protocol on a
// pipe (--remote-debugging-pipe: it reads commands on fd 3, writes on fd
// 4, each message JSON ended by a NUL), attached to one page. The test's
// goroutine owns it.
type chromium struct {
	t       *testing.T
	w       *os.File
	r       *bufio.Reader
	id      int
	session string
}

func startChromium(t *testing.T, browser string) *chromium {
	t.Helper()
	toChrome, ours, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	fromChrome, theirs, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
		"--user-data-dir="+t.TempDir(), "--remote-debugging-pipe", "about:blank")
	cmd.ExtraFiles = []*os.File{toChrome, theirs} // fd 3, fd 4
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	toChrome.Close()
	theirs.Close()
	t.Cleanup(func() {
		ours.Close()
		cmd.Process.Kill()
		cmd.Wait()
		fromChrome.Close()
	})
	c := &chromium{t: t, w: ours, r: bufio.NewReader(fromChrome)}
	var target struct{ TargetID string }
	c.call("Target.createTarget", map[string]any{"url": "about:blank"}, &target)
	var att struct{ SessionID string }
	c.call("Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &att)
	c.session = att.SessionID
	return c
}

// call sends one command (to the page once attached) and decodes its
// result into out, skipping the events that come before it.
func (c *chromium) call(method string, params any, out any) {
	c.t.Helper()
	c.id++
	msg := map[string]any{"id": c.id, "method": method}
	if params != nil {
		msg["params"] = params
	}
	if c.session != "" {
		msg["sessionId"] = c.session
	}
	b, _ := json.Marshal(msg)
	if _, err := c.w.Write(append(b, 0)); err != nil {
		c.t.Fatalf("%s: %v", method, err)
	}
	for {
		line, err := c.r.ReadBytes(0)
		if err != nil {
			c.t.Fatalf("%s: %v", method, err)
		}
		var resp struct {
			ID     int
			Result json.RawMessage
			Error  *struct{ Message string }
		}
		if err := json.Unmarshal(line[:len(line)-1], &resp); err != nil {
			c.t.Fatalf("%s: %v", method, err)
		}
		if resp.ID != c.id {
			continue
		}
		if resp.Error != nil {
			c.t.Fatalf("%s: %s", method, resp.Error.Message)
		}
		if out != nil {
			if err := json.Unmarshal(resp.Result, out); err != nil {
				c.t.Fatalf("%s: %v", method, err)
			}
		}
		return
	}
}

// eval evaluates a JavaScript expression in the page and returns its value
// as a string.
func (c *chromium) eval(expr string) string {
	c.t.Helper()
	var r struct {
		Result struct {
			Value any
		}
		ExceptionDetails *struct{ Text string }
	}
	c.call("Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true}, &r)
	if r.ExceptionDetails != nil {
		c.t.Fatalf("evaluate: %s", r.ExceptionDetails.Text)
	}
	if s, ok := r.Result.Value.(string); ok {
		return s
	}
	return fmt.Sprint(r.Result.Value)
}

// screenshots saves the whole page as dir/status.png and each section as
// dir/status-NAME.png.
func (c *chromium) screenshots(t *testing.T, dir string) {
	var boxes []struct {
		Name                string
		X, Y, Width, Height float64
	}
	js := `JSON.stringify([{name: "", el: document.documentElement}].concat([
	  ["charts", "qpsChart"], ["nodes", "nodes"], ["digest", "digest"], ["movement", "workflows"], ["streams", "streams"], ["cache", "rcache"], ["fleet", "fleet"]
	].map(([name, id]) => ({name, el: document.getElementById(id).closest(name === "charts" ? "main" : "section")}))).map(({name, el}) => {
	  const r = el.getBoundingClientRect();
	  const h = name === "charts" ? document.getElementById("nodeErrChart").closest("section").getBoundingClientRect().bottom + 16 - r.top + window.scrollY : r.height;
	  return {name, x: r.left + window.scrollX, y: r.top + window.scrollY, width: r.width, height: name ? h : document.documentElement.scrollHeight};
	}))`
	if err := json.Unmarshal([]byte(c.eval(js)), &boxes); err != nil {
		t.Fatal(err)
	}
	for _, b := range boxes {
		var shot struct{ Data string }
		pad := 8.0
		if b.Name == "" || b.Name == "charts" { // the page; main has its own padding
			pad = 0
		}
		c.call("Page.captureScreenshot", map[string]any{"format": "png", "captureBeyondViewport": true,
			"clip": map[string]any{"x": max(0, b.X-pad), "y": max(0, b.Y-pad), "width": b.Width + 2*pad, "height": b.Height + 2*pad, "scale": 1}}, &shot)
		png, err := base64.StdEncoding.DecodeString(shot.Data)
		if err != nil {
			t.Fatal(err)
		}
		name := "status.png"
		if b.Name != "" {
			name = "status-" + b.Name + ".png"
		}
		if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s (%.0fx%.0f)", filepath.Join(dir, name), b.Width+2*pad, b.Height+2*pad)
	}
}
