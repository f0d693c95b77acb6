package metrics

import (
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/shardgate/shardgate/router"
)

func newTest(t testing.TB, digestSize int) *Metrics {
	t.Helper()
	return New(Options{DigestSize: digestSize, Nodes: []string{"node1", "node2"},
		Collector: Collector{Stats: func() Stats { return Stats{Sessions: 3, Nodes: []NodeStats{{Name: "node1", Up: true}}} }}})
}

// scrape returns the exposition text of m's registry.
func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler(zap.NewNop()).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return rec.Body.String()
}

func TestRouteIndex(t *testing.T) {
	two := []router.Target{{Node: "node1"}, {Node: "node2"}}
	for _, c := range []struct {
		plan *router.Plan
		want string
	}{
		{nil, "proxy"},
		{&router.Plan{Kind: router.Forward}, "unsharded"},
		{&router.Plan{Kind: router.Forward, Tables: []string{"t"}}, "single"},
		{&router.Plan{Kind: router.Concat, Targets: two[:1]}, "single"},
		{&router.Plan{Kind: router.Concat, Targets: two}, "scatter"},
		{&router.Plan{Kind: router.ShowTables}, "merge"},
		{&router.Plan{Kind: router.Fallback}, "fallback"},
		{&router.Plan{Kind: router.Explain}, "proxy"},
	} {
		if got := stmtRoutes[routeIndex(c.plan)]; got != c.want {
			t.Errorf("routeIndex(%+v) = %s, want %s", c.plan, got, c.want)
		}
	}
	for kw, want := range map[string]string{"SELECT": "select", "WITH": "select", "XA": "transaction", "DESCRIBE": "show", "RENAME": "ddl", "HANDLER": "other"} {
		if got := stmtKinds[kindIndex(kw)]; got != want {
			t.Errorf("kindIndex(%s) = %s, want %s", kw, got, want)
		}
	}
}

// TestObserve: a statement counts under its kind and route, once per node
// it ran on, in the digest under its fingerprint, and its error under its
// code; the collector's series come along in the same scrape.
func TestObserve(t *testing.T) {
	m := newTest(t, 100)
	plan := &router.Plan{Kind: router.Concat, Targets: []router.Target{{Node: "node1"}, {Node: "node1"}, {Node: "node2"}}}
	var key []byte
	for _, sql := range []string{"SELECT * FROM t WHERE id = 1", "SELECT * FROM t WHERE id = 2"} {
		key = m.Observe(&Statement{SQL: sql, Keyword: "SELECT", Plan: plan, User: "u", DB: "d", Start: time.Now(), Key: key})
	}
	m.Observe(&Statement{SQL: "INSERT INTO t VALUES (1)", Keyword: "INSERT", Node: "node2", Unsharded: true, Replica: true,
		ErrCode: 1062, Start: time.Now()})
	m.Observe(&Statement{Keyword: "SELECT", Start: time.Now()}) // no statement: nothing
	out := scrape(t, m)
	for _, want := range []string{
		`shardgate_statements_total{kind="select",route="scatter"} 2`,
		`shardgate_statements_total{kind="insert",route="unsharded"} 1`,
		`shardgate_backend_statements_total{node="node1",role="master"} 2`,
		`shardgate_backend_statements_total{node="node2",role="master"} 2`,
		`shardgate_backend_statements_total{node="node2",role="replica"} 1`,
		`shardgate_client_errors_total{code="1062"} 1`,
		`shardgate_statement_duration_seconds_count{route="scatter"} 2`,
		`shardgate_digest_shapes 2`,
		`shardgate_client_connections 3`,
		`shardgate_backend_up{node="node1"} 1`,
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("scrape lacks %s", want)
		}
	}
	rows := m.Digest().Snapshot()
	if len(rows) != 2 || rows[0].Count+rows[1].Count != 3 {
		t.Fatalf("digest = %+v, want two shapes, three statements", rows)
	}
}

// TestStandardCollectors: the Go runtime's and the process's series are
// scraped beside the proxy's own, as every Prometheus user expects.
func TestStandardCollectors(t *testing.T) {
	out := scrape(t, newTest(t, 10))
	for _, want := range []string{
		"# TYPE go_goroutines gauge",
		"# TYPE go_memstats_alloc_bytes gauge",
		"# TYPE go_memstats_heap_inuse_bytes gauge",
		"# TYPE go_gc_duration_seconds summary",
		"# TYPE go_info gauge",
		"# TYPE process_start_time_seconds gauge",
		"# TYPE process_open_fds gauge",
		"# TYPE process_resident_memory_bytes gauge",
		"# TYPE process_cpu_seconds_total counter",
		"# TYPE shardgate_statements_total counter",
		"# TYPE shardgate_client_connections gauge",
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("scrape lacks %q", want)
		}
	}
	start := regexp.MustCompile(`(?m)^process_start_time_seconds (\S+)$`).FindStringSubmatch(out)
	if start == nil {
		t.Fatal("no process_start_time_seconds sample")
	}
	if v, err := strconv.ParseFloat(start[1], 64); err != nil || time.Since(time.Unix(int64(v), 0)) > time.Hour || v > float64(time.Now().Unix()+1) {
		t.Errorf("process_start_time_seconds %s is not this process's start", start[1])
	}
	if !regexp.MustCompile(`(?m)^process_open_fds [1-9]`).MatchString(out) {
		t.Error("process_open_fds is not positive")
	}
}

// TestSample: one second's counts become QPS, errors, the mean and the
// 99th percentile's bucket.
func TestSample(t *testing.T) {
	m := newTest(t, 0)
	for i := 0; i < 100; i++ {
		m.count.Add(1)
		m.nanos.Add(uint64(time.Millisecond))
		m.hist[10].Add(1) // 1024..2047 us
	}
	m.failed.Add(2)
	var prev [3 + latencyBuckets]uint64
	m.sample(&prev, time.Unix(100, 0))
	m.sample(&prev, time.Unix(101, 0)) // nothing since
	got := m.Series()
	want := []Sample{{At: 100, QPS: 100, Errors: 2, MeanMs: 1, P99Ms: 2.048}, {At: 101}}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("Series() = %+v, want %+v", got, want)
	}
	if m.Digest() != nil {
		t.Fatal("digest_size 0: Digest() should be nil")
	}
}

// TestObserveAllocs: the statement path allocates nothing once the shape
// is in the digest.
func TestObserveAllocs(t *testing.T) {
	m := newTest(t, 100)
	plan := &router.Plan{Kind: router.Forward, Tables: []string{"t"}, Targets: []router.Target{{Node: "node1"}}}
	st := Statement{SQL: "SELECT c FROM sbtest1 WHERE id = 42", Keyword: "SELECT", Plan: plan, User: "u", DB: "d", Start: time.Now()}
	st.Key = m.Observe(&st)
	if n := testing.AllocsPerRun(1000, func() { st.Key = m.Observe(&st) }); n != 0 {
		t.Fatalf("Observe allocates %v times per statement", n)
	}
}

func BenchmarkObserve(b *testing.B) {
	m := newTest(b, 1000)
	plan := &router.Plan{Kind: router.Forward, Tables: []string{"t"}, Targets: []router.Target{{Node: "node1"}}}
	st := Statement{SQL: "SELECT c FROM sbtest1 WHERE id = 42", Keyword: "SELECT", Plan: plan, User: "u", DB: "d", Start: time.Now()}
	b.ReportAllocs()
	for b.Loop() {
		st.Key = m.Observe(&st)
	}
}
