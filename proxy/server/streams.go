package server

import (
	"context"
	"reflect"
	"slices"
	"sync"

	"go.uber.org/zap"

	"github.com/shardgate/shardgate/changestream"
	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/kafkasink"
	"github.com/shardgate/shardgate/move"
	"github.com/shardgate/shardgate/proxy/metrics"
)

// The proxy runs one Kafka sink (package kafkasink) per entry of streams:
// in ks.yaml. A proxy from one file runs them from New to Shutdown; in a
// fleet only the leader runs them, for each term it leads (LeadWorkflows),
// as the workflows: two sinks of one stream would fence each other by
// their transactional id, and the positions live in Kafka, so the next
// leader's sinks resume where the last one's committed.
//
// A sink never touches the query path: it reads the nodes' binary logs
// over connections of its own, in goroutines of its own, and a slow or
// absent broker makes only its readers wait. A sink that fails is started
// again after a pause (kafkasink.Supervisor). A reload that changes a
// stream's definition, or the nodes, restarts that stream's sink.

// streamRunner owns the running sinks. lead runs them while its context
// lasts; one lead runs at a time (New's for a proxy from one file, the
// fleet's terms otherwise).
type streamRunner struct {
	conf   *liveConfig
	log    *zap.Logger
	fleet  bool          // in a fleet: only the leader runs the sinks
	leader func() string // the fleet's leader, for the standby's status
	kick   chan struct{} // the configuration changed (buffered, 1)
	names  streamNames
	// workflows lists the data-movement workflows (nil without the
	// sidecar): their rules name subtables, their cutovers order changes.
	workflows func() ([]move.Status, error)

	mu      sync.Mutex // guards running and leading
	running map[string]*sinkRun
	leading bool

	stop context.CancelFunc // ends New's lead (no fleet); nil in a fleet
	done <-chan struct{}    // closed when New's lead returned
}

// sinkRun is one stream's supervised sink, with what it was started from.
type sinkRun struct {
	cfg    config.Stream
	nodes  []config.Node
	sup    *kafkasink.Supervisor
	cancel context.CancelFunc
	done   chan struct{}
}

func newStreamRunner(s *Server) *streamRunner {
	r := &streamRunner{conf: &s.liveConfig, log: s.log.With(zap.String("component", "streams")), fleet: s.fleet != nil,
		leader: func() string { id, _ := s.fleetLeader(); return id },
		kick:   make(chan struct{}, 1), running: map[string]*sinkRun{}}
	r.names.conf = &s.liveConfig
	if s.flows != nil {
		r.workflows = s.flows.m.List
	}
	if !r.fleet {
		ctx, cancel := context.WithCancel(context.Background())
		r.stop, r.done = cancel, r.goLead(ctx)
	}
	return r
}

// goLead runs lead in a goroutine; the channel closes when it returned.
func (r *streamRunner) goLead(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.lead(ctx)
	}()
	return done
}

// lead runs a sink per stream of the configuration in force until ctx
// ends, then stops them and returns.
func (r *streamRunner) lead(ctx context.Context) {
	r.mu.Lock()
	r.leading = true
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.leading = false
		r.mu.Unlock()
	}()
	for {
		r.reconcile(ctx)
		select {
		case <-ctx.Done():
			r.stopAll()
			return
		case <-r.kick:
		}
	}
}

// changed tells the runner the configuration changed (a reload); it never
// blocks.
func (r *streamRunner) changed() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// close stops the sinks of a proxy from one file (Shutdown) and waits for
// them; in a fleet the leader's term ending stops them.
func (r *streamRunner) close() {
	if r == nil || r.stop == nil {
		return
	}
	r.stop()
	<-r.done
}

// reconcile stops the sinks of streams the configuration no longer has or
// has changed (or whose nodes changed), and starts the missing ones.
func (r *streamRunner) reconcile(ctx context.Context) {
	cfg := r.conf.cfg()
	r.mu.Lock()
	var stale []*sinkRun
	for name, run := range r.running {
		want := cfg.Stream(name)
		if want == nil || !reflect.DeepEqual(*want, run.cfg) || !reflect.DeepEqual(cfg.Nodes, run.nodes) {
			stale = append(stale, run)
			delete(r.running, name)
		}
	}
	r.mu.Unlock()
	for _, run := range stale {
		run.cancel()
		<-run.done
		r.log.Info("stream's sink stopped for the new configuration", zap.String("stream", run.cfg.Name))
	}
	if ctx.Err() != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, sc := range cfg.Streams {
		if r.running[sc.Name] != nil {
			continue
		}
		run := &sinkRun{cfg: sc, nodes: slices.Clone(cfg.Nodes), done: make(chan struct{})}
		run.sup = &kafkasink.Supervisor{Stream: sc, Sources: r.sources, Names: r.names.names, Event: r.event, Cutovers: r.cutovers}
		rctx, cancel := context.WithCancel(ctx)
		run.cancel = cancel
		go func() {
			defer close(run.done)
			run.sup.Run(rctx)
		}()
		r.running[sc.Name] = run
	}
}

// stopAll stops every sink and waits for them.
func (r *streamRunner) stopAll() {
	r.mu.Lock()
	runs := make([]*sinkRun, 0, len(r.running))
	for name, run := range r.running {
		runs = append(runs, run)
		delete(r.running, name)
	}
	r.mu.Unlock()
	for _, run := range runs {
		run.cancel()
	}
	for _, run := range runs {
		<-run.done
	}
}

// sources are the nodes of the configuration in force, each at the
// address its writes go to now (a master switch moves it). A run asks for
// them at its start, so the workflows' rules are read again first: a sink
// that resumes from positions before a cutover, on a proxy started after
// it, names the old subtables too.
func (r *streamRunner) sources() []changestream.Source {
	r.cutovers()
	out := changestream.Sources(r.conf.cfg())
	for i := range out {
		if n := r.conf.node(out[i].Node); n != nil {
			out[i].Addr = n.Addr()
		}
	}
	return out
}

// cutovers are the cutovers of the resharding workflows that have one
// (switched, or completed since), for the sinks' order
// (kafkasink.Cutover); reading them also gives the names every workflow's
// rules (old and new), which the sinks name subtables by.
func (r *streamRunner) cutovers() []kafkasink.Cutover {
	if r.workflows == nil {
		return nil
	}
	ws, err := r.workflows()
	if err != nil {
		r.log.Warn("cannot list the workflows for the streams: their subtables are named by the rules seen so far", zap.Error(err))
		return nil
	}
	flows := make([]*move.Workflow, len(ws))
	for i := range ws {
		flows[i] = &ws[i].Workflow
	}
	rules, cs := move.ForStreams(flows)
	r.names.add(rules)
	out := make([]kafkasink.Cutover, 0, len(cs))
	for _, c := range cs {
		out = append(out, kafkasink.Cutover(c))
	}
	return out
}

// event logs a sink's start, failure and stop.
func (r *streamRunner) event(e kafkasink.Event) {
	switch {
	case e.Started:
		r.log.Info("stream's sink running", zap.String("stream", e.Stream), zap.Int("nodes", e.Nodes))
	case e.Err != nil:
		r.log.Warn("stream's sink failed; it starts again after a pause", zap.String("stream", e.Stream), zap.Error(e.Err),
			zap.Duration("pause", e.Pause), zap.Int64("commits", e.Stats.Commits))
	default:
		r.log.Info("stream's sink stopped", zap.String("stream", e.Stream), zap.Int64("commits", e.Stats.Commits))
	}
}

// stats reports each stream of the configuration in force (Stats.Streams).
func (r *streamRunner) stats() []metrics.StreamStats {
	if r == nil {
		return nil
	}
	cfg := r.conf.cfg()
	if len(cfg.Streams) == 0 {
		return nil
	}
	r.mu.Lock()
	leading := r.leading
	runs := make(map[string]*sinkRun, len(r.running))
	for name, run := range r.running {
		runs[name] = run
	}
	r.mu.Unlock()
	out := make([]metrics.StreamStats, 0, len(cfg.Streams))
	for _, sc := range cfg.Streams {
		run := runs[sc.Name]
		if run == nil {
			st := metrics.StreamStats{Name: sc.Name, State: kafkasink.StateStopped}
			if r.fleet && !leading {
				st.State, st.Leader = "standby", r.leader()
			}
			out = append(out, st)
			continue
		}
		out = append(out, streamStats(run.sup.Status()))
	}
	return out
}

func streamStats(v kafkasink.Status) metrics.StreamStats {
	st := metrics.StreamStats{Name: v.Name, State: v.State, Since: v.Since, Runs: v.Runs, Failures: v.Failures,
		LastError: v.LastErr, LastErrorAt: v.LastErrAt, Commits: v.Total.Commits, Transactions: v.Total.Transactions,
		Changes: v.Total.Changes, Records: v.Total.Records, Bytes: v.Total.Bytes, SnapshotRows: v.Total.SnapshotRows}
	for _, n := range v.Stats.Nodes {
		st.Nodes = append(st.Nodes, metrics.StreamNodeStats{Node: n.Node, Pos: n.Pos, Behind: n.Behind, LagSeconds: n.LagSeconds, Committed: n.Committed})
	}
	return st
}

// streamNames names the tables of the binary logs for the sinks: by the
// shard rules in force (a cutover's new rule as soon as it is), by every
// rule seen before, and by the rules of the workflows (add), so that the
// old subtables of a table that was resharded still name it while the
// sinks read the binary logs behind, on this proxy's run or after a
// restart.
type streamNames struct {
	conf *liveConfig

	mu    sync.Mutex
	cfg   *config.Config // the configuration fn was built from
	fn    func(db, table string) string
	rules []config.ShardRule // every rule seen
}

func (n *streamNames) names(db, table string) string {
	cfg := n.conf.cfg()
	n.mu.Lock()
	if n.cfg != cfg {
		for _, sc := range cfg.Schemas {
			n.addLocked(sc.Shard)
		}
		n.cfg, n.fn = cfg, changestream.NamesWith(cfg, n.rules...)
	}
	fn := n.fn
	n.mu.Unlock()
	return fn(db, table)
}

// add names the subtables of rules too, from the next change on.
func (n *streamNames) add(rules []config.ShardRule) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.addLocked(rules) {
		n.cfg = nil // names builds fn again
	}
}

// addLocked appends the rules not known yet and reports whether there
// were any; n.mu is held.
func (n *streamNames) addLocked(rules []config.ShardRule) bool {
	var added bool
	n.rules, added = move.AddRules(n.rules, rules)
	return added
}
