package kafkasink

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/shardgate/shardgate/changestream"
	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/internal/mariadbtest"
)

// servers are the package's two MariaDB nodes, n1 and n2 (nil under -short).
var servers []*mariadbtest.Server

func TestMain(m *testing.M) {
	mariadbtest.Main(m, 2, func(c *mariadbtest.Cluster) int {
		if c != nil {
			servers = c.Servers
		}
		defer closeBroker()
		return m.Run()
	})
}

// cluster is a sharded table eo.t (hash on id over 4 subtables, t_0000
// and t_0001 on n1, t_0002 and t_0003 on n2) created fresh in db.
type cluster struct {
	db      string
	dbs     []*sql.DB
	sources []changestream.Source
	names   func(db, table string) string
}

func newCluster(t *testing.T, db string) *cluster {
	t.Helper()
	if servers == nil {
		t.Skip("integration test: needs MariaDB (skipped under -short)")
	}
	c := &cluster{db: db}
	for i, s := range servers {
		d, err := sql.Open("mysql", s.DSN(""))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		c.dbs = append(c.dbs, d)
		c.sources = append(c.sources, changestream.Source{Node: fmt.Sprintf("n%d", i+1), Addr: s.Addr, User: s.User, Password: s.Password})
		exec(t, d, "DROP DATABASE IF EXISTS "+db, "CREATE DATABASE "+db)
		for k := 2 * i; k < 2*i+2; k++ {
			exec(t, d, fmt.Sprintf("CREATE TABLE %s.t_%04d (id INT PRIMARY KEY, v INT NOT NULL, s VARCHAR(40))", db, k))
		}
	}
	cfg := &config.Config{Schemas: []config.Schema{{Shard: []config.ShardRule{{DB: db, Table: "t", Type: "hash", Key: "id", Locations: []int{2, 2}}}}}}
	c.names = changestream.Names(cfg)
	return c
}

// unique is name with a suffix of its own, so a test run again against
// the same broker (go test -count) starts a stream with new topics and no
// positions.
func unique(name string) string {
	return name + "-" + strconv.FormatInt(time.Now().UnixNano()%1e12, 36)
}

func exec(t testing.TB, d *sql.DB, qs ...string) {
	t.Helper()
	for _, q := range qs {
		if _, err := d.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// node is the server of id's subtable, and sub its name.
func (c *cluster) node(id int) (*sql.DB, string) {
	k := id % 4
	return c.dbs[k/2], fmt.Sprintf("%s.t_%04d", c.db, k)
}

// write runs one random source transaction of 1 to 3 statements, each an
// upsert, an update or a delete of a random id below keys, all on one node.
func (c *cluster) write(r *rand.Rand, keys int) error {
	first := r.IntN(keys)
	d, _ := c.node(first)
	tx, err := d.Begin()
	if err != nil {
		return err
	}
	for i := 0; i < 1+r.IntN(3); i++ {
		id := first
		if i > 0 {
			id = (r.IntN(keys/4))*4 + first%4 // same subtable, so same node
		}
		_, sub := c.node(id)
		var q string
		switch r.IntN(4) {
		case 0, 1:
			q = fmt.Sprintf("INSERT INTO %s VALUES (%d, %d, 'row %d') ON DUPLICATE KEY UPDATE v = v + 1, s = CONCAT('u', v)", sub, id, r.IntN(1000), id)
		case 2:
			q = fmt.Sprintf("UPDATE %s SET v = v + 7 WHERE id = %d", sub, id)
		default:
			q = fmt.Sprintf("DELETE FROM %s WHERE id = %d", sub, id)
		}
		if _, err := tx.Exec(q); err != nil {
			tx.Rollback()
			return err
		}
	}
	return tx.Commit()
}

// rows reads eo.t from every subtable: id -> "v|s".
func (c *cluster) rows(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for k := 0; k < 4; k++ {
		d := c.dbs[k/2]
		rs, err := d.Query(fmt.Sprintf("SELECT id, v, s FROM %s.t_%04d", c.db, k))
		if err != nil {
			t.Fatal(err)
		}
		for rs.Next() {
			var id, v int
			var s sql.NullString
			if err := rs.Scan(&id, &v, &s); err != nil {
				t.Fatal(err)
			}
			out[strconv.Itoa(id)] = fmt.Sprintf("%d|%v", v, s.String)
		}
		rs.Close()
	}
	return out
}

// heads are each node's @@gtid_binlog_pos now.
func (c *cluster) heads(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for i, d := range c.dbs {
		var p string
		if err := d.QueryRow("SELECT @@gtid_binlog_pos").Scan(&p); err != nil {
			t.Fatal(err)
		}
		out[c.sources[i].Node] = p
	}
	return out
}

// caughtUp reports whether st's committed positions contain heads.
func caughtUp(st Stats, heads map[string]string) bool {
	for _, n := range st.Nodes {
		if gtidBehind(heads[n.Node], n.Pos) > 0 {
			return false
		}
	}
	return len(st.Nodes) == len(heads)
}

// rebuilt is what a read_committed consumer rebuilds from the records of
// topic: id -> "v|s", after checking that no change arrived twice and that
// each row's changes came in commit order.
func rebuilt(t *testing.T, recs []*kgo.Record) (rows map[string]string, snapshot, changes int) {
	t.Helper()
	rows = map[string]string{}
	seen := map[string]bool{}
	lastSeq := map[string]int64{} // key -> sequence number of its last change
	for _, r := range recs {
		if r.Value == nil {
			continue
		}
		var v struct {
			Before, After map[string]any
			Op            string
			Source        struct {
				GTID *string `json:"gtid"`
				Row  int
				Node string
			}
		}
		if err := json.Unmarshal(r.Value, &v); err != nil {
			t.Fatalf("record %s: %v", r.Value, err)
		}
		var k struct{ ID int }
		if err := json.Unmarshal(r.Key, &k); err != nil {
			t.Fatalf("key %s: %v", r.Key, err)
		}
		id := strconv.Itoa(k.ID)
		if v.Op == "r" {
			snapshot++
			if seen["r "+id] {
				t.Errorf("key %s snapshotted twice", id)
			}
			seen["r "+id] = true
		} else {
			changes++
			if v.Source.GTID == nil {
				t.Fatalf("change without gtid: %s", r.Value)
			}
			dup := v.Source.Node + " " + *v.Source.GTID + " " + strconv.Itoa(v.Source.Row)
			if seen[dup] {
				t.Errorf("change %s (key %s) delivered twice", dup, r.Key)
			}
			seen[dup] = true
			parts := strings.Split(*v.Source.GTID, "-")
			seq, _ := strconv.ParseInt(parts[2], 10, 64)
			if seq < lastSeq[id] {
				t.Errorf("key %s: change of %s after one of sequence %d", id, *v.Source.GTID, lastSeq[id])
			}
			lastSeq[id] = seq
		}
		switch v.Op {
		case "c", "u", "r":
			s, _ := v.After["s"].(string)
			rows[id] = fmt.Sprintf("%v|%s", v.After["v"], s)
		case "d":
			delete(rows, id)
		}
	}
	return rows, snapshot, changes
}

func diff(got, want map[string]string) string {
	var out []string
	for k, w := range want {
		if got[k] != w {
			out = append(out, fmt.Sprintf("id %s: got %q want %q", k, got[k], w))
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			out = append(out, fmt.Sprintf("id %s: got %q, not in the source", k, g))
		}
	}
	sort.Strings(out)
	if len(out) > 10 {
		out = append(out[:10], fmt.Sprintf("... %d more", len(out)-10))
	}
	return strings.Join(out, "\n")
}

// TestExactlyOnceAcrossRestarts: rows exist before the stream (snapshot),
// four writers change a sharded table on two nodes, and the sink is
// cancelled at random points (some between producing a batch and
// committing it) and started again five times during the writes (the first snapshot
// among them). A
// read_committed consumer rebuilds exactly the table's final content from
// the table's topic, with no change twice and each row's changes in
// commit order.
func TestExactlyOnceAcrossRestarts(t *testing.T) {
	c := newCluster(t, "eo")
	brokers := broker(t)
	const keys = 400
	for id := 0; id < keys; id += 2 {
		d, sub := c.node(id)
		exec(t, d, fmt.Sprintf("INSERT INTO %s VALUES (%d, %d, 'before')", sub, id, id))
	}
	cfg := streamConfig(unique("eo"), brokers)
	cfg.Tables, cfg.Snapshot, cfg.BatchTransactions, cfg.BatchTime = []string{"eo.t"}, config.SnapshotInitial, 20, 20*time.Millisecond

	writeCtx, stopWrites := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var mu sync.Mutex
	written := 0
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 38))
			for writeCtx.Err() == nil {
				if err := c.write(r, keys); err != nil && !strings.Contains(err.Error(), "Deadlock") {
					t.Error(err)
					return
				}
				mu.Lock()
				written++
				mu.Unlock()
			}
		}()
	}
	r := rand.New(rand.NewPCG(38, 1))
	var total Stats
	run := func(ctx context.Context, s *Sink) {
		if err := s.Run(ctx); err != nil {
			t.Errorf("run: %v", err)
		}
		st := s.Stats()
		total.Commits += st.Commits
		total.Transactions += st.Transactions
		total.Records += st.Records
		total.Changes += st.Changes
		total.SnapshotRows += st.SnapshotRows
	}
	for i := 0; i < 5; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		s := New(cfg, c.sources, c.names)
		if i%2 == 1 {
			// Die between producing a batch and committing it.
			n, at := 0, 1+r.IntN(5)
			s.Knobs.BeforeCommit = func() {
				if n++; n == at {
					cancel()
				}
			}
		}
		done := make(chan struct{})
		go func() { defer close(done); run(ctx, s) }()
		// Let it commit changes (the first run: its snapshot), then kill it
		// 0.2-1.5 s later.
		for start := time.Now(); s.Stats().Changes == 0 && ctx.Err() == nil && time.Since(start) < 30*time.Second; {
			time.Sleep(5 * time.Millisecond)
		}
		time.AfterFunc(time.Duration(200+r.IntN(1300))*time.Millisecond, cancel)
		<-done
		cancel()
	}
	stopWrites()
	wg.Wait()
	streamed := total.Changes - total.SnapshotRows // by the sinks killed during the writes
	heads := c.heads(t)
	s := New(cfg, c.sources, c.names)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	start := time.Now()
	go func() { defer close(done); run(ctx, s) }()
	for !caughtUp(s.Stats(), heads) && time.Since(start) < time.Minute {
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-done
	if !caughtUp(s.Stats(), heads) {
		t.Fatalf("the last sink did not catch up with %v in a minute: %+v", heads, s.Stats())
	}
	got, snap, changes := rebuilt(t, consume(t, brokers, cfg.TopicOf("eo", "t")))
	if d := diff(got, c.rows(t)); d != "" {
		t.Errorf("the consumer's table differs from the source:\n%s", d)
	}
	if snap < keys/2 || streamed == 0 {
		t.Errorf("%d snapshot records, %d changes streamed by the killed sinks: want at least the %d rows written before the stream, and changes",
			snap, streamed, keys/2)
	}
	t.Logf("%d source transactions written; %d snapshot records and %d changes read_committed (%d committed by the killed sinks); sinks: %d commits of %d source transactions, %d records",
		written, snap, changes, streamed, total.Commits, total.Transactions, total.Records)
}

// TestThroughput measures the sink end to end (binary log read, decode,
// encode, produce, commit): rows written on two nodes before the sink
// starts (snapshot never, from the position before them), until all are
// committed in Kafka. Two workloads: 50 000 rows in 100-row transactions,
// and 20 000 single-row transactions; each in both formats.
func TestThroughput(t *testing.T) {
	c := newCluster(t, "tp")
	brokers := broker(t)
	from := c.heads(t)
	const rows, per = 50000, 100
	for i := 0; i < rows/per; i++ {
		var b strings.Builder
		_, sub := c.node(i)
		for id := i * per; id < (i+1)*per; id++ {
			if b.Len() > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "(%d, %d, 'row %d of the throughput test')", id, id, id)
		}
		d, _ := c.node(i)
		exec(t, d, "INSERT INTO "+sub+" VALUES "+b.String())
	}
	heads := c.heads(t)
	for _, format := range []string{config.FormatDebezium, config.FormatJSON} {
		measure(t, c, brokers, "100-row transactions", format, from, heads, rows)
	}
	from = heads
	const singles = 20000
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := rows + w; id < rows+singles; id += 4 {
				d, sub := c.node(id)
				if _, err := d.Exec(fmt.Sprintf("INSERT INTO %s VALUES (%d, %d, 'row %d of the throughput test')", sub, id, id, id)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	heads = c.heads(t)
	for _, format := range []string{config.FormatDebezium, config.FormatJSON} {
		measure(t, c, brokers, "single-row transactions", format, from, heads, singles)
	}
}

// measure runs a sink of c's table in format from the positions from
// until it has committed heads, and logs the rate.
func measure(t *testing.T, c *cluster, brokers []string, workload, format string, from, heads map[string]string, want int64) {
	t.Helper()
	cfg := streamConfig(unique("tp-"+format), brokers)
	cfg.Tables, cfg.Format = []string{c.db + ".t"}, format
	// Start at from on each node, as if committed by an earlier sink.
	s := New(cfg, c.sources, c.names)
	w, err := s.open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.readPositions(context.Background()); err != nil {
		t.Fatal(err)
	}
	for n, p := range from {
		w.pos[n] = p
	}
	if err := w.commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	w.cl.Close()
	s = New(cfg, c.sources, c.names)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(done)
		if err := s.Run(ctx); err != nil {
			t.Error(err)
		}
	}()
	var (
		first   time.Duration // until the first change was committed
		atFirst int64         // changes committed then
	)
	for !caughtUp(s.Stats(), heads) && time.Since(start) < 2*time.Minute {
		time.Sleep(5 * time.Millisecond)
		if n := s.Stats().Changes; first == 0 && n > 0 {
			first, atFirst = time.Since(start), n
		}
	}
	elapsed := time.Since(start)
	cancel()
	<-done
	st := s.Stats()
	t.Logf("%s, %s: %d changes in %v from start: %.0f changes/s, %.1f MB/s, %d Kafka transactions; the first commit of changes after %v, %.0f changes/s after it",
		workload, format, st.Changes, elapsed.Round(time.Millisecond), float64(st.Changes)/elapsed.Seconds(), float64(st.Bytes)/elapsed.Seconds()/1e6,
		st.Commits, first.Round(time.Millisecond), float64(st.Changes-atFirst)/(elapsed-first).Seconds())
	if st.Changes != want {
		t.Errorf("%s, %s: %d changes committed, want %d", workload, format, st.Changes, want)
	}
}
