package server

import (
	"bufio"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/pprof"
	"runtime"
	"strings"

	"go.uber.org/zap"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/shardgate/shardgate/changestream"
	"github.com/shardgate/shardgate/mysql"
)

// Stats is a snapshot of the server for operators.
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
	PacketsTooLarge         uint64 `json:"packets_too_large"`
	LongDataTooLarge        uint64 `json:"long_data_too_large"`
	WriteTimeouts           uint64 `json:"client_write_timeouts"`
	Queries                 uint64 `json:"queries_total"`
	ErrorsSent              uint64 `json:"errors_total"`
	Goroutines              int    `json:"goroutines"`
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

// Stats returns a snapshot of sessions, counters and pools.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	n := len(s.sessions)
	s.mu.Unlock()
	st := Stats{Sessions: n, ConnsTotal: s.connsTotal.Load(), ConnsRejected: s.rejected.Load(), AcceptErrors: s.acceptErrors.Load(), IdleTxnClosed: s.idleTxnClosed.Load(), Panics: s.panics.Load(),
		Unauthenticated: s.unauth.Load(), UnauthenticatedRejected: s.unauthRejected.Load(),
		PacketsTooLarge: s.packetsTooLarge.Load(), LongDataTooLarge: s.longDataTooLarge.Load(), WriteTimeouts: s.writeTimeouts.Load(),
		Queries: s.queries.Load(), ErrorsSent: s.errorsSent.Load(), Goroutines: runtime.NumGoroutine()}
	st.PlanCacheHits, st.PlanCacheMisses, st.PlanCacheShapes = s.rt().CacheStats()
	st.HeldStatements = s.heldStatements.Load()
	st.SchemaDrift, st.CatalogVersion = s.tables.driftReport(), s.tables.catalog.Version()
	for _, nd := range s.order {
		x := nd.Stats()
		ns := NodeStats{Name: x.Name, Addr: x.Addr, Up: x.Up, InUse: x.InUse, Idle: x.Idle,
			Max: x.Max, Dials: x.Dials, DialFailures: x.DialFailures, AcquireTimeouts: x.AcquireTimeouts, StmtEvictions: x.StmtEvictions,
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
		st.Nodes = append(st.Nodes, ns)
	}
	return st
}

// AdminHandler serves the admin listener (web_addr): /healthz (no
// authentication), /stats, /metrics and /debug/pprof/ (HTTP basic
// authentication with web_user/web_password when web_user is set).
func (s *Server) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", s.serveHealth)
	mux.Handle("/stats", s.auth(http.HandlerFunc(s.serveStats)))
	mux.Handle("/metrics", s.auth(http.HandlerFunc(s.serveMetrics)))
	mux.Handle("/admin/switch_master", s.auth(http.HandlerFunc(s.serveSwitchMaster)))
	mux.Handle("/admin/reload", s.auth(http.HandlerFunc(s.serveReload)))
	mux.Handle("/admin/config", s.auth(http.HandlerFunc(s.serveAdminConfig)))
	mux.Handle("/changes", s.auth(http.HandlerFunc(s.serveChanges)))
	mux.Handle("/admin/workflows", s.auth(http.HandlerFunc(s.serveWorkflows)))
	mux.Handle("/admin/workflows/", s.auth(http.HandlerFunc(s.serveWorkflows)))
	mux.Handle("/admin/digest", s.auth(http.HandlerFunc(s.serveDigest)))
	mux.Handle("/admin/series", s.auth(http.HandlerFunc(s.serveSeries)))
	mux.Handle("/status", s.auth(http.HandlerFunc(s.serveStatus)))
	mux.Handle("/debug/pprof/", s.auth(http.HandlerFunc(pprof.Index)))
	mux.Handle("/debug/pprof/cmdline", s.auth(http.HandlerFunc(pprof.Cmdline)))
	mux.Handle("/debug/pprof/profile", s.auth(http.HandlerFunc(pprof.Profile)))
	mux.Handle("/debug/pprof/symbol", s.auth(http.HandlerFunc(pprof.Symbol)))
	mux.Handle("/debug/pprof/trace", s.auth(http.HandlerFunc(pprof.Trace)))
	return mux
}

// MetricsHandler serves /metrics alone, for prometheus_addr.
func (s *Server) MetricsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", s.serveMetrics)
	return mux
}

func (s *Server) auth(h http.Handler) http.Handler {
	if s.cfg().WebUser == "" {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		if !ok || subtle.ConstantTimeCompare([]byte(u), []byte(s.cfg().WebUser)) != 1 ||
			subtle.ConstantTimeCompare([]byte(p), []byte(s.cfg().WebPassword)) != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="shardgate"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// serveHealth answers 200 while the proxy accepts clients and every node
// is up, 503 otherwise, with the node states as JSON.
func (s *Server) serveHealth(w http.ResponseWriter, r *http.Request) {
	type node struct {
		Name string `json:"name"`
		Addr string `json:"addr"`
		Up   bool   `json:"up"`
	}
	body := struct {
		Status string `json:"status"`
		Nodes  []node `json:"nodes"`
	}{Status: "ok"}
	code := http.StatusOK
	for _, n := range s.order {
		body.Nodes = append(body.Nodes, node{n.Name, n.Addr(), n.Up()})
		if !n.Up() {
			body.Status, code = "degraded", http.StatusServiceUnavailable
		}
	}
	if s.draining.Load() {
		body.Status, code = "shutting down", http.StatusServiceUnavailable
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(body)
}

// serveSwitchMaster moves a node's writes to another of its servers: POST
// /admin/switch_master?node=NAME&addr=HOST:PORT, where addr is the node's
// configured master or one of its replicas. For a switchover the operator
// has made (the new master writable and no longer replicating); the proxy
// also follows such a promotion by itself when the old master turns
// read-only or goes down.
func (s *Server) serveSwitchMaster(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "use POST", http.StatusMethodNotAllowed)
		return
	}
	name, addr := r.URL.Query().Get("node"), r.URL.Query().Get("addr")
	n := s.nodes[name]
	if n == nil {
		http.Error(w, fmt.Sprintf("no node %q", name), http.StatusNotFound)
		return
	}
	known := addr == s.cfg().Node(name).Master
	for _, rep := range n.Replicas() {
		known = known || rep.Addr() == addr
	}
	if !known {
		http.Error(w, fmt.Sprintf("%q is neither node %s's configured master nor one of its replicas", addr, name), http.StatusBadRequest)
		return
	}
	from := n.Addr()
	n.SwitchMaster(addr)
	fmt.Fprintf(w, "node %s: master %s -> %s\n", name, from, addr)
}

// serveAdminConfig is the admin SQL's show commands as JSON: GET
// /admin/config gives the proxy's settings, the nodes with their replicas
// and state, and the schemas with their rules.
func (s *Server) serveAdminConfig(w http.ResponseWriter, r *http.Request) {
	objects := func(cols []mysql.Column, rows [][][]byte) []map[string]string {
		out := make([]map[string]string, 0, len(rows))
		for _, row := range rows {
			m := make(map[string]string, len(cols))
			for i, c := range cols {
				m[c.Name] = string(row[i])
			}
			out = append(out, m)
		}
		return out
	}
	proxy := map[string]string{}
	for _, row := range s.proxyConfigRows() {
		proxy[string(row[0])] = string(row[1])
	}
	body := map[string]any{
		"proxy":   proxy,
		"nodes":   objects(textColumns("Node", "Address", "Type", "State", "Usable", "Lag", "InUse", "Idle", "MaxConn", "Reads"), s.nodeRows()),
		"schemas": objects(textColumns("User", "DB", "Table", "Type", "Key", "Nodes_List", "Locations", "TableRowLimit", "Default", "RW_Split", "Read_Consistency"), s.schemaRows()),
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(body)
}

// serveReload reads the configuration file again and applies it (POST
// /admin/reload): 200 with the new version, or 409 with why nothing
// changed.
func (s *Server) serveReload(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "use POST", http.StatusMethodNotAllowed)
		return
	}
	if s.cfgPath == "" {
		http.Error(w, "this proxy was not started from a configuration file", http.StatusConflict)
		return
	}
	if err := s.ReloadFile(s.cfgPath); err != nil {
		s.log.Warn("reload refused", zap.Error(err))
		http.Error(w, err.Error(), http.StatusConflict)
		return
	}
	fmt.Fprintf(w, "reloaded %s: configuration version %d\n", s.cfgPath, s.lv().version)
}

func (s *Server) serveStats(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(s.Stats())
}

// serveMetrics serves the Prometheus exposition of the proxy's registry
// (metrics.go).
func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) {
	promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{ErrorLog: zap.NewStdLog(s.log)}).ServeHTTP(w, r)
}

// serveChanges streams the change streams of logical tables as JSON lines
// (changestream.Change): GET /changes?table=db.t&table=...&from=node1=GTIDS&from=...
// (&until=node1=GTIDS&...: end once each named node has reached it).
// Each line is flushed as it is written; a client that reads slowly slows
// only its own stream. The stream ends when the client goes away or a
// node's reader fails (its error is the last line, {"error": "..."}).
func (s *Server) serveChanges(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	o := changestream.Options{Tables: q["table"], From: map[string]string{}, Until: map[string]string{}, Encode: true}
	for _, p := range []struct {
		key string
		m   map[string]string
	}{{"from", o.From}, {"until", o.Until}} {
		for _, f := range q[p.key] {
			node, pos, ok := strings.Cut(f, "=")
			if !ok || s.nodes[node] == nil {
				http.Error(w, fmt.Sprintf("%s=%q: want node=GTID-position with a node of this proxy", p.key, f), http.StatusBadRequest)
				return
			}
			p.m[node] = pos
		}
	}
	if len(o.Until) == 0 {
		o.Until = nil
	}
	cfg := s.cfg()
	changes, errc, err := changestream.Subscribe(r.Context(), changestream.Sources(cfg), changestream.Names(cfg), o)
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	s.metrics.streams.Inc()
	defer s.metrics.streams.Dec()
	w.Header().Set("Content-Type", "application/x-ndjson")
	fl, _ := w.(http.Flusher)
	bw := bufio.NewWriterSize(w, 64<<10)
	for ch := range changes {
		// Encoded by each node's reader (Options.Encode), in parallel.
		if _, err := bw.Write(ch.JSON); err != nil {
			break // the client went away; r.Context() ends the readers
		}
		s.metrics.changes.Inc()
		if len(changes) == 0 {
			if bw.Flush() != nil {
				break
			}
			if fl != nil {
				fl.Flush()
			}
		}
	}
	if err := <-errc; err != nil {
		json.NewEncoder(bw).Encode(map[string]string{"error": err.Error()})
	}
	bw.Flush()
}
