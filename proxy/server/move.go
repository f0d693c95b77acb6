package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/move"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/proxy/engine"
)

// A gate stands in front of a table that a workflow moves. Sessions enter
// it with their first statement on the table and leave it when their
// transaction (or autocommitted statement) ends; a cutover holds it shut:
// sessions not inside wait, and the cutover waits until none is inside.
type gate struct {
	active int           // sessions inside
	held   chan struct{} // non-nil while held; closed when released
	empty  chan struct{} // gets a token when active drops to 0 while held
}

// gates are the gates of the tables workflows move, by table name (as
// router.Plan.Tables names them). Statements look at them only while some
// workflow runs (moving is nil otherwise).
type gates struct {
	mu sync.Mutex
	m  map[string]*gate
}

// gate returns table's gate, making it (and publishing the set) if needed.
func (s *Server) gate(table string) *gate {
	s.gates.mu.Lock()
	defer s.gates.mu.Unlock()
	if g := s.gates.m[table]; g != nil {
		return g
	}
	if s.gates.m == nil {
		s.gates.m = map[string]*gate{}
	}
	g := &gate{}
	next := make(map[string]*gate, len(s.gates.m)+1)
	for k, v := range s.gates.m {
		next[k] = v
	}
	next[table] = g
	s.gates.m = next
	s.moving.Store(&next)
	return g
}

// enterGates enters the gates of the tables a plan touches; it waits
// while one is held and reports whether it did (the plan must then be made
// again: the rule may have changed).
func (h *handler) enterGates(m map[string]*gate, tables []string) (waited bool, err error) {
	c := h.c
	for _, t := range tables {
		g := m[t]
		if g == nil || slices.Contains(c.gates, g) {
			continue
		}
		for {
			c.srv.gates.mu.Lock()
			held := g.held
			if held == nil {
				g.active++
				c.gates = append(c.gates, g)
				c.srv.gates.mu.Unlock()
				break
			}
			c.srv.gates.mu.Unlock()
			waited = true
			c.srv.heldStatements.Add(1)
			limit := 2*c.srv.cfg().Move.WithDefaults().CutoverTimeout + time.Second
			select {
			case <-held:
			case <-time.After(limit):
				return true, mysql.NewError(mysql.ErLockWaitTimeout, "Lock wait timeout exceeded: table %s is being cut over to a new shard rule and stayed held longer than %v", t, limit)
			}
		}
	}
	return waited, nil
}

// leaveGates leaves every gate the session is inside.
func (c *conn) leaveGates() {
	c.srv.gates.mu.Lock()
	for _, g := range c.gates {
		g.active--
		if g.active == 0 && g.held != nil {
			select {
			case g.empty <- struct{}{}:
			default:
			}
		}
	}
	c.srv.gates.mu.Unlock()
	c.gates = c.gates[:0]
}

// moveEnv is what the workflows need of the server.
type moveEnv struct{ s *Server }

func (e moveEnv) Endpoint(node string) (move.Endpoint, error) {
	n := e.s.nodes[node]
	if n == nil {
		return move.Endpoint{}, fmt.Errorf("no node %s", node)
	}
	for _, nc := range e.s.cfg().Nodes {
		if nc.Name == node {
			return move.Endpoint{Addr: n.Addr(), User: nc.User, Password: nc.Password}, nil
		}
	}
	return move.Endpoint{}, fmt.Errorf("no node %s", node)
}

func (e moveEnv) Lag(node string) time.Duration {
	n := e.s.nodes[node]
	if n == nil {
		return 0
	}
	var lag time.Duration
	for _, r := range n.Replicas() {
		lag = max(lag, r.Status().Lag)
	}
	return lag
}

func (e moveEnv) Pause(ctx context.Context, db, table string) (func(*config.ShardRule) error, error) {
	s := e.s
	g := s.gate(table)
	s.gates.mu.Lock()
	if g.held != nil {
		s.gates.mu.Unlock()
		return nil, fmt.Errorf("table %s is already held", table)
	}
	g.held, g.empty = make(chan struct{}), make(chan struct{}, 1)
	s.gates.mu.Unlock()
	release := func() {
		s.gates.mu.Lock()
		close(g.held)
		g.held = nil
		s.gates.mu.Unlock()
	}
	for {
		s.gates.mu.Lock()
		n := g.active
		s.gates.mu.Unlock()
		if n == 0 {
			break
		}
		select {
		case <-g.empty:
		case <-ctx.Done():
			release()
			return nil, fmt.Errorf("%d sessions stayed inside transactions on %s.%s", n, db, table)
		}
	}
	return func(to *config.ShardRule) error {
		defer release()
		if to == nil {
			return nil
		}
		return s.swapRule(db, table, *to)
	}, nil
}

// swapRule puts rule in force for db.table: the next statement routes by
// it. It is remembered, so a reload of ks.yaml (which still has the old
// rule) keeps it.
func (s *Server) swapRule(db, table string, rule config.ShardRule) error {
	s.swapMu.Lock()
	defer s.swapMu.Unlock()
	if s.overrides == nil {
		s.overrides = map[string]config.ShardRule{}
	}
	s.overrides[db+"."+table] = rule
	old := s.lv()
	lv, err := newLive(withRules(old.cfg, s.overrides))
	if err != nil {
		return err
	}
	lv.version = old.version + 1
	s.current.Store(lv)
	go s.tables.ruleChanged(lv.router, db, table)
	s.log.Info("shard rule swapped", zap.String("table", db+"."+table), zap.String("subtables", strings.Join(move.Targets(rule), ",")),
		zap.Uint64("version", lv.version))
	return nil
}

// withRules returns cfg with the rules of the tables in rules replaced.
func withRules(cfg *config.Config, rules map[string]config.ShardRule) *config.Config {
	if len(rules) == 0 {
		return cfg
	}
	c := *cfg
	c.Schemas = slices.Clone(cfg.Schemas)
	for i := range c.Schemas {
		c.Schemas[i].Shard = slices.Clone(c.Schemas[i].Shard)
		for k, r := range c.Schemas[i].Shard {
			if nr, ok := rules[r.DB+"."+r.Table]; ok {
				c.Schemas[i].Shard[k] = nr
			}
		}
	}
	return &c
}

// startMoves opens the workflow store in the sidecar, puts in force the
// rules of tables already cut over, and resumes the workflows that have
// not ended.
func (s *Server) startMoves() {
	cfg := s.cfg()
	node := cfg.Sidecar.Node
	if node == "" && len(cfg.Schemas) > 0 {
		node = cfg.Schemas[0].Default
	}
	ep, err := moveEnv{s}.Endpoint(node)
	if err != nil {
		return
	}
	host, _ := os.Hostname()
	s.moves = move.NewManager(move.NewStore(ep, cfg.Sidecar.DB), moveEnv{s}, s.log, host+"/"+cfg.Addr)
	// Start-up waits a little for the sidecar, not for ever: a node that
	// does not answer must not keep the proxy from serving.
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.resumeMoves()
	}()
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		s.log.Warn("the sidecar has not answered in 3s; workflows resume when it does")
	}
}

func (s *Server) resumeMoves() {
	ws, err := s.moves.List()
	if err != nil {
		s.log.Warn("cannot read the data-movement workflows from the sidecar; tables cut over by a workflow use their ks.yaml rule until it is updated", zap.Error(err))
		return
	}
	ovr, _ := s.moves.Overrides()
	for t, r := range ovr {
		db, table, _ := strings.Cut(t, ".")
		if err := s.swapRule(db, table, r); err != nil {
			s.log.Error("cannot use the rule a workflow cut over to", zap.String("table", t), zap.Error(err))
		}
	}
	for _, w := range ws {
		if !w.Ended() {
			s.gate(w.Spec.Table)
		}
	}
	if err := s.moves.Resume(); err != nil {
		s.log.Warn("resuming workflows", zap.Error(err))
	}
}

// moveRequest starts a workflow (POST /admin/workflows).
type moveRequest struct {
	Kind  string `json:"kind"`  // reshard (default) or import
	Table string `json:"table"` // db.table
	Name  string `json:"name"`
	// The new rule (reshard): what is left out keeps the current rule's.
	Type          string   `json:"type"`
	Key           string   `json:"key"`
	Nodes         []string `json:"nodes"`
	Locations     []int    `json:"locations"`
	TableRowLimit int      `json:"table_row_limit"`
	DateRange     []string `json:"date_range"`
	// Import: the server and table to read.
	Source      *move.Endpoint     `json:"source"`
	SourceTable string             `json:"source_table"`
	AutoCutover bool               `json:"auto_cutover"`
	Options     config.MoveOptions `json:"options"`
}

// newSpec checks a request against the configuration in force.
func (s *Server) newSpec(req moveRequest) (move.Spec, error) {
	db, table, ok := strings.Cut(req.Table, ".")
	if !ok || db == "" || table == "" {
		return move.Spec{}, fmt.Errorf("table must be db.table, got %q", req.Table)
	}
	cfg := s.cfg()
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
		to := &sp.To
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
		to.Generation = cur.Generation + 1
		if to.Type != "hash" && to.Type != "range" {
			return move.Spec{}, fmt.Errorf("the new rule must be hash or range (its subtables get a new generation's names), not %q", to.Type)
		}
		if cur.Type != "hash" && cur.Type != "range" {
			return move.Spec{}, fmt.Errorf("only hash and range tables can be resharded; %s is %s", req.Table, cur.Type)
		}
		if err := withRules(cfg, map[string]config.ShardRule{req.Table: *to}).Validate(); err != nil {
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

// serveWorkflows lists workflows (GET), starts one (POST), or sends one
// a command (POST /admin/workflows/NAME/COMMAND).
func (s *Server) serveWorkflows(w http.ResponseWriter, r *http.Request) {
	if s.moves == nil {
		http.Error(w, "workflows need the sidecar database's node", http.StatusServiceUnavailable)
		return
	}
	rest := strings.Trim(strings.TrimPrefix(r.URL.Path, "/admin/workflows"), "/")
	reply := func(v any) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(v)
	}
	switch {
	case r.Method == http.MethodGet && rest == "":
		st, err := s.moves.List()
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		reply(st)
	case r.Method == http.MethodGet:
		st, err := s.moves.List()
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		for _, x := range st {
			if x.Spec.Name == rest {
				reply(x)
				return
			}
		}
		http.Error(w, "no workflow "+rest, http.StatusNotFound)
	case r.Method == http.MethodPost && rest == "":
		var req moveRequest
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			http.Error(w, "bad request: "+err.Error(), http.StatusBadRequest)
			return
		}
		sp, err := s.newSpec(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.gate(sp.Table)
		wf, err := s.moves.Start(sp)
		if err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		s.log.Info("workflow started", zap.String("workflow", wf.Spec.Name), zap.String("kind", wf.Spec.Kind), zap.String("table", wf.Spec.Logical()),
			zap.Strings("to", move.Targets(wf.Spec.To)))
		shown := *wf
		shown.Spec.Source = nil // no password in answers
		reply(shown)
	case r.Method == http.MethodPost:
		name, cmd, ok := strings.Cut(rest, "/")
		if !ok {
			http.Error(w, "POST /admin/workflows/NAME/(cutover|rollback|complete|cancel|verify|repair)", http.StatusNotFound)
			return
		}
		if err := s.moves.Command(name, cmd); err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		s.log.Info("workflow command done", zap.String("workflow", name), zap.String("command", cmd))
		st, _ := s.moves.List()
		for _, x := range st {
			if x.Spec.Name == name {
				reply(x)
				return
			}
		}
		reply(map[string]string{"workflow": name, "done": cmd})
	default:
		http.Error(w, "use GET or POST", http.StatusMethodNotAllowed)
	}
}

// adminMove runs the admin SQL of data movement (adminsql.go).
func (h *handler) adminMove(what string, v []string) error {
	c, s := h.c, h.c.srv
	if s.moves == nil {
		return mysql.NewError(mysql.ErNotSupported, "workflows need the sidecar database's node")
	}
	bad := func(format string, args ...any) error { return mysql.NewError(mysql.ErWrongArguments, format, args...) }
	var req moveRequest
	switch what {
	case "show":
		all, err := s.moves.List()
		if err != nil {
			return mysql.NewError(mysql.ErUnknownError, "%v", err)
		}
		var rows [][][]byte
		for _, w := range all {
			rows = append(rows, rowOf(w.Spec.Name, w.Spec.Kind, w.Spec.Logical(), w.State.Phase,
				strconv.FormatInt(w.State.RowsCopied, 10), strconv.FormatInt(w.State.RowsTotal, 10), strconv.FormatInt(w.State.ChangesApplied, 10),
				strconv.FormatFloat(w.LagSeconds, 'f', 1, 64), strconv.Itoa(len(w.State.Diffs)), strconv.FormatFloat(w.State.PauseMillis, 'f', 1, 64),
				strings.Join(move.Targets(w.Spec.To), ","), w.State.Error))
		}
		return engine.WriteResultSet(c, textColumns("Name", "Kind", "Table", "Phase", "Rows_Copied", "Rows_Total", "Changes_Applied",
			"Lag_Seconds", "Differing_Ranges", "Pause_Ms", "Subtables", "Error"), rows)
	case "workflow":
		if len(v) != 2 {
			return bad("admin workflow(opt,name) takes two values: the command and the workflow's name")
		}
		if err := s.moves.Command(v[1], strings.ToLower(v[0])); err != nil {
			return bad("%v", err)
		}
		return c.writeOK(mysql.OK{AffectedRows: 1, Status: c.status()})
	case "reshard":
		if len(v) != 4 || !strings.EqualFold(v[0], "start") {
			return bad("admin reshard(opt,table,nodes,locations) values('start', 'db.table', 'node1,node2', '4,4')")
		}
		req = moveRequest{Table: v[1], Nodes: splitComma(v[2])}
		for _, l := range splitComma(v[3]) {
			n, err := strconv.Atoi(l)
			if err != nil {
				return bad("locations: %q is not a number", l)
			}
			req.Locations = append(req.Locations, n)
		}
	case "import":
		if len(v) != 4 || !strings.EqualFold(v[0], "start") {
			return bad("admin import(opt,table,source,source_table) values('start', 'db.table', 'user:password@host:port', 'db.table')")
		}
		cred, addr, ok := strings.Cut(v[2], "@")
		user, pw, _ := strings.Cut(cred, ":")
		if !ok {
			return bad("source is user:password@host:port, not %q", v[2])
		}
		req = moveRequest{Kind: move.KindImport, Table: v[1], Source: &move.Endpoint{Addr: addr, User: user, Password: pw}, SourceTable: v[3]}
	}
	sp, err := s.newSpec(req)
	if err != nil {
		return bad("%v", err)
	}
	s.gate(sp.Table)
	wf, err := s.moves.Start(sp)
	if err != nil {
		return bad("%v", err)
	}
	s.log.Info("workflow started", zap.String("workflow", wf.Spec.Name), zap.String("kind", wf.Spec.Kind), zap.String("table", wf.Spec.Logical()))
	return c.writeOK(mysql.OK{AffectedRows: 1, Status: c.status(), Info: "workflow " + wf.Spec.Name})
}
