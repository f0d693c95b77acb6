// Command move is the data-movement benchmark of online resharding (make
// bench-move). It drives a running proxy's admin API (POST
// /admin/workflows and its commands) to reshard sbtest.sbtest1 from 1+1
// subtables to 4+4 again and again, and measures, in one run on one
// machine:
//
//   - copy: rows/s and MB/s of the copy phase, swept over copy workers and
//     rows per batch, each setting in every round (rounds interleaved);
//   - anchors from the same run: mariadb-dump | mariadb, and SELECT ...
//     INTO OUTFILE + LOAD DATA INFILE, of the same rows on the same servers;
//   - catch-up: changes applied per second while sysbench oltp_write_only
//     writes through the proxy during the copy, by apply workers, against
//     the rate sysbench writes at (and the binary log's own count);
//   - verify: rows/s of the checksum comparison before the ready phase;
//   - cutover and rollback: the pause each reports, and the latency of an
//     application's statements that started during it, against the same
//     statements' baseline.
//
// The report goes to -out as report.md, results.json and CSV files.
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/shardgate/shardgate/config"
)

var (
	cfgPath   = flag.String("config", "", "the proxy's ks.yaml (nodes, and sbtest.sbtest1's rule: hash on id over node1, node2 with locations [1, 1])")
	proxyAddr = flag.String("proxy", "127.0.0.1:9696", "the proxy's client address")
	webAddr   = flag.String("web", "127.0.0.1:9797", "the proxy's admin address")
	proxyPID  = flag.Int("proxy-pid", 0, "the proxy's process id (its CPU time, from /proc)")
	dbPIDList = flag.String("db-pids", "", "the MariaDB servers' process ids, comma-separated (their CPU time, from /proc)")
	user      = flag.String("user", "shardgate", "account on the proxy and the nodes")
	password  = flag.String("password", "shardgate", "its password")
	rows      = flag.Int("rows", 200000, "rows of sbtest1 (already loaded through the proxy with ids 1..rows)")
	rounds    = flag.Int("rounds", 3, "rounds of the copy sweep and its anchors, and of the catch-up settings")
	workers   = flag.String("copy-workers", "1,2,4,8", "copy workers swept")
	batches   = flag.String("batch-rows", "100,1000,5000", "rows per batch swept")
	applyWs   = flag.String("apply-workers", "1,4,16", "apply workers of the catch-up runs")
	writeSecs = flag.Int("catchup-seconds", 20, "seconds sysbench oltp_write_only writes in each catch-up run")
	threads   = flag.Int("threads", 16, "sysbench threads of the catch-up runs")
	cutovers  = flag.Int("cutovers", 5, "cutovers (each followed by a rollback)")
	loadConns = flag.Int("load-conns", 8, "goroutines of the load client during the cutovers")
	loadRate  = flag.Int("load-rate", 2000, "statements per second of the load client in all (0: as fast as it can)")
	sections  = flag.String("sections", "copy,catchup,cutover", "sections to run")
	proxySrc  = flag.String("proxy-source", "", "how the proxy was built, for the report (default: the working tree's commit and changes)")
	since     = flag.Int64("script-start", 0, "Unix time the calling script began (the report gives the run time from it)")
	out       = flag.String("out", "", "report directory (default bench/results/<date>-move)")
)

var dbPIDs []int

// node is one MariaDB server of the config.
type node struct {
	Name, Addr string
	Port       string
	Sub        string // its source subtable of sbtest1
	db         *sql.DB
}

// bench holds what every section shares.
type bench struct {
	cfg     *config.Config
	nodes   []*node
	proxy   *sql.DB
	api     *api
	res     *results
	wfSeq   int
	started time.Time
}

func main() {
	flag.Parse()
	log.SetFlags(log.Ltime | log.Lmicroseconds)
	if *out == "" {
		*out = "bench/results/" + time.Now().UTC().Format("2006-01-02") + "-move"
	}
	if err := os.MkdirAll(filepath.Join(*out, "raw"), 0o755); err != nil {
		log.Fatal(err)
	}
	if *cfgPath == "" {
		log.Fatal("-config is required")
	}
	if *dbPIDList != "" {
		dbPIDs = ints(*dbPIDList)
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		log.Fatal(err)
	}
	b := &bench{cfg: cfg, api: &api{base: "http://" + *webAddr}, started: time.Now()}
	b.res = &results{Date: time.Now().UTC().Format("2006-01-02 15:04 UTC"), Rows: *rows}
	if err := b.setup(); err != nil {
		log.Fatal(err)
	}
	b.res.Env = environment(b)
	want := map[string]bool{}
	for _, s := range strings.Split(*sections, ",") {
		want[strings.TrimSpace(s)] = true
	}
	if want["copy"] {
		b.section("copy", b.copySweep)
	}
	if want["catchup"] {
		b.section("catchup", b.catchUp)
	}
	if want["cutover"] {
		b.section("cutover", b.cutovers)
	}
	b.res.Env.LoadEnd = loadavg()
	b.res.TotalSeconds = time.Since(b.started).Seconds()
	if *since > 0 {
		b.res.ScriptSeconds = time.Since(time.Unix(*since, 0)).Seconds()
	}
	if err := b.write(); err != nil {
		log.Fatal(err)
	}
}

// section runs one part of the benchmark, recording its time and the
// proxy's CPU time.
func (b *bench) section(name string, f func() error) {
	log.Printf("section %s", name)
	t0, cpu0, db0, own0, busy0 := time.Now(), procCPU(*proxyPID), dbCPU(), ownCPU(), machineBusy()
	if err := f(); err != nil {
		log.Fatalf("section %s: %v", name, err)
	}
	st := sectionTime{Name: name, Seconds: time.Since(t0).Seconds(), ProxyCPUSeconds: procCPU(*proxyPID) - cpu0, DBCPUSeconds: dbCPU() - db0,
		DriverCPUSeconds: ownCPU() - own0, BusySeconds: machineBusy() - busy0}
	st.OtherCPUSeconds = max(0, st.BusySeconds-st.ProxyCPUSeconds-st.DBCPUSeconds-st.DriverCPUSeconds)
	b.res.Sections = append(b.res.Sections, st)
}

// machineBusy is the CPU time all processes used so far (/proc/stat:
// user, nice, system, irq, softirq, steal), in seconds.
func machineBusy() float64 {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0
	}
	var sum float64
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		v, _ := strconv.ParseFloat(f[i], 64)
		sum += v
	}
	return sum / 100 // CLK_TCK
}

// ownCPU is this driver's CPU time and that of the children it has
// waited for (sysbench, mariadb-dump, mariadb), in seconds.
func ownCPU() float64 {
	var self, kids syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids)
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(self.Utime) + tv(self.Stime) + tv(kids.Utime) + tv(kids.Stime)
}

// setup connects to the proxy and the nodes and checks the table.
func (b *bench) setup() error {
	var rule *config.ShardRule
	for i := range b.cfg.Schemas {
		for k := range b.cfg.Schemas[i].Shard {
			if r := &b.cfg.Schemas[i].Shard[k]; r.DB == "sbtest" && r.Table == "sbtest1" {
				rule = r
			}
		}
	}
	if rule == nil || rule.Type != "hash" || len(rule.Nodes) != 2 || len(rule.Locations) != 2 || rule.Locations[0] != 1 || rule.Locations[1] != 1 {
		return fmt.Errorf("%s: sbtest.sbtest1 must be hash-sharded over two nodes with locations [1, 1]", *cfgPath)
	}
	for i, name := range rule.Nodes {
		for _, n := range b.cfg.Nodes {
			if n.Name != name {
				continue
			}
			_, port, _ := strings.Cut(n.Master, ":")
			db, err := sql.Open("mysql", fmt.Sprintf("%s:%s@tcp(%s)/?interpolateParams=true", n.User, n.Password, n.Master))
			if err != nil {
				return err
			}
			db.SetMaxIdleConns(4)
			b.nodes = append(b.nodes, &node{Name: name, Addr: n.Master, Port: port, Sub: rule.Subtable(i), db: db})
		}
	}
	var err error
	b.proxy, err = sql.Open("mysql", fmt.Sprintf("%s:%s@tcp(%s)/sbtest?interpolateParams=true", *user, *password, *proxyAddr))
	if err != nil {
		return err
	}
	var n int
	if err := b.proxy.QueryRow("SELECT COUNT(*) FROM sbtest1").Scan(&n); err != nil {
		return fmt.Errorf("through the proxy: %w", err)
	}
	if n != *rows {
		return fmt.Errorf("sbtest1 has %d rows through the proxy, want %d (-rows)", n, *rows)
	}
	// The data size the MB/s figures use: the source subtables' clustered
	// index (DATA_LENGTH) after ANALYZE TABLE.
	for _, nd := range b.nodes {
		if _, err := nd.db.Exec("ANALYZE TABLE sbtest." + nd.Sub); err != nil {
			return err
		}
		var dl, rowBytes int64
		var cnt int
		if err := nd.db.QueryRow("SELECT DATA_LENGTH FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'sbtest' AND TABLE_NAME = ?", nd.Sub).Scan(&dl); err != nil {
			return err
		}
		if err := nd.db.QueryRow("SELECT COUNT(*), SUM(4 + 4 + LENGTH(c) + LENGTH(pad)) FROM sbtest."+nd.Sub).Scan(&cnt, &rowBytes); err != nil {
			return err
		}
		b.res.Table = append(b.res.Table, tableSize{Node: nd.Name, Subtable: nd.Sub, Rows: cnt, DataLength: dl, RowBytes: rowBytes})
		b.res.DataBytes += dl
		b.res.RowBytes += rowBytes
	}
	// No workflow may be left running (a name must be new, a table moves
	// in one workflow at a time).
	st, err := b.api.list()
	if err != nil {
		return err
	}
	for _, s := range st {
		if s.Running {
			return fmt.Errorf("workflow %s is still running (%s): cancel or roll it back first", s.Spec.Name, s.State.Phase)
		}
		if n, ok := strings.CutPrefix(s.Spec.Name, "w"); ok {
			if k, err := strconv.Atoi(n); err == nil && k > b.wfSeq {
				b.wfSeq = k
			}
		}
	}
	return nil
}

// nextName returns the next unused workflow name (w1, w2, ...).
func (b *bench) nextName() string {
	b.wfSeq++
	return "w" + strconv.Itoa(b.wfSeq)
}

// purgeBinlogs drops the binary logs no workflow reads any more (called
// between workflows, so a run does not leave gigabytes of them).
func (b *bench) purgeBinlogs() {
	for _, nd := range b.nodes {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		conn, err := nd.db.Conn(ctx)
		if err == nil {
			if _, err = conn.ExecContext(ctx, "FLUSH BINARY LOGS"); err == nil {
				var file, pos, doDB, ignoreDB string
				if err = conn.QueryRowContext(ctx, "SHOW MASTER STATUS").Scan(&file, &pos, &doDB, &ignoreDB); err == nil {
					_, err = conn.ExecContext(ctx, "PURGE BINARY LOGS TO '"+file+"'")
				}
			}
			conn.Close()
		}
		cancel()
		if err != nil {
			log.Printf("purging binary logs of %s: %v (ignored)", nd.Name, err)
		}
	}
}

// environment records the machine and the versions.
func environment(b *bench) envBlock {
	e := envBlock{CPUs: runtime.NumCPU(), Go: runtime.Version(), LoadStart: loadavg()}
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				e.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if o, err := exec.Command("uname", "-sr").Output(); err == nil {
		e.Kernel = strings.TrimSpace(string(o))
	}
	if o, err := exec.Command("sysbench", "--version").Output(); err == nil {
		e.Sysbench = strings.TrimSpace(string(o))
	}
	_ = b.nodes[0].db.QueryRow("SELECT @@version").Scan(&e.MariaDB)
	if o, err := exec.Command("git", "rev-parse", "--short=12", "HEAD").Output(); err == nil {
		e.Commit = strings.TrimSpace(string(o))
	}
	if o, err := exec.Command("git", "status", "--porcelain", "--", "move", "proxy", "config", "router", "changestream", "backend", "cmd").Output(); err == nil && len(o) > 0 {
		e.Dirty = strings.Fields(strings.ReplaceAll(strings.TrimSpace(string(o)), "\n", " "))
	}
	for _, nd := range b.nodes {
		var bp int64
		var flush, binlog string
		_ = nd.db.QueryRow("SELECT @@innodb_buffer_pool_size, @@innodb_flush_log_at_trx_commit, CONCAT(@@binlog_format, '/', @@binlog_row_image, '/', @@binlog_row_metadata, ' sync_binlog=', @@sync_binlog)").Scan(&bp, &flush, &binlog)
		e.Servers = append(e.Servers, fmt.Sprintf("%s %s: buffer pool %d MB, flush_log_at_trx_commit=%s, binlog %s", nd.Name, nd.Addr, bp>>20, flush, binlog))
	}
	e.ProxySource = *proxySrc
	e.ProxyGOMAXPROCS = os.Getenv("GOMAXPROCS")
	if e.ProxyGOMAXPROCS == "" {
		e.ProxyGOMAXPROCS = strconv.Itoa(runtime.NumCPU()) + " (default)"
	}
	return e
}

func loadavg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// procCPU is a process's utime+stime in seconds (0 without a pid).
func procCPU(pid int) float64 {
	if pid == 0 {
		return 0
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // CLK_TCK
}

// ints parses a comma-separated list.
func ints(s string) []int {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			log.Fatalf("bad list %q: %v", s, err)
		}
		out = append(out, n)
	}
	return out
}

func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}
