package server

import (
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/proxy/engine"
	"github.com/shardgate/shardgate/proxy/session"
	"github.com/shardgate/shardgate/router"
)

// query runs COM_QUERY in four steps: the router reads the text once
// (router.Classify: what the statement is and does) and plans it; the
// session applies the statement's effects before it (Before: implicit
// commit, transaction left out); the engine runs the plan; the session
// records what it left (After: locks, state, SET on other nodes). The
// statements the proxy answers itself are picked off on the way.
func (h *handler) query(p []byte) error {
	c, st := h.c, h.c.st
	if served, err := h.rc.serve(p[1:]); served { // rcache_query.go
		return err
	}
	u := router.Unwrap(string(p[1:]), h.defaultVersion())
	if u.CommentsOnly {
		return h.forwardComment(p) // the server answers comments itself
	}
	sql := u.SQL
	if u.Changed {
		p = h.queryPacket(sql)
	}
	stmt := router.Classify(sql, st.Mode())
	// SET STATEMENT session_track_... FOR: the server's trackers answer (track.go).
	h.track.forStatement = stmt.Keyword == "SET" && stmt.Sticky && router.StatementSetsTrackers(sql, st.Mode())
	if stmt.ReadsTrackers && !h.track.forStatement {
		sql, p = h.track.bind(sql, p) // track.go
	}
	if stmt.ReadsCounts {
		sql, p = h.counts.bind(sql, &stmt, p)
	}
	if stmt.Keyword == "LOAD" {
		c.unwatch() // the proxy reads the client's file itself
	}
	c.act.set("Query", sql)
	h.ob = stmtObs{sql: sql, keyword: stmt.Keyword, reads0: st.ReplicaReads}
	if handled, err := h.answerFirst(sql, &stmt); handled {
		return err
	}
	if err := st.Before(&stmt); err != nil {
		return h.settle(err)
	}
	plan, err := h.plan(sql, &stmt, p)
	if plan == nil {
		if err != nil || !stmt.Multi { // a split text noted each of its statements
			h.counts.note(false, backend.Outcome{}, err)
		}
		if aerr := st.After(&stmt, sql, nil, session.Outcome{}); aerr != nil && err == nil {
			err = h.afterFailed(&stmt, aerr, err)
		}
		return err
	}
	var start time.Time
	if c.srv.sqlLog != nil {
		start = time.Now()
	}
	if n := st.DiagnosticsNode(&stmt); n != "" && plan.Kind == router.Forward && len(plan.Tables) == 0 && plan.Targets[0].Node != n {
		plan = plan.On(n) // SHOW WARNINGS where the last statement left them
	}
	st.Route(&stmt, plan.Kind, c.readSplit())
	var res backend.Outcome
	switch {
	case plan.Into != "":
		plan, res, err = h.into.run(plan, &stmt)
	case plan.Kind != router.Forward:
		err = h.execute(plan, sql)
	default:
		plan, res, err = h.rc.forward(plan, &stmt, sql, p) // rcache_query.go, stale.go
	}
	h.finish(plan, &stmt, res, err)
	h.counts.note(plan.Kind == router.Forward, res, err)
	if aerr := st.After(&stmt, sql, plan, session.Outcome{Err: err, OK: res.OK}); aerr != nil {
		err = h.afterFailed(&stmt, aerr, err)
	}
	if !start.IsZero() {
		h.logSQL(sql, plan.Targets[0].Node, time.Since(start), err)
	}
	if err == nil && plan.Kind == router.Forward && !res.OK && c.more != 0 {
		err = engine.ErrAnswered // the relayed ERR ends a split text (multi.go)
	}
	return err
}

// defaultVersion is the version of the server behind the session's
// default node, as router.VersionID reads it.
func (h *handler) defaultVersion() int {
	node, _ := h.c.srv.rt().DefaultNode(h.c.user)
	if v := h.c.srv.node(node).Version(); v != h.version {
		h.version, h.versionID = v, router.VersionID(v) // read once per version, not per statement
	}
	return h.versionID
}

// answerFirst answers the statements that need neither the session's
// transaction nor a plan: the admin statements, empty texts, KILL, SHOW
// PROCESSLIST; and refuses what the statement policy denies.
func (h *handler) answerFirst(sql string, stmt *router.Stmt) (handled bool, err error) {
	c := h.c
	if stmt.Keyword == "ADMIN" || stmt.Keyword == "SHOW" {
		if handled, err := h.adminSQL(sql, stmt.Keyword); handled {
			return true, err
		}
	}
	switch stmt.Kind {
	case router.KindEmpty:
		if stmt.Blank {
			return true, mysql.NewError(mysql.ErEmptyQuery, "Query was empty")
		}
		// Comments only (the mariadb client sends "/*!*/"), or text
		// that starts with no keyword ("@a from t"): the server says
		// what it makes of it (OK, 1065 or 1064), as it would directly.
	case router.KindKill:
		if k, ok := router.ParseKill(sql); ok {
			return true, h.ls.kill(k)
		}
		// No id: the server's syntax error.
		return true, mysql.NewError(mysql.ErSyntax, "You have an error in your SQL syntax; check the manual that corresponds to your MariaDB server version for the right syntax to use near '' at line 1")
	case router.KindRead:
		if stmt.Keyword != "SHOW" {
			break
		}
		if full, ok := router.IsShowProcesslist(sql); ok {
			return true, c.srv.showProcesslist(c, full)
		}
	}
	if err := h.allowed(sql, stmt); err != nil {
		return true, err
	}
	return false, nil
}

// plan answers the statements of a single-statement text that the proxy
// runs itself (transaction control, UNLOCK TABLES, SQL-level PREPARE,
// tracked SET, SET NAMES, USE) and routes the others. A nil plan means the
// statement is answered (err says how).
func (h *handler) plan(sql string, stmt *router.Stmt, p []byte) (*router.Plan, error) {
	c, st := h.c, h.c.st
	if !stmt.Multi {
		switch {
		case stmt.Keyword == "BEGIN" && st.Mode()&router.ModeForeign != 0:
			// Under sql_mode=ORACLE, BEGIN opens a block, not a
			// transaction: the server says what it makes of it.
		case stmt.Kind == router.KindTxn || stmt.Keyword == "SAVEPOINT" || stmt.Keyword == "RELEASE":
			if handled, err := h.ls.txnStatement(sql, stmt); handled {
				return nil, err
			}
		case stmt.UnlockTables:
			return nil, h.ls.unlockTables(p)
		}
		if handled, err := h.ls.local(sql, *stmt); handled {
			return nil, err
		}
	} else {
		stmt.Sticky = c.srv.rt().MultiSticky(sql, c.user, st.Mode())
	}
	plan, err := h.route(sql, h.routerSession())
	if err != nil {
		if stmt.Multi {
			if texts, ok := c.srv.rt().SplitSharded(sql, h.routerSession()); ok {
				return nil, h.multi.queryMulti(texts)
			}
		}
		return nil, err
	}
	c.srv.queries.Add(1)
	h.ob.plan = plan
	if plan.Kind == router.Explain {
		h.rc.explain(plan) // rcache_query.go
	}
	if plan.Kind == router.LoadSplit && c.caps&mysql.ClientLocalFiles == 0 {
		return nil, mysql.NewError(mysql.ErNotAllowedCommand, "The used command is not allowed with this MariaDB version")
	}
	return plan, nil
}

// forward runs a plan of one target, relaying its response: table names
// in results read as the client wrote them, a master that turned
// read-only during a switchover gets the statement again once the node's
// master moved, and a read a replica could not answer goes to the master.
func (h *handler) forward(plan *router.Plan, stmt *router.Stmt, p []byte) (backend.Outcome, error) {
	st := h.c.st
	t := &plan.Targets[0]
	pkt, relay := p, engine.Relay(engine.RelayResult)
	if t.SQL != "" {
		pkt = h.queryPacket(t.SQL)
	}
	switch {
	case len(plan.Renames) > 0:
		relay = engine.RelayRenamed(plan.Renames)
	case t.Subtable != "":
		relay = h.logicalRelay(plan.Tables)
	}
	relay = h.fence.wrap(relay) // stale.go
	if stmt.Keyword == "CALL" {
		relay = h.track.afterRoutine(relay) // track.go
	}
	var from string
	base := relay
	if st.Read != session.ReadReplica && !stmt.Multi && h.watchesReadOnly(t.Node) {
		from = h.beforeMasterStatement(t.Node)
		relay = readOnlyGuard(base, from != "")
	}
	guarded := from != ""
	if h.track.forStatement {
		h.track.forStatement = false
		res, err := h.track.runLent(t.Node, pkt, stmt, relay) // track.go
		return res, h.settle(err)
	}
	res, err := h.x.Forward(t.Node, pkt, stmt.Sticky, stmt.UsesLastInsertID, relay)
	if guarded && errors.Is(err, errReadOnlyMaster) {
		// A switchover is under way: once the node's master moves, the
		// statement runs there.
		res, err = h.afterReadOnly(t.Node, from, func() (backend.Outcome, error) {
			return h.x.Forward(t.Node, pkt, stmt.Sticky, stmt.UsesLastInsertID, base)
		})
	}
	if err != nil && st.Read == session.ReadReplica && !res.Sent && replicaLost(err) {
		// The replica died under a read the client has seen nothing of:
		// the master answers it.
		st.Read = session.ReadMaster
		res, err = h.x.Forward(t.Node, pkt, stmt.Sticky, stmt.UsesLastInsertID, relay)
	}
	return res, h.settle(err)
}

// afterFailed handles an error of session.After: the locks of a failed
// LOCK TABLES that could not be released are logged (their connections
// are broken, and the locks go with them); a SET that failed on another
// node of the session, after the client got its answer, ends the session
// rather than leave its nodes disagreeing.
func (h *handler) afterFailed(stmt *router.Stmt, aerr, err error) error {
	if stmt.LockTables {
		h.c.log.Warn("releasing the locks of a failed LOCK TABLES", zap.Error(aerr))
		return err
	}
	h.c.log.Warn("SET failed on another node of the session; closing it", zap.Error(aerr))
	return h.c.closeNow()
}

// finish does what a statement that ran means for everyone: DDL through
// the proxy refreshes the tables' definitions, a SET GLOBAL renews the
// pools (new sessions start with the new value), and a statement that
// stored an explicit value in a sequence's column moves the sequence past
// it.
func (h *handler) finish(plan *router.Plan, stmt *router.Stmt, res backend.Outcome, err error) {
	if err != nil {
		return
	}
	switch {
	case plan.Kind != router.Forward && stmt.Kind == router.KindDDL && len(plan.Tables) > 0:
		h.c.srv.tables.refresh(plan.Tables)
	case plan.Kind == router.Forward && res.OK && !stmt.Multi && stmt.SetsGlobal:
		h.c.srv.renewPools()
	}
	if plan.Advance != nil {
		h.seqs.advance(plan.Advance)
	}
}
