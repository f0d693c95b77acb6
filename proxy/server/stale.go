package server

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/move"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/proxy/engine"
	"github.com/shardgate/shardgate/proxy/session"
	"github.com/shardgate/shardgate/router"
)

// A stale rule. A workflow's cutover fences the old subtables at the
// backend before it swaps the rule (move/fence.go): they are renamed, so a
// proxy that still routes by the old rule (it runs no workflow, or did not
// hear of the swap) gets ERROR 1146 on them. A sharded statement's ERR
// 1146 is held back (fenceGuard) and the proxy asks the workflows' record
// in the sidecar, which every proxy in front of the same nodes shares,
// whether the table's rule moved on: when it did, the rule is put in force
// here and the statement is planned and run again, once, on the new
// subtables. Inside a transaction it is not: the transaction is rolled back
// and the client gets ERROR 1213 (SQLSTATE 40001), which applications
// retry. Otherwise the held ERR goes to the client as the server sent it.

// erNoSuchTable is ER_NO_SUCH_TABLE (1146, 42S02).
const erNoSuchTable uint16 = 1146

// fenceGuard holds back a relayed ERR 1146 of one statement; it belongs to
// the session's goroutine.
type fenceGuard struct {
	armed bool   // set around one forward by forwardFenced
	held  []byte // the ERR packet held back (a copy); empty when none
	inner engine.Relay
	relay engine.Relay // built once: wraps inner
	// again is set while a prepared execution runs again (againExecute).
	again bool
}

// errFenceAgain tells a prepared execution to run again under the rule
// just put in force (fenceGuard.executed).
var errFenceAgain = errors.New("run the execution again under the refreshed rule")

// wrap returns relay guarded while armed (relay itself otherwise).
func (g *fenceGuard) wrap(relay engine.Relay) engine.Relay {
	if !g.armed {
		return relay
	}
	if g.relay == nil {
		g.relay = func(x *engine.Executor, bc *backend.Conn) (backend.Outcome, error) {
			code, isErr, err := bc.PeekErrCode()
			if err != nil || !isErr || code != erNoSuchTable {
				return g.inner(x, bc)
			}
			p, err := bc.ReadPacket()
			if err != nil {
				return backend.Outcome{}, err
			}
			g.held = append(g.held[:0], p...)
			return backend.Outcome{ErrCode: code}, nil
		}
	}
	g.inner = relay
	return g.relay
}

// forward is handler.forward for a text statement on one subtable, which a
// fence may have renamed: see the comment at the top. It returns the plan
// that ran.
func (g *fenceGuard) forward(h *handler, plan *router.Plan, stmt *router.Stmt, sql string, p []byte) (*router.Plan, backend.Outcome, error) {
	if stmt.Multi || len(plan.Tables) == 0 || plan.Targets[0].Subtable == "" {
		res, err := h.forward(plan, stmt, p)
		return plan, res, err
	}
	rt := h.c.srv.rt()
	g.armed, g.held = true, g.held[:0]
	res, err := h.forward(plan, stmt, p)
	g.armed = false
	if err != nil || len(g.held) == 0 {
		return plan, res, err
	}
	sub, deadline := plan.Targets[0].Node+":"+plan.Targets[0].Subtable, h.c.srv.fenceDeadline()
	for {
		moved, moving := h.c.srv.refreshRule(rt, plan.Tables, sub)
		if moved {
			break
		}
		if !moving || time.Now().After(deadline) {
			// A table that is missing indeed: the server's answer.
			h.x.ErrCode = erNoSuchTable
			res.Sent = true
			if err := h.c.Client().WritePacket(g.held); err != nil {
				return plan, res, &mysql.DstError{Err: err}
			}
			return plan, res, nil
		}
		// A workflow of the table may be between its fence and its swap:
		// until the swap is recorded, the statement is tried again as it
		// was (a cutover that gave up renamed the subtables back).
		time.Sleep(20 * time.Millisecond)
		g.armed, g.held = true, g.held[:0]
		res, err = h.forward(plan, stmt, p)
		g.armed = false
		if err != nil || len(g.held) == 0 {
			return plan, res, err
		}
	}
	if h.c.st.InTxn() {
		return plan, res, staleInTxn(h, plan)
	}
	next, err := h.route(sql, h.routerSession())
	if err != nil {
		return plan, backend.Outcome{}, err
	}
	h.c.srv.staleRetries.Add(1)
	if next.Kind != router.Forward {
		return next, backend.Outcome{}, h.execute(next, sql)
	}
	res, err = h.forward(next, stmt, p)
	return next, res, err
}

// wrapExec is wrap for the relay of a prepared execution (executeOn) on a
// subtable of a sharded table (sharded), except while it runs again.
func (g *fenceGuard) wrapExec(relay engine.Relay, sharded bool) engine.Relay {
	g.held = g.held[:0]
	if !sharded || g.again {
		return relay
	}
	g.armed = true
	relay = g.wrap(relay)
	g.armed = false
	return relay
}

// executed looks at the end of a prepared execution of plan (err is its
// error): one that met a fenced subtable, when preparing it (err) or
// executing it (an ERR held back by wrapExec), asks for the rule to be
// refreshed as forward does, and returns errFenceAgain when the execution
// is to run again (againExecute), 1213 inside a transaction, and the
// execution's own answer otherwise.
func (g *fenceGuard) executed(h *handler, plan *router.Plan, e *mysql.StmtExecute, err error) error {
	held := len(g.held) > 0
	if g.again || !held && (err == nil || errorCode(err) != erNoSuchTable) {
		return err
	}
	t := plan.Targets[0]
	stale := false
	if len(plan.Tables) > 0 && t.Subtable != "" {
		// While a workflow may be between its fence and its swap, wait for
		// the swap; at the end, the execution runs again as it is (a
		// cutover that gave up renamed the subtables back).
		for deadline := h.c.srv.fenceDeadline(); ; time.Sleep(20 * time.Millisecond) {
			moved, moving := h.c.srv.refreshRule(nil, plan.Tables, t.Node+":"+t.Subtable)
			if stale = moved || moving; moved || !moving || time.Now().After(deadline) {
				break
			}
		}
	}
	if !stale || held && sentLong(e) {
		// Not stale, or the values sent with COM_STMT_SEND_LONG_DATA are
		// spent: the server's answer goes to the client.
		if held {
			h.x.ErrCode = erNoSuchTable
			werr := h.c.Client().WritePacket(g.held)
			g.held = g.held[:0]
			if werr != nil {
				return &mysql.DstError{Err: werr}
			}
		}
		return err
	}
	g.held = g.held[:0]
	if h.c.st.InTxn() {
		return staleInTxn(h, plan)
	}
	h.c.srv.staleRetries.Add(1)
	return errFenceAgain
}

// sentLong reports whether an execution had values sent with
// COM_STMT_SEND_LONG_DATA (nil and not NULL in the packet).
func sentLong(e *mysql.StmtExecute) bool {
	for i, v := range e.Values {
		if v == nil && !e.Null[i] {
			return true
		}
	}
	return false
}

// againExecute runs a prepared execution again (after executed asked for
// it), without the guard: its answer is the client's.
func (g *fenceGuard) againExecute(s *stmtHandler, ps *session.Stmt, p []byte) error {
	g.again = true
	defer func() { g.again = false }()
	return s.execute(ps, p)
}

// staleInTxn is the error of a statement in a transaction that met a fence.
func staleInTxn(h *handler, plan *router.Plan) error {
	h.c.log.Info("a statement in a transaction met a fenced subtable: the table was cut over by another proxy", zap.Strings("tables", plan.Tables))
	return mysql.NewError(mysql.ErLockDeadlock, "Deadlock found when trying to get lock; try restarting transaction (table %s was cut over to a new shard rule by a workflow: the transaction is rolled back)", strings.Join(plan.Tables, ","))
}

// refreshRule reports whether the rule of one of tables (as a plan names
// them) moved on since rt was in force (nil: not known), for a statement
// that found subtable (node:name) missing (moved): the router changed
// since, the rule in force no longer has that subtable (another session
// refreshed it), or the workflows' record in the sidecar says a workflow
// cut the table over from the rule subtable belongs to (or rolled it back
// from it), and that rule is then put in force here. moving reports that
// a workflow of the table may be between its fence and its swap.
func (s *staleState) refreshRule(rt *router.Router, tables []string, subtable string) (moved, moving bool) {
	if rt != nil && s.live.rt() != rt {
		return true, false
	}
	if s.moves == nil {
		return false, false
	}
	s.staleMu.Lock() // one session asks the sidecar at a time
	defer s.staleMu.Unlock()
	if rt != nil && s.live.rt() != rt {
		return true, false
	}
	ws, err := s.moves.m.List()
	if err != nil {
		s.log.Warn("a subtable is missing and the workflows cannot be read from the sidecar", zap.Error(err))
		return false, false
	}
	for _, w := range ws {
		if w.Spec.Kind != move.KindReshard || !slices.Contains(tables, w.Spec.Table) {
			continue
		}
		inFrom, inTo := slices.Contains(move.Targets(w.Spec.From), subtable), slices.Contains(move.Targets(w.Spec.To), subtable)
		cur := s.live.ruleOf(w.Spec.DB, w.Spec.Table)
		if (inFrom || inTo) && cur != nil && !slices.Contains(move.Targets(*cur), subtable) {
			return true, false // the rule in force moved on already
		}
		var to config.ShardRule // the rule to put in force
		switch w.State.Phase {
		case move.PhaseCatchingUp, move.PhaseReady:
			moving = moving || inFrom
			continue
		case move.PhaseSwitched, move.PhaseCompleted:
			moving = moving || inTo && w.State.Phase == move.PhaseSwitched // perhaps rolling back
			if !inFrom {
				continue
			}
			to = w.Spec.To
		case move.PhaseRolledBack:
			if !inTo {
				continue
			}
			to = w.Spec.From
		default:
			continue
		}
		if cur == nil || cur.Generation == to.Generation {
			continue
		}
		if err := s.moves.swapRule(w.Spec.DB, w.Spec.Table, to); err != nil {
			s.log.Error("cannot put in force the rule a workflow cut over to", zap.String("table", w.Spec.Logical()), zap.Error(err))
			return false, false
		}
		s.log.Info("a fenced subtable: this proxy's rule was stale; it now routes by the workflow's", zap.String("workflow", w.Spec.Name),
			zap.String("table", w.Spec.Logical()), zap.Int("generation", to.Generation))
		return true, false
	}
	return false, moving
}

// fenceDeadline is how long a statement that met a fence waits for the
// swap to be recorded: twice the cutover timeout and a second, as a
// statement held at a gate.
func (l *liveConfig) fenceDeadline() time.Time {
	return time.Now().Add(2*l.cfg().Move.WithDefaults().CutoverTimeout + time.Second)
}

// ruleOf returns the rule in force for db.table (nil when none).
func (l *liveConfig) ruleOf(db, table string) *config.ShardRule {
	cfg := l.cfg()
	for i := range cfg.Schemas {
		for k := range cfg.Schemas[i].Shard {
			if r := &cfg.Schemas[i].Shard[k]; r.DB == db && r.Table == table {
				return r
			}
		}
	}
	return nil
}

// staleState is the server's part: one refresh at a time (refreshRule),
// and a count. live, moves and log are the server's (New sets them);
// moves is nil without the sidecar's node.
type staleState struct {
	staleMu      sync.Mutex
	staleRetries atomic.Uint64 // statements run again after a refresh
	live         *liveConfig
	moves        *workflows
	log          *zap.Logger
}
