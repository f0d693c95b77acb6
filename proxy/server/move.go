package server

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/move"
	"github.com/shardgate/shardgate/proxy/admin"
	"github.com/shardgate/shardgate/router"
)

// A gate stands in front of a table that a workflow moves. Sessions enter
// it with their first statement on the table and leave it when their
// transaction (or autocommitted statement) ends; a cutover holds it shut:
// sessions not inside wait, and the cutover waits until none is inside.
type gate struct {
	active  int           // sessions inside
	held    chan struct{} // non-nil while held; closed when released
	empty   chan struct{} // gets a token when active drops to 0 while held
	waiting int           // statements waiting while held (the buffer, cutover.go)
}

// gates are the gates of the tables workflows move, by table name (as
// router.Plan.Tables names them). Statements look at them only while some
// workflow runs (moving is nil otherwise). Safe for concurrent use.
type gates struct {
	mu      sync.Mutex
	byTable map[string]*gate
	// moving is the published copy of byTable that statements read
	// without the lock; nil until a workflow exists.
	moving atomic.Pointer[map[string]*gate]
	// heldStatements counts statements a cutover held.
	heldStatements atomic.Uint64
	conf           *liveConfig // the cutover timeout and the buffer's bounds
	// buffer counts what the gates held (cutover.go).
	buffer bufferCounters
	// fleet announces a cutover to the other proxies of the fleet
	// (cutover.go); nil from one file.
	fleet FleetCutover
}

// gate returns table's gate, making it (and publishing the set) if needed.
func (gs *gates) gate(table string) *gate {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if g := gs.byTable[table]; g != nil {
		return g
	}
	g := &gate{}
	next := make(map[string]*gate, len(gs.byTable)+1)
	for k, v := range gs.byTable {
		next[k] = v
	}
	next[table] = g
	gs.byTable = next
	gs.moving.Store(&next)
	return g
}

// enter enters the gates in m of tables that the session is not inside
// yet (inside) and returns inside with them added; it waits while one is
// held and reports whether it did (the plan must then be made again: the
// rule may have changed).
func (gs *gates) enter(inside []*gate, m map[string]*gate, tables []string) (_ []*gate, waited bool, err error) {
	for _, t := range tables {
		g := m[t]
		if g == nil || slices.Contains(inside, g) {
			continue
		}
		for {
			gs.mu.Lock()
			held := g.held
			if held == nil {
				g.active++
				inside = append(inside, g)
				gs.mu.Unlock()
				break
			}
			gs.mu.Unlock()
			waited = true
			if err := gs.wait(t, g, held); err != nil {
				return inside, true, err
			}
		}
	}
	return inside, waited, nil
}

// leave leaves the gates inside; it returns inside emptied.
func (gs *gates) leave(inside []*gate) []*gate {
	gs.mu.Lock()
	for _, g := range inside {
		g.active--
		if g.active == 0 && g.held != nil {
			select {
			case g.empty <- struct{}{}:
			default:
			}
		}
	}
	gs.mu.Unlock()
	return inside[:0]
}

// hold shuts table's gate and waits until no session is inside, or ctx
// ends; release opens it again and returns how long it was shut: the
// pause, counted in the metrics, logged and saved by the workflow.
func (gs *gates) hold(ctx context.Context, db, table string) (release func() time.Duration, err error) {
	g := gs.gate(table)
	gs.mu.Lock()
	if g.held != nil {
		gs.mu.Unlock()
		return nil, fmt.Errorf("table %s is already held", table)
	}
	g.held, g.empty = make(chan struct{}), make(chan struct{}, 1)
	gs.mu.Unlock()
	t0 := time.Now()
	release = func() time.Duration {
		gs.mu.Lock()
		close(g.held)
		g.held = nil
		gs.mu.Unlock()
		d := time.Since(t0)
		gs.buffer.paused(d)
		return d
	}
	for {
		gs.mu.Lock()
		n := g.active
		gs.mu.Unlock()
		if n == 0 {
			return release, nil
		}
		select {
		case <-g.empty:
		case <-ctx.Done():
			release()
			return nil, fmt.Errorf("%d sessions stayed inside transactions on %s.%s", n, db, table)
		}
	}
}

// enterGates enters the gates of the tables a plan touches (gates.enter).
func (h *handler) enterGates(m map[string]*gate, tables []string) (waited bool, err error) {
	c := h.c
	c.gates, waited, err = c.srv.gates.enter(c.gates, m, tables)
	return waited, err
}

// leaveGates leaves every gate the session is inside.
func (c *conn) leaveGates() { c.gates = c.srv.gates.leave(c.gates) }

// workflows is the server's side of data movement: it gives the workflows
// (move.Manager) what they need of the proxy (move.Env: node endpoints,
// replica lag, holding a table's statements and swapping its rule) and the
// admin console what it starts and commands (admin.Workflows).
type workflows struct {
	m     *move.Manager
	conf  *liveConfig
	gates *gates
	// ruleChanged is told of each rule a cutover puts in force.
	ruleChanged func(rt *router.Router, db, table string)
	// publish writes a rule a cutover or a rollback swapped into the
	// fleet's topology (publish.go; nothing from one file).
	publish func(db, table string, rule config.ShardRule)
	// leader names the fleet's leader and its admin address (nil from
	// one file).
	leader func() (id, admin string)
	log    *zap.Logger
}

// startWorkflows opens the workflow store in the sidecar, puts in force
// the rules of tables already cut over, and resumes the workflows that have
// not ended. It returns nil when the sidecar's node is unknown.
func startWorkflows(s *Server) *workflows {
	cfg := s.cfg()
	node := cfg.Sidecar.Node
	if node == "" && len(cfg.Schemas) > 0 {
		node = cfg.Schemas[0].Default
	}
	w := &workflows{conf: &s.liveConfig, gates: &s.gates, ruleChanged: s.tables.ruleChanged, publish: s.publisher.publish, log: s.log}
	ep, err := w.Endpoint(node)
	if err != nil {
		return nil
	}
	host, _ := os.Hostname()
	store := move.NewStore(ep, cfg.Sidecar.DB)
	store.CloseIdleAfter(cfg.Backend.IdleTimeout) // as the pools: servers count the threads
	w.m = move.NewManager(store, w, s.log, host+"/"+cfg.Addr)
	if s.fleet != nil {
		// In a fleet only the leader runs workflows (LeadWorkflows); every
		// proxy gates the tables they move from their start (cutover.go).
		w.m.Follow()
		w.leader = s.fleetLeader
		w.m.WatchTables(func(_, table string) { w.gates.gate(table) })
	}
	// Start-up waits a little for the sidecar, not for ever: a node that
	// does not answer must not keep the proxy from serving.
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.resume()
	}()
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		s.log.Warn("the sidecar has not answered in 3s; workflows resume when it does")
	}
	return w
}

func (w *workflows) resume() {
	ws, err := w.m.List()
	if err != nil {
		w.log.Warn("cannot read the data-movement workflows from the sidecar; tables cut over by a workflow use their ks.yaml rule until it is updated", zap.Error(err))
		return
	}
	ovr, _ := w.m.Overrides()
	for t, r := range ovr {
		db, table, _ := strings.Cut(t, ".")
		if err := w.swapRule(db, table, r); err != nil {
			w.log.Error("cannot use the rule a workflow cut over to", zap.String("table", t), zap.Error(err))
		}
	}
	for _, x := range ws {
		if !x.Ended() {
			w.gates.gate(x.Spec.Table)
		}
	}
	if err := w.m.Resume(); err != nil {
		w.log.Warn("resuming workflows", zap.Error(err))
	}
}

// swapRule puts rule in force for db.table (liveConfig.swapRule) and
// has the table definitions read under it.
func (w *workflows) swapRule(db, table string, rule config.ShardRule) error {
	lv, err := w.conf.swapRule(db, table, rule)
	if err != nil {
		return err
	}
	go w.ruleChanged(lv.router, db, table)
	w.log.Info("shard rule swapped", zap.String("table", db+"."+table), zap.String("subtables", strings.Join(move.Targets(rule), ",")),
		zap.Uint64("version", lv.version))
	return nil
}

// Endpoint is where node's master is, with the node's account (move.Env).
func (w *workflows) Endpoint(node string) (move.Endpoint, error) {
	n := w.conf.node(node)
	if n == nil {
		return move.Endpoint{}, fmt.Errorf("no node %s", node)
	}
	for _, nc := range w.conf.cfg().Nodes {
		if nc.Name == node {
			return move.Endpoint{Addr: n.Addr(), User: nc.User, Password: nc.Password}, nil
		}
	}
	return move.Endpoint{}, fmt.Errorf("no node %s", node)
}

// Lag is the largest lag of node's replicas (move.Env).
func (w *workflows) Lag(node string) time.Duration {
	n := w.conf.node(node)
	if n == nil {
		return 0
	}
	var lag time.Duration
	for _, r := range n.Replicas() {
		lag = max(lag, r.Status().Lag)
	}
	return lag
}

// Pause holds the statements on db.table until no session is inside a
// transaction on it (move.Env); the function it returns puts the new rule
// in force (none when nil) and lets them go. In a fleet every other live
// proxy holds them too, as far as it acknowledges within
// cutover_ack_wait, and puts the same rule in force before it lets them
// go (cutover.go).
func (w *workflows) Pause(ctx context.Context, db, table string) (func(*config.ShardRule) (time.Duration, error), error) {
	fp := w.announce(ctx, db, table)
	release, err := w.gates.hold(ctx, db, table)
	if err != nil {
		fp.end(nil)
		return nil, err
	}
	fp.wait(ctx)
	return func(to *config.ShardRule) (paused time.Duration, err error) {
		defer func() { paused = release() }()
		defer fp.end(to)
		if to == nil {
			return 0, nil
		}
		if err := w.swapRule(db, table, *to); err != nil {
			return 0, err
		}
		w.publish(db, table, *to)
		return 0, nil
	}, nil
}

// List lists the workflows (admin.Workflows).
func (w *workflows) List() ([]move.Status, error) { return w.m.List() }

// Command sends a workflow a command (admin.Workflows). In a fleet the
// leader runs the workflows: another proxy says where it is.
func (w *workflows) Command(name, cmd string) error {
	if w.leader != nil && !w.m.Leading() {
		id, addr := w.leader()
		return fmt.Errorf("workflow %s is run by the fleet's leader %s (admin %s): send the command there", name, cmp.Or(id, "(none elected yet)"), cmp.Or(addr, "unknown"))
	}
	return w.m.Command(name, cmd)
}

// Start sets up the gate of sp's table, then starts the workflow
// (admin.Workflows). In a fleet, a proxy that does not lead records it in
// the sidecar, where the leader finds it within a second and runs it
// (move.Manager.Lead).
func (w *workflows) Start(sp move.Spec) (*move.Workflow, error) {
	w.gates.gate(sp.Table)
	return w.m.Start(sp)
}

// Spec checks a request against the configuration in force
// (admin.Workflows).
func (w *workflows) Spec(req admin.MoveRequest) (move.Spec, error) {
	db, table, ok := strings.Cut(req.Table, ".")
	if !ok || db == "" || table == "" {
		return move.Spec{}, fmt.Errorf("table must be db.table, got %q", req.Table)
	}
	cfg := w.conf.cfg()
	var cur *config.ShardRule
	for i := range cfg.Schemas {
		for k := range cfg.Schemas[i].Shard {
			if r := &cfg.Schemas[i].Shard[k]; r.DB == db && r.Table == table {
				cur = r
			}
		}
	}
	if cur == nil {
		return move.Spec{}, fmt.Errorf("table %s has no shard rule in ks.yaml: add the rule it should have (for an import, its target layout)", req.Table)
	}
	if cur.Type == "global" {
		return move.Spec{}, fmt.Errorf("table %s is a global table: every node holds all of it, there is nothing to reshard", req.Table)
	}
	opts := req.Options
	if opts == (config.MoveOptions{}) {
		opts = cfg.Move
	}
	sp := move.Spec{Name: req.Name, Kind: req.Kind, DB: db, Table: table, From: *cur, To: *cur, AutoCutover: req.AutoCutover, Options: opts.WithDefaults()}
	switch req.Kind {
	case "", move.KindReshard:
		sp.Kind = move.KindReshard
		if err := newRule(&sp.To, req); err != nil {
			return move.Spec{}, err
		}
		if cur.Type != "hash" && cur.Type != "range" {
			return move.Spec{}, fmt.Errorf("only hash and range tables can be resharded; %s is %s", req.Table, cur.Type)
		}
		if err := withRules(cfg, map[string]config.ShardRule{req.Table: sp.To}).Validate(); err != nil {
			return move.Spec{}, fmt.Errorf("the new rule: %w", err)
		}
	case move.KindImport:
		src, stable, ok := strings.Cut(req.SourceTable, ".")
		if req.Source == nil || req.Source.Addr == "" || !ok {
			return move.Spec{}, fmt.Errorf("an import needs source (addr, user, password) and source_table db.table")
		}
		sp.Source, sp.SourceDB, sp.SourceTable = req.Source, src, stable
	default:
		return move.Spec{}, fmt.Errorf("kind must be reshard or import, not %q", req.Kind)
	}
	return sp, nil
}

// newRule changes to, a copy of the current rule, into the rule req asks
// for: what req leaves out stays; the generation is the next one.
func newRule(to *config.ShardRule, req admin.MoveRequest) error {
	if req.Type != "" {
		to.Type = req.Type
	}
	if req.Key != "" {
		to.Key = req.Key
	}
	if req.Nodes != nil {
		to.Nodes = req.Nodes
	}
	if req.Locations != nil {
		to.Locations = req.Locations
	}
	if req.TableRowLimit != 0 {
		to.TableRowLimit = req.TableRowLimit
	}
	if req.DateRange != nil {
		to.DateRange = req.DateRange
	}
	to.Generation++
	if to.Type != "hash" && to.Type != "range" {
		return fmt.Errorf("the new rule must be hash or range (its subtables get a new generation's names), not %q", to.Type)
	}
	return nil
}
