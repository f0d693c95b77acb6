package admin

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/shardgate/shardgate/changestream"
	"github.com/shardgate/shardgate/mysql"
)

// serveHealth answers 200 while the proxy accepts clients and every node
// is up, 503 otherwise, with the node states as JSON.
func (c *Console) serveHealth(w http.ResponseWriter, r *http.Request) {
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
	for _, n := range c.env.Nodes() {
		body.Nodes = append(body.Nodes, node{n.Name, n.Addr(), n.Up()})
		if !n.Up() {
			body.Status, code = "degraded", http.StatusServiceUnavailable
		}
	}
	if c.env.Draining() {
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
func (c *Console) serveSwitchMaster(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "use POST", http.StatusMethodNotAllowed)
		return
	}
	name, addr := r.URL.Query().Get("node"), r.URL.Query().Get("addr")
	n := c.node(name)
	if n == nil {
		http.Error(w, fmt.Sprintf("no node %q", name), http.StatusNotFound)
		return
	}
	known := addr == c.cfg().Node(name).Master
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
func (c *Console) serveAdminConfig(w http.ResponseWriter, r *http.Request) {
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
	for _, row := range c.proxyConfigRows() {
		proxy[string(row[0])] = string(row[1])
	}
	body := map[string]any{
		"proxy":   proxy,
		"nodes":   objects(nodeColumns(), nodeRows(c.env.Nodes())),
		"schemas": objects(schemaColumns(), schemaRows(c.cfg())),
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(body)
}

// serveReload reads the configuration file again and applies it (POST
// /admin/reload): 200 with the new version and the shard rule changes
// left for shardgate apply (one line each), or 409 with why nothing
// changed.
func (c *Console) serveReload(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "use POST", http.StatusMethodNotAllowed)
		return
	}
	path := c.env.ConfigPath
	if path == "" {
		http.Error(w, "this proxy was not started from a configuration file", http.StatusConflict)
		return
	}
	waiting, err := c.env.ReloadFile(path)
	if err != nil {
		c.env.Log.Warn("reload refused", zap.Error(err))
		http.Error(w, err.Error(), http.StatusConflict)
		return
	}
	_, version := c.env.Config()
	fmt.Fprintf(w, "reloaded %s: configuration version %d\n", path, version)
	for _, x := range waiting {
		fmt.Fprintf(w, "waits for shardgate apply: %s\n", x)
	}
}

func (c *Console) serveStats(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(c.env.Stats())
}

// serveChanges streams the change streams of logical tables as JSON lines
// (changestream.Change): GET /changes?table=db.t&table=...&from=node1=GTIDS&from=...
// (&until=node1=GTIDS&...: end once each named node has reached it;
// &enums=numbers: ENUM and SET values as index and bit mask).
// Each line is flushed as it is written; a client that reads slowly slows
// only its own stream. The stream ends when the client goes away, when a
// node's reader fails, or when the proxy shuts down; the last two end it
// with a line {"error": "..."} saying why, then a clean end of response.
func (c *Console) serveChanges(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	o := changestream.Options{Tables: q["table"], From: map[string]string{}, Until: map[string]string{}, Encode: true,
		EnumNumbers: q.Get("enums") == "numbers"}
	for _, p := range []struct {
		key string
		m   map[string]string
	}{{"from", o.From}, {"until", o.Until}} {
		for _, f := range q[p.key] {
			node, pos, ok := strings.Cut(f, "=")
			if !ok || c.node(node) == nil {
				http.Error(w, fmt.Sprintf("%s=%q: want node=GTID-position with a node of this proxy", p.key, f), http.StatusBadRequest)
				return
			}
			p.m[node] = pos
		}
	}
	if len(o.Until) == 0 {
		o.Until = nil
	}
	if c.draining() {
		http.Error(w, errShuttingDown, http.StatusServiceUnavailable)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	cfg := c.cfg()
	changes, errc, err := changestream.Subscribe(ctx, changestream.Sources(cfg), changestream.Names(cfg), o)
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	m := c.env.Metrics
	m.StreamOpened()
	defer m.StreamClosed()
	st := c.streams.add(r, o.Tables)
	defer c.streams.remove(st)
	w.Header().Set("Content-Type", "application/x-ndjson")
	// The headers go out now: the client knows its stream is open before
	// the first change.
	w.WriteHeader(http.StatusOK)
	if fl, ok := w.(http.Flusher); ok {
		fl.Flush()
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	end := c.stream(bw, w, changes, st)
	cancel()
	for range changes {
	}
	if err := <-errc; err != nil && end == "" {
		end = err.Error()
	}
	if end != "" {
		json.NewEncoder(bw).Encode(map[string]string{"error": end})
	}
	bw.Flush()
}

// errShuttingDown ends the streams of a proxy that shuts down.
const errShuttingDown = "the proxy is shutting down: resume from the last pos received"

// draining reports whether the proxy's shutdown has begun.
func (c *Console) draining() bool { return c.env.Draining != nil && c.env.Draining() }

// stream writes the changes' JSON lines to bw (over w) until the channel
// closes, the client goes away ("" either way) or the proxy begins its
// shutdown (errShuttingDown): a stream never holds a shutdown up, and its
// client learns why it ended.
func (c *Console) stream(bw *bufio.Writer, w http.ResponseWriter, changes <-chan changestream.Change, st *streamInfo) string {
	m := c.env.Metrics
	fl, _ := w.(http.Flusher)
	// Shutdown has no channel to wait on: Draining is looked at every
	// 100 ms, well within the second a stream may add to a shutdown.
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case ch, ok := <-changes:
			if !ok {
				return ""
			}
			// Encoded by each node's reader (Options.Encode), in parallel.
			if _, err := bw.Write(ch.JSON); err != nil {
				return "" // the client went away; the caller ends the readers
			}
			m.ChangeSent()
			st.sent(ch.Time, time.Now())
			if len(changes) == 0 {
				if bw.Flush() != nil {
					return ""
				}
				if fl != nil {
					fl.Flush()
				}
			}
		case <-tick.C:
			if c.draining() {
				return errShuttingDown
			}
		}
	}
}
