package server

import (
	"context"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/proxy/metrics"
)

// A cutover no proxy of the fleet misses. The proxy that cuts a table
// over (workflows.Pause) announces it to the fleet (FleetCutover, package
// fleet over etcd) before it shuts its own gate; every other live proxy
// shuts its gate for the table (Server.HoldTable), and acknowledges once
// no session of its own is inside. The cutover waits for the
// acknowledgements at most cutover_ack_wait from the announcement, then
// fences and swaps whatever came back: a proxy that did not answer
// (frozen, partitioned, slow) meets the fence, which stays the guarantee.
// The outcome (the rule now in force, or none) goes back with the end of
// the announcement; each proxy puts that rule in force and only then opens
// its gate, so that the statements it held run on the new subtables. One
// proxy with one file has no FleetCutover: its pause is its own.
//
// While a gate is shut, statements wait at it within bounds (the buffer):
// at most move.buffer_size per table and proxy, each at most
// move.buffer_window; beyond either the statement fails with 1205.

// FleetCutover announces a cutover of db.table to the other proxies of
// the fleet (FleetOptions.Cutover): each holds the table's statements for
// at most hold. wait waits, until its context ends, for every live proxy
// to hold the table with no session inside and returns those that did not;
// end tells them the outcome (to: the rule in force now, nil when nothing
// changed) and lets them go. Both are called once.
type FleetCutover func(ctx context.Context, db, table string, hold time.Duration) (wait func(context.Context) []string, end func(to *config.ShardRule), err error)

// bufferCounters count what the gates held (metrics.BufferStats). Safe
// for concurrent use.
type bufferCounters struct {
	buffered, drained, acksMissing atomic.Uint64
	evicted                        [2]atomic.Uint64 // by metrics.EvictReasons

	mu        sync.Mutex
	pauses    uint64
	last, sum time.Duration
}

// Indexes of bufferCounters.evicted.
const (
	evictFull = iota
	evictWindow
)

// paused counts one gate held for d.
func (b *bufferCounters) paused(d time.Duration) {
	b.mu.Lock()
	b.pauses++
	b.last = d
	b.sum += d
	b.mu.Unlock()
}

// bufferStats returns what the gates held so far.
func (gs *gates) bufferStats() metrics.BufferStats {
	b := &gs.buffer
	st := metrics.BufferStats{Buffered: b.buffered.Load(), Drained: b.drained.Load(), AcksMissing: b.acksMissing.Load(),
		Evicted: map[string]uint64{}}
	for i, r := range metrics.EvictReasons {
		st.Evicted[r] = b.evicted[i].Load()
	}
	b.mu.Lock()
	st.Pauses, st.LastPauseSeconds, st.PauseSecondsSum = b.pauses, b.last.Seconds(), b.sum.Seconds()
	b.mu.Unlock()
	gs.mu.Lock()
	for _, g := range gs.byTable {
		st.Held += g.waiting
	}
	gs.mu.Unlock()
	return st
}

// wait holds a statement on table at its gate g until held (the hold's
// channel) is closed, within the buffer's bounds: it fails at once when
// buffer_size statements wait at g already, and after buffer_window.
func (gs *gates) wait(table string, g *gate, held chan struct{}) error {
	o := gs.conf.cfg().Move.WithDefaults()
	gs.mu.Lock()
	if n := g.waiting; n >= o.BufferSize {
		gs.mu.Unlock()
		gs.buffer.evicted[evictFull].Add(1)
		return mysql.NewError(mysql.ErLockWaitTimeout, "Lock wait timeout exceeded: table %s is being cut over to a new shard rule and %d statements wait for it already (move.buffer_size)", table, n)
	}
	g.waiting++
	gs.mu.Unlock()
	gs.heldStatements.Add(1)
	gs.buffer.buffered.Add(1)
	t := time.NewTimer(o.BufferWindow)
	defer t.Stop()
	var err error
	select {
	case <-held:
		gs.buffer.drained.Add(1)
	case <-t.C:
		gs.buffer.evicted[evictWindow].Add(1)
		err = mysql.NewError(mysql.ErLockWaitTimeout, "Lock wait timeout exceeded: table %s is being cut over to a new shard rule and stayed held longer than %v (move.buffer_window)", table, o.BufferWindow)
	}
	gs.mu.Lock()
	g.waiting--
	gs.mu.Unlock()
	return err
}

// fleetPause is one cutover announced to the fleet; nil without a fleet
// or when the announcement failed (the fence alone then protects).
type fleetPause struct {
	w        *workflows
	table    string
	t0       time.Time
	ackWait  time.Duration
	waitFn   func(context.Context) []string
	endFn    func(*config.ShardRule)
	endOnce  sync.Once
	announce time.Duration
}

// announce tells the fleet that db.table is being cut over (FleetCutover),
// waiting at most half cutover_ack_wait for etcd (an etcd that does not
// answer must not take the pause's time). A failure is logged: the
// cutover goes on, protected by the fence.
func (w *workflows) announce(ctx context.Context, db, table string) *fleetPause {
	fc := w.gates.fleet
	if fc == nil {
		return nil
	}
	o := w.conf.cfg().Move.WithDefaults()
	hold := o.CutoverTimeout + time.Second
	if d, ok := ctx.Deadline(); ok {
		hold = time.Until(d) + time.Second
	}
	t0 := time.Now()
	actx, cancel := context.WithTimeout(ctx, o.CutoverAckWait/2)
	defer cancel()
	wait, end, err := fc(actx, db, table, hold)
	if err != nil {
		w.log.Warn("cannot announce the cutover to the fleet; the other proxies meet the fence instead", zap.String("table", db+"."+table), zap.Error(err))
		return nil
	}
	return &fleetPause{w: w, table: db + "." + table, t0: t0, ackWait: o.CutoverAckWait, waitFn: wait, endFn: end, announce: time.Since(t0)}
}

// wait waits until every live proxy of the fleet holds the table, at most
// cutover_ack_wait from the announcement (and until ctx ends); when this
// proxy's own sessions took longer to leave, the acknowledgements are
// still read once.
func (p *fleetPause) wait(ctx context.Context) {
	if p == nil {
		return
	}
	deadline := p.t0.Add(p.ackWait)
	if last := time.Now().Add(50 * time.Millisecond); deadline.Before(last) {
		deadline = last
	}
	wctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	missing := p.waitFn(wctx)
	if len(missing) > 0 {
		p.w.gates.buffer.acksMissing.Add(uint64(len(missing)))
		p.w.log.Warn("cutover goes on without these proxies holding the table: they meet the fence", zap.String("table", p.table),
			zap.Strings("members", missing), zap.Duration("waited", time.Since(p.t0)))
		return
	}
	p.w.log.Info("every proxy of the fleet holds the table", zap.String("table", p.table), zap.Duration("announce", p.announce),
		zap.Duration("acknowledged", time.Since(p.t0)))
}

// end tells the fleet the outcome (to: the rule in force now; nil:
// unchanged); later calls do nothing.
func (p *fleetPause) end(to *config.ShardRule) {
	if p == nil {
		return
	}
	p.endOnce.Do(func() { p.endFn(to) })
}

// HoldTable shuts the gate of db.table in this proxy for a cutover another
// proxy of the fleet runs (package fleet) and waits until no session is
// inside, or ctx ends (the gate is open again then). release puts to in
// force first, when it is not nil and not the rule in force, then opens
// the gate: the statements held run under the new rule.
func (s *Server) HoldTable(ctx context.Context, db, table string) (release func(to *config.ShardRule), err error) {
	open, err := s.gates.hold(ctx, db, table)
	if err != nil {
		return nil, err
	}
	return func(to *config.ShardRule) {
		defer open()
		if to == nil {
			return
		}
		if cur := s.ruleOf(db, table); cur != nil && reflect.DeepEqual(*cur, *to) {
			return
		}
		var err error
		if s.flows != nil {
			err = s.flows.swapRule(db, table, *to)
		} else {
			_, err = s.liveConfig.swapRule(db, table, *to)
		}
		if err != nil {
			s.log.Error("cannot put in force the rule the fleet's cutover swapped to; statements meet the fence", zap.String("table", db+"."+table), zap.Error(err))
		}
	}, nil
}
