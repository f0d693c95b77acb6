package server

import (
	"context"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/move"
)

// publisher writes the rule a cutover or a rollback put in force into the
// fleet's topology (Options.PublishRule), so that shardgate topo get, a
// proxy started later and shardgate plan see it without meeting the fence.
// It never delays the swap: publish only records the rule and wakes one
// goroutine, which stores it and, while etcd does not take it, tries again
// with a growing pause until it does or the server shuts down. Meanwhile
// every proxy still learns the rule from the sidecar at the fence. A nil
// publisher (one proxy with a file) publishes nothing. Safe for
// concurrent use.
type publisher struct {
	fn  func(ctx context.Context, db, table string, rule config.ShardRule) error
	log *zap.Logger

	failures atomic.Uint64 // attempts etcd did not take

	mu      sync.Mutex
	pending map[tableName]config.ShardRule // not stored yet
	started bool

	wake   chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

// Pauses between attempts while etcd does not take a rule.
const (
	publishRetryMin = 200 * time.Millisecond
	publishRetryMax = 5 * time.Second
)

func newPublisher(fn func(ctx context.Context, db, table string, rule config.ShardRule) error, log *zap.Logger) *publisher {
	if fn == nil {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &publisher{fn: fn, log: log, pending: map[tableName]config.ShardRule{}, wake: make(chan struct{}, 1),
		ctx: ctx, cancel: cancel, done: make(chan struct{})}
}

// publish has rule stored as db.table's in the topology, in the
// background; a later rule of the same table replaces one not stored yet.
func (p *publisher) publish(db, table string, rule config.ShardRule) {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.pending[tableName{db, table}] = rule
	if !p.started {
		p.started = true
		go p.run()
	}
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// run stores the pending rules each time it is woken, until none is left.
func (p *publisher) run() {
	defer close(p.done)
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-p.wake:
		}
		backoff := publishRetryMin
		for !p.storeAll() {
			select {
			case <-p.ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, publishRetryMax)
		}
	}
}

// storeAll tries to store each pending rule once; it reports whether none
// is left.
func (p *publisher) storeAll() bool {
	p.mu.Lock()
	todo := make(map[tableName]config.ShardRule, len(p.pending))
	for t, r := range p.pending {
		todo[t] = r
	}
	p.mu.Unlock()
	for t, r := range todo {
		ctx, cancel := context.WithTimeout(p.ctx, 5*time.Second)
		err := p.fn(ctx, t.db, t.table, r)
		cancel()
		if err != nil {
			if p.ctx.Err() != nil {
				return false
			}
			if p.failures.Add(1) == 1 || p.failures.Load()%10 == 0 {
				p.log.Warn("cannot write the swapped shard rule into the fleet's topology; trying again (proxies learn it from the sidecar at the fence meanwhile)",
					zap.String("table", t.db+"."+t.table), zap.Uint64("failures", p.failures.Load()), zap.Error(err))
			}
			continue
		}
		p.log.Info("swapped shard rule written into the fleet's topology", zap.String("table", t.db+"."+t.table))
		p.mu.Lock()
		if cur, ok := p.pending[t]; ok && reflect.DeepEqual(cur, r) {
			delete(p.pending, t)
		}
		p.mu.Unlock()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.pending) == 0
}

// tableName is a logical table, the key of the rules to publish.
type tableName struct{ db, table string }

// stats returns the attempts that failed and the rules not stored yet.
func (p *publisher) stats() (failures uint64, pending int) {
	if p == nil {
		return 0, 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failures.Load(), len(p.pending)
}

// close stops the background attempts and waits for them to end.
func (p *publisher) close() {
	if p == nil {
		return
	}
	p.cancel()
	p.mu.Lock()
	started := p.started
	p.mu.Unlock()
	if started {
		<-p.done
	}
}

// Reload applies cfg (liveConfig.Reload). A shard rule of cfg that differs
// from the one in force and is the rule a reshard workflow of that table
// swapped to, as the sidecar records it (the To of one cut over; the From
// of one whose To is in force, when no workflow of the table is cut over:
// it was rolled back), is put in force first, as when a statement meets
// the fence: in a fleet, the topology version a cutover or a rollback
// published is then no change of rule for this proxy, so every proxy
// applies it.
func (s *Server) Reload(cfg *config.Config) error {
	s.flows.adoptSwapped(cfg)
	return s.liveConfig.Reload(cfg)
}

// adoptSwapped puts in force the rules of cfg that workflows swapped to
// (Server.Reload). The sidecar is read only when a rule differs. Nil-safe.
func (w *workflows) adoptSwapped(cfg *config.Config) {
	if w == nil {
		return
	}
	inForce := map[tableName]config.ShardRule{}
	for _, sc := range w.conf.cfg().Schemas {
		for _, r := range sc.Shard {
			inForce[tableName{r.DB, r.Table}] = r
		}
	}
	var changed []config.ShardRule
	for _, sc := range cfg.Schemas {
		for _, r := range sc.Shard {
			if cur, ok := inForce[tableName{r.DB, r.Table}]; ok && !reflect.DeepEqual(cur, r) {
				changed = append(changed, r)
			}
		}
	}
	if len(changed) == 0 {
		return
	}
	// The phases are the store's (Overrides), not those of a run this
	// proxy may hold in memory.
	ovr, err := w.m.Overrides()
	var ws []move.Status
	if err == nil {
		ws, err = w.m.List()
	}
	if err != nil {
		w.log.Warn("a reload changes a shard rule and the workflows cannot be read from the sidecar", zap.Error(err))
		return
	}
	for _, r := range changed {
		cur := inForce[tableName{r.DB, r.Table}]
		to, cutOver := ovr[r.DB+"."+r.Table]
		adopt := cutOver && reflect.DeepEqual(to, r)
		for _, x := range ws {
			if !adopt && !cutOver && x.Spec.Kind == move.KindReshard && x.Spec.DB == r.DB && x.Spec.Table == r.Table {
				adopt = reflect.DeepEqual(x.Spec.From, r) && reflect.DeepEqual(x.Spec.To, cur)
			}
		}
		if !adopt {
			continue
		}
		if err := w.swapRule(r.DB, r.Table, r); err != nil {
			w.log.Error("cannot put in force the rule a workflow swapped to", zap.String("table", r.DB+"."+r.Table), zap.Error(err))
		}
	}
}
