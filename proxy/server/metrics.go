package server

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/shardgate/shardgate/digest"
	"github.com/shardgate/shardgate/router"
)

// Statement kinds and routes, the labels of shardgate_statements_total.
var (
	stmtKinds = [...]string{"select", "insert", "update", "delete", "replace", "load", "set", "transaction", "show", "ddl", "call", "other"}
	// Routes: single (one shard or node), scatter (several targets, results
	// concatenated or summed), merge (several targets merged: ORDER BY,
	// GROUP BY, aggregates, DISTINCT, SHOW TABLES), fallback (the exact
	// fallback through temporary tables), unsharded (no sharded table),
	// proxy (answered by the proxy: transaction control, SET, USE, ...).
	stmtRoutes = [...]string{"single", "scatter", "merge", "fallback", "unsharded", "proxy"}
)

const (
	routeSingle = iota
	routeScatter
	routeMerge
	routeFallback
	routeUnsharded
	routeProxy
)

// kindIndex maps a statement's first keyword to its kind.
func kindIndex(keyword string) int {
	switch keyword {
	case "SELECT", "WITH", "VALUES", "TABLE":
		return 0
	case "INSERT":
		return 1
	case "UPDATE":
		return 2
	case "DELETE":
		return 3
	case "REPLACE":
		return 4
	case "LOAD":
		return 5
	case "SET":
		return 6
	case "BEGIN", "START", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE", "XA":
		return 7
	case "SHOW", "DESC", "DESCRIBE", "EXPLAIN":
		return 8
	case "CREATE", "ALTER", "DROP", "TRUNCATE", "RENAME":
		return 9
	case "CALL":
		return 10
	}
	return 11
}

// routeIndex says how a plan ran.
func routeIndex(p *router.Plan) int {
	if p == nil {
		return routeProxy
	}
	switch p.Kind {
	case router.Forward:
		if len(p.Tables) == 0 {
			return routeUnsharded
		}
		return routeSingle
	case router.Concat:
		if p.Merge != nil {
			return routeMerge
		}
		if len(p.Targets) == 1 {
			return routeSingle
		}
		return routeScatter
	case router.ShowTables, router.ShowTableStatus:
		return routeMerge
	case router.Fallback:
		return routeFallback
	case router.Explain:
		return routeProxy
	}
	if len(p.Targets) == 1 {
		return routeSingle
	}
	return routeScatter
}

// maxFingerprint bounds the fingerprint kept per shape (a multi-row INSERT
// has a long one): longer ones are cut and end in "...".
const maxFingerprint = 1024

// latencyBuckets: 26 log2 buckets of microseconds, for the per-second
// percentiles of the status page.
const latencyBuckets = 26

// metrics is what the proxy counts for Prometheus, the status page and the
// digest. Everything a statement touches is a precomputed child or an
// atomic: the hot path does no label lookup and allocates nothing.
type metrics struct {
	reg       *prometheus.Registry
	stmts     [len(stmtKinds)][len(stmtRoutes)]prometheus.Counter
	durations [len(stmtRoutes)]prometheus.Observer
	errors    *prometheus.CounterVec // by code; errors are rare
	backend   map[string]*[2]prometheus.Counter
	streams   prometheus.Gauge
	changes   prometheus.Counter

	digest *digest.Digest // nil when digest_size is 0

	// For the status page: statements, errors, time and a histogram, read
	// once a second into series.
	count, failed, nanos atomic.Uint64
	hist                 [latencyBuckets]atomic.Uint64
	seriesMu             sync.Mutex
	series               []Sample
}

// Sample is one second of the status page's charts.
type Sample struct {
	At     int64   `json:"t"` // Unix seconds
	QPS    float64 `json:"qps"`
	Errors float64 `json:"errors"`
	MeanMs float64 `json:"mean_ms"`
	P99Ms  float64 `json:"p99_ms"`
}

func newMetrics(s *Server, digestSize int, nodes []string) *metrics {
	m := &metrics{reg: prometheus.NewRegistry(), backend: map[string]*[2]prometheus.Counter{}}
	stmts := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "shardgate_statements_total",
		Help: "Client statements (COM_QUERY, COM_STMT_EXECUTE) by kind and by how they were routed."}, []string{"kind", "route"})
	for k, kind := range stmtKinds {
		for r, route := range stmtRoutes {
			m.stmts[k][r] = stmts.WithLabelValues(kind, route)
		}
	}
	dur := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "shardgate_statement_duration_seconds",
		Help:    "Time from a statement's arrival to the end of its response, by route.",
		Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 10}}, []string{"route"})
	for r, route := range stmtRoutes {
		m.durations[r] = dur.WithLabelValues(route)
	}
	m.errors = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "shardgate_client_errors_total",
		Help: "ERR packets clients received (from the proxy or relayed from a backend), by MySQL error code."}, []string{"code"})
	be := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "shardgate_backend_statements_total",
		Help: "Statements run on a node's master or on one of its replicas (a statement on several nodes counts once per node)."}, []string{"node", "role"})
	for _, n := range nodes {
		m.backend[n] = &[2]prometheus.Counter{be.WithLabelValues(n, "master"), be.WithLabelValues(n, "replica")}
	}
	m.streams = prometheus.NewGauge(prometheus.GaugeOpts{Name: "shardgate_change_streams", Help: "GET /changes streams open now."})
	m.changes = prometheus.NewCounter(prometheus.CounterOpts{Name: "shardgate_change_stream_changes_total", Help: "Row changes sent on GET /changes."})
	m.reg.MustRegister(stmts, dur, m.errors, be, m.streams, m.changes, statsCollector{s})
	if digestSize > 0 {
		m.digest = digest.New(digestSize)
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "shardgate_digest_shapes",
			Help: "Statement shapes the query digest holds."}, func() float64 { return float64(m.digest.Len()) }))
	}
	return m
}

// error counts an ERR packet a client got.
func (m *metrics) error(code uint16) {
	m.errors.WithLabelValues(strconv.Itoa(int(code))).Inc()
}

// sample turns the last second's counts into a Sample (called once a
// second by the sampler).
func (m *metrics) sample(prev *[3 + latencyBuckets]uint64, now time.Time) {
	var cur [3 + latencyBuckets]uint64
	cur[0], cur[1], cur[2] = m.count.Load(), m.failed.Load(), m.nanos.Load()
	for i := range m.hist {
		cur[3+i] = m.hist[i].Load()
	}
	n := cur[0] - prev[0]
	sm := Sample{At: now.Unix(), QPS: float64(n), Errors: float64(cur[1] - prev[1])}
	if n > 0 {
		sm.MeanMs = float64(cur[2]-prev[2]) / float64(n) / 1e6
		want := (n*99 + 99) / 100
		var acc uint64
		for i := 0; i < latencyBuckets; i++ {
			acc += cur[3+i] - prev[3+i]
			if acc >= want {
				sm.P99Ms = float64(uint64(2)<<i) / 1000
				break
			}
		}
	}
	*prev = cur
	m.seriesMu.Lock()
	m.series = append(m.series, sm)
	if len(m.series) > 600 {
		m.series = append(m.series[:0], m.series[len(m.series)-600:]...)
	}
	m.seriesMu.Unlock()
}

// Series returns the last ten minutes, one sample per second.
func (s *Server) Series() []Sample {
	s.metrics.seriesMu.Lock()
	defer s.metrics.seriesMu.Unlock()
	return append([]Sample(nil), s.metrics.series...)
}

func (s *Server) sampler(stop <-chan struct{}) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	var prev [3 + latencyBuckets]uint64
	for {
		select {
		case now := <-t.C:
			s.metrics.sample(&prev, now)
		case <-stop:
			return
		}
	}
}

// stmtObs is what the handler learns of the statement it runs, for the
// metrics, the digest and the slow log (observe).
type stmtObs struct {
	sql     string // "" when the command ran no statement
	keyword string
	plan    *router.Plan // nil when the proxy answered itself (or node is set)
	node    string       // a prepared statement run on this node alone
	reads0  uint64       // the session's replica reads before the statement
}

// observe records the statement the command that began at start ran.
func (c *conn) observe(start time.Time, failed bool) {
	h := c.h
	ob := &h.ob
	if ob.sql == "" {
		return
	}
	m := c.srv.metrics
	now := time.Now()
	d := now.Sub(start)
	r := routeIndex(ob.plan)
	if ob.plan == nil && ob.node != "" {
		r = routeSingle
		if !c.srv.rt().Sharded(c.user) {
			r = routeUnsharded
		}
	}
	m.stmts[kindIndex(ob.keyword)][r].Inc()
	m.durations[r].Observe(d.Seconds())
	role := 0
	if c.st.ReplicaReads > ob.reads0 {
		role = 1
	}
	if ob.node != "" {
		if b := m.backend[ob.node]; b != nil {
			b[role].Inc()
		}
	}
	if ob.plan != nil {
		last := ""
		for i := range ob.plan.Targets {
			if n := ob.plan.Targets[i].Node; n != last {
				if b := m.backend[n]; b != nil {
					b[role].Inc()
				}
				last = n
			}
		}
	}
	if h.x.ErrCode != 0 {
		failed = true
		m.error(h.x.ErrCode)
	}
	m.count.Add(1)
	m.nanos.Add(uint64(d))
	if failed {
		m.failed.Add(1)
	}
	us := uint64(d / time.Microsecond)
	b := 0
	for us > 1 && b < latencyBuckets-1 {
		us >>= 1
		b++
	}
	m.hist[b].Add(1)
	rows := h.x.Rows
	if m.digest != nil || c.srv.lv().slow > 0 {
		c.dkey = digest.Key(c.dkey[:0], c.user, c.st.DB, nil)
		fp := len(c.dkey)
		c.dkey = router.AppendFingerprint(c.dkey, ob.sql)
		if len(c.dkey)-fp > maxFingerprint {
			c.dkey = append(c.dkey[:fp+maxFingerprint], "..."...)
		}
		if m.digest != nil {
			m.digest.Record(c.dkey, stmtRoutes[r], d, rows, failed, now)
		}
		if slow := c.srv.lv().slow; slow > 0 && d >= slow {
			c.log.Warn("slow query", zap.Duration("took", d), zap.String("route", stmtRoutes[r]), zap.Uint64("rows", rows),
				zap.ByteString("fingerprint", c.dkey[fp:]), zap.String("db", c.st.DB), zap.String("sql", ob.sql), zap.Bool("failed", failed))
		}
	}
	*ob = stmtObs{}
	h.x.Rows, h.x.ErrCode = 0, 0
}

// statsCollector exports Stats (sessions, limits, pools, replicas, plan
// cache, workflows) at each scrape.
type statsCollector struct{ s *Server }

// Describe describes nothing: the collector is unchecked (its metrics
// depend on the nodes, replicas and workflows of the moment).
func (c statsCollector) Describe(ch chan<- *prometheus.Desc) {}

func (c statsCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.s.Stats()
	one := func(name, help string, typ prometheus.ValueType, v float64, labels ...string) {
		var names []string
		var vals []string
		for i := 0; i+1 < len(labels); i += 2 {
			names, vals = append(names, labels[i]), append(vals, labels[i+1])
		}
		ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(name, help, names, nil), typ, v, vals...)
	}
	g, k := prometheus.GaugeValue, prometheus.CounterValue
	one("shardgate_client_connections", "Client connections open now.", g, float64(st.Sessions))
	one("shardgate_client_connections_total", "Client connections accepted.", k, float64(st.ConnsTotal))
	one("shardgate_client_connections_rejected_total", "Client connections refused (allow_ips, max_connections).", k, float64(st.ConnsRejected))
	one("shardgate_accept_errors_total", "Accept failures waited out (out of file descriptors or memory).", k, float64(st.AcceptErrors))
	one("shardgate_unauthenticated_connections", "Connections that have not logged in yet.", g, float64(st.Unauthenticated))
	one("shardgate_session_panics_total", "Sessions ended by a bug in the proxy.", k, float64(st.Panics))
	one("shardgate_queries_total", "Statements run (COM_QUERY and COM_STMT_EXECUTE).", k, float64(st.Queries))
	one("shardgate_errors_total", "ERR packets the proxy itself sent.", k, float64(st.ErrorsSent))
	one("shardgate_cutover_held_statements_total", "Statements a cutover held until the new shard rule was in force.", k, float64(st.HeldStatements))
	one("shardgate_plan_cache_hits_total", "Statements on sharded schemas routed from the plan cache without parsing.", k, float64(st.PlanCacheHits))
	one("shardgate_plan_cache_misses_total", "Statements on sharded schemas the planner parsed and planned.", k, float64(st.PlanCacheMisses))
	one("shardgate_plan_cache_shapes", "Statement shapes the plan caches hold.", g, float64(st.PlanCacheShapes))
	one("shardgate_goroutines", "Goroutines of the proxy.", g, float64(st.Goroutines))
	// Limits tripped.
	limit := func(name string, v uint64) {
		one("shardgate_limits_tripped_total", "Clients or statements stopped by a limit, by limit.", k, float64(v), "limit", name)
	}
	limit("max_allowed_packet", st.PacketsTooLarge)
	limit("long_data", st.LongDataTooLarge)
	limit("client_write_timeout", st.WriteTimeouts)
	limit("max_unauthenticated_connections", st.UnauthenticatedRejected)
	limit("idle_in_transaction_timeout", st.IdleTxnClosed)
	limit("connections_rejected", st.ConnsRejected)
	for _, n := range st.Nodes {
		up := 0.0
		if n.Up {
			up = 1
		}
		one("shardgate_backend_up", "1 when the node's master is up.", g, up, "node", n.Name)
		one("shardgate_backend_conns_in_use", "Pooled connections checked out.", g, float64(n.InUse), "node", n.Name, "role", "master")
		one("shardgate_backend_conns_idle", "Idle pooled connections.", g, float64(n.Idle), "node", n.Name, "role", "master")
		one("shardgate_backend_conns_max", "Pool size limit (max_conns_limit).", g, float64(n.Max), "node", n.Name)
		one("shardgate_backend_dials_total", "Backend connections opened.", k, float64(n.Dials), "node", n.Name)
		one("shardgate_backend_dial_failures_total", "Backend connections that failed to open.", k, float64(n.DialFailures), "node", n.Name)
		one("shardgate_backend_acquire_timeouts_total", "Statements that timed out waiting for a pooled connection (acquire_timeout).", k, float64(n.AcquireTimeouts), "node", n.Name)
		one("shardgate_backend_acquire_wait_seconds_total", "Time statements waited for a pooled connection.", k, n.WaitSeconds, "node", n.Name)
		for _, r := range n.Replicas {
			usable, rup := 0.0, 0.0
			if r.Usable {
				usable = 1
			}
			if r.Up {
				rup = 1
			}
			one("shardgate_replica_up", "1 when the replica answers.", g, rup, "node", n.Name, "replica", r.Addr)
			one("shardgate_replica_usable", "1 when the replica takes reads (replicating, lag within max_replica_lag).", g, usable, "node", n.Name, "replica", r.Addr)
			one("shardgate_replica_lag_seconds", "Seconds_Behind_Master of the replica; -1 when unknown.", g, r.LagSec, "node", n.Name, "replica", r.Addr)
			one("shardgate_backend_conns_in_use", "Pooled connections checked out.", g, float64(r.InUse), "node", n.Name, "role", "replica:"+r.Addr)
			one("shardgate_backend_conns_idle", "Idle pooled connections.", g, float64(r.Idle), "node", n.Name, "role", "replica:"+r.Addr)
			one("shardgate_replica_reads_total", "Reads sent to the replica.", k, float64(r.Reads), "node", n.Name, "replica", r.Addr)
		}
	}
	if c.s.xa != nil {
		x := c.s.xa.Stats()
		one("shardgate_xa_commits_total", "Transactions of transaction_mode xa committed, by phases (one: one node; two: several).", k, float64(x.OnePhase), "phases", "one")
		one("shardgate_xa_commits_total", "Transactions of transaction_mode xa committed, by phases (one: one node; two: several).", k, float64(x.Decided), "phases", "two")
		one("shardgate_xa_decisions_refused_total", "Two-phase commits rolled back because their decision could not be written (fenced, sidecar failed).", k, float64(x.Refused))
		one("shardgate_xa_recovered_branches_total", "Prepared branches recovery finished, by action.", k, float64(x.RecoveredCommit), "action", "commit")
		one("shardgate_xa_recovered_branches_total", "Prepared branches recovery finished, by action.", k, float64(x.RecoveredAbort), "action", "rollback")
		one("shardgate_xa_in_flight", "Two-phase commits under way.", g, float64(x.InFlight))
		one("shardgate_xa_left_to_recovery", "Transactions whose session left prepared branches to recovery (a node failed mid-commit).", g, float64(x.Owed))
	}
	if c.s.moves != nil {
		for _, w := range c.s.moves.Running() {
			l := []string{"workflow", w.Spec.Name, "table", w.Spec.Logical(), "kind", w.Spec.Kind}
			one("shardgate_workflow_rows_copied", "Rows a data-movement workflow has copied.", g, float64(w.State.RowsCopied), l...)
			one("shardgate_workflow_rows_total", "Rows of the source when the workflow's copy began.", g, float64(w.State.RowsTotal), l...)
			one("shardgate_workflow_changes_applied", "Binary log row changes the workflow has applied (this run).", g, float64(w.State.ChangesApplied), l...)
			one("shardgate_workflow_lag_seconds", "How far the workflow's apply is behind the binary log.", g, w.LagSeconds, l...)
			one("shardgate_workflow_differing_ranges", "Key ranges the last verify found different.", g, float64(len(w.State.Diffs)), l...)
			for _, ph := range []string{"copying", "catching-up", "ready", "switched"} {
				v := 0.0
				if w.State.Phase == ph {
					v = 1
				}
				one("shardgate_workflow_phase", "1 for the phase the workflow is in.", g, v, append(l, "phase", ph)...)
			}
		}
	}
}
