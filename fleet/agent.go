package fleet

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/topo"
)

// Proxy is what an agent drives in its proxy (proxy/server.Server).
type Proxy interface {
	// Reload applies a topology version: all of it for the next
	// statement, or nothing (an error).
	Reload(cfg *config.Config) error
	// NodeHealth is what the proxy's health checks last saw, by node.
	NodeHealth() map[string]backend.Health
	// FollowMaster moves the node's writes to the master the leader
	// recorded.
	FollowMaster(node, addr string)
}

// Leader is implemented by a proxy that has work only the fleet's leader
// does (proxy/server.Server: the data-movement workflows). The agent calls
// LeadWorkflows when the proxy wins a term of leadership, with the term's
// election revision (larger for every later term: a fencing token), and
// cancels ctx when the term ends (lease lost, election key gone, agent
// closed) before it campaigns again or resigns. LeadWorkflows returns once
// that work has stopped.
type Leader interface {
	LeadWorkflows(ctx context.Context, term int64)
}

// Options configure an agent.
type Options struct {
	Store *topo.Store
	// Member is what the proxy publishes of itself (ID empty: a name is
	// claimed, proxy-1, proxy-2, ...).
	Member topo.Member
	// Overlay changes each version before it is applied: the settings
	// that are each proxy's own (listen addresses, certificates, the XA
	// instance name) over the fleet's.
	Overlay func(*config.Config)
	Log     *zap.Logger
	// Interval is how often health is published and, by the leader,
	// master switches decided. Default 1s.
	Interval time.Duration
}

// Agent is one proxy's part in the fleet.
type Agent struct {
	o   Options
	log *zap.Logger

	mu      sync.Mutex
	member  *topo.Membership // the current one: a lost lease is joined again
	id      string
	written *topo.Member // the record last written (unchanged: not written again)

	applied, latest atomic.Int64
	applyErr        atomic.Pointer[string]
	status          atomic.Pointer[Status]

	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
}

// Status is the fleet as this proxy last saw it, for the status page,
// /metrics and shardgate status.
type Status struct {
	ID string `json:"id"`
	// Reachable: etcd answered the last check; Error is why not.
	Reachable bool   `json:"etcd_reachable"`
	Error     string `json:"error,omitempty"`
	Leader    string `json:"leader"`
	// Applied is the topology version this proxy serves, Latest the
	// newest it has seen in etcd; ApplyError is why it did not apply
	// Latest.
	Applied    int64  `json:"applied"`
	Latest     int64  `json:"latest"`
	ApplyError string `json:"apply_error,omitempty"`
	// Members are the live proxies; Drift names those that do not serve
	// the latest version.
	Members []topo.Member `json:"members"`
	Drift   []string      `json:"drift,omitempty"`
	Checked time.Time     `json:"checked"`
}

// Join registers the proxy in the fleet (a member under a lease) and
// returns its agent; Run starts it.
func Join(ctx context.Context, o Options) (*Agent, error) {
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	if o.Interval <= 0 {
		o.Interval = time.Second
	}
	if o.Overlay == nil {
		o.Overlay = func(*config.Config) {}
	}
	a := &Agent{o: o, log: o.Log}
	m := o.Member
	m.Started = time.Now()
	mb, err := o.Store.Join(ctx, m)
	if err != nil {
		return nil, fmt.Errorf("joining the fleet: %w", err)
	}
	a.member, a.id = mb, mb.ID()
	a.o.Member.ID = a.id
	a.o.Member.Started = m.Started
	a.log = a.log.With(zap.String("member", a.id))
	a.status.Store(&Status{ID: a.id, Reachable: true})
	return a, nil
}

// SetLogger makes the agent log to l from Run on (the proxy's log, once
// its configuration is read); call it before Run.
func (a *Agent) SetLogger(l *zap.Logger) { a.log = l.With(zap.String("member", a.id)) }

// ID is the proxy's name in the fleet (its XA instance name too).
func (a *Agent) ID() string { return a.id }

// Initial waits for the topology in etcd and returns it, with the
// overlay applied, and its version: what the proxy starts with. It
// retries while etcd is unreachable (the proxy serves nothing meanwhile:
// never a stale file).
func (a *Agent) Initial(ctx context.Context) (*config.Config, int64, error) {
	for {
		cfg, rev, err := a.get(ctx)
		if err == nil {
			if a.o.Member.Addr == "" {
				a.o.Member.Addr = cfg.Addr
			}
			if a.o.Member.AdminAddr == "" {
				a.o.Member.AdminAddr = cfg.WebAddr
			}
			a.applied.Store(rev)
			a.latest.Store(rev)
			return cfg, rev, nil
		}
		if ctx.Err() != nil {
			return nil, 0, err
		}
		a.log.Warn("waiting for the fleet's topology", zap.Error(err))
		select {
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		case <-time.After(a.o.Interval):
		}
	}
}

func (a *Agent) get(ctx context.Context) (*config.Config, int64, error) {
	gctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	v, err := a.o.Store.Get(gctx)
	if err != nil {
		return nil, 0, err
	}
	cfg, err := a.parse(v.YAML)
	if err != nil {
		return nil, 0, fmt.Errorf("topology version %d: %w", v.Rev, err)
	}
	return cfg, v.Rev, nil
}

func (a *Agent) parse(yaml []byte) (*config.Config, error) {
	cfg, err := config.Parse(yaml)
	if err != nil {
		return nil, err
	}
	a.o.Overlay(cfg)
	return cfg, cfg.Validate()
}

// Run starts the agent's work for proxy p: applying topology versions
// after the one it started with, following recorded masters, publishing
// health, and campaigning for leadership. Close stops it.
func (a *Agent) Run(p Proxy) {
	ctx, cancel := context.WithCancel(context.Background())
	a.cancel = cancel
	a.wg.Add(4)
	go func() { defer a.wg.Done(); a.applyLoop(ctx, p) }()
	go func() { defer a.wg.Done(); a.masterLoop(ctx, p) }()
	go func() { defer a.wg.Done(); a.healthLoop(ctx, p) }()
	go func() { defer a.wg.Done(); a.leaderLoop(ctx, p) }()
	if cp, ok := p.(CutoverProxy); ok { // cutover.go
		a.wg.Go(func() { a.cutoverLoop(ctx, cp) })
	}
}

// Close stops the agent, leaves the fleet (its member key goes at once,
// and leadership with it) and closes the store. It returns within a few
// seconds whether etcd answers or not: a call etcd does not answer (the
// election's own resign after a cancelled campaign waits on the client,
// not on a context) ends when the store's client is closed.
func (a *Agent) Close() { a.closeOnce.Do(a.close) }

func (a *Agent) close() {
	if a.cancel != nil {
		a.cancel()
	}
	done := make(chan struct{})
	go func() { a.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Second):
	}
	left := make(chan struct{})
	go func() {
		a.mu.Lock()
		if a.member != nil {
			a.member.Close()
		}
		a.mu.Unlock()
		close(left)
	}()
	select {
	case <-left:
	case <-time.After(time.Second): // etcd away: the lease ends by itself
	}
	a.o.Store.Close()
	<-done
}

// Applied is the topology version the proxy serves.
func (a *Agent) Applied() int64 { return a.applied.Load() }

// Status returns the fleet as this proxy last saw it.
func (a *Agent) Status() Status { return *a.status.Load() }

// PublishRule stores a new topology version in which db.table has rule
// (the rule a cutover or a rollback put in force), the rest of the stored
// text as written. It reads the current version and stores the new one
// only if none was stored meanwhile (a conflict is read again, at most 5
// times). When the stored topology has that rule already, or no rule for
// the table, nothing is stored. It returns the version that carries the
// rule (0 when none is stored).
func (a *Agent) PublishRule(ctx context.Context, db, table string, rule config.ShardRule) (int64, error) {
	key := db + "." + table
	for try := 1; ; try++ {
		v, err := a.o.Store.Get(ctx)
		if err != nil {
			return 0, err
		}
		cur, err := config.Parse(v.YAML)
		if err != nil {
			return 0, fmt.Errorf("topology version %d: %w", v.Rev, err)
		}
		text, err := config.WithRulesText(v.YAML, map[string]config.ShardRule{key: rule})
		if err != nil {
			return 0, fmt.Errorf("topology version %d: %w", v.Rev, err)
		}
		next, err := config.Parse(text)
		if err != nil {
			return 0, fmt.Errorf("topology version %d with the rule of %s: %w", v.Rev, key, err)
		}
		was, has := shardRule(cur, key)
		if now, _ := shardRule(next, key); !has || reflect.DeepEqual(was, now) {
			return v.Rev, nil
		}
		if _, err := a.parse(text); err != nil {
			return 0, fmt.Errorf("topology version %d with the rule of %s: %w", v.Rev, key, err)
		}
		rev, err := a.o.Store.Put(ctx, text, v.Rev)
		if errors.Is(err, topo.ErrConflict) && try < 5 {
			continue
		}
		if err != nil {
			return 0, err
		}
		a.log.Info("shard rule written into the topology", zap.String("table", key), zap.Int64("version", rev))
		return rev, nil
	}
}

// shardRule is the rule of db.table (key) in cfg.
func shardRule(cfg *config.Config, key string) (config.ShardRule, bool) {
	for _, sc := range cfg.Schemas {
		for _, r := range sc.Shard {
			if r.DB+"."+r.Table == key {
				return r, true
			}
		}
	}
	return config.ShardRule{}, false
}

// applyLoop applies each topology version etcd holds after the one the
// proxy has.
func (a *Agent) applyLoop(ctx context.Context, p Proxy) {
	for v := range a.o.Store.Watch(ctx) {
		if v.Rev <= a.latest.Load() && v.Rev <= a.applied.Load() {
			continue
		}
		a.latest.Store(v.Rev)
		cfg, err := a.parse(v.YAML)
		if err == nil {
			err = p.Reload(cfg)
		}
		if err != nil {
			msg := fmt.Sprintf("version %d: %v", v.Rev, err)
			a.applyErr.Store(&msg)
			a.log.Error("topology version not applied; serving the one before", zap.Int64("version", v.Rev),
				zap.Int64("serving", a.applied.Load()), zap.Error(err))
		} else {
			a.applyErr.Store(nil)
			a.applied.Store(v.Rev)
			a.log.Info("topology version applied", zap.Int64("version", v.Rev))
		}
		a.publish(ctx, p)
	}
}

// masterLoop moves each node's writes to the master the leader recorded.
func (a *Agent) masterLoop(ctx context.Context, p Proxy) {
	for masters := range a.o.Store.WatchMasters(ctx) {
		for node, addr := range masters {
			p.FollowMaster(node, addr)
		}
	}
}

// healthLoop publishes, every interval, what the proxy serves and sees,
// and keeps the member's lease: a lost one (etcd away longer than its
// TTL) is joined again under the same name.
func (a *Agent) healthLoop(ctx context.Context, p Proxy) {
	t := time.NewTicker(a.o.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		a.publish(ctx, p)
	}
}

// publish writes the member's record when it changed, and refreshes the
// status.
func (a *Agent) publish(ctx context.Context, p Proxy) {
	st := &Status{ID: a.id, Applied: a.applied.Load(), Latest: a.latest.Load(), Checked: time.Now()}
	if e := a.applyErr.Load(); e != nil {
		st.ApplyError = *e
	}
	health := map[string]topo.NodeHealth{}
	for name, h := range p.NodeHealth() {
		health[name] = topo.NodeHealth{Master: h.Master, Up: h.Up, ReadOnly: h.ReadOnly, Promoted: h.Promoted}
	}
	m := a.o.Member
	m.Applied, m.Health, m.Err = st.Applied, health, st.ApplyError
	err := a.writeMember(ctx, m)
	if err == nil {
		err = a.readFleet(ctx, st)
	}
	if err != nil {
		st.Error = err.Error()
		prev := a.status.Load()
		st.Leader, st.Members, st.Drift = prev.Leader, prev.Members, prev.Drift
	}
	st.Reachable = err == nil
	if prev := a.status.Load(); prev.Reachable != st.Reachable {
		if st.Reachable {
			a.log.Info("etcd reachable again")
		} else {
			a.log.Error("etcd unreachable: serving the topology in force; topology changes are refused until it answers", zap.Error(err))
		}
	}
	a.status.Store(st)
}

// writeMember updates the member's record, joining again under the same
// name when its lease is gone.
func (a *Agent) writeMember(ctx context.Context, m topo.Member) error {
	ctx, cancel := context.WithTimeout(ctx, a.o.Interval)
	defer cancel()
	a.mu.Lock()
	defer a.mu.Unlock()
	select {
	case <-a.member.Done():
		if err := a.rejoin(ctx); err != nil {
			return err
		}
	default:
	}
	if a.written != nil && reflect.DeepEqual(*a.written, m) {
		return nil
	}
	err := a.member.Update(ctx, func(cur *topo.Member) { *cur = m })
	if errors.Is(err, topo.ErrMemberGone) {
		if err = a.rejoin(ctx); err == nil {
			err = a.member.Update(ctx, func(cur *topo.Member) { *cur = m })
		}
	}
	if err != nil {
		return err
	}
	a.written = &m
	return nil
}

// rejoin registers the member again after its lease ended; a.mu is held.
func (a *Agent) rejoin(ctx context.Context) error {
	mb, err := a.member.Rejoin(ctx)
	if err != nil {
		return err
	}
	a.member, a.written = mb, nil
	a.log.Info("joined the fleet again after its lease ended")
	return nil
}

// readFleet fills st with the live members, the leader and the drift.
func (a *Agent) readFleet(ctx context.Context, st *Status) error {
	ctx, cancel := context.WithTimeout(ctx, a.o.Interval)
	defer cancel()
	members, err := a.o.Store.Members(ctx)
	if err != nil {
		return err
	}
	leader, err := a.o.Store.Leader(ctx)
	if err != nil {
		return err
	}
	st.Members, st.Leader = members, leader
	for _, m := range members {
		if m.Applied > st.Latest {
			st.Latest = m.Applied
		}
	}
	for _, m := range members {
		if m.Applied != st.Latest || m.Err != "" {
			st.Drift = append(st.Drift, m.ID)
		}
	}
	return nil
}

func (a *Agent) membership() *topo.Membership {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.member
}

// leaderLoop campaigns for leadership and, while leader, decides master
// switches every interval and runs the leader's work of p (Leader).
// Leadership ends with the member's lease; the leader's writes are
// conditioned on its election (SetMaster), so a deposed leader changes
// nothing.
func (a *Agent) leaderLoop(ctx context.Context, p Proxy) {
	for ctx.Err() == nil {
		mb := a.membership()
		l, err := mb.Campaign(ctx)
		if err != nil {
			if ctx.Err() == nil {
				a.log.Warn("campaign for the fleet's leadership failed; trying again", zap.Error(err))
				sleep(ctx, a.o.Interval)
			}
			continue
		}
		a.log.Info("leading the fleet", zap.Int64("term", l.Rev()))
		stop := a.startLeaderWork(ctx, p, l)
		a.lead(ctx, l, mb, stop)
		stop()
		a.log.Info("no longer leading the fleet", zap.Int64("term", l.Rev()))
	}
}

// startLeaderWork runs p's leader work (Leader) for term l, and returns
// the function that ends it and waits until it has stopped.
func (a *Agent) startLeaderWork(ctx context.Context, p Proxy, l *topo.Leadership) (stop func()) {
	ld, ok := p.(Leader)
	if !ok {
		return func() {}
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		ld.LeadWorkflows(wctx, l.Rev())
	}()
	return func() {
		cancel()
		<-done
	}
}

// lead decides master switches while l lasts; stopWork ends the leader's
// work before a resignation (the next leader starts it at once).
func (a *Agent) lead(ctx context.Context, l *topo.Leadership, mb *topo.Membership, stopWork func()) {
	t := time.NewTicker(a.o.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			stopWork()
			rctx, cancel := context.WithTimeout(context.Background(), time.Second)
			l.Resign(rctx)
			cancel()
			return
		case <-l.Done():
			return
		case <-mb.Done():
			return
		case <-t.C:
		}
		if err := a.decideMasters(ctx, l); errors.Is(err, topo.ErrNotLeader) {
			return
		} else if err != nil {
			a.log.Warn("deciding master switches", zap.Error(err))
		}
	}
}

func (a *Agent) decideMasters(ctx context.Context, l *topo.Leadership) error {
	ctx, cancel := context.WithTimeout(ctx, a.o.Interval)
	defer cancel()
	members, err := a.o.Store.Members(ctx)
	if err != nil {
		return err
	}
	recorded, err := a.o.Store.Masters(ctx)
	if err != nil {
		return err
	}
	for node, addr := range Decide(members, recorded) {
		if err := l.SetMaster(ctx, node, addr); err != nil {
			return err
		}
		a.log.Warn("master switch recorded for the fleet", zap.String("node", node), zap.String("from", recorded[node]), zap.String("to", addr))
	}
	return nil
}

// Decide returns the master switches the fleet's reports call for, by
// node: the master they follow (the recorded one, else the one most
// report) is down or read-only for a majority of the members that report
// on it, and the replicas those members see promoted are exactly one.
// Two candidates, or none, decide nothing: the servers do not say which.
func Decide(members []topo.Member, recorded map[string]string) map[string]string {
	nodes := map[string]bool{}
	for _, m := range members {
		for n := range m.Health {
			nodes[n] = true
		}
	}
	out := map[string]string{}
	for node := range nodes {
		cur := recorded[node]
		if cur == "" {
			cur = mostReported(members, node)
		}
		var reports, down int
		cands := map[string]bool{}
		for _, m := range members {
			h, ok := m.Health[node]
			if !ok || h.Master != cur {
				continue
			}
			reports++
			if !h.Up || h.ReadOnly {
				down++
			}
			for _, p := range h.Promoted {
				if p != cur {
					cands[p] = true
				}
			}
		}
		if reports == 0 || down*2 <= reports || len(cands) != 1 {
			continue
		}
		for c := range maps.Keys(cands) {
			out[node] = c
		}
	}
	return out
}

func mostReported(members []topo.Member, node string) string {
	count := map[string]int{}
	best := ""
	for _, m := range members {
		if h, ok := m.Health[node]; ok {
			count[h.Master]++
			if count[h.Master] > count[best] || count[h.Master] == count[best] && h.Master < best {
				best = h.Master
			}
		}
	}
	return best
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
