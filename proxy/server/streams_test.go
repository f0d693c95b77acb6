package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/internal/kafkatest"
	"github.com/shardgate/shardgate/proxy/metrics"
	"github.com/shardgate/shardgate/proxy/server"
)

// kafkaStream is a stream of db.t into the broker at brokers, every key
// set as config's defaults would set it.
func kafkaStream(name, db string, brokers []string) config.Stream {
	return config.Stream{Name: name, Tables: []string{db + ".t"}, Brokers: brokers, Topic: "{prefix}.{db}.{table}",
		TopicPrefix: name, Partitions: 3, ReplicationFactor: 1, Format: config.FormatDebezium, Snapshot: config.SnapshotInitial,
		TransactionalID: "shardgate-" + name, PositionsTopic: "shardgate.positions",
		BatchTransactions: 200, BatchBytes: 4 << 20, BatchTime: 50 * time.Millisecond}
}

// streamStatus is the stream's entry in the proxy's /stats.
func streamStatus(t *testing.T, p *proxy, name string) metrics.StreamStats {
	t.Helper()
	rec := httptest.NewRecorder()
	p.srv.AdminHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/stats", nil))
	var st metrics.Stats
	if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
		t.Fatalf("/stats: %v: %s", err, rec.Body)
	}
	for _, s := range st.Streams {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("/stats has no stream %s: %s", name, rec.Body)
	return metrics.StreamStats{}
}

// streamSeries returns the /metrics series of the stream: "name{labels}" -> value.
func streamSeries(t *testing.T, p *proxy) map[string]float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	p.srv.MetricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	out := map[string]float64{}
	re := regexp.MustCompile(`(?m)^(shardgate_stream_\w+(?:\{[^}]*\})?) (\S+)$`)
	for _, m := range re.FindAllStringSubmatch(rec.Body.String(), -1) {
		v, _ := strconv.ParseFloat(m[2], 64)
		out[m[1]] = v
	}
	return out
}

// streamCaughtUp reports whether the stream has committed every transaction of
// both nodes' binary logs.
func streamCaughtUp(st metrics.StreamStats) bool {
	if st.State != "running" || len(st.Nodes) != 2 {
		return false
	}
	for _, n := range st.Nodes {
		if n.Behind != 0 || n.LagSeconds != 0 {
			return false
		}
	}
	return true
}

// p99 of ds (0 if empty), and the largest.
func p99(ds []time.Duration) (time.Duration, time.Duration) {
	if len(ds) == 0 {
		return 0, 0
	}
	slices.Sort(ds)
	return ds[len(ds)*99/100], ds[len(ds)-1]
}

// TestStreamBrokerOutage: a proxy runs the Kafka sink of its streams:
// entry (added by a reload), four clients write through it, and the broker
// is stopped for 20 s while they keep writing. The clients' statements
// are unaffected (no error; p99 latency during the outage is logged next
// to before), the stream's lag grows and /stats and /metrics show it, and
// once the broker is back the sink resumes: a read_committed consumer
// rebuilds exactly the table's final content, with no change twice and
// each row's changes in commit order.
func TestStreamBrokerOutage(t *testing.T) {
	servers := backends(t)
	broker := kafkatest.Start(t)
	const db, keys = "kso", 400
	cfg := newConfig(t, servers...)
	cfg.Schemas[0].Shard = []config.ShardRule{{DB: db, Table: "t", Key: "id", Type: "hash", Nodes: []string{"node1", "node2"}, Locations: []int{2, 2}}}
	for _, s := range servers {
		mustExec(t, openDB(t, directDSN(s, "", "")), "DROP DATABASE IF EXISTS "+db, "CREATE DATABASE "+db)
	}
	p := startProxy(t, cfg)
	app := openDB(t, p.dsn(db, ""))
	app.SetMaxOpenConns(8)
	mustExec(t, app, "CREATE TABLE t (id INT PRIMARY KEY, v INT NOT NULL, s VARCHAR(40))")
	for id := 0; id < keys; id += 2 {
		mustExec(t, app, fmt.Sprintf("INSERT INTO t VALUES (%d, %d, 'before')", id, id))
	}

	// The stream arrives by a reload: its sink starts, snapshots the 200
	// rows and streams.
	name := "outage-" + strconv.FormatInt(time.Now().UnixNano()%1e12, 36)
	withStream := *cfg
	withStream.Streams = []config.Stream{kafkaStream(name, db, broker.Addrs())}
	if err := p.srv.Reload(&withStream); err != nil {
		t.Fatal(err)
	}

	wait := func(what string, limit time.Duration, ok func(metrics.StreamStats) bool) metrics.StreamStats {
		t.Helper()
		deadline := time.Now().Add(limit)
		for {
			st := streamStatus(t, p, name)
			if ok(st) {
				return st
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %v: %+v", what, limit, st)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	st := wait("the snapshot", 60*time.Second, func(st metrics.StreamStats) bool {
		return st.State == "running" && st.Commits >= 2 && st.SnapshotRows == keys/2
	})
	t.Logf("snapshot committed: %d rows, %d commits", st.SnapshotRows, st.Commits)
	// Four clients write through the proxy until stopped: upserts,
	// updates and deletes of random rows, one statement each.
	var (
		phase   atomic.Int32 // 0 before the outage, 1 during, 2 after
		mu      sync.Mutex
		lat     [3][]time.Duration
		errs    [3]int
		written atomic.Int64
	)
	wctx, stopWrites := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 38))
			for wctx.Err() == nil {
				id := r.IntN(keys)
				var q string
				switch r.IntN(4) {
				case 0, 1:
					q = fmt.Sprintf("INSERT INTO t VALUES (%d, %d, 'row %d') ON DUPLICATE KEY UPDATE v = v + 1, s = CONCAT('u', v)", id, r.IntN(1000), id)
				case 2:
					q = fmt.Sprintf("UPDATE t SET v = v + 7 WHERE id = %d", id)
				default:
					q = fmt.Sprintf("DELETE FROM t WHERE id = %d", id)
				}
				ph := phase.Load()
				start := time.Now()
				_, err := app.ExecContext(context.Background(), q)
				d := time.Since(start)
				mu.Lock()
				lat[ph] = append(lat[ph], d)
				if err != nil {
					errs[ph]++
					t.Errorf("%s: %v", q, err)
				}
				mu.Unlock()
				written.Add(1)
				// Paced: the machine is small and shared; the point is
				// the statements' latency, not their rate.
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
	defer func() { stopWrites(); wg.Wait() }()

	time.Sleep(20 * time.Second) // as long as the outage, for the latencies
	before := streamStatus(t, p, name)
	t.Logf("before the outage: %d statements, stream %+v", written.Load(), before)

	phase.Store(1)
	stopped := time.Now()
	if err := broker.Stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("broker stopped in %v", time.Since(stopped).Round(time.Millisecond))
	var maxLag float64
	var maxBehind int64
	var states []string
	for time.Since(stopped) < 20*time.Second {
		st = streamStatus(t, p, name)
		for _, n := range st.Nodes {
			maxLag, maxBehind = max(maxLag, n.LagSeconds), max(maxBehind, n.Behind)
		}
		if len(states) == 0 || states[len(states)-1] != st.State {
			states = append(states, st.State)
		}
		time.Sleep(500 * time.Millisecond)
	}
	series := streamSeries(t, p)
	during := streamStatus(t, p, name)
	t.Logf("after 20 s without the broker: lag up to %.0f s, up to %d transactions behind, states %v; stream %+v", maxLag, maxBehind, states, during)
	var seriesLag float64
	for k, v := range series {
		if strings.HasPrefix(k, "shardgate_stream_lag_seconds{") && strings.Contains(k, `stream="`+name+`"`) {
			seriesLag = max(seriesLag, v)
		}
	}
	t.Logf("metrics at the outage's end: %v", series)
	if maxLag < 10 || maxBehind == 0 {
		t.Errorf("the stream's lag did not grow while the broker was away: lag %.0f s, behind %d", maxLag, maxBehind)
	}
	if seriesLag < 10 {
		t.Errorf("shardgate_stream_lag_seconds at the outage's end is %v, want >= 10", seriesLag)
	}

	phase.Store(2)
	restarted := time.Now()
	if err := broker.Restart(); err != nil {
		t.Fatal(err)
	}
	t.Logf("broker back in %v", time.Since(restarted).Round(time.Millisecond))
	time.Sleep(3 * time.Second)
	stopWrites()
	wg.Wait()
	after := wait("the sink catches up after the outage", 120*time.Second, streamCaughtUp)
	t.Logf("caught up %v after the broker came back: %+v", time.Since(restarted).Round(time.Millisecond), after)

	mu.Lock()
	for i, ph := range []string{"before the outage", "during the outage", "after it"} {
		q, m := p99(lat[i])
		t.Logf("statements %s: %d, errors %d, p99 %v, max %v", ph, len(lat[i]), errs[i], q, m)
	}
	mu.Unlock()
	if errs != [3]int{} {
		t.Errorf("statements failed: %v", errs)
	}
	// Latency is the machine's as much as the proxy's (two shared
	// cores); a statement that waited for the sink would take seconds.
	if q, _ := p99(lat[1]); q > time.Second {
		t.Errorf("p99 latency during the outage %v: statements waited", q)
	}

	// The consumer's table equals the source.
	want := map[string]string{}
	for _, row := range queryStrings(t, app, "SELECT id, v, s FROM t") {
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
	got, snapshot, changes := rebuild(t, recs)
	t.Logf("consumer: %d records (%d snapshot rows, %d changes), %d rows; source %d rows", len(recs), snapshot, changes, len(got), len(want))
	if snapshot != keys/2 {
		t.Errorf("%d snapshot rows, want %d", snapshot, keys/2)
	}
	if d := tableDiff(got, want); d != "" {
		t.Errorf("the consumer's table differs from the source:\n%s", d)
	}
}

// rebuild is the table (id -> "v|s") a consumer rebuilds from recs, after
// checking that no change came twice and each row's came in commit order.
func rebuild(t *testing.T, recs []*kgo.Record) (rows map[string]string, snapshot, changes int) {
	t.Helper()
	rows = map[string]string{}
	seen := map[string]bool{}
	last := map[string]int64{}
	for _, r := range recs {
		if r.Value == nil {
			continue
		}
		var v struct {
			After  map[string]any
			Op     string
			Source struct {
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
			seq, _ := strconv.ParseInt(parts[len(parts)-1], 10, 64)
			if seq < last[id] {
				t.Errorf("key %s: change of %s after one of sequence %d", id, *v.Source.GTID, last[id])
			}
			last[id] = seq
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

func tableDiff(got, want map[string]string) string {
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

// TestStreamLeaderOnly: in a fleet a proxy runs its streams' sinks only
// while it leads (LeadWorkflows, as the fleet's agent calls it): standby
// before, in /stats and with no series in /metrics; running during the
// term; a reload that changes the stream restarts its sink; the term's end
// stops it.
func TestStreamLeaderOnly(t *testing.T) {
	servers := backends(t)
	broker := kafkatest.Start(t)
	const db = "ksl"
	for _, s := range servers {
		mustExec(t, openDB(t, directDSN(s, "", "")), "DROP DATABASE IF EXISTS "+db, "CREATE DATABASE "+db,
			"CREATE TABLE "+db+".t (id INT PRIMARY KEY, v INT)", "INSERT INTO "+db+".t VALUES (1, 1), (2, 2)")
	}
	cfg := newConfig(t, servers...)
	name := "leader-" + strconv.FormatInt(time.Now().UnixNano()%1e12, 36)
	cfg.Streams = []config.Stream{kafkaStream(name, db, broker.Addrs())}
	fleet := &metrics.FleetStats{ID: "proxy-1", Leader: "proxy-2"}
	p := startProxyWith(t, cfg, server.Options{Fleet: &server.FleetOptions{Status: func() *metrics.FleetStats { return fleet }}})

	if st := streamStatus(t, p, name); st.State != "standby" || st.Leader != "proxy-2" {
		t.Fatalf("a proxy that does not lead: %+v, want standby for proxy-2", st)
	}
	if s := streamSeries(t, p); len(s) != 0 {
		t.Errorf("a standby stream has series: %v", s)
	}
	wait := func(what string, ok func(metrics.StreamStats) bool) metrics.StreamStats {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			st := streamStatus(t, p, name)
			if ok(st) {
				return st
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 60s: %+v", what, st)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	ctx, endTerm := context.WithCancel(context.Background())
	led := make(chan struct{})
	go func() {
		defer close(led)
		p.srv.LeadWorkflows(ctx, 1)
	}()
	defer func() { endTerm(); <-led }()
	first := wait("the leader's sink snapshots", func(st metrics.StreamStats) bool {
		return st.State == "running" && st.SnapshotRows == 4
	})
	if s := streamSeries(t, p); s[`shardgate_stream_up{stream="`+name+`"}`] != 1 {
		t.Errorf("shardgate_stream_up of the leader's stream: %v", s)
	}

	changed := *cfg
	changed.Streams = []config.Stream{kafkaStream(name, db, broker.Addrs())}
	changed.Streams[0].BatchTime = 20 * time.Millisecond
	if err := p.srv.Reload(&changed); err != nil {
		t.Fatal(err)
	}
	second := wait("the changed stream's sink restarts", func(st metrics.StreamStats) bool {
		return st.State == "running" && st.Since.After(first.Since) && len(st.Nodes) == 2
	})
	if second.SnapshotRows != 0 {
		t.Errorf("the restarted sink snapshotted %d rows again: it resumes from the committed positions", second.SnapshotRows)
	}

	endTerm()
	<-led
	if st := streamStatus(t, p, name); st.State != "standby" {
		t.Errorf("after the term: %+v, want standby", st)
	}
}
