package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/deadlock"
	"github.com/shardgate/shardgate/move"
	"github.com/shardgate/shardgate/xa"
)

// Stats is a snapshot of the server for operators (GET /stats, and the
// scrape through Collector).
type Stats struct {
	Sessions      int    `json:"sessions"`
	ConnsTotal    uint64 `json:"connections_total"`
	ConnsRejected uint64 `json:"connections_rejected"`
	AcceptErrors  uint64 `json:"accept_errors"` // Accept failures waited out (out of descriptors, ...)
	IdleTxnClosed uint64 `json:"idle_in_transaction_closed"`
	// HeldStatements counts statements a cutover held (they ran after it).
	HeldStatements          uint64 `json:"held_statements"`
	Panics                  uint64 `json:"session_panics"` // sessions ended by a bug in the proxy
	Unauthenticated         int64  `json:"unauthenticated"`
	UnauthenticatedRejected uint64 `json:"unauthenticated_rejected"`
	UnauthenticatedEvicted  uint64 `json:"unauthenticated_evicted"` // handshakes closed to make room at max_unauthenticated_connections
	PacketsTooLarge         uint64 `json:"packets_too_large"`
	LongDataTooLarge        uint64 `json:"long_data_too_large"`
	WriteTimeouts           uint64 `json:"client_write_timeouts"`
	Queries                 uint64 `json:"queries_total"`
	ErrorsSent              uint64 `json:"errors_total"`
	Goroutines              int    `json:"goroutines"`

	// PacketMemoryInUse is the memory client packets being received hold
	// (packet_memory_total bounds it); PacketMemoryRefused counts the
	// packets it refused (1041).
	PacketMemoryInUse   int64  `json:"packet_memory_in_use"`
	PacketMemoryRefused uint64 `json:"packet_memory_refused"`

	// Plan cache of the sharded schemas: statements routed from a cached
	// template, statements planned, shapes held.
	PlanCacheHits   uint64      `json:"plan_cache_hits_total"`
	PlanCacheMisses uint64      `json:"plan_cache_misses_total"`
	PlanCacheShapes int         `json:"plan_cache_shapes"`
	Nodes           []NodeStats `json:"nodes"`
	// SchemaDrift lists, per logical table ("db.table"), how its
	// subtables' definitions differ from the first one read (columns,
	// types, keys; missing subtables), as found at start-up, on demand and
	// after DDL through the proxy. Empty when they agree.
	SchemaDrift map[string][]string `json:"schema_drift"`
	// CatalogVersion counts the changes of table definitions seen.
	CatalogVersion uint64 `json:"catalog_version"`
	// FenceRetries counts statements run again after they met a fence
	// (a stale shard rule) and the cut-over rule was read from the sidecar.
	FenceRetries uint64 `json:"fence_retries_total"`
	// TopologyPublishFailures counts the attempts to write a swapped rule
	// into the fleet's topology that etcd did not take;
	// TopologyPublishPending the rules not written yet.
	TopologyPublishFailures uint64 `json:"topology_publish_failures_total"`
	TopologyPublishPending  int    `json:"topology_publish_pending"`
	// Fleet is the fleet this proxy is part of; nil from one file.
	Fleet *FleetStats `json:"fleet,omitempty"`
	// Buffer is what cutovers held (buffer.go).
	Buffer BufferStats `json:"buffer"`
	// Streams are the Kafka streams of streams: (streams.go).
	Streams []StreamStats `json:"streams,omitempty"`
	// Cache is the result cache (cache.go); nil without one.
	Cache *CacheStats `json:"cache,omitempty"`
}

// NodeStats is one backend node's pool and health.
type NodeStats struct {
	Name            string  `json:"name"`
	Addr            string  `json:"addr"`
	Up              bool    `json:"up"`
	InUse           int     `json:"in_use"`
	Idle            int     `json:"idle"`
	Max             int     `json:"max"`
	Dials           uint64  `json:"dials_total"`
	DialFailures    uint64  `json:"dial_failures_total"`
	AcquireTimeouts uint64  `json:"acquire_timeouts_total"`
	WaitSeconds     float64 `json:"acquire_wait_seconds_total"` // time statements waited for a pooled connection
	StmtEvictions   uint64  `json:"stmt_evictions_total"`
	Resets          uint64  `json:"handover_resets_total"` // idle connections reset as they passed to another session
	// DoublePuts counts connections returned to the pool that were not
	// checked out: ignored, and a bug to report.
	DoublePuts uint64 `json:"double_returns_total"`
	// Replicas are the node's read replicas (slave) and what their last
	// check found.
	Replicas []ReplicaStats `json:"replicas,omitempty"`
}

// ReplicaStats is one read replica of a node.
type ReplicaStats struct {
	Addr   string `json:"addr"`
	Weight int    `json:"weight"`
	Up     bool   `json:"up"`
	// Usable: replication runs and lags no more than max_replica_lag;
	// Why says otherwise.
	Usable  bool    `json:"usable"`
	Why     string  `json:"why,omitempty"`
	LagSec  float64 `json:"lag_seconds"` // -1: unknown
	GTIDPos string  `json:"gtid_slave_pos"`
	Reads   uint64  `json:"reads_total"` // connections handed out for reads
	InUse   int     `json:"in_use"`
	Idle    int     `json:"idle"`
}

// Nodes returns the pools and health of nodes and their replicas, in the
// order given.
func Nodes(nodes []*backend.Node) []NodeStats {
	var out []NodeStats
	for _, nd := range nodes {
		x := nd.Stats()
		ns := NodeStats{Name: x.Name, Addr: x.Addr, Up: x.Up, InUse: x.InUse, Idle: x.Idle,
			Max: x.Max, Dials: x.Dials, DialFailures: x.DialFailures, AcquireTimeouts: x.AcquireTimeouts, StmtEvictions: x.StmtEvictions,
			DoublePuts: x.DoublePuts, Resets: x.Resets,
			WaitSeconds: float64(x.WaitNanos) / 1e9}
		for _, r := range nd.Replicas() {
			rs, ps := r.Status(), r.Stats()
			lag := -1.0
			if rs.Lag >= 0 {
				lag = rs.Lag.Seconds()
			}
			ns.Replicas = append(ns.Replicas, ReplicaStats{Addr: r.Addr(), Weight: r.Weight(), Up: ps.Up, Usable: rs.Usable, Why: rs.Why,
				LagSec: lag, GTIDPos: rs.GTIDPos, Reads: r.Reads(), InUse: ps.InUse, Idle: ps.Idle})
		}
		out = append(out, ns)
	}
	return out
}

// Collector exports, at each scrape, what the server reads at that moment:
// Stats (sessions, limits, pools, replicas, plan cache), the XA
// coordinator's counts and the workflows running. It is unchecked: its
// series depend on the nodes, replicas and workflows of the moment.
type Collector struct {
	Stats func() Stats
	// XA returns the two-phase commit counts; false when no schema uses
	// transaction_mode xa.
	XA func() (xa.Stats, bool)
	// Workflows returns the data-movement workflows running; nil without
	// the sidecar database's node.
	Workflows func() []move.Status
	// Deadlock returns the deadlock detector's counts; false when it is
	// off (deadlock_detect_after: 0).
	Deadlock func() (deadlock.Stats, bool)
}

// Describe describes nothing: the collector is unchecked.
func (c Collector) Describe(ch chan<- *prometheus.Desc) {}

// Collect sends the series of one snapshot.
func (c Collector) Collect(ch chan<- prometheus.Metric) {
	e := emitter(ch)
	st := c.Stats()
	e.server(st)
	e.limits(st)
	for _, n := range st.Nodes {
		e.node(n)
	}
	e.buffer(st.Buffer)
	if st.Fleet != nil {
		e.fleet(st.Fleet, st)
	}
	if c.XA != nil {
		if x, ok := c.XA(); ok {
			e.xa(x)
		}
	}
	if c.Deadlock != nil {
		if d, ok := c.Deadlock(); ok {
			e.deadlock(d)
		}
	}
	for _, s := range st.Streams {
		e.stream(s)
	}
	if st.Cache != nil {
		e.cache(st.Cache)
	}
	if c.Workflows != nil {
		for _, w := range c.Workflows() {
			e.workflow(w)
		}
	}
}

// emitter owns the sending of one scrape's series to the registry's channel.
type emitter chan<- prometheus.Metric

const (
	gauge   = prometheus.GaugeValue
	counter = prometheus.CounterValue
)

// one sends a single series; labels alternate names and values.
func (e emitter) one(name, help string, typ prometheus.ValueType, v float64, labels ...string) {
	var names []string
	var vals []string
	for i := 0; i+1 < len(labels); i += 2 {
		names, vals = append(names, labels[i]), append(vals, labels[i+1])
	}
	e <- prometheus.MustNewConstMetric(prometheus.NewDesc(name, help, names, nil), typ, v, vals...)
}

// server sends the series of the client side: sessions, statements, plan cache and goroutines.
func (e emitter) server(st Stats) {
	g, k := gauge, counter
	e.one("shardgate_client_connections", "Client connections open now.", g, float64(st.Sessions))
	e.one("shardgate_client_connections_total", "Client connections accepted.", k, float64(st.ConnsTotal))
	e.one("shardgate_client_connections_rejected_total", "Client connections refused (allow_ips, max_connections).", k, float64(st.ConnsRejected))
	e.one("shardgate_accept_errors_total", "Accept failures waited out (out of file descriptors or memory).", k, float64(st.AcceptErrors))
	e.one("shardgate_unauthenticated_connections", "Connections that have not logged in yet.", g, float64(st.Unauthenticated))
	e.one("shardgate_session_panics_total", "Sessions ended by a bug in the proxy.", k, float64(st.Panics))
	e.one("shardgate_queries_total", "Statements run (COM_QUERY and COM_STMT_EXECUTE).", k, float64(st.Queries))
	e.one("shardgate_errors_total", "ERR packets the proxy itself sent.", k, float64(st.ErrorsSent))
	e.one("shardgate_cutover_held_statements_total", "Statements a cutover held until the new shard rule was in force.", k, float64(st.HeldStatements))
	e.one("shardgate_fence_retries_total", "Statements that met a fence (a stale shard rule) and ran again under the cut-over rule.", k, float64(st.FenceRetries))
	e.one("shardgate_plan_cache_hits_total", "Statements on sharded schemas routed from the plan cache without parsing.", k, float64(st.PlanCacheHits))
	e.one("shardgate_plan_cache_misses_total", "Statements on sharded schemas the planner parsed and planned.", k, float64(st.PlanCacheMisses))
	e.one("shardgate_plan_cache_shapes", "Statement shapes the plan caches hold.", g, float64(st.PlanCacheShapes))
	e.one("shardgate_goroutines", "Goroutines of the proxy.", g, float64(st.Goroutines))
	e.one("shardgate_packet_memory_bytes", "Memory the client packets being received hold (packet_memory_total bounds it).", g, float64(st.PacketMemoryInUse))
}

// limits sends shardgate_limits_tripped_total, one series per limit.
func (e emitter) limits(st Stats) {
	for _, l := range []struct {
		name string
		v    uint64
	}{
		{"max_allowed_packet", st.PacketsTooLarge},
		{"long_data", st.LongDataTooLarge},
		{"packet_memory_total", st.PacketMemoryRefused},
		{"client_write_timeout", st.WriteTimeouts},
		{"max_unauthenticated_connections", st.UnauthenticatedRejected},
		{"max_unauthenticated_connections_evicted", st.UnauthenticatedEvicted},
		{"idle_in_transaction_timeout", st.IdleTxnClosed},
		{"connections_rejected", st.ConnsRejected},
	} {
		e.one("shardgate_limits_tripped_total", "Clients or statements stopped by a limit, by limit.", counter, float64(l.v), "limit", l.name)
	}
}

// node sends one node's master pool series, then its replicas'.
func (e emitter) node(n NodeStats) {
	g, k := gauge, counter
	e.one("shardgate_backend_up", "1 when the node's master is up.", g, boolFloat(n.Up), "node", n.Name)
	e.one("shardgate_backend_conns_in_use", "Pooled connections checked out.", g, float64(n.InUse), "node", n.Name, "role", "master")
	e.one("shardgate_backend_conns_idle", "Idle pooled connections.", g, float64(n.Idle), "node", n.Name, "role", "master")
	e.one("shardgate_backend_conns_max", "Pool size limit (max_conns_limit).", g, float64(n.Max), "node", n.Name)
	e.one("shardgate_backend_dials_total", "Backend connections opened.", k, float64(n.Dials), "node", n.Name)
	e.one("shardgate_backend_dial_failures_total", "Backend connections that failed to open.", k, float64(n.DialFailures), "node", n.Name)
	e.one("shardgate_backend_acquire_timeouts_total", "Statements that timed out waiting for a pooled connection (acquire_timeout).", k, float64(n.AcquireTimeouts), "node", n.Name)
	e.one("shardgate_backend_handover_resets_total", "Idle pooled connections reset (COM_RESET_CONNECTION) as they passed from one client session to another.", k, float64(n.Resets), "node", n.Name)
	e.one("shardgate_backend_acquire_wait_seconds_total", "Time statements waited for a pooled connection.", k, n.WaitSeconds, "node", n.Name)
	for _, r := range n.Replicas {
		e.replica(n.Name, r)
	}
}

// replica sends one replica's health, lag, pool and read series.
func (e emitter) replica(node string, r ReplicaStats) {
	g, k := gauge, counter
	e.one("shardgate_replica_up", "1 when the replica answers.", g, boolFloat(r.Up), "node", node, "replica", r.Addr)
	e.one("shardgate_replica_usable", "1 when the replica takes reads (replicating, lag within max_replica_lag).", g, boolFloat(r.Usable), "node", node, "replica", r.Addr)
	e.one("shardgate_replica_lag_seconds", "Seconds_Behind_Master of the replica; -1 when unknown.", g, r.LagSec, "node", node, "replica", r.Addr)
	e.one("shardgate_backend_conns_in_use", "Pooled connections checked out.", g, float64(r.InUse), "node", node, "role", "replica:"+r.Addr)
	e.one("shardgate_backend_conns_idle", "Idle pooled connections.", g, float64(r.Idle), "node", node, "role", "replica:"+r.Addr)
	e.one("shardgate_replica_reads_total", "Reads sent to the replica.", k, float64(r.Reads), "node", node, "replica", r.Addr)
}

// xa sends the two-phase commit coordinator's counts.
func (e emitter) xa(x xa.Stats) {
	g, k := gauge, counter
	e.one("shardgate_xa_commits_total", "Transactions of transaction_mode xa committed, by phases (one: one node; two: several).", k, float64(x.OnePhase), "phases", "one")
	e.one("shardgate_xa_commits_total", "Transactions of transaction_mode xa committed, by phases (one: one node; two: several).", k, float64(x.Decided), "phases", "two")
	e.one("shardgate_xa_decisions_refused_total", "Two-phase commits rolled back because their decision could not be written (fenced, sidecar failed).", k, float64(x.Refused))
	e.one("shardgate_xa_recovered_branches_total", "Prepared branches recovery finished, by action.", k, float64(x.RecoveredCommit), "action", "commit")
	e.one("shardgate_xa_recovered_branches_total", "Prepared branches recovery finished, by action.", k, float64(x.RecoveredAbort), "action", "rollback")
	e.one("shardgate_xa_in_flight", "Two-phase commits under way.", g, float64(x.InFlight))
	e.one("shardgate_xa_left_to_recovery", "Transactions whose session left prepared branches to recovery (a node failed mid-commit).", g, float64(x.Owed))
}

// deadlock sends the deadlock detector's counts.
func (e emitter) deadlock(d deadlock.Stats) {
	k := counter
	e.one("shardgate_deadlock_waits_total", "Statements of transactions that waited past deadlock_detect_after.", k, float64(d.WaitsSeen))
	e.one("shardgate_deadlock_graphs_total", "Waits-for graphs the deadlock detector built (each reads the lock waits of the nodes involved).", k, float64(d.Graphs))
	e.one("shardgate_deadlocks_broken_total", "Deadlocks across nodes broken (a victim rolled back, its client answered 1213).", k, float64(d.Broken))
	e.one("shardgate_deadlock_detection_seconds_sum", "Time from each deadlock's forming to its break, summed.", k, d.LatencySum.Seconds())
	e.one("shardgate_deadlock_detection_seconds_max", "The longest time from a deadlock's forming to its break.", gauge, d.LatencyMax.Seconds())
}

// workflow sends one data-movement workflow's progress and phase series.
func (e emitter) workflow(w move.Status) {
	g := gauge
	l := []string{"workflow", w.Spec.Name, "table", w.Spec.Logical(), "kind", w.Spec.Kind}
	e.one("shardgate_workflow_rows_copied", "Rows a data-movement workflow has copied.", g, float64(w.State.RowsCopied), l...)
	e.one("shardgate_workflow_rows_total", "Rows of the source when the workflow's copy began.", g, float64(w.State.RowsTotal), l...)
	e.one("shardgate_workflow_changes_applied", "Binary log row changes the workflow has applied (this run).", g, float64(w.State.ChangesApplied), l...)
	e.one("shardgate_workflow_lag_seconds", "How far the workflow's apply is behind the binary log.", g, w.LagSeconds, l...)
	e.one("shardgate_workflow_differing_ranges", "Key ranges the last verify found different.", g, float64(len(w.State.Diffs)), l...)
	for _, ph := range []string{"copying", "catching-up", "ready", "switched"} {
		e.one("shardgate_workflow_phase", "1 for the phase the workflow is in.", g, boolFloat(w.State.Phase == ph), append(l, "phase", ph)...)
	}
}

// boolFloat is a gauge's value for a fact: 1 when true, 0 when false.
func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
