package move

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/shardgate/shardgate/changestream"
	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/router"
)

// Commands a running workflow takes.
const (
	CmdCutover  = "cutover"
	CmdRollback = "rollback"
	CmdComplete = "complete"
	CmdCancel   = "cancel"
	CmdVerify   = "verify"
	CmdRepair   = "repair"
)

// importNode names the source of an import in positions and streams.
const importNode = "source"

// leaseTTL is how long a proxy's claim on a workflow lasts unless renewed:
// a proxy that dies gives its workflows up to another after this long.
const leaseTTL = 10 * time.Second

// Manager runs the workflows of one proxy. Several proxies may share a
// sidecar: each workflow is run by the one holding its lease.
//
// In a fleet (Follow), only the leader runs workflows: Lead runs them for
// one term of leadership and stops them when it ends, and Start on any
// proxy records a new workflow in the sidecar, where the leader finds it.
type Manager struct {
	store *Store
	env   Env
	log   *zap.Logger
	owner string // this proxy, in leases

	mu     sync.Mutex
	runs   map[string]*run
	follow bool  // in a fleet: runs only while leading (Lead)
	lead   *term // the term being led; nil when not leading
	base   *term // outside a fleet: the manager's lifetime
	wg     sync.WaitGroup
	ctx    context.Context
	stop   context.CancelFunc
}

// A term is a span in which the manager runs workflows: the manager's
// lifetime outside a fleet, one term of leadership in a fleet. Its runs
// end with ctx; wg waits for them.
type term struct {
	id  int64 // the leader's election revision; 0 outside a fleet
	ctx context.Context
	wg  sync.WaitGroup
}

// pollInterval is how often a leader looks in the sidecar for workflows
// that other proxies recorded (Start while not leading) or that stopped.
const pollInterval = time.Second

// NewManager returns a manager keeping its workflows in store; owner
// names this proxy in the workflows' leases (stable across its restarts).
func NewManager(store *Store, env Env, log *zap.Logger, owner string) *Manager {
	ctx, stop := context.WithCancel(context.Background())
	m := &Manager{store: store, env: env, log: log, owner: owner, runs: map[string]*run{}, ctx: ctx, stop: stop}
	m.base = &term{ctx: ctx}
	return m
}

// Follow makes the manager one of a fleet's: it runs workflows only while
// Lead runs, and Start records a workflow without running it unless this
// proxy leads. Call it before anything else.
func (m *Manager) Follow() {
	m.mu.Lock()
	m.follow = true
	m.mu.Unlock()
}

// Leading reports whether the manager runs workflows: always outside a
// fleet, while Lead runs in one.
func (m *Manager) Leading() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return !m.follow || m.lead != nil
}

// Lead runs the fleet's workflows for one term of leadership (id, the
// election revision: larger for every later term) until ctx ends: every
// saved workflow that has not ended at once, and those recorded later
// within pollInterval. The leases are claimed in term id, which takes
// them from an earlier leader at once and keeps an earlier leader's saves
// out (SaveOwned). When ctx ends, the runs stop where they are, their
// saved state unchanged, and Lead returns once they have. prepare, when
// set, is called before a workflow is run here.
func (m *Manager) Lead(ctx context.Context, id int64, prepare func(*Workflow)) {
	tctx, stop := context.WithCancel(ctx)
	defer stop()
	unlink := context.AfterFunc(m.ctx, stop)
	defer unlink()
	t := &term{id: id, ctx: tctx}
	m.mu.Lock()
	m.lead = t
	m.mu.Unlock()
	m.log.Info("leading the fleet's workflows", zap.Int64("term", id))
	tick := time.NewTicker(pollInterval)
	failing := false // logged once per outage of the sidecar
	for tctx.Err() == nil {
		err := m.resume(t, prepare)
		switch {
		case err != nil && !failing && tctx.Err() == nil:
			m.log.Warn("cannot read the workflows from the sidecar; trying again every second", zap.Error(err))
			failing = true
		case err == nil && failing:
			m.log.Info("the sidecar answers again: the fleet's workflows run")
			failing = false
		}
		select {
		case <-tctx.Done():
		case <-tick.C:
		}
	}
	tick.Stop()
	m.mu.Lock()
	m.lead = nil
	n := len(m.runs)
	m.mu.Unlock()
	stop()
	t.wg.Wait()
	m.log.Info("no longer leading: the fleet's workflows stopped here, their state as saved", zap.Int64("term", id), zap.Int("stopped", n))
}

// WatchTables calls moving, every pollInterval until the manager closes,
// with the table of each saved workflow that has not ended: in a fleet,
// the proxies that do not run workflows put a gate in front of a table
// being moved from when the workflow is recorded, not from its cutover,
// so that a transaction open on the table when the cutover comes is
// known to them and waited for before they acknowledge the hold.
func (m *Manager) WatchTables(moving func(db, table string)) {
	go func() {
		tick := time.NewTicker(pollInterval)
		defer tick.Stop()
		for m.ctx.Err() == nil {
			if ws, err := m.List(); err == nil {
				for _, w := range ws {
					if !w.Ended() {
						moving(w.Spec.DB, w.Spec.Table)
					}
				}
			}
			select {
			case <-m.ctx.Done():
			case <-tick.C:
			}
		}
	}()
}

// run is one workflow being driven.
type run struct {
	m    *Manager
	mu   sync.Mutex // guards w
	w    *Workflow
	cmds chan command

	def      *tableDef
	copier   *copier
	applier  *applier // the forward apply, then the reverse one
	term     int64    // the fleet term the run claims its lease in (0 outside a fleet)
	started  time.Time
	copyBase int64 // rows copied before this run
	// applyBase is the changes applied before the running applier began.
	applyBase int64
	leased    atomic.Bool
}

type command struct {
	name  string
	reply chan error
}

// Resume starts every saved workflow that has not ended (outside a
// fleet; in one, Lead does).
func (m *Manager) Resume() error {
	if m.follow {
		return nil
	}
	return m.resume(m.base, nil)
}

// resume launches in t every saved workflow that has not ended and is not
// running here.
func (m *Manager) resume(t *term, prepare func(*Workflow)) error {
	ws, err := m.store.List(t.ctx)
	if err != nil {
		return err
	}
	for _, w := range ws {
		if w.Ended() {
			continue
		}
		m.mu.Lock()
		running := m.runs[w.Spec.Name] != nil
		m.mu.Unlock()
		if running {
			continue
		}
		if prepare != nil {
			prepare(w)
		}
		m.launch(t, w)
	}
	return nil
}

// Overrides returns the rules saved workflows put in force: a table that
// was cut over (and not rolled back) uses its new rule. The key is
// db.table.
func (m *Manager) Overrides() (map[string]config.ShardRule, error) {
	ws, err := m.store.List(m.ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]config.ShardRule{}
	for _, w := range ws {
		if w.Spec.Kind == KindReshard && (w.State.Phase == PhaseSwitched || w.State.Phase == PhaseCompleted) {
			out[w.Spec.Logical()] = w.Spec.To
		}
	}
	return out, nil
}

// Start saves a new workflow and runs it; in a fleet, a proxy that does
// not lead only saves it, and the leader runs it (Lead).
func (m *Manager) Start(spec Spec) (*Workflow, error) {
	if spec.Name == "" {
		spec.Name = strings.ReplaceAll(spec.DB+"_"+spec.Table, "`", "") + "_" + time.Now().UTC().Format("20060102T150405")
	}
	spec.Created = time.Now().UTC()
	spec.Options = spec.Options.WithDefaults()
	ws, err := m.store.List(m.ctx)
	if err != nil {
		return nil, err
	}
	for _, w := range ws {
		if w.Spec.Name == spec.Name {
			return nil, fmt.Errorf("workflow %s exists", spec.Name)
		}
		if !w.Ended() && w.Spec.Logical() == spec.Logical() {
			return nil, fmt.Errorf("table %s already moves in workflow %s (%s)", spec.Logical(), w.Spec.Name, w.State.Phase)
		}
	}
	w := &Workflow{Spec: spec, State: State{Phase: PhaseCopying}}
	if err := m.store.Save(m.ctx, w); err != nil {
		return nil, err
	}
	out := w.clone()
	m.mu.Lock()
	t := m.base
	if m.follow {
		t = m.lead
	}
	m.mu.Unlock()
	if t == nil {
		m.log.Info("workflow recorded for the fleet's leader to run", zap.String("workflow", spec.Name))
	} else {
		m.launch(t, w)
	}
	return &out, nil
}

// launch runs w in term t, unless it runs here already or t has ended.
func (m *Manager) launch(t *term, w *Workflow) {
	r := &run{m: m, w: w, cmds: make(chan command), term: t.id}
	m.mu.Lock()
	if m.runs[w.Spec.Name] != nil || t.ctx.Err() != nil || m.follow && m.lead != t {
		m.mu.Unlock()
		return
	}
	m.runs[w.Spec.Name] = r
	// Added under mu: Lead, which waits for t.wg, stops leading under it
	// first.
	m.wg.Add(1)
	t.wg.Add(1)
	m.mu.Unlock()
	go func() {
		defer m.wg.Done()
		defer t.wg.Done()
		defer func() {
			m.mu.Lock()
			delete(m.runs, w.Spec.Name)
			m.mu.Unlock()
		}()
		ctx, lost := context.WithCancel(t.ctx)
		defer lost()
		// Wait for the lease, then keep it while the workflow runs.
		for {
			ok, err := m.store.Claim(ctx, w.Spec.Name, m.owner, t.id, leaseTTL)
			if ok {
				break
			}
			if err != nil {
				m.log.Warn("cannot claim a workflow", zap.String("workflow", w.Spec.Name), zap.Error(err))
			}
			select {
			case <-time.After(leaseTTL / 3):
			case <-ctx.Done():
				return
			}
		}
		r.leased.Store(true)
		m.log.Info("workflow running here", zap.String("workflow", w.Spec.Name), zap.String("phase", r.phase()), zap.Int64("term", t.id))
		// The lease is given up once its renewal has stopped (a renewal
		// after the release would hold it again).
		renewed := make(chan struct{})
		defer func() {
			lost()
			<-renewed
			m.store.Release(context.Background(), w.Spec.Name, m.owner, t.id)
		}()
		go func() {
			defer close(renewed)
			tk := time.NewTicker(leaseTTL / 4)
			defer tk.Stop()
			misses := 0
			for {
				select {
				case <-tk.C:
				case <-ctx.Done():
					return
				}
				ok, err := m.store.Claim(ctx, w.Spec.Name, m.owner, t.id, leaseTTL)
				if ok {
					misses = 0
					continue
				}
				if misses++; err == nil || misses >= 3 {
					m.log.Error("lost the lease of a workflow; it stops here", zap.String("workflow", w.Spec.Name), zap.Error(err))
					lost()
					return
				}
			}
		}()
		r.drive(ctx)
	}()
}

// Command sends a command to a running workflow and waits for it to be
// done (a cutover: tried until it succeeds, at most ten times).
func (m *Manager) Command(name, cmd string) error {
	m.mu.Lock()
	r := m.runs[name]
	m.mu.Unlock()
	if r == nil {
		return fmt.Errorf("no running workflow %s", name)
	}
	if !r.leased.Load() {
		owner, _ := m.store.Owner(m.ctx, name)
		return fmt.Errorf("workflow %s is run by another proxy (%s); send the command there", name, owner)
	}
	c := command{name: cmd, reply: make(chan error, 1)}
	select {
	case r.cmds <- c:
	case <-time.After(30 * time.Second):
		return fmt.Errorf("workflow %s is busy", name)
	}
	return <-c.reply
}

// Status is a workflow with its live figures.
type Status struct {
	Workflow
	Running    bool    `json:"running"`
	RowsPerSec float64 `json:"rows_per_sec,omitempty"`
	ETASeconds float64 `json:"eta_seconds,omitempty"`
	// LagSeconds is how far the apply is behind the binary log (the
	// timestamp of the newest change it has not applied yet).
	LagSeconds float64 `json:"lag_seconds"`
}

// List returns every workflow, running or saved.
func (m *Manager) List() ([]Status, error) {
	ws, err := m.store.List(m.ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Status, 0, len(ws))
	for _, w := range ws {
		m.mu.Lock()
		r := m.runs[w.Spec.Name]
		m.mu.Unlock()
		if r == nil {
			st := Status{Workflow: *w}
			st.Spec.Source = nil // no password in listings
			out = append(out, st)
			continue
		}
		out = append(out, r.status())
	}
	return out, nil
}

// Close stops every workflow (they resume at the next start).
func (m *Manager) Close() {
	m.stop()
	m.wg.Wait()
	m.store.Close()
}

// clone copies w deeply enough to be read while the run goes on.
func (w *Workflow) clone() Workflow {
	c := *w
	c.State.Start, c.State.Copied = maps.Clone(w.State.Start), maps.Clone(w.State.Copied)
	c.State.Applied, c.State.Reverse = maps.Clone(w.State.Applied), maps.Clone(w.State.Reverse)
	c.State.Diffs = slices.Clone(w.State.Diffs)
	return c
}

func (r *run) status() Status {
	r.mu.Lock()
	st := Status{Workflow: r.w.clone(), Running: true}
	st.Spec.Source = nil // no password in listings
	base, c, a, applyBase := r.copyBase, r.copier, r.applier, r.applyBase
	r.mu.Unlock()
	if c != nil && st.State.Phase == PhaseCopying {
		done := c.rows.Load()
		st.State.RowsCopied = base + done
		if el := time.Since(r.started).Seconds(); el > 0 && done > 0 {
			st.RowsPerSec = float64(done) / el
			if left := st.State.RowsTotal - st.State.RowsCopied; left > 0 {
				st.ETASeconds = float64(left) / st.RowsPerSec
			}
		}
	}
	if a != nil {
		st.State.ChangesApplied = applyBase + a.changes.Load()
		st.LagSeconds = a.lag().Seconds()
	}
	return st
}

func (r *run) save(ctx context.Context, f func(s *State)) error {
	r.mu.Lock()
	f(&r.w.State)
	if r.applier != nil {
		r.w.State.ChangesApplied = r.applyBase + r.applier.changes.Load()
	}
	w := r.w.clone()
	r.mu.Unlock()
	return r.m.store.SaveOwned(ctx, &w, r.m.owner, r.term)
}

func (r *run) phase() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.w.State.Phase
}

func (r *run) spec() *Spec { return &r.w.Spec } // never changes

// drive runs the workflow from its phase until it ends or the manager
// stops; a failure is recorded and the phase retried.
func (r *run) drive(ctx context.Context) {
	log := r.m.log.With(zap.String("workflow", r.spec().Name))
	r.flagging(log)
	for ctx.Err() == nil {
		var err error
		switch r.phase() {
		case PhaseCopying:
			err = r.copy(ctx)
		case PhaseCatchingUp, PhaseReady:
			err = r.catchUp(ctx)
		case PhaseSwitched:
			err = r.reverse(ctx)
		default:
			return
		}
		if err == nil || ctx.Err() != nil {
			continue
		}
		if errors.Is(err, ErrNotOwner) {
			log.Warn("another proxy runs the workflow now; it stops here", zap.Error(err))
			return
		}
		log.Warn("workflow step failed; retrying", zap.String("phase", r.phase()), zap.Error(err))
		_ = r.save(ctx, func(s *State) { s.Error = err.Error() })
		if !r.idle(ctx, 2*time.Second) {
			return
		}
	}
}

// idle waits d, answering commands meanwhile (only cancel acts);
// it reports false when ctx ended.
func (r *run) idle(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			return true
		case <-ctx.Done():
			return false
		case c := <-r.cmds:
			if c.name == CmdCancel {
				c.reply <- r.cancel(ctx)
				continue
			}
			c.reply <- fmt.Errorf("workflow %s is retrying a failed step (%s); try again", r.spec().Name, r.w.State.Error)
		}
	}
}

// sources are the tables the workflow reads and the streams it follows;
// targets the subtables it writes.
func (r *run) layout() (sources []copySource, streams []changestream.Source, targets []copyTarget, place *router.Placement, err error) {
	sp := r.spec()
	place, err = router.NewPlacement(sp.To)
	if err != nil {
		return
	}
	for _, t := range place.Subtables() {
		targets = append(targets, copyTarget{node: t.Node, db: sp.DB, name: t.Name})
	}
	if sp.Kind == KindImport {
		sources = []copySource{{key: sp.SourceDB + "." + sp.SourceTable, node: importNode, ep: *sp.Source, db: sp.SourceDB, name: sp.SourceTable}}
		streams = []changestream.Source{{Node: importNode, Addr: sp.Source.Addr, User: sp.Source.User, Password: sp.Source.Password}}
		return
	}
	from, err := router.NewPlacement(sp.From)
	if err != nil {
		return
	}
	nodes := map[string]bool{}
	for _, t := range from.Subtables() {
		ep, e := r.m.env.Endpoint(t.Node)
		if e != nil {
			err = e
			return
		}
		sources = append(sources, copySource{key: t.Node + ":" + t.Name, node: t.Node, ep: ep, db: sp.DB, name: t.Name})
		if !nodes[t.Node] {
			nodes[t.Node] = true
			streams = append(streams, changestream.Source{Node: t.Node, Addr: ep.Addr, User: ep.User, Password: ep.Password})
		}
	}
	return
}

// names maps the physical tables of rule to the logical table (for an
// import, the source table).
func (r *run) names(rule config.ShardRule) func(db, table string) string {
	sp := r.spec()
	if sp.Kind == KindImport {
		src := sp.SourceDB + "." + sp.SourceTable
		return func(db, table string) string {
			if db+"."+table == src {
				return sp.Logical()
			}
			return db + "." + table
		}
	}
	return changestream.Names(&config.Config{Schemas: []config.Schema{{Shard: []config.ShardRule{rule}}}})
}

// copy creates the new subtables, takes the start positions and copies.
func (r *run) copy(ctx context.Context) error {
	sp := r.spec()
	sources, streams, targets, place, err := r.layout()
	if err != nil {
		return err
	}
	first, err := dial(sources[0].ep)
	if err != nil {
		return err
	}
	def, err := readDef(first, sources[0].db, sources[0].name)
	first.Close()
	if err != nil {
		return err
	}
	r.def = def
	keyCol := def.col(sp.To.Key)
	if keyCol < 0 {
		return fmt.Errorf("table %s has no column %s (the new rule's key)", sp.Logical(), sp.To.Key)
	}
	for _, t := range targets {
		ep, err := r.m.env.Endpoint(t.node)
		if err != nil {
			return err
		}
		c, err := dial(ep)
		if err != nil {
			return err
		}
		_, err = c.Execute(def.createAs(t.db, t.name))
		c.Close()
		if err != nil {
			return fmt.Errorf("creating %s.%s on %s: %w", t.db, t.name, t.node, err)
		}
	}
	if r.w.State.Start == nil {
		// The positions come before the first row is read: every change
		// the copy may miss comes after them.
		start := map[string]string{}
		for _, s := range streams {
			if err := changestream.Check(s); err != nil {
				return err
			}
			c, err := dial(Endpoint{Addr: s.Addr, User: s.User, Password: s.Password})
			if err != nil {
				return err
			}
			p, err := gtidPos(c)
			c.Close()
			if err != nil {
				return err
			}
			start[s.Node] = p
		}
		var total int64
		for _, s := range sources {
			c, err := dial(s.ep)
			if err != nil {
				return err
			}
			res, err := c.Execute("SELECT COUNT(*) FROM " + qualified(s.db, s.name))
			c.Close()
			if err != nil {
				return err
			}
			n, _ := res.GetInt(0, 0)
			total += n
		}
		if err := r.save(ctx, func(s *State) { s.Start, s.Copied, s.RowsTotal = start, map[string]string{}, total }); err != nil {
			return err
		}
	}
	o := sp.Options.WithDefaults()
	c := &copier{def: def, place: place, targets: targets, env: r.m.env, workers: o.CopyWorkers, batch: o.BatchRows,
		throttle: o.ThrottleLatency, keyCol: keyCol}
	r.mu.Lock()
	if r.w.State.Copied == nil {
		r.w.State.Copied = map[string]string{}
	}
	r.copier, r.started, r.copyBase = c, time.Now(), r.w.State.RowsCopied
	resume := maps.Clone(r.w.State.Copied)
	r.mu.Unlock()
	var saveMu sync.Mutex
	c.checkpoint = func(key, pk string, rows int64) error {
		saveMu.Lock()
		defer saveMu.Unlock()
		r.mu.Lock()
		r.w.State.Copied[key] = pk
		r.w.State.RowsCopied += rows
		r.mu.Unlock()
		// Every chunk is checkpointed: a restart copies at most one chunk
		// per source again.
		return r.save(ctx, func(*State) {})
	}
	// Commands during the copy: only cancel acts.
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- c.run(cctx, sources, resume) }()
	for {
		select {
		case err := <-done:
			if err != nil {
				return err
			}
			el := time.Since(r.started).Seconds()
			return r.save(ctx, func(s *State) {
				s.Phase, s.Applied, s.Error = PhaseCatchingUp, maps.Clone(s.Start), ""
				s.CopySeconds += el
			})
		case cmd := <-r.cmds:
			if cmd.name == CmdCancel {
				stop()
				<-done
				cmd.reply <- r.cancel(ctx)
				return nil
			}
			cmd.reply <- fmt.Errorf("workflow %s is copying; %s comes after the copy", sp.Name, cmd.name)
		}
	}
}

// startApply starts an applier of streams into targets (placed by place)
// from positions; it runs until the returned stop is called.
func (r *run) startApply(ctx context.Context, streams []changestream.Source, names func(db, table string) string,
	place *router.Placement, targets []copyTarget, from map[string]string, save func(map[string]string) error) (*applier, <-chan error, func(), error) {
	sp := r.spec()
	if r.def == nil {
		var src copySource
		if sp.Kind == KindImport {
			src = copySource{ep: *sp.Source, db: sp.SourceDB, name: sp.SourceTable}
		} else {
			t := targets[0]
			ep, err := r.m.env.Endpoint(t.node)
			if err != nil {
				return nil, nil, nil, err
			}
			src = copySource{ep: ep, db: t.db, name: t.name}
		}
		c, err := dial(src.ep)
		if err != nil {
			return nil, nil, nil, err
		}
		def, err := readDef(c, src.db, src.name)
		c.Close()
		if err != nil {
			return nil, nil, nil, err
		}
		r.def = def
	}
	keyCol := r.def.col(sp.To.Key)
	if place != nil && sp.Kind == KindReshard && r.phase() == PhaseSwitched {
		keyCol = r.def.col(sp.From.Key)
	}
	if keyCol < 0 {
		return nil, nil, nil, fmt.Errorf("table %s: the shard key column is missing", sp.Logical())
	}
	a := newApplier(r.def, place, targets, r.m.env, sp.Options.WithDefaults().ApplyWorkers, keyCol, from)
	a.checkpoint = save
	actx, stop := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- a.run(actx, streams, names, sp.Logical()) }()
	r.mu.Lock()
	r.applier, r.applyBase = a, r.w.State.ChangesApplied
	r.mu.Unlock()
	return a, errc, stop, nil
}

// positions reads the current binary log position of streams' nodes.
func positions(streams []changestream.Source) (map[string]string, error) {
	out := map[string]string{}
	for _, s := range streams {
		c, err := dial(Endpoint{Addr: s.Addr, User: s.User, Password: s.Password})
		if err != nil {
			return nil, err
		}
		p, err := gtidPos(c)
		c.Close()
		if err != nil {
			return nil, err
		}
		out[s.Node] = p
	}
	return out, nil
}

// catchUp applies the sources' binary logs to the new subtables, verifies
// once caught up, and serves commands until a cutover (or, for an import,
// complete) ends the phase.
func (r *run) catchUp(ctx context.Context) error {
	sp := r.spec()
	sources, streams, targets, place, err := r.layout()
	if err != nil {
		return err
	}
	if sp.Kind == KindReshard {
		// Before the cutover the old subtables are in force: a restart in
		// the middle of a cutover may have left them fenced.
		olds, err := placementTargets(sp.DB, sp.From)
		if err == nil {
			err = r.settle(ctx, olds, false)
		}
		if err != nil {
			return err
		}
	}
	r.mu.Lock()
	from := maps.Clone(r.w.State.Applied)
	r.mu.Unlock()
	a, errc, stop, err := r.startApply(ctx, streams, r.names(sp.From), place, targets, from, func(p map[string]string) error {
		return r.save(ctx, func(s *State) { s.Applied = p })
	})
	if err != nil {
		return err
	}
	defer stop()
	sync := func(ctx context.Context) error { return presync(ctx, a, streams) }
	var srcTables, dstTables []table
	byNode := map[string][]table{}
	for _, s := range sources {
		srcTables = append(srcTables, table{ep: s.ep, db: s.db, name: s.name})
		byNode[s.node] = append(byNode[s.node], table{ep: s.ep, db: s.db, name: s.name})
	}
	for _, t := range targets {
		ep, err := r.m.env.Endpoint(t.node)
		if err != nil {
			return err
		}
		dstTables = append(dstTables, table{ep: ep, db: t.db, name: t.name})
	}
	v := &verifier{def: r.def, width: 1000}
	verify := func() error {
		t0 := time.Now()
		diffs, rows, err := v.compare(ctx, byNode, dstTables, a)
		if err != nil {
			return err
		}
		r.m.log.Info("workflow verified", zap.String("workflow", sp.Name), zap.Int64("rows", rows), zap.Int("differing_ranges", len(diffs)),
			zap.Duration("took", time.Since(t0)))
		return r.save(ctx, func(s *State) {
			s.Phase, s.Diffs, s.Verified, s.Error = PhaseReady, diffs, time.Now().UTC(), ""
			s.VerifyRows, s.VerifySeconds = rows, time.Since(t0).Seconds()
		})
	}
	if r.phase() == PhaseCatchingUp {
		// Caught up first: the positions now, applied.
		if err := r.await(ctx, errc, sync); err != nil {
			return err
		}
		if r.phase() == PhaseCancelled {
			return nil // cancelled while catching up
		}
		if err := verify(); err != nil {
			return err
		}
	}
	autoTries := 0
	for {
		var auto <-chan time.Time
		r.mu.Lock()
		clean := len(r.w.State.Diffs) == 0
		r.mu.Unlock()
		if sp.AutoCutover && sp.Kind == KindReshard && clean && autoTries < 10 {
			auto = time.After(time.Duration(autoTries) * time.Second)
		}
		select {
		case err := <-errc:
			if err == nil {
				err = ctx.Err()
			}
			return err
		case <-ctx.Done():
			return nil
		case <-auto:
			autoTries++
			if ok, err := r.cutover(ctx, a, streams, targets); err != nil {
				return err
			} else if ok {
				return nil
			}
		case cmd := <-r.cmds:
			switch cmd.name {
			case CmdVerify:
				cmd.reply <- verify()
			case CmdRepair:
				r.mu.Lock()
				var buckets []int64
				for _, d := range r.w.State.Diffs {
					buckets = append(buckets, d.Bucket)
				}
				r.mu.Unlock()
				c := &copier{def: r.def, place: place, targets: targets, env: r.m.env, keyCol: r.def.col(sp.To.Key)}
				err := v.repair(ctx, srcTables, c, buckets)
				if err == nil {
					err = verify()
				}
				cmd.reply <- err
			case CmdCancel:
				stop()
				cmd.reply <- r.cancel(ctx)
				return nil
			case CmdComplete:
				if sp.Kind != KindImport {
					cmd.reply <- fmt.Errorf("workflow %s has not cut over yet: cutover first (or cancel)", sp.Name)
					continue
				}
				// The application now writes through the proxy: apply what
				// the source has, then stop.
				err := sync(ctx)
				if err == nil {
					err = r.save(ctx, func(s *State) { s.Phase, s.Applied = PhaseCompleted, a.position() })
				}
				cmd.reply <- err
				if err == nil {
					return nil
				}
			case CmdCutover:
				if sp.Kind != KindReshard {
					cmd.reply <- fmt.Errorf("an import has no cutover: point the application at the proxy, then complete")
					continue
				}
				ok, err := r.retrySwap(ctx, "cutover", func() (bool, error) { return r.cutover(ctx, a, streams, targets) })
				cmd.reply <- err
				if ok {
					return nil
				}
			default:
				cmd.reply <- fmt.Errorf("workflow %s (%s) cannot %s", sp.Name, r.phase(), cmd.name)
			}
		}
	}
}

// await waits for sync, failing early if the applier stops.
func (r *run) await(ctx context.Context, errc <-chan error, sync func(context.Context) error) error {
	done := make(chan error, 1)
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { done <- sync(sctx) }()
	for {
		select {
		case err := <-done:
			return err
		case err := <-errc:
			if err == nil {
				err = errors.New("the apply stopped")
			}
			return err
		case cmd := <-r.cmds:
			if cmd.name == CmdCancel {
				cancel()
				<-done
				cmd.reply <- r.cancel(ctx)
				return nil
			}
			cmd.reply <- fmt.Errorf("workflow %s is catching up; %s comes after", r.spec().Name, cmd.name)
		}
	}
}

// swap tries one pause-and-swap of the table's rule to to: the apply a
// (of streams) catches up outside the pause, then inside it; finish says
// what to save with the new phase (it may read positions, under the
// pause). It reports false, and changed nothing, when the pause would have
// exceeded cutover_timeout. A cutover and a rollback are both one swap.
func (r *run) swap(ctx context.Context, what string, a *applier, streams []changestream.Source, to config.ShardRule,
	fence, unfence []copyTarget, finish func() (func(*State), error)) (bool, error) {
	sp := r.spec()
	r.mu.Lock()
	r.w.State.Cutovers++
	r.mu.Unlock()
	// Catch up first, outside the pause: inside it, only what was written
	// since is left to apply.
	if err := presync(ctx, a, streams); err != nil {
		return false, err
	}
	// The fence's connections are opened before the pause.
	f, err := r.newFencer(fence, unfence)
	if err != nil {
		return false, err
	}
	defer f.close()
	pctx, cancel := context.WithTimeout(ctx, sp.Options.WithDefaults().CutoverTimeout)
	defer cancel()
	resume, err := r.m.env.Pause(pctx, sp.DB, sp.Table)
	if err != nil {
		r.m.log.Info(what+" postponed: transactions on the table did not end in time", zap.String("workflow", sp.Name), zap.Error(err))
		return false, nil
	}
	// The fence (fence.go): the subtables of the rule going out are
	// renamed before the positions are read, so whatever another proxy
	// wrote to them is applied, and nothing can be written after.
	deadline, _ := pctx.Deadline()
	fenced, err := f.rename(fence, true, time.Until(deadline))
	var unfenced []copyTarget
	var p map[string]string
	if err == nil {
		p, err = positions(streams)
	}
	if err == nil {
		err = a.waitFor(pctx, p)
	}
	if err == nil {
		unfenced, err = f.rename(unfence, false, time.Until(deadline))
	}
	var set func(*State)
	if err == nil {
		set, err = finish()
	}
	if err == nil {
		err = r.save(ctx, set)
	}
	if err != nil {
		r.unrename(fenced, unfenced)
		_, _ = resume(nil)
		if errors.Is(err, context.DeadlineExceeded) || isLockWait(err) {
			r.m.log.Info(what+" postponed: the new layout did not catch up in time, or the subtables stayed in use", zap.String("workflow", sp.Name), zap.Error(err))
			return false, nil
		}
		return false, err
	}
	paused, err := resume(&to)
	if err != nil {
		return false, err
	}
	// The pause is known once the statements are let go: the state saved
	// inside it gets it now, the same value the log and the metrics give.
	ms := float64(paused.Microseconds()) / 1000
	r.m.log.Info(what+" done", zap.String("workflow", sp.Name), zap.Duration("pause", paused), zap.Float64("pause_ms", ms))
	if err := r.save(ctx, func(s *State) { s.PauseMillis = ms }); err != nil {
		r.m.log.Warn("cannot save the "+what+"'s pause", zap.String("workflow", sp.Name), zap.Error(err))
	}
	return true, nil
}

// retrySwap runs try (one swap) until it succeeds, at most ten times, a
// second apart.
func (r *run) retrySwap(ctx context.Context, what string, try func() (bool, error)) (bool, error) {
	for n := 0; n < 10; n++ {
		if n > 0 && !r.idle(ctx, time.Second) {
			return false, ctx.Err()
		}
		if ok, err := try(); ok || err != nil {
			return ok, err
		}
	}
	return false, fmt.Errorf("%s did not finish within cutover_timeout (%v) in 10 tries; nothing changed", what, r.spec().Options.WithDefaults().CutoverTimeout)
}

// cutover swaps to the new rule: the new layout's positions are where the
// reverse stream starts.
func (r *run) cutover(ctx context.Context, a *applier, streams []changestream.Source, targets []copyTarget) (bool, error) {
	olds, err := placementTargets(r.spec().DB, r.spec().From)
	if err != nil {
		return false, err
	}
	return r.swap(ctx, "cutover", a, streams, r.spec().To, olds, nil, func() (func(*State), error) {
		tstreams, err := r.nodeStreams(targets)
		if err != nil {
			return nil, err
		}
		rev, err := positions(tstreams)
		if err != nil {
			return nil, err
		}
		applied := a.position()
		return func(s *State) {
			s.Phase, s.Reverse, s.Applied, s.Error = PhaseSwitched, rev, applied, ""
		}, nil
	})
}

// presync waits (at most a minute) until a has applied the streams'
// current positions.
func presync(ctx context.Context, a *applier, streams []changestream.Source) error {
	p, err := positions(streams)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := a.waitFor(wctx, p); err != nil {
		return fmt.Errorf("the new subtables did not catch up with the binary log in a minute: %w", err)
	}
	return nil
}

// nodeStreams lists the distinct nodes of targets as stream sources.
func (r *run) nodeStreams(targets []copyTarget) ([]changestream.Source, error) {
	var out []changestream.Source
	seen := map[string]bool{}
	for _, t := range targets {
		if seen[t.node] {
			continue
		}
		seen[t.node] = true
		ep, err := r.m.env.Endpoint(t.node)
		if err != nil {
			return nil, err
		}
		out = append(out, changestream.Source{Node: t.node, Addr: ep.Addr, User: ep.User, Password: ep.Password})
	}
	return out, nil
}

// reverse applies the new subtables' changes to the old ones after a
// cutover, until rollback or complete.
func (r *run) reverse(ctx context.Context) error {
	sp := r.spec()
	_, _, targets, _, err := r.layout()
	if err != nil {
		return err
	}
	old, err := router.NewPlacement(sp.From)
	if err != nil {
		return err
	}
	olds, err := placementTargets(sp.DB, sp.From)
	if err != nil {
		return err
	}
	// Once cut over, the old subtables are fenced and the new ones are
	// not (a restart in the middle of a rollback may have left them
	// otherwise).
	if err := r.settle(ctx, olds, true); err != nil {
		return err
	}
	if err := r.settle(ctx, targets, false); err != nil {
		return err
	}
	streams, err := r.nodeStreams(targets)
	if err != nil {
		return err
	}
	r.mu.Lock()
	from := maps.Clone(r.w.State.Reverse)
	r.mu.Unlock()
	a, errc, stop, err := r.startApply(ctx, streams, r.names(sp.To), old, fencedTargets(olds), from, func(p map[string]string) error {
		return r.save(ctx, func(s *State) { s.Reverse = p })
	})
	if err != nil {
		return err
	}
	defer stop()
	for {
		select {
		case err := <-errc:
			if err == nil {
				err = ctx.Err()
			}
			return err
		case <-ctx.Done():
			return nil
		case cmd := <-r.cmds:
			switch cmd.name {
			case CmdRollback:
				ok, err := r.retrySwap(ctx, "rollback", func() (bool, error) { return r.rollback(ctx, a, streams, targets, olds) })
				if ok {
					stop()
					err = r.drop(append(fencedTargets(targets), targets...))
				}
				cmd.reply <- err
				if ok {
					return nil
				}
			case CmdComplete:
				stop()
				err := r.drop(append(fencedTargets(olds), olds...))
				if err == nil {
					err = r.save(ctx, func(s *State) { s.Phase = PhaseCompleted })
				}
				cmd.reply <- err
				return err
			default:
				cmd.reply <- fmt.Errorf("workflow %s has cut over: rollback or complete", sp.Name)
			}
		}
	}
}

// rollback is a cutover back to the old rule.
func (r *run) rollback(ctx context.Context, a *applier, streams []changestream.Source, news, olds []copyTarget) (bool, error) {
	return r.swap(ctx, "rollback", a, streams, r.spec().From, news, olds, func() (func(*State), error) {
		applied := a.position()
		return func(s *State) {
			s.Phase, s.Reverse = PhaseRolledBack, applied
		}, nil
	})
}

// cancel ends a workflow before its cutover: the new subtables are
// dropped (an import's target rows stay).
func (r *run) cancel(ctx context.Context) error {
	sp := r.spec()
	if sp.Kind == KindReshard {
		_, _, targets, _, err := r.layout()
		if err != nil {
			return err
		}
		if err := r.drop(targets); err != nil {
			return err
		}
	}
	return r.save(ctx, func(s *State) { s.Phase = PhaseCancelled })
}

// drop drops tables.
func (r *run) drop(ts []copyTarget) error {
	for _, t := range ts {
		ep, err := r.m.env.Endpoint(t.node)
		if err != nil {
			return err
		}
		c, err := dial(ep)
		if err != nil {
			return err
		}
		_, err = c.Execute("DROP TABLE IF EXISTS " + qualified(t.db, t.name))
		c.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// Targets reports the new rule's subtables for a spec (for messages).
func Targets(rule config.ShardRule) []string {
	p, err := router.NewPlacement(rule)
	if err != nil {
		return nil
	}
	var out []string
	for _, t := range p.Subtables() {
		out = append(out, t.Node+":"+t.Name)
	}
	return slices.Clip(out)
}

// Running returns the status of the workflows this proxy runs now, from
// memory (no sidecar query): for the metrics.
func (m *Manager) Running() []Status {
	m.mu.Lock()
	runs := make([]*run, 0, len(m.runs))
	for _, r := range m.runs {
		if r.leased.Load() {
			runs = append(runs, r)
		}
	}
	m.mu.Unlock()
	out := make([]Status, 0, len(runs))
	for _, r := range runs {
		out = append(out, r.status())
	}
	return out
}
