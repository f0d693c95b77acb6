package metrics

import (
	"maps"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"

	"github.com/shardgate/shardgate/digest"
	"github.com/shardgate/shardgate/router"
)

// maxFingerprint bounds the fingerprint kept per shape (a multi-row INSERT
// has a long one): longer ones are cut and end in "...".
const maxFingerprint = 1024

// latencyBuckets: 26 log2 buckets of microseconds, for the per-second
// percentiles of the status page.
const latencyBuckets = 26

// Metrics is what the proxy counts for Prometheus, the status page and the
// digest. Everything a statement touches is a precomputed child or an
// atomic: the hot path does no label lookup and allocates nothing. Safe for
// concurrent use.
type Metrics struct {
	reg       *prometheus.Registry
	stmts     [len(stmtKinds)][len(stmtRoutes)]prometheus.Counter
	durations [len(stmtRoutes)]prometheus.Observer
	errors    *prometheus.CounterVec // by code; errors are rare
	// backend is replaced whole when nodes are added (AddNodes): the hot
	// path reads it with one atomic load.
	backend    atomic.Pointer[map[string]*[2]prometheus.Counter]
	backendVec *prometheus.CounterVec
	addMu      sync.Mutex // AddNodes
	streams    prometheus.Gauge
	changes    prometheus.Counter

	digest *digest.Digest // nil when digest_size is 0

	// For the status page: statements, errors, time and a histogram, read
	// once a second into series.
	count, failed, nanos atomic.Uint64
	hist                 [latencyBuckets]atomic.Uint64
	seriesMu             sync.Mutex
	series               []Sample

	stop     chan struct{}
	stopOnce sync.Once
	sampling sync.WaitGroup
}

// Sample is one second of the status page's charts.
type Sample struct {
	At     int64   `json:"t"` // Unix seconds
	QPS    float64 `json:"qps"`
	Errors float64 `json:"errors"`
	MeanMs float64 `json:"mean_ms"`
	P99Ms  float64 `json:"p99_ms"`
}

// Options is what New needs: the nodes to label, the digest's size, and
// what the scrape reads at each collection (Collector).
type Options struct {
	DigestSize int      // shapes the query digest holds; 0 turns it off
	Nodes      []string // node names, for shardgate_backend_statements_total
	Collector
}

// AddNodes labels the statements of nodes (added by a reload) in
// shardgate_backend_statements_total. Safe for concurrent use.
func (m *Metrics) AddNodes(nodes ...string) {
	m.addMu.Lock()
	defer m.addMu.Unlock()
	next := maps.Clone(*m.backend.Load())
	for _, n := range nodes {
		if next[n] == nil {
			next[n] = &[2]prometheus.Counter{m.backendVec.WithLabelValues(n, "master"), m.backendVec.WithLabelValues(n, "replica")}
		}
	}
	m.backend.Store(&next)
}

// New registers the proxy's series in a registry of its own, beside the
// standard Go runtime (go_*: goroutines, memory, GC) and process
// (process_*: CPU, file descriptors, start time) collectors every
// Prometheus user expects.
func New(o Options) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), stop: make(chan struct{})}
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
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
	m.backendVec = be
	m.backend.Store(&map[string]*[2]prometheus.Counter{})
	m.AddNodes(o.Nodes...)
	m.streams = prometheus.NewGauge(prometheus.GaugeOpts{Name: "shardgate_change_streams", Help: "GET /changes streams open now."})
	m.changes = prometheus.NewCounter(prometheus.CounterOpts{Name: "shardgate_change_stream_changes_total", Help: "Row changes sent on GET /changes."})
	m.reg.MustRegister(stmts, dur, m.errors, be, m.streams, m.changes, o.Collector)
	if o.DigestSize > 0 {
		m.digest = digest.New(o.DigestSize)
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "shardgate_digest_shapes",
			Help: "Statement shapes the query digest holds."}, func() float64 { return float64(m.digest.Len()) }))
	}
	return m
}

// Handler serves the Prometheus exposition of the registry; scrape errors
// go to log.
func (m *Metrics) Handler(log *zap.Logger) http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorLog: zap.NewStdLog(log)})
}

// Digest returns the query digest; nil when digest_size is 0.
func (m *Metrics) Digest() *digest.Digest { return m.digest }

// ClientError counts an ERR packet a client got.
func (m *Metrics) ClientError(code uint16) {
	m.errors.WithLabelValues(strconv.Itoa(int(code))).Inc()
}

// StreamOpened and StreamClosed count the GET /changes streams open;
// ChangeSent counts a row change one of them sent.
func (m *Metrics) StreamOpened() { m.streams.Inc() }

// StreamClosed: see StreamOpened.
func (m *Metrics) StreamClosed() { m.streams.Dec() }

// ChangeSent: see StreamOpened.
func (m *Metrics) ChangeSent() { m.changes.Inc() }

// Statement is what a session tells Observe of one statement it ran.
type Statement struct {
	SQL     string // "" when the command ran no statement: nothing is recorded
	Keyword string
	Plan    *router.Plan // nil when the proxy answered itself (or Node is set)
	Node    string       // a prepared statement run on this node alone
	// Unsharded: with Node, the session's schema has no sharded table.
	Unsharded bool
	Replica   bool   // a replica answered
	ErrCode   uint16 // the ERR the client got, 0 for none
	Failed    bool
	Rows      uint64
	User, DB  string
	Start     time.Time // when the command arrived
	// Slow is slow_log_time (0: off); statements that took as long are
	// logged to Log with their fingerprint.
	Slow time.Duration
	Log  *zap.Logger
	// Key is the session's scratch for the digest key, reused from one
	// statement to the next (Observe returns it grown).
	Key []byte
}

// Observe records s and returns s.Key, grown as needed for the caller to
// keep.
func (m *Metrics) Observe(s *Statement) []byte {
	if s.SQL == "" {
		return s.Key
	}
	now := time.Now()
	d := now.Sub(s.Start)
	r := routeIndex(s.Plan)
	if s.Plan == nil && s.Node != "" {
		r = routeSingle
		if s.Unsharded {
			r = routeUnsharded
		}
	}
	m.stmts[kindIndex(s.Keyword)][r].Inc()
	m.durations[r].Observe(d.Seconds())
	role := 0
	if s.Replica {
		role = 1
	}
	backend := *m.backend.Load()
	if s.Node != "" {
		if b := backend[s.Node]; b != nil {
			b[role].Inc()
		}
	}
	if s.Plan != nil {
		last := ""
		for i := range s.Plan.Targets {
			if n := s.Plan.Targets[i].Node; n != last {
				if b := backend[n]; b != nil {
					b[role].Inc()
				}
				last = n
			}
		}
	}
	failed := s.Failed
	if s.ErrCode != 0 {
		failed = true
		m.ClientError(s.ErrCode)
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
	key := s.Key
	if m.digest != nil || s.Slow > 0 {
		key = digest.Key(key[:0], s.User, s.DB, nil)
		fp := len(key)
		key = router.AppendFingerprint(key, s.SQL)
		var valueRows int
		key, valueRows = digest.Collapse(key, fp) // VALUES (?,?),... is one shape
		if len(key)-fp > maxFingerprint {
			key = append(key[:fp+maxFingerprint], "..."...)
		}
		if m.digest != nil {
			m.digest.RecordValues(key, stmtRoutes[r], d, s.Rows, valueRows, failed, now)
		}
		if s.Slow > 0 && d >= s.Slow {
			s.Log.Warn("slow query", zap.Duration("took", d), zap.String("route", stmtRoutes[r]), zap.Uint64("rows", s.Rows),
				zap.ByteString("fingerprint", key[fp:]), zap.String("db", s.DB), zap.String("sql", s.SQL), zap.Bool("failed", failed))
		}
	}
	return key
}

// Start runs the sampler: once a second it turns the last second's counts
// into a Sample, until Close.
func (m *Metrics) Start() {
	m.sampling.Add(1)
	go func() {
		defer m.sampling.Done()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		var prev [3 + latencyBuckets]uint64
		for {
			select {
			case now := <-t.C:
				m.sample(&prev, now)
			case <-m.stop:
				return
			}
		}
	}()
}

// Close stops the sampler and waits for it; calling it again does nothing.
func (m *Metrics) Close() {
	m.stopOnce.Do(func() { close(m.stop) })
	m.sampling.Wait()
}

// sample turns the counts since prev into a Sample.
func (m *Metrics) sample(prev *[3 + latencyBuckets]uint64, now time.Time) {
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
func (m *Metrics) Series() []Sample {
	m.seriesMu.Lock()
	defer m.seriesMu.Unlock()
	return append([]Sample(nil), m.series...)
}
