// Command kafka is the Kafka sink benchmark (make bench-kafka, bench/kafka.sh).
//
//	kafka run      canal's table (mixed DML and batch inserts by topics x partitions, both formats), the stage
//	               funnel with the franz-go anchor, and Tunnel's scaling; writes -out/run.json
//	kafka lag      sysbench oltp_write_only through a proxy that runs a sink; writes -out/lag.json
//	kafka report   renders -out/run.json and -out/lag.json as -out/README.md
//	kafka consume  one consumer of a group (a separate process of the scaling section)
//
// Every rate of the sink is measured over a backlog: the rows are written to the nodes' subtables first, then a
// sink starts at the position before them (written to the positions topic as an earlier sink would have) and runs
// until its committed positions reach the position after them. The rate is the sink's, not the writers'.
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	gmysql "github.com/go-mysql-org/go-mysql/mysql"
	_ "github.com/go-sql-driver/mysql"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/shardgate/shardgate/changestream"
	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/kafkasink"
)

var (
	cfgPath   = flag.String("config", "", "the benchmark's ks.yaml (nodes; kb.orders and kb.items sharded 2+2)")
	brokers   = flag.String("brokers", "", "the Kafka broker, host:port")
	out       = flag.String("out", "", "report directory")
	rounds    = flag.Int("rounds", 3, "rounds of every cell, interleaved")
	cycles    = flag.Int("mixed-cycles", 480, "cycles of the mixed workload (each: 2 batch inserts of 50 rows, 50 single-row updates, 20 single-row deletes)")
	inserts   = flag.Int("inserts", 100000, "rows of the batch-insert workload (100-row INSERTs into one table)")
	scaleRows = flag.Int("scale-rows", 120000, "rows of the scaling section's backlog")
	sections  = flag.String("sections", "throughput,funnel,profile,scaling", "run: sections to run")
	pids      = flag.String("pids", "", "name=pid,... of processes whose CPU is reported (broker, mariadbd)")
	proxyWeb  = flag.String("web", "", "lag: the proxy's admin address (/metrics)")
	proxyAddr = flag.String("proxy", "", "lag: the proxy's client address")
	secs      = flag.Int("oltp-seconds", 30, "lag: seconds of sysbench")
	threads   = flag.Int("threads", 16, "lag: sysbench threads")
	lagRounds = flag.Int("lag-rounds", 1, "lag: runs")
	tableSize = flag.Int("table-size", 10000, "lag: sysbench table size")
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "consume" {
		consume(os.Args[2:])
		return
	}
	if len(os.Args) < 2 {
		log.Fatal("usage: kafka run|lag|report|consume [flags]")
	}
	mode := os.Args[1]
	flag.CommandLine.Parse(os.Args[2:])
	log.SetFlags(log.Ltime)
	switch mode {
	case "run":
		run()
	case "lag":
		lagMain()
	case "report":
		report()
	default:
		log.Fatalf("unknown mode %q", mode)
	}
}

// ---- environment --------------------------------------------------------

type bench struct {
	cfg   *config.Config
	srcs  []changestream.Source
	names func(db, table string) string
	dbs   []*sql.DB // per node
	adm   *kadm.Client
	cl    *kgo.Client
	seq   int
}

func setup() *bench {
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		log.Fatal(err)
	}
	b := &bench{cfg: cfg, srcs: changestream.Sources(cfg), names: changestream.Names(cfg)}
	for _, s := range b.srcs {
		db, err := sql.Open("mysql", fmt.Sprintf("%s:%s@tcp(%s)/", s.User, s.Password, s.Addr))
		if err != nil {
			log.Fatal(err)
		}
		db.SetMaxOpenConns(8)
		b.dbs = append(b.dbs, db)
	}
	b.cl, err = kgo.NewClient(kgo.SeedBrokers(*brokers))
	if err != nil {
		log.Fatal(err)
	}
	b.adm = kadm.NewClient(b.cl)
	b.createTopic("bench.positions", 1, map[string]*string{"cleanup.policy": ptr("compact")})
	return b
}

func ptr[T any](v T) *T { return &v }

func (b *bench) createTopic(topic string, partitions int, configs map[string]*string) {
	if _, err := b.adm.CreateTopics(context.Background(), int32(partitions), 1, configs, topic); err != nil {
		log.Fatalf("creating %s: %v", topic, err)
	}
}

func (b *bench) exec(node int, q string) {
	if _, err := b.dbs[node].Exec(q); err != nil {
		log.Fatalf("%.100s: %v", q, err)
	}
}

// heads returns each node's @@gtid_binlog_pos.
func (b *bench) heads() map[string]string {
	m := map[string]string{}
	for i, s := range b.srcs {
		var p string
		if err := b.dbs[i].QueryRow("SELECT @@gtid_binlog_pos").Scan(&p); err != nil {
			log.Fatal(err)
		}
		m[s.Node] = p
	}
	return m
}

// cpu is CPU seconds of this process and of the -pids processes.
type cpu map[string]float64

func readCPU() cpu {
	c := cpu{}
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	c["bench"] = float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
	for _, kv := range strings.Split(*pids, ",") {
		name, pid, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		data, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil {
			continue
		}
		s := string(data)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		ut, _ := strconv.ParseFloat(f[11], 64)
		st, _ := strconv.ParseFloat(f[12], 64)
		c[name] += (ut + st) / 100 // USER_HZ
	}
	return c
}

func (c cpu) since(o cpu) cpu {
	d := cpu{}
	for k, v := range c {
		d[k] = v - o[k]
	}
	return d
}

// loadSampler records /proc/loadavg's 1-minute figure every second.
type loadSampler struct {
	mu      sync.Mutex
	samples []float64
}

func (l *loadSampler) start(ctx context.Context) {
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			if data, err := os.ReadFile("/proc/loadavg"); err == nil {
				v, _ := strconv.ParseFloat(strings.Fields(string(data))[0], 64)
				l.mu.Lock()
				l.samples = append(l.samples, v)
				l.mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

func (l *loadSampler) summary() Spread {
	l.mu.Lock()
	defer l.mu.Unlock()
	return spread(l.samples)
}

// Spread is the median and range of a cell's rounds.
type Spread struct {
	Median, Min, Max float64
	N                int
}

func spread(v []float64) Spread {
	if len(v) == 0 {
		return Spread{}
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return Spread{Median: m, Min: s[0], Max: s[len(s)-1], N: len(s)}
}

// ---- workloads ----------------------------------------------------------

// Tables kb.orders and kb.items, hash on id over 4 subtables: _0000 and
// _0001 on node1, _0002 and _0003 on node2 (the script's ks.yaml).
const (
	ordersDDL = "(id BIGINT PRIMARY KEY, customer INT NOT NULL, status VARCHAR(16) NOT NULL, amount DECIMAL(12,2) NOT NULL, note VARCHAR(100), created DATETIME NOT NULL)"
	itemsDDL  = "(id BIGINT PRIMARY KEY, order_id BIGINT NOT NULL, sku VARCHAR(32) NOT NULL, qty INT NOT NULL, price DECIMAL(10,2) NOT NULL)"
)

func (b *bench) createTables() {
	for n := range b.dbs {
		b.exec(n, "CREATE DATABASE IF NOT EXISTS kb")
		for s := 0; s < 4; s++ {
			if s/2 != n {
				continue
			}
			for t, ddl := range map[string]string{"orders": ordersDDL, "items": itemsDDL} {
				name := fmt.Sprintf("kb.%s_%04d", t, s)
				b.exec(n, "DROP TABLE IF EXISTS "+name)
				b.exec(n, "CREATE TABLE "+name+" "+ddl)
			}
		}
	}
}

func sub(table string, id int) (node int, name string) {
	s := id % 4
	return s / 2, fmt.Sprintf("kb.%s_%04d", table, s)
}

// backlog is a written workload: the GTID range of its binary log events.
type backlog struct {
	Name       string
	Tables     []string
	From, To   map[string]string
	Changes    int64 // row changes
	Txns       int64
	WriteSecs  float64
	BinlogByte int64
}

// mixed writes the mixed DML workload: per cycle, on one subtable pair,
// a 50-row INSERT into orders and one into items (one transaction each),
// 25 single-row UPDATEs of each table, and 10 single-row DELETEs of each.
// Cycles run on 4 writers (one per subtable).
func (b *bench) mixed(cycles int) backlog {
	from := b.heads()
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Go(func() {
			for c := w; c < cycles; c += 4 {
				base := 1_000_000 + c*400 // ids base+4k+w: all on subtable w
				node, orders := sub("orders", w)
				_, items := sub("items", w)
				var o, it strings.Builder
				for i := 0; i < 50; i++ {
					id := base + i*4 + w
					sep := ","
					if i == 0 {
						sep = ""
					}
					fmt.Fprintf(&o, "%s(%d,%d,'new',%d.%02d,'order %d of the mixed workload',NOW())", sep, id, id%997, id%10000, id%100, id)
					fmt.Fprintf(&it, "%s(%d,%d,'SKU-%08d',%d,%d.%02d)", sep, id, id, id, 1+id%9, id%500, id%100)
				}
				b.exec(node, "INSERT INTO "+orders+" VALUES "+o.String())
				b.exec(node, "INSERT INTO "+items+" VALUES "+it.String())
				for i := 0; i < 25; i++ {
					id := base + i*4 + w
					b.exec(node, fmt.Sprintf("UPDATE %s SET status='paid', amount=amount+1 WHERE id=%d", orders, id))
					b.exec(node, fmt.Sprintf("UPDATE %s SET qty=qty+1 WHERE id=%d", items, id))
				}
				for i := 40; i < 50; i++ {
					id := base + i*4 + w
					b.exec(node, fmt.Sprintf("DELETE FROM %s WHERE id=%d", orders, id))
					b.exec(node, fmt.Sprintf("DELETE FROM %s WHERE id=%d", items, id))
				}
			}
		})
	}
	wg.Wait()
	return backlog{Name: "mixed", Tables: []string{"kb.orders", "kb.items"}, From: from, To: b.heads(),
		Changes: int64(cycles) * 170, Txns: int64(cycles) * 72, WriteSecs: time.Since(start).Seconds()}
}

// batchInserts writes rows into kb.orders in 100-row INSERTs (one
// subtable each), from id base.
func (b *bench) batchInserts(name string, rows, base int) backlog {
	from := b.heads()
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Go(func() {
			node, orders := sub("orders", w)
			for lo := w * 100; lo < rows; lo += 400 {
				var o strings.Builder
				for i := 0; i < 100; i++ {
					id := base + (lo+i)*4 + w
					if i > 0 {
						o.WriteByte(',')
					}
					fmt.Fprintf(&o, "(%d,%d,'new',%d.%02d,'order %d of the insert workload',NOW())", id, id%997, id%10000, id%100, id)
				}
				b.exec(node, "INSERT INTO "+orders+" VALUES "+o.String())
			}
		})
	}
	wg.Wait()
	n := int64((rows + 99) / 100 * 100)
	return backlog{Name: name, Tables: []string{"kb.orders"}, From: from, To: b.heads(), Changes: n, Txns: n / 100,
		WriteSecs: time.Since(start).Seconds()}
}

// ---- the sink over a backlog -------------------------------------------

// layout is a cell's topics x partitions.
type layout struct {
	Topics, Partitions int
}

func (l layout) String() string { return fmt.Sprintf("%d x %d", l.Topics, l.Partitions) }

// SinkRun is one sink run over a backlog.
type SinkRun struct {
	Seconds      float64 // start to all committed
	FirstCommit  float64 // start to the first commit
	Changes      int64
	Bytes        int64
	Commits      int64
	SteadyRate   float64 // changes/s after the first commit
	CPU          cpu
	ChangesPerS  float64
	MBPerS       float64
	BytesPerChg  float64
	SinkCPUPerCh float64 // microseconds of this process per change
}

// sinkRun runs a sink of stream name over bl with the layout and format,
// until its committed positions reach bl.To.
func (b *bench) sinkRun(bl backlog, l layout, format string, topicOverride string) SinkRun {
	b.seq++
	name := fmt.Sprintf("kb%d-%d", time.Now().Unix()%100000, b.seq)
	st := config.Stream{Name: name, Tables: bl.Tables, Brokers: []string{*brokers}, Partitions: l.Partitions,
		Format: format, Snapshot: config.SnapshotNever, PositionsTopic: "bench.positions"}
	if l.Topics == 1 {
		st.Topic = "{prefix}.changes"
	}
	if topicOverride != "" {
		st.Topic = topicOverride
	}
	defaults(&st)
	// Positions as an earlier sink of the stream would have committed them.
	for node, pos := range bl.From {
		v, _ := json.Marshal(map[string]any{"stream": name, "node": node, "pos": pos, "ts_ms": time.Now().UnixMilli()})
		if err := b.cl.ProduceSync(context.Background(), &kgo.Record{Topic: "bench.positions", Key: []byte(name + "/" + node), Value: v}).FirstErr(); err != nil {
			log.Fatal(err)
		}
	}
	s := kafkasink.New(st, b.srcs, b.names)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	c0 := readCPU()
	start := time.Now()
	go func() { done <- s.Run(ctx) }()
	var r SinkRun
	var atFirst int64
	for {
		stats := s.Stats()
		if stats.Commits > 0 && r.FirstCommit == 0 {
			r.FirstCommit, atFirst = time.Since(start).Seconds(), stats.Changes
		}
		if caughtUp(stats, bl.To) {
			r.Seconds = time.Since(start).Seconds()
			r.Changes, r.Bytes, r.Commits = stats.Changes, stats.Bytes, stats.Commits
			break
		}
		select {
		case err := <-done:
			log.Fatalf("sink %s stopped: %v (%s)", name, err, stats.Err)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Since(start) > 3*time.Minute {
			log.Fatalf("sink %s: not caught up after 3 minutes: %+v", name, stats)
		}
	}
	r.CPU = readCPU().since(c0)
	cancel()
	if err := <-done; err != nil {
		log.Fatalf("sink %s: %v", name, err)
	}
	r.ChangesPerS = float64(r.Changes) / r.Seconds
	r.MBPerS = float64(r.Bytes) / r.Seconds / 1e6
	r.BytesPerChg = float64(r.Bytes) / float64(r.Changes)
	r.SinkCPUPerCh = r.CPU["bench"] / float64(r.Changes) * 1e6
	if r.Seconds > r.FirstCommit {
		r.SteadyRate = float64(r.Changes-atFirst) / (r.Seconds - r.FirstCommit)
	}
	return r
}

// defaults fills a stream's unset keys as config.Load does (docs/kafka.md).
func defaults(s *config.Stream) {
	if s.Topic == "" {
		s.Topic = "{prefix}.{db}.{table}"
	}
	if s.TopicPrefix == "" {
		s.TopicPrefix = s.Name
	}
	if s.ReplicationFactor == 0 {
		s.ReplicationFactor = 1
	}
	if s.TransactionalID == "" {
		s.TransactionalID = "shardgate-" + s.Name
	}
	if s.BatchTransactions == 0 {
		s.BatchTransactions = 1000
	}
	if s.BatchBytes == 0 {
		s.BatchBytes = 4 << 20
	}
	if s.BatchTime == 0 {
		s.BatchTime = 100 * time.Millisecond
	}
}

func caughtUp(st kafkasink.Stats, heads map[string]string) bool {
	if len(st.Nodes) < len(heads) {
		return false
	}
	for _, n := range st.Nodes {
		if !contains(n.Pos, heads[n.Node]) {
			return false
		}
	}
	return true
}

func contains(pos, head string) bool {
	if head == "" {
		return true
	}
	p, err := gmysql.ParseMariadbGTIDSet(pos)
	if err != nil {
		return false
	}
	h, err := gmysql.ParseMariadbGTIDSet(head)
	if err != nil {
		return false
	}
	return p.Contain(h)
}
