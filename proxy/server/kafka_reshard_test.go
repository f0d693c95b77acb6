package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gmysql "github.com/go-mysql-org/go-mysql/mysql"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/internal/kafkatest"
	"github.com/shardgate/shardgate/internal/mariadbtest"
	"github.com/shardgate/shardgate/move"
	"github.com/shardgate/shardgate/proxy/metrics"
)

// TestKafkaAcrossReshard: the proxy's Kafka sink of a table streams while
// two writers insert, update and delete rows through the proxy before,
// during and after a resharding of the table from 2 to 4 subtables. A
// read_committed consumer rebuilds exactly the final table, with no
// change twice and each row's changes in commit order (each update's and
// delete's before-image is the row as the consumer last had it, each
// insert's row absent), across the cutover, where a row's changes move
// from its old node's binary log to its new node's. In "live" the sink
// runs throughout; in "history" it is stopped (a reload without the
// stream) just before the cutover and started again after it, so it reads
// the cutover from its committed positions, both nodes' logs at once,
// with a backlog of 20 000 rows on node1 before the cutover: the new
// subtables' changes are held until the old nodes' streams are past the
// cutover (kafkasink.Cutover). Without the hold that run delivered 53
// changes out of order and the consumer's table differed. In
// "another-proxy" the sink is started again on a second proxy started
// after the cutover from a file with the new rule only: it names the old
// subtables by the workflow's rules in the sidecar.
func TestKafkaAcrossReshard(t *testing.T) {
	servers := backends(t)
	broker := kafkatest.Start(t)
	t.Run("live", func(t *testing.T) { kafkaAcrossReshard(t, servers, broker, "mvkl", false, false) })
	t.Run("history", func(t *testing.T) { kafkaAcrossReshard(t, servers, broker, "mvkh", true, false) })
	t.Run("another-proxy", func(t *testing.T) { kafkaAcrossReshard(t, servers, broker, "mvkp", true, true) })
}

func kafkaAcrossReshard(t *testing.T, servers []*mariadbtest.Server, broker *kafkatest.Broker, db string, restart, another bool) {
	cfg := newConfig(t, servers...)
	for _, s := range servers[:2] {
		mustExec(t, openDB(t, directDSN(s, "", "")), "DROP DATABASE IF EXISTS "+db, "CREATE DATABASE "+db,
			"DROP DATABASE IF EXISTS "+db+"_sidecar")
	}
	cfg.Schemas[0].Shard = []config.ShardRule{{DB: db, Table: "t", Key: "id", Type: "hash", Nodes: []string{"node1", "node2"}, Locations: []int{1, 1}}}
	cfg.Users = append(cfg.Users, config.User{User: "adm", Password: appPassword})
	cfg.Schemas = append(cfg.Schemas, config.Schema{User: "adm", Nodes: []string{"node1"}, Default: "node1"})
	cfg.AdminUser = "adm"
	cfg.Sidecar = config.Sidecar{Node: "node1", DB: db + "_sidecar"}
	p := startProxy(t, cfg)
	app := openDB(t, p.dsn(db, ""))
	app.SetMaxOpenConns(8)
	adm := openDB(t, userDSN("adm", appPassword, p.addr, "", ""))
	mustExec(t, app, "CREATE TABLE t (id INT PRIMARY KEY, v INT, c VARCHAR(40))")
	const initial = 600
	for i := 0; i < initial; i += 100 {
		var vals []string
		for j := i; j < i+100; j++ {
			vals = append(vals, fmt.Sprintf("(%d, %d, 'row %d')", j, j, j))
		}
		mustExec(t, app, "INSERT INTO t VALUES "+strings.Join(vals, ","))
	}

	name := db + "-" + strconv.FormatInt(time.Now().UnixNano()%1e12, 36)
	withStream := *cfg
	withStream.Streams = []config.Stream{kafkaStream(name, db, broker.Addrs())}
	withStream.Streams[0].BatchTransactions = 50
	withStream.Streams[0].DecimalHandling = config.DecimalPrecise
	withStream.Streams[0].TimePrecision = config.TimeAdaptiveMicros
	withStream.Streams[0].BigintUnsignedHandling = config.BigintUnsignedLong
	if err := p.srv.Reload(&withStream); err != nil {
		t.Fatal(err)
	}
	sinks := p // the proxy that runs the sink
	wait := func(what string, limit time.Duration, ok func(metrics.StreamStats) bool) metrics.StreamStats {
		t.Helper()
		deadline := time.Now().Add(limit)
		for {
			st := streamStatus(t, sinks, name)
			if ok(st) {
				return st
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %v: %+v", what, limit, st)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	wait("the snapshot", time.Minute, func(st metrics.StreamStats) bool {
		return st.State == "running" && st.SnapshotRows == initial
	})

	// Two writers through the proxy until told to stop.
	var stop atomic.Bool
	var wg sync.WaitGroup
	var statements atomic.Int64
	werr := make(chan error, 2)
	for w := range 2 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 38))
			for n := 0; !stop.Load(); n++ {
				id := rng.IntN(initial * 3 / 2)
				var err error
				switch rng.IntN(4) {
				case 0:
					_, err = app.Exec("INSERT IGNORE INTO t VALUES (?, ?, ?)", id, n, fmt.Sprintf("writer %d", w))
				case 1:
					_, err = app.Exec("DELETE FROM t WHERE id = ?", id)
				default:
					_, err = app.Exec("UPDATE t SET v = v + 1, c = ? WHERE id = ?", fmt.Sprintf("writer %d step %d", w, n), id)
				}
				if err != nil {
					werr <- err
					return
				}
				statements.Add(1)
				time.Sleep(time.Millisecond) // a small, shared machine
			}
		})
	}
	stopWriters := func() {
		stop.Store(true)
		wg.Wait()
		select {
		case err := <-werr:
			t.Fatalf("a writer failed: %v", err)
		default:
		}
	}
	defer stopWriters()

	mustExec(t, adm, "admin reshard(opt,table,nodes,locations) values('start','"+db+".t','node1,node2','2,2')")
	var wf string
	eventually(t, time.Minute, "the workflow to be ready", func() bool {
		rows := queryStrings(t, adm, "show workflow status")
		if len(rows) != 1 {
			return false
		}
		wf = rows[0][0]
		return rows[0][3] == move.PhaseReady && rows[0][8] == "0"
	})
	if restart {
		// The sink stops just before the cutover (a reload without its
		// stream cancels it and aborts its open transaction).
		if err := p.srv.Reload(cfg); err != nil {
			t.Fatal(err)
		}
		// A backlog on node1 before the cutover (rows of the old
		// t_0000 only): the restarted sink's node1 reader reaches the
		// cutover well after node2's, whose changes after it include
		// rows that moved from node1 (without the hold they would be
		// produced before those rows' last changes on node1).
		for i := 0; i < 20000; i += 500 {
			var vals []string
			for j := i; j < i+500; j++ {
				vals = append(vals, fmt.Sprintf("(%d, %d, 'backlog')", 100000+2*j, j))
			}
			mustExec(t, app, "INSERT INTO t VALUES "+strings.Join(vals, ","))
		}
		eventually(t, time.Minute, "the workflow to catch up with the backlog", func() bool {
			rows := queryStrings(t, adm, "show workflow status")
			return len(rows) == 1 && rows[0][3] == move.PhaseReady && rows[0][8] == "0"
		})
	}
	time.Sleep(300 * time.Millisecond) // writes between verify and cutover
	mustExec(t, adm, "admin workflow(opt,name) values('cutover','"+wf+"')")
	time.Sleep(time.Second) // writes under the new rule
	if restart {
		// The positions the sink resumes from are before the cutover on
		// both nodes: it reads the cutover from history.
		committed := committedPositions(t, broker, withStream.Streams[0].PositionsTopic, name)
		var state string
		if err := openDB(t, directDSN(servers[0], "", "")).QueryRow("SELECT state FROM "+db+"_sidecar.move_workflows WHERE name = ?", wf).Scan(&state); err != nil {
			t.Fatal(err)
		}
		var ws move.State
		if err := json.Unmarshal([]byte(state), &ws); err != nil {
			t.Fatal(err)
		}
		t.Logf("the sink resumes from %v; the cutover is at %v", committed, ws.Applied)
		before := 0
		for node, at := range ws.Applied {
			c, err1 := gmysql.ParseMariadbGTIDSet(committed[node])
			a, err2 := gmysql.ParseMariadbGTIDSet(at)
			if err1 == nil && err2 == nil && !c.Contain(a) {
				before++
			}
		}
		if before == 0 {
			t.Errorf("the sink's positions %v are past the cutover %v: it does not read the cutover from history", committed, ws.Applied)
		}
		if another {
			// A proxy started after the cutover, from a file that has the
			// new rule only, runs the sink: it names the old subtables
			// by the workflow's rules in the sidecar.
			cfg2 := withStream
			cfg2.Schemas = slices.Clone(withStream.Schemas)
			cfg2.Schemas[0].Shard = []config.ShardRule{{DB: db, Table: "t", Key: "id", Type: "hash", Nodes: []string{"node1", "node2"}, Locations: []int{2, 2}, Generation: 1}}
			sinks = startProxy(t, &cfg2)
		} else if err := p.srv.Reload(&withStream); err != nil {
			t.Fatal(err)
		}
		st := wait("the sink to start again", time.Minute, func(st metrics.StreamStats) bool { return st.State == "running" && len(st.Nodes) == 2 })
		if st.SnapshotRows != 0 {
			t.Errorf("the restarted sink snapshotted %d rows: it resumes from its positions", st.SnapshotRows)
		}
		time.Sleep(time.Second) // writes while it reads the cutover from history
	}
	stopWriters()
	t.Logf("%d statements written", statements.Load())

	// The sink commits every transaction of both nodes.
	wait("the sink to catch up", 2*time.Minute, streamCaughtUp)
	want := map[string]string{}
	for _, row := range queryStrings(t, app, "SELECT id, v, c FROM t") {
		want[row[0]] = row[1] + "|" + row[2]
	}
	cl := broker.Client(t, kgo.ConsumeTopics(withStream.Streams[0].TopicOf(db, "t")), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var recs []*kgo.Record
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		n := 0
		fs.EachRecord(func(r *kgo.Record) { recs = append(recs, r); n++ })
		if n == 0 {
			break
		}
	}
	got, bySub := rebuildChained(t, recs)
	t.Logf("consumer: %d records by subtable %v, %d rows; source %d rows", len(recs), bySub, len(got), len(want))
	if bySub[db+".t_0000"]+bySub[db+".t_0001"] == 0 || bySub[db+".t_g1_0000"]+bySub[db+".t_g1_0001"]+bySub[db+".t_g1_0002"]+bySub[db+".t_g1_0003"] == 0 {
		t.Errorf("want changes from the old and the new subtables: %v", bySub)
	}
	if d := tableDiff(got, want); d != "" {
		t.Errorf("the consumer's table differs from the source:\n%s", d)
	}
	mustExec(t, adm, "admin workflow(opt,name) values('complete','"+wf+"')")
}

// committedPositions reads the positions topic with read_committed: the
// last position committed per node of stream.
func committedPositions(t *testing.T, broker *kafkatest.Broker, topic, stream string) map[string]string {
	t.Helper()
	cl := broker.Client(t, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	out := map[string]string{}
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		n := 0
		fs.EachRecord(func(r *kgo.Record) {
			n++
			var v struct{ Stream, Node, Pos string }
			if strings.HasPrefix(string(r.Key), stream+"/") && json.Unmarshal(r.Value, &v) == nil && v.Stream == stream {
				out[v.Node] = v.Pos
			}
		})
		if n == 0 {
			return out
		}
	}
}

// rebuildChained is the table (id -> "v|c") a consumer rebuilds from the
// Debezium records recs, and the records per subtable, after checking
// that no change came twice and that each row's changes chain: an
// insert's row was absent, an update's or a delete's before-image is the
// row as the records before it left it. Rows move between nodes at a
// cutover, so GTID sequence numbers (per node) cannot order them.
func rebuildChained(t *testing.T, recs []*kgo.Record) (map[string]string, map[string]int) {
	t.Helper()
	rows := map[string]string{}
	bySub := map[string]int{}
	seen := map[string]bool{}
	img := func(m map[string]any) string {
		c, _ := m["c"].(string)
		return fmt.Sprintf("%v|%s", m["v"], c)
	}
	bad := 0
	for _, r := range recs {
		if r.Value == nil {
			continue
		}
		var v struct {
			Before, After map[string]any
			Op            string
			Source        struct {
				GTID     *string `json:"gtid"`
				Row      int
				Node     string
				Subtable string
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
		bySub[v.Source.Subtable]++
		if v.Op != "r" {
			if v.Source.GTID == nil {
				t.Fatalf("change without gtid: %s", r.Value)
			}
			dup := v.Source.Node + " " + *v.Source.GTID + " " + strconv.Itoa(v.Source.Row)
			if seen[dup] {
				t.Errorf("change %s (key %s) delivered twice", dup, r.Key)
			}
			seen[dup] = true
		}
		cur, ok := rows[id]
		var wrong string
		switch v.Op {
		case "r":
			if ok {
				wrong = "snapshot of a row already there"
			}
			rows[id] = img(v.After)
		case "c":
			if ok {
				wrong = "insert of a row already there (" + cur + ")"
			}
			rows[id] = img(v.After)
		case "u":
			if !ok || img(v.Before) != cur {
				wrong = fmt.Sprintf("update from %s, the row was %q", img(v.Before), cur)
			}
			rows[id] = img(v.After)
		case "d":
			if !ok || img(v.Before) != cur {
				wrong = fmt.Sprintf("delete of %s, the row was %q", img(v.Before), cur)
			}
			delete(rows, id)
		}
		if wrong != "" {
			if bad++; bad <= 10 {
				t.Errorf("key %s: out of order: %s (%s)", id, wrong, v.Source.Subtable)
			}
		}
	}
	if bad > 10 {
		t.Errorf("... %d changes out of order in all", bad)
	}
	return rows, bySub
}
