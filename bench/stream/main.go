// Command stream is the funnel benchmark of change streams (make
// bench-stream): it writes two workloads through a sharded proxy (batched
// INSERT/UPDATE/DELETE, as an import does, and sysbench oltp_write_only),
// then reads the binary logs those writes produced stage by stage, each
// pass going one stage further than the one before: receive (go-mysql,
// raw events), parse and decode rows, route to logical tables
// (changestream), serialize (JSON), deliver (GET /changes to an HTTP
// client). Each pass reads the same GTID range of every node, the nodes in
// parallel, so a stage's own cost is its pass's time less the one before.
// Anchors measured in the same run: mariadb-binlog
// --read-from-remote-server on the same servers, and the rate sysbench
// writes at. The report goes to -out as report.md and results.json.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	gmysql "github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/shardgate/shardgate/changestream"
	"github.com/shardgate/shardgate/config"
)

var (
	cfgPath  = flag.String("config", "etc/ks.yaml", "the sharded proxy's ks.yaml (nodes, and sbtest.sbtest1's rule)")
	proxy    = flag.String("proxy", "127.0.0.1:9696", "the sharded proxy's client address")
	web      = flag.String("web", "127.0.0.1:9797", "the sharded proxy's admin address (GET /changes)")
	user     = flag.String("user", "shardgate", "account on the proxy and the nodes")
	password = flag.String("password", "shardgate", "its password")
	rows     = flag.Int("rows", 100000, "rows the batched workload inserts (then updates and deletes)")
	batch    = flag.Int("batch", 500, "rows per batched statement")
	oltpSecs = flag.Int("oltp-seconds", 10, "seconds of sysbench oltp_write_only")
	threads  = flag.Int("threads", 16, "sysbench threads")
	out      = flag.String("out", "", "report directory (default bench/results/<date>-stream)")
)

func main() {
	flag.Parse()
	if *out == "" {
		*out = "bench/results/" + time.Now().UTC().Format("2006-01-02-1504") + "-stream"
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		log.Fatal(err)
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		log.Fatal(err)
	}
	srcs := changestream.Sources(cfg)
	for _, s := range srcs {
		if err := changestream.Check(s); err != nil {
			log.Fatal(err)
		}
	}
	r := report{Date: time.Now().UTC().Format("2006-01-02 15:04 UTC"), Config: *cfgPath}

	// Workload 1: batched writes, as an import.
	from := positions(srcs)
	start := time.Now()
	batched()
	r.Batched.WriteSeconds = time.Since(start).Seconds()
	until := positions(srcs)
	r.Batched.Stages = funnel(cfg, srcs, from, until)
	log.Printf("batched: %+v", r.Batched)

	// Workload 2: sysbench oltp_write_only, with a live stream beside it.
	r.OLTP = oltp(cfg, srcs)
	r.OLTP.Stages = funnel(cfg, srcs, r.OLTP.from, r.OLTP.until)
	r.Scaling = scaling(cfg, srcs)
	r.Anchor = anchor(srcs)
	write(r)
}

type scale struct {
	Subtables  int     `json:"subtables"`
	Rows       int64   `json:"rows"`
	Seconds    float64 `json:"seconds"`
	RowsPerSec float64 `json:"rows_per_s"`
}

// scaling measures the stream end to end (subscribe, route, serialize)
// over one logical table split into 1, 2, 4 and 8 subtables over the two
// nodes (1: all on node1), with *rows rows inserted directly into the
// subtables, *batch per statement.
func scaling(cfg *config.Config, srcs []changestream.Source) []scale {
	var out []scale
	for _, parts := range []int{1, 2, 4, 8} {
		table := fmt.Sprintf("scale%d", parts)
		rule := config.ShardRule{DB: "sbtest", Table: table, Key: "id", Type: "hash"}
		if parts == 1 {
			rule.Nodes, rule.Locations = []string{srcs[0].Node}, []int{1}
		} else {
			rule.Nodes, rule.Locations = []string{srcs[0].Node, srcs[1].Node}, []int{parts / 2, parts / 2}
		}
		names := changestream.Names(&config.Config{Schemas: []config.Schema{{Shard: []config.ShardRule{rule}}}})
		// Subtable i lives on the node its place in the rule says.
		node := func(i int) changestream.Source {
			if parts == 1 || i < parts/2 {
				return srcs[0]
			}
			return srcs[1]
		}
		conns := map[string]*client.Conn{}
		for _, s := range srcs {
			conns[s.Node] = connect(s.Addr, "sbtest")
		}
		for i := 0; i < parts; i++ {
			c := conns[node(i).Node]
			for _, q := range []string{fmt.Sprintf("DROP TABLE IF EXISTS %s_%04d", table, i),
				fmt.Sprintf("CREATE TABLE %s_%04d (id INT PRIMARY KEY, k INT, c CHAR(120))", table, i)} {
				if _, err := c.Execute(q); err != nil {
					log.Fatal(err)
				}
			}
		}
		from := positions(srcs)
		var wg sync.WaitGroup
		for i := 0; i < parts; i++ {
			wg.Go(func() {
				s := node(i)
				c := connect(s.Addr, "sbtest")
				defer c.Close()
				for lo := i; lo < *rows; lo += parts * *batch {
					var b strings.Builder
					fmt.Fprintf(&b, "INSERT INTO %s_%04d VALUES ", table, i)
					for j, id := 0, lo; j < *batch && id < *rows; j, id = j+1, id+parts {
						if j > 0 {
							b.WriteByte(',')
						}
						fmt.Fprintf(&b, "(%d, %d, 'row %d')", id, id, id)
					}
					if _, err := c.Execute(b.String()); err != nil {
						log.Fatal(err)
					}
				}
			})
		}
		wg.Wait()
		until := positions(srcs)
		for _, c := range conns {
			c.Close()
		}
		start := time.Now()
		changes, errc, err := changestream.Subscribe(context.Background(), srcs, names,
			changestream.Options{Tables: []string{"sbtest." + table}, From: from, Until: until, Buffer: 4096})
		if err != nil {
			log.Fatal(err)
		}
		var n int64
		for ch := range changes {
			if _, err := json.Marshal(ch); err != nil {
				log.Fatal(err)
			}
			n++
		}
		if err := <-errc; err != nil {
			log.Fatal(err)
		}
		secs := time.Since(start).Seconds()
		out = append(out, scale{Subtables: parts, Rows: n, Seconds: secs, RowsPerSec: float64(n) / secs})
		log.Printf("scaling: %d subtables: %d rows in %.3f s", parts, n, secs)
	}
	return out
}

type stage struct {
	Name         string  `json:"name"`
	Seconds      float64 `json:"seconds"`
	Events       int64   `json:"events"`
	Rows         int64   `json:"rows"`
	Bytes        int64   `json:"binlog_bytes"`
	OutBytes     int64   `json:"out_bytes,omitempty"` // JSON written by serialize and deliver
	EventsPerSec float64 `json:"events_per_s"`
	RowsPerSec   float64 `json:"rows_per_s"`
	MBPerSec     float64 `json:"binlog_mb_per_s"`
	OwnSeconds   float64 `json:"own_seconds"` // this pass less the one before
}

type workload struct {
	WriteSeconds float64 `json:"write_seconds"`
	// OLTP only: sysbench's rate, the stream's during the run, and how
	// long after sysbench stopped the stream had delivered everything.
	SysbenchQPS    float64 `json:"sysbench_qps,omitempty"`
	StreamRowsSec  float64 `json:"stream_rows_per_s_live,omitempty"`
	DrainSeconds   float64 `json:"drain_seconds,omitempty"`
	MaxLagSeconds  int64   `json:"max_lag_s,omitempty"` // commit timestamp to delivery, 1 s resolution
	Stages         []stage `json:"stages"`
	from, until    map[string]string
	sysbenchOutput string
}

type report struct {
	Date    string   `json:"date"`
	Config  string   `json:"config"`
	Batched workload `json:"batched"`
	OLTP    workload `json:"oltp_write_only"`
	Scaling []scale  `json:"scaling"`
	Anchor  []anchorResult
}

func connect(addr, db string) *client.Conn {
	c, err := client.Connect(addr, *user, *password, db)
	if err != nil {
		log.Fatalf("connect %s: %v", addr, err)
	}
	return c
}

func positions(srcs []changestream.Source) map[string]string {
	m := map[string]string{}
	for _, s := range srcs {
		c := connect(s.Addr, "")
		res, err := c.Execute("SELECT @@gtid_binlog_pos")
		if err != nil {
			log.Fatal(err)
		}
		m[s.Node], _ = res.GetString(0, 0)
		c.Close()
	}
	return m
}

// batched inserts, updates and deletes *rows rows of sbtest1 (ids above
// the sysbench table's) through the proxy, *batch rows per statement.
func batched() {
	c := connect(*proxy, "sbtest")
	defer c.Close()
	const base = 10_000_000
	pad := strings.Repeat("p", 60)
	exec := func(q string) {
		if _, err := c.Execute(q); err != nil {
			log.Fatalf("%.80s: %v", q, err)
		}
	}
	exec(fmt.Sprintf("DELETE FROM sbtest1 WHERE id > %d", base))
	for lo := 1; lo <= *rows; lo += *batch {
		var b strings.Builder
		b.WriteString("INSERT INTO sbtest1 (id, k, c, pad) VALUES ")
		for i := lo; i < lo+*batch && i <= *rows; i++ {
			if i > lo {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "(%d, %d, 'c-%d-%s', '%s')", base+i, i, i, pad, pad)
		}
		exec(b.String())
	}
	for lo := 1; lo <= *rows; lo += *batch {
		exec(fmt.Sprintf("UPDATE sbtest1 SET k = k + 1 WHERE id BETWEEN %d AND %d", base+lo, base+lo+*batch-1))
	}
	for lo := 1; lo <= *rows; lo += *batch {
		exec(fmt.Sprintf("DELETE FROM sbtest1 WHERE id BETWEEN %d AND %d", base+lo, base+lo+*batch-1))
	}
}

// oltp runs sysbench oltp_write_only through the proxy while a stream
// follows it, then waits for the stream to reach the end of the run.
func oltp(cfg *config.Config, srcs []changestream.Source) workload {
	var w workload
	w.from = positions(srcs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	changes, _, err := changestream.Subscribe(ctx, srcs, changestream.Names(cfg), changestream.Options{From: w.from})
	if err != nil {
		log.Fatal(err)
	}
	var n, maxLag atomic.Int64
	var last atomic.Int64 // unix nanos of the last change delivered
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ch := range changes {
			n.Add(1)
			now := time.Now()
			last.Store(now.UnixNano())
			if lag := now.Unix() - ch.Time; lag > maxLag.Load() {
				maxLag.Store(lag)
			}
		}
	}()
	host, port, _ := net.SplitHostPort(*proxy)
	start := time.Now()
	cmd := exec.Command("sysbench", "oltp_write_only", "--db-driver=mysql", "--mysql-host="+host, "--mysql-port="+port,
		"--mysql-user="+*user, "--mysql-password="+*password, "--mysql-db=sbtest", "--tables=1", "--table-size=10000",
		"--threads="+strconv.Itoa(*threads), "--time="+strconv.Itoa(*oltpSecs), "--report-interval=0", "--skip-trx=on", "--mysql-ignore-errors=1062,1213,1205,1020", "run")
	outb, err := cmd.CombinedOutput()
	w.sysbenchOutput = string(outb)
	if err != nil {
		log.Fatalf("sysbench: %v\n%s", err, outb)
	}
	w.WriteSeconds = time.Since(start).Seconds()
	stopped := time.Now()
	liveRows := n.Load()
	w.StreamRowsSec = float64(liveRows) / w.WriteSeconds
	if m := regexp.MustCompile(`queries:\s+\d+\s+\(([\d.]+) per sec`).FindStringSubmatch(string(outb)); m != nil {
		w.SysbenchQPS, _ = strconv.ParseFloat(m[1], 64)
	}
	w.until = positions(srcs)
	// The stream has caught up when it is idle for half a second after
	// the run; the drain is the time from sysbench's end to its last change.
	for {
		time.Sleep(100 * time.Millisecond)
		if time.Since(time.Unix(0, last.Load())) > 500*time.Millisecond {
			break
		}
	}
	if l := time.Unix(0, last.Load()); l.After(stopped) {
		w.DrainSeconds = l.Sub(stopped).Seconds()
	}
	w.MaxLagSeconds = maxLag.Load()
	cancel()
	<-done
	return w
}

// funnel reads [from, until) of every node once per stage.
func funnel(cfg *config.Config, srcs []changestream.Source, from, until map[string]string) []stage {
	decode := binlogPass(srcs, from, until, false, nil)
	counts := map[string]int64{}
	for node, c := range decode.perNode {
		counts[node] = c
	}
	raw := binlogPass(srcs, from, until, true, counts)
	route := streamPass(cfg, srcs, from, until, false)
	ser := streamPass(cfg, srcs, from, until, true)
	deliver := httpPass(from, until)
	list := []stage{raw.stage("receive (raw events)"), decode.stage("parse and decode rows"), route, ser, deliver}
	for i := range list {
		s := &list[i]
		s.Bytes = decode.bytes
		if s.Events == 0 {
			s.Events = decode.events
		}
		s.EventsPerSec = float64(s.Events) / s.Seconds
		s.RowsPerSec = float64(s.Rows) / s.Seconds
		s.MBPerSec = float64(s.Bytes) / s.Seconds / 1e6
		s.OwnSeconds = s.Seconds
		if i > 0 {
			s.OwnSeconds = s.Seconds - list[i-1].Seconds
		}
	}
	return list
}

type passResult struct {
	seconds      float64
	events, rows int64
	bytes        int64
	perNode      map[string]int64 // events per node
	mu           sync.Mutex
}

func (p *passResult) stage(name string) stage {
	return stage{Name: name, Seconds: p.seconds, Events: p.events, Rows: p.rows}
}

// binlogPass reads each node's binary log from its from position with
// go-mysql alone: decoding rows up to until (counting events), or raw,
// stopping after the event counts the decoding pass found.
func binlogPass(srcs []changestream.Source, from, until map[string]string, raw bool, counts map[string]int64) *passResult {
	res := &passResult{perNode: map[string]int64{}}
	var wg sync.WaitGroup
	start := time.Now()
	for i, s := range srcs {
		wg.Go(func() {
			host, port, _ := net.SplitHostPort(s.Addr)
			p, _ := strconv.Atoi(port)
			syncer := replication.NewBinlogSyncer(replication.BinlogSyncerConfig{ServerID: uint32(2_000_000 + i + int(time.Now().UnixNano()%1000)*10),
				Flavor: gmysql.MariaDBFlavor, Host: host, Port: uint16(p), User: s.User, Password: s.Password, RawModeEnabled: raw})
			defer syncer.Close()
			set, _ := gmysql.ParseMariadbGTIDSet(from[s.Node])
			end, _ := gmysql.ParseMariadbGTIDSet(until[s.Node])
			cur := set.(*gmysql.MariadbGTIDSet)
			if cur.Contain(end) {
				return
			}
			st, err := syncer.StartSyncGTID(cur.Clone())
			if err != nil {
				log.Fatal(err)
			}
			var events, rows, bytes int64
			var gtid *gmysql.MariadbGTID
			for {
				ev, err := st.GetEvent(context.Background())
				if err != nil {
					log.Fatal(err)
				}
				events++
				bytes += int64(len(ev.RawData))
				if raw {
					if events >= counts[s.Node] {
						break
					}
					continue
				}
				switch e := ev.Event.(type) {
				case *replication.MariadbGTIDEvent:
					g := e.GTID
					gtid = &g
				case *replication.RowsEvent:
					rows += int64(len(e.Rows))
					if e.Type() == replication.EnumRowsEventTypeUpdate {
						rows -= int64(len(e.Rows)) / 2
					}
				case *replication.XIDEvent, *replication.QueryEvent:
					if gtid != nil {
						cur.AddSet(gtid)
						gtid = nil
					}
					if cur.Contain(end) {
						goto done
					}
				}
			}
		done:
			res.mu.Lock()
			res.events += events
			res.rows += rows
			res.bytes += bytes
			res.perNode[s.Node] = events
			res.mu.Unlock()
		})
	}
	wg.Wait()
	res.seconds = time.Since(start).Seconds()
	return res
}

// streamPass reads the range through changestream, serializing each
// change to JSON when ser is set.
func streamPass(cfg *config.Config, srcs []changestream.Source, from, until map[string]string, ser bool) stage {
	start := time.Now()
	changes, errc, err := changestream.Subscribe(context.Background(), srcs, changestream.Names(cfg),
		changestream.Options{From: from, Until: until, Buffer: 4096})
	if err != nil {
		log.Fatal(err)
	}
	var n, outBytes int64
	for ch := range changes {
		n++
		if ser {
			b, err := json.Marshal(ch)
			if err != nil {
				log.Fatal(err)
			}
			outBytes += int64(len(b)) + 1
		}
	}
	if err := <-errc; err != nil {
		log.Fatal(err)
	}
	name := "route to logical tables (changestream)"
	if ser {
		name = "serialize (JSON)"
	}
	return stage{Name: name, Seconds: time.Since(start).Seconds(), Rows: n, OutBytes: outBytes}
}

// httpPass reads the range from GET /changes, as a consumer does.
func httpPass(from, until map[string]string) stage {
	v := url.Values{}
	for node, pos := range from {
		v.Add("from", node+"="+pos)
	}
	for node, pos := range until {
		v.Add("until", node+"="+pos)
	}
	start := time.Now()
	resp, err := http.Get("http://" + *web + "/changes?" + v.Encode())
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		log.Fatalf("GET /changes: %s %s", resp.Status, b)
	}
	var n, outBytes int64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), `{"error"`) {
			log.Fatalf("GET /changes: %s", sc.Text())
		}
		n++
		outBytes += int64(len(sc.Bytes())) + 1
	}
	return stage{Name: "deliver (GET /changes, HTTP client)", Seconds: time.Since(start).Seconds(), Rows: n, OutBytes: outBytes}
}

type anchorResult struct {
	Node     string  `json:"node"`
	Bytes    int64   `json:"bytes"`
	Seconds  float64 `json:"seconds"`
	MBPerSec float64 `json:"mb_per_s"`
}

// anchor reads each node's whole binary log with mariadb-binlog
// --read-from-remote-server (decoded to text, thrown away).
func anchor(srcs []changestream.Source) []anchorResult {
	var out []anchorResult
	for _, s := range srcs {
		c := connect(s.Addr, "")
		res, err := c.Execute("SHOW BINARY LOGS")
		if err != nil {
			log.Fatal(err)
		}
		first, _ := res.GetString(0, 0)
		var size int64
		for i := 0; i < res.RowNumber(); i++ {
			n, _ := res.GetInt(i, 1)
			size += n
		}
		c.Close()
		host, port, _ := net.SplitHostPort(s.Addr)
		start := time.Now()
		cmd := exec.Command("mariadb-binlog", "--read-from-remote-server", "--host="+host, "--port="+port,
			"--user="+s.User, "--password="+s.Password, "--to-last-log", first)
		var stderr strings.Builder
		cmd.Stdout, cmd.Stderr = io.Discard, &stderr
		if err := cmd.Run(); err != nil {
			log.Fatalf("mariadb-binlog on %s: %v %s", s.Node, err, stderr.String())
		}
		secs := time.Since(start).Seconds()
		out = append(out, anchorResult{Node: s.Node, Bytes: size, Seconds: secs, MBPerSec: float64(size) / secs / 1e6})
	}
	return out
}

func write(r report) {
	b, _ := json.MarshalIndent(r, "", "  ")
	if err := os.WriteFile(filepath.Join(*out, "results.json"), b, 0o644); err != nil {
		log.Fatal(err)
	}
	var m strings.Builder
	fmt.Fprintf(&m, "# Change stream funnel — %s\n\n", r.Date)
	fmt.Fprintf(&m, "Proxy config %s (sbtest.sbtest1, hash, 2+2 subtables on two MariaDB servers). Each pass reads the same GTID range of both nodes in parallel and goes one stage further than the pass above it; `own s` is the pass's time less the one above (the stage's own cost). Rows: changed rows (an update is one). 2 shared cores: sysbench, MariaDB, the proxy and this program share them.\n\n", r.Config)
	for _, w := range []struct {
		name string
		w    workload
	}{{fmt.Sprintf("Batched writes (%d rows inserted, updated and deleted, %d per statement, through the proxy)", *rows, *batch), r.Batched},
		{fmt.Sprintf("sysbench oltp_write_only (%d threads, %d s, --skip-trx=on: single-row autocommit writes, through the proxy)", *threads, *oltpSecs), r.OLTP}} {
		fmt.Fprintf(&m, "## %s\n\n", w.name)
		fmt.Fprintf(&m, "| stage | s | own s | events | rows | events/s | rows/s | binlog MB/s | JSON MB |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, s := range w.w.Stages {
			fmt.Fprintf(&m, "| %s | %.3f | %.3f | %d | %d | %.0f | %.0f | %.1f | %.1f |\n", s.Name, s.Seconds, s.OwnSeconds, s.Events, s.Rows,
				s.EventsPerSec, s.RowsPerSec, s.MBPerSec, float64(s.OutBytes)/1e6)
		}
		if w.w.SysbenchQPS > 0 {
			fmt.Fprintf(&m, "\nLive, beside the run: sysbench wrote %.0f queries/s; the stream delivered %.0f rows/s during the run, the last change %.3f s after sysbench stopped; largest commit-to-delivery lag seen %d s (1 s resolution).\n",
				w.w.SysbenchQPS, w.w.StreamRowsSec, w.w.DrainSeconds, w.w.MaxLagSeconds)
		} else {
			fmt.Fprintf(&m, "\nThe writes took %.2f s.\n", w.w.WriteSeconds)
		}
		m.WriteString("\n")
	}
	m.WriteString("## Scaling with subtables (end to end in process: subscribe, route, serialize; rows inserted directly into the subtables)\n\n| subtables | nodes | rows | s | rows/s |\n|---:|---:|---:|---:|---:|\n")
	for _, sc := range r.Scaling {
		nodes := 2
		if sc.Subtables == 1 {
			nodes = 1
		}
		fmt.Fprintf(&m, "| %d | %d | %d | %.3f | %.0f |\n", sc.Subtables, nodes, sc.Rows, sc.Seconds, sc.RowsPerSec)
	}
	m.WriteString("\nEach node's binary log has one reader, however many subtables it holds, and the consumer is one goroutine; more subtables mean more, smaller row events.\n\n")
	m.WriteString("## Anchor: mariadb-binlog --read-from-remote-server (each node's whole binary log, decoded to text)\n\n| node | MB | s | MB/s |\n|---|---:|---:|---:|\n")
	for _, a := range r.Anchor {
		fmt.Fprintf(&m, "| %s | %.1f | %.3f | %.1f |\n", a.Node, float64(a.Bytes)/1e6, a.Seconds, a.MBPerSec)
	}
	if err := os.WriteFile(filepath.Join(*out, "report.md"), []byte(m.String()), 0o644); err != nil {
		log.Fatal(err)
	}
	fmt.Println(m.String())
}
