package server

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/proxy/engine"
	"github.com/shardgate/shardgate/proxy/session"
	"github.com/shardgate/shardgate/router"
)

// handler runs one client's commands: one method per COM_* command, the
// statements the proxy answers itself (transactions, SET, USE, KILL, SHOW
// PROCESSLIST, SQL-level PREPARE), and the hand-off of everything else to
// the router and the engine. Session state lives in conn.st; what the
// client is sent goes through conn. It is owned by the conn's goroutine.
type handler struct {
	c    *conn
	x    *engine.Executor
	ps   *stmtHandler // binary prepared statements
	qbuf []byte       // scratch for rewritten COM_QUERY packets
	// immediate is set while an EXECUTE IMMEDIATE the proxy checked runs.
	immediate bool
	// logical relays results of statements on subtables of relayTables
	// (logicalRelay).
	logical     engine.Relay
	relayTables []string
	// ob is what the statement under way did, for the metrics (observe).
	ob stmtObs
}

func newHandler(c *conn) *handler {
	h := &handler{c: c, x: c.srv.engine.NewExecutor(c, c)}
	h.ps = &stmtHandler{h: h}
	return h
}

// errCloseSession ends the session after the current response: the client
// connection can no longer be served faithfully (e.g. the backend holding
// its session state died, or the client vanished mid-result).
var errCloseSession = errors.New("close session")

// routerSession is what the router needs to know of the session.
func (h *handler) routerSession() router.Session {
	t := h.c.srv.tables
	return router.Session{User: h.c.user, DB: h.c.st.DB, Mode: h.c.st.Mode(), Catalog: t, IDs: t.ids()}
}

// logicalRelay returns a relay that names logical tables in column
// definitions (engine.RelayResultLogical), built once per session.
func (h *handler) logicalRelay(tables []string) engine.Relay {
	h.relayTables = tables
	if h.logical == nil {
		h.logical = func(x *engine.Executor, bc *backend.Conn) (backend.Outcome, error) {
			return engine.RelayResultLogical(x, bc, h.relayTables, false)
		}
	}
	return h.logical
}

// probeSession is routerSession for plans made only to be looked at: they
// take no sequence values.
func (h *handler) probeSession() router.Session {
	s := h.routerSession()
	if s.IDs != nil {
		s.IDs = probeIDs{}
	}
	return s
}

// route plans a text statement; a plan that needs the definition of a
// table not read yet reads it and plans again.
func (h *handler) route(sql string, s router.Session) (*router.Plan, error) {
	p, err := h.c.srv.rt().Route(sql, s)
	if h.readDefinition(err) {
		p, err = h.c.srv.rt().Route(sql, s)
	}
	if m := h.c.srv.moving.Load(); m != nil && err == nil && len(p.Tables) > 0 {
		if waited, gerr := h.enterGates(*m, p.Tables); gerr != nil {
			return nil, gerr
		} else if waited {
			return h.route(sql, s)
		}
	}
	return p, err
}

// routeArgs is route for a binary prepared statement's execution.
func (h *handler) routeArgs(sql string, s router.Session, args []router.Arg) (*router.Plan, error) {
	p, err := h.c.srv.rt().RouteArgs(sql, s, args)
	if h.readDefinition(err) {
		p, err = h.c.srv.rt().RouteArgs(sql, s, args)
	}
	if m := h.c.srv.moving.Load(); m != nil && err == nil && len(p.Tables) > 0 {
		if waited, gerr := h.enterGates(*m, p.Tables); gerr != nil {
			return nil, gerr
		} else if waited {
			return h.routeArgs(sql, s, args)
		}
	}
	return p, err
}

// readDefinition reads the table definition err asks for (a
// router.NeedSchemaError) and reports whether it is now known.
func (h *handler) readDefinition(err error) bool {
	if err == nil {
		return false // before anything escapes: this is every statement's path
	}
	var ne *router.NeedSchemaError
	return errors.As(err, &ne) && h.c.srv.tables.loadNamed(ne.DB, ne.Table)
}

// dispatch runs one command. A non-nil error that is not errCloseSession
// is sent to the client as an ERR packet.
func (h *handler) dispatch(p []byte) (quit bool, err error) {
	c := h.c
	c.interrupted.Store(false)
	cmd := p[0]
	switch cmd {
	case mysql.ComQuit:
		return true, nil
	case mysql.ComPing:
		return false, c.okStatus()
	case mysql.ComQuery:
		err = h.query(p)
	case mysql.ComInitDB:
		if err = h.useDB(string(p[1:])); err == nil {
			err = c.okStatus()
		}
	case mysql.ComFieldList, mysql.ComStatistics:
		err = h.passthrough(p)
	case mysql.ComStmtPrepare:
		err = h.ps.prepare(p)
	case mysql.ComStmtExecute, mysql.ComStmtFetch, mysql.ComStmtReset, mysql.ComStmtClose, mysql.ComStmtSendLongData:
		if ps := h.ps.lookup(p); ps != nil {
			err = h.ps.command(ps, p)
			break
		}
		// An id the session never got: it is never passed on, since a
		// pooled connection holds statements of other sessions.
		if cmd == mysql.ComStmtClose || cmd == mysql.ComStmtSendLongData {
			return false, nil // no reply is due
		}
		id, _ := mysql.StmtExecuteID(p)
		return false, unknownStmt(cmd, id)
	case mysql.ComSetOption:
		err = h.setOption(p)
	case mysql.ComResetConnection:
		c.st.Reset()
		err = c.okStatus()
	case mysql.ComChangeUser:
		err = h.changeUser(p)
	case mysql.ComProcessKill:
		if len(p) < 5 {
			return false, mysql.ErrBadPacket
		}
		err = c.srv.kill(c, router.Kill{ID: uint64(binary.LittleEndian.Uint32(p[1:5]))})
	default:
		err = mysql.NewError(mysql.ErNotSupported, "command %s is not supported by shardgate", comName(cmd))
	}
	if errors.Is(err, errCloseSession) {
		return true, nil
	}
	return false, err
}

// unlockTables answers UNLOCK TABLES: the session's table locks are
// released on every node that holds some; without any, the statement goes
// to the default node as it is (it also ends FLUSH TABLES WITH READ LOCK
// there) and leaves nothing behind.
func (h *handler) unlockTables(p []byte) error {
	st := h.c.st
	if !st.Locked() {
		node, _ := h.c.srv.rt().DefaultNode(h.c.user)
		_, err := h.x.Forward(node, p, false, false, engine.RelayResult)
		return h.settle(err)
	}
	if err := st.Unlock(); err != nil {
		return mysql.NewError(mysql.ErServerLost, "%v", err)
	}
	return h.c.okStatus()
}

// forwardComment sends a text the server reads as comments only to the
// default node, unchanged, and relays its answer (OK, or 1065): nothing
// runs, so no state is left, and nothing is routed.
func (h *handler) forwardComment(p []byte) error {
	node, _ := h.c.srv.rt().DefaultNode(h.c.user)
	_, err := h.x.Forward(node, p, false, false, engine.RelayResult)
	return h.settle(err)
}

// execute runs a plan the proxy answers itself (Executor.Execute). In
// transaction_mode xa, a write outside any transaction that reaches
// several nodes runs as one XA transaction: committed, two-phase, before
// its OK is sent, or rolled back everywhere when a node fails it.
func (h *handler) execute(plan *router.Plan, sql string) error {
	st := h.c.st
	if (plan.Kind != router.SumOK && plan.Kind != router.LoadSplit) || !st.BeginImplicitXA(plan.Nodes()) {
		return h.settle(h.x.Execute(plan, sql))
	}
	h.x.BeforeOK = h.commitImplicit
	err := h.x.Execute(plan, sql)
	h.x.BeforeOK = nil
	if st.TxnSQL() != "" {
		// It failed before its commit (which ends the transaction):
		// undone on every node.
		if rerr := st.End(false); rerr != nil {
			h.c.log.Warn("rolling back a failed write across nodes", zap.Error(rerr))
		}
		var se *mysql.SQLError
		if errors.As(err, &se) {
			err = &mysql.SQLError{Code: se.Code, State: se.State, Message: se.Message + "; rolled back on every node (transaction_mode xa)"}
		}
	}
	return h.settle(err)
}

// endDeadlocked ends the transaction of a statement a node answered with
// a deadlock (1213): MariaDB rolled that node's part back and ended the
// transaction there, so the proxy rolls back the other nodes' parts, as
// one server would have ended it all (left open, their locks would hold
// up other transactions, and the client's next BEGIN would commit them).
func (h *handler) endDeadlocked(err error) {
	code := h.x.ErrCode // a relayed error
	var se *mysql.SQLError
	if code == 0 && err != nil && errors.As(err, &se) {
		code = se.Code
	}
	if code != mysql.ErLockDeadlock || !h.c.st.InTxn() {
		return
	}
	if rerr := h.c.st.End(false); rerr != nil {
		h.c.log.Warn("rolling back a deadlocked transaction across nodes", zap.Error(rerr))
	}
}

// commitImplicit commits the transaction execute opened (BeforeOK).
func (h *handler) commitImplicit() error { return h.c.st.End(true) }

// settle turns what a backend failure means into the session's answer: a
// client that went away or holds half a packet ends the session; a lost
// backend connection is reported, and ends the session when its state
// lived there. Other errors go to the client as they are.
func (h *handler) settle(err error) error {
	if err == nil {
		return nil // before anything escapes: this is every statement's path
	}
	return h.settleErr(err)
}

func (h *handler) settleErr(err error) error {
	var de *mysql.DstError
	var lost *backend.LostError
	switch {
	case errors.As(err, &de):
		h.c.log.Debug("client vanished mid-result", zap.Error(err))
		return errCloseSession
	case errors.Is(err, mysql.ErrForwardCut):
		h.c.log.Warn("backend failed mid-packet; closing the client connection", zap.Error(err))
		return h.c.closeNow()
	case errors.Is(err, session.ErrCommitUnknown):
		h.c.log.Error("closing the client connection", zap.Error(err))
		return h.c.closeNow()
	case errors.As(err, &lost):
		if lost.Cause != nil {
			h.c.log.Warn("backend failed mid-query", zap.String("addr", lost.Conn.Addr), zap.Error(lost.Cause))
		}
		return h.backendLost(lost.Conn)
	}
	if node := h.c.st.TxnLost(); node != "" {
		// The statement lost the transaction's connection to node (a
		// statement on several nodes reports that as an error of its
		// own): its part there is gone, as after a server crash, which
		// would close the connection.
		h.c.log.Info("the open transaction lost its connection to a node; closing the client connection", zap.String("node", node), zap.Error(err))
		return h.c.closeNow()
	}
	var se *mysql.SQLError
	if errors.As(err, &se) && se.Code == mysql.ErErrorDuringCommit {
		h.c.log.Error("COMMIT failed", zap.Error(err))
	}
	return err
}

// backendLost reports a backend that failed during a command, or closed
// the connection while it was idle (a server's idle_transaction_timeout,
// a KILL from elsewhere, a crash). If the session's state or transaction
// lived on that connection, the client's connection is closed, as the
// server's close or crash would close it (clients see 2013/2006, as
// directly); otherwise the client gets error 1430 and goes on with another
// backend connection.
func (h *handler) backendLost(bc *backend.Conn) error {
	if h.c.st.HoldsState() {
		h.c.log.Info("the backend connection holding the session's state or transaction is gone; closing the client connection", zap.String("addr", bc.Addr))
		return h.c.closeNow()
	}
	h.c.writeErr(backend.ErrLost(bc))
	return engine.ErrAnswered
}

// query runs COM_QUERY.
func (h *handler) query(p []byte) error {
	c, st := h.c, h.c.st
	sql := string(p[1:])
	if len(sql) > 3 && (sql[0] == '/' || sql[0] <= ' ' || sql[0] == '-' || sql[0] == '#') && router.HasExecutableComment(sql) {
		// A statement written as one executable comment (mysqldump's
		// /*!40101 SET ... */, /*M!100602 ... */): the server runs what
		// is inside, so the proxy reads, checks and sends just that.
		// Comments before it that the server skips (mariadb-dump's
		// sandbox line, for a later version) are dropped first.
		node, _ := c.srv.rt().DefaultNode(c.user)
		version := router.VersionID(c.srv.nodes[node].Version())
		rest := router.SkipIgnored(sql, version)
		if inner, ok := router.UnwrapExecutable(rest, version); ok {
			sql = inner
			p = h.queryPacket(inner)
		} else if strings.TrimSpace(strings.TrimRight(rest, "; \t\r\n")) == "" {
			// Comments only, to the server: it answers itself.
			return h.forwardComment(p)
		} else if len(rest) < len(sql) {
			sql = rest
			p = h.queryPacket(rest)
		}
	}
	stmt := router.Classify(sql)
	c.act.set("Query", sql)
	h.ob = stmtObs{sql: sql, keyword: stmt.Keyword, reads0: st.ReplicaReads}
	if stmt.Keyword == "ADMIN" || stmt.Keyword == "SHOW" {
		if handled, err := h.adminSQL(sql, stmt.Keyword); handled {
			return err
		}
	}
	switch stmt.Kind {
	case router.KindEmpty:
		if strings.TrimSpace(sql) == "" {
			return mysql.NewError(mysql.ErEmptyQuery, "Query was empty")
		}
		// Comments only (the mariadb client sends "/*!*/"), or text
		// that starts with no keyword ("@a from t"): the server says
		// what it makes of it (OK, 1065 or 1064), as it would directly.
	case router.KindKill:
		if k, ok := router.ParseKill(sql); ok {
			return c.srv.kill(c, k)
		}
		return mysql.NewError(mysql.ErNotSupported, "this form of KILL is not supported by shardgate; use KILL [CONNECTION | QUERY] <id> with an id from the proxy's SHOW PROCESSLIST")
	case router.KindRead:
		if stmt.Keyword != "SHOW" {
			break
		}
		if full, ok := router.IsShowProcesslist(sql); ok {
			return c.srv.showProcesslist(c, full)
		}
	}
	if err := h.allowed(sql, stmt.Keyword); err != nil {
		return err
	}
	multi := st.MultiStmts && strings.IndexByte(strings.TrimRight(sql, "; \t\r\n"), ';') >= 0
	if !multi {
		switch {
		case stmt.Keyword == "BEGIN" && st.Mode()&router.ModeForeign != 0:
			// Under sql_mode=ORACLE, BEGIN opens a block, not a
			// transaction: the server says what it makes of it.
		case stmt.Kind == router.KindTxn || stmt.Keyword == "SAVEPOINT" || stmt.Keyword == "RELEASE":
			if handled, err := h.txnStatement(sql); handled {
				return err
			}
		case stmt.Kind == router.KindDDL && !strings.Contains(strings.ToUpper(sql), "TEMPORARY"):
			// DDL commits the open transaction first, on every node, as
			// MySQL does (CREATE/DROP TEMPORARY TABLE do not).
			if err := st.CommitImplicitly(); err != nil {
				return h.settle(err)
			}
			st.SetOutsideTxn(true)
			defer st.SetOutsideTxn(false)
		case stmt.Keyword == "LOCK" || stmt.Keyword == "UNLOCK":
			st.SetOutsideTxn(true)
			defer st.SetOutsideTxn(false)
		}
		if stmt.Keyword == "UNLOCK" && router.IsUnlockTables(sql) {
			return h.unlockTables(p)
		}
		if handled, err := h.local(sql, stmt); handled {
			return err
		}
	} else {
		stmt.Sticky = h.multiSticky(sql)
	}
	plan, err := h.route(sql, h.routerSession())
	if err != nil {
		if multi {
			if texts, ok := c.srv.rt().SplitSharded(sql, h.routerSession()); ok {
				return h.queryMulti(texts)
			}
		}
		return err
	}
	var start time.Time
	if c.srv.sqlLog != nil {
		start = time.Now()
	}
	c.srv.queries.Add(1)
	h.ob.plan = plan
	if plan.Kind == router.LoadSplit && c.caps&mysql.ClientLocalFiles == 0 {
		return mysql.NewError(mysql.ErNotAllowedCommand, "The used command is not allowed with this MariaDB version")
	}
	st.Read = h.readMode(sql, stmt, plan.Kind, multi)
	if plan.Kind != router.Forward {
		err = h.execute(plan, sql)
		switch {
		case err == nil && plan.Sticky && stmt.Keyword == "LOCK":
			st.NoteLocks(plan.Nodes())
		case err != nil && plan.Sticky && stmt.Keyword == "LOCK" && !multi:
			// Some nodes may hold their locks: as MariaDB releases the
			// locks of a failed LOCK TABLES, so does the proxy.
			st.NoteLocks(plan.Nodes())
			if uerr := st.Unlock(); uerr != nil {
				c.log.Warn("releasing the locks of a failed LOCK TABLES", zap.Error(uerr))
			}
		case err == nil && stmt.Kind == router.KindDDL && len(plan.Tables) > 0:
			c.srv.tables.refresh(plan.Tables) // DDL through the proxy
		}
	} else {
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
		var res backend.Outcome
		var from string
		base := relay
		if st.Read != session.ReadReplica && !multi && h.watchesReadOnly(t.Node) {
			from = h.beforeMasterStatement(t.Node)
			relay = readOnlyGuard(base, from != "")
		}
		guarded := from != ""
		res, err = h.x.Forward(t.Node, pkt, stmt.Sticky, stmt.UsesLastInsertID, relay)
		if guarded && errors.Is(err, errReadOnlyMaster) {
			// A switchover is under way: once the node's master moves,
			// the statement runs there.
			res, err = h.afterReadOnly(t.Node, from, func() (backend.Outcome, error) {
				return h.x.Forward(t.Node, pkt, stmt.Sticky, stmt.UsesLastInsertID, base)
			})
		}
		if err != nil && st.Read == session.ReadReplica && !res.Sent && replicaLost(err) {
			// The replica died under a read the client has seen nothing
			// of: the master answers it.
			st.Read = session.ReadMaster
			res, err = h.x.Forward(t.Node, pkt, stmt.Sticky, stmt.UsesLastInsertID, relay)
		}
		err = h.settle(err)
		if err == nil && res.OK && !multi && router.SetsGlobal(sql, stmt.Keyword) {
			// New sessions start with the new value: so do the
			// connections the pool hands out from now on.
			c.srv.renewPools()
		}
		if err == nil && stmt.Sticky && res.OK && stmt.Keyword == "LOCK" && !multi {
			st.NoteLocks([]string{t.Node})
		} else if err == nil && stmt.Sticky && res.OK {
			st.NoteState(stmt, sql, multi)
			if stmt.Keyword == "SET" && !multi {
				if serr := st.SetOnOtherNodes(t.Node, sql); serr != nil {
					c.log.Warn("SET failed on another node of the session; closing it", zap.Error(serr))
					err = c.closeNow()
				}
			}
		}
	}
	st.Read = session.ReadMaster
	if err == nil && plan.Advance != nil {
		h.advance(plan.Advance)
	}
	if !start.IsZero() {
		h.logSQL(sql, plan.Targets[0].Node, time.Since(start), err)
	}
	return err
}

// advance moves a sequence past the explicit value a statement stored
// (sequence_advance). The statement's answer is sent: a failure is logged,
// and the next generated id may then collide with the value (1062).
func (h *handler) advance(a *router.Advance) {
	seqs := h.c.srv.tables.seqs
	if seqs == nil {
		return
	}
	if err := seqs.Advance(a.DB, a.Table, a.Past); err != nil {
		h.c.log.Warn("moving a sequence past an explicit value failed", zap.String("table", a.DB+"."+a.Table), zap.Uint64("value", a.Past), zap.Error(err))
	}
}

// multiSticky reports whether a multi-statement text leaves state on its
// connection. With shard rules each statement is classified (a batch of
// INSERTs, as Connector/J rewrites one, leaves none, so it does not tie
// the session to a node); without, the whole text counts as leaving state:
// the session uses one node anyway, and the text is not parsed.
func (h *handler) multiSticky(sql string) bool {
	c := h.c
	if !c.srv.rt().Sharded(c.user) {
		return true
	}
	texts, ok := router.SplitStatements(sql, c.st.Mode())
	if !ok {
		return true
	}
	for _, q := range texts {
		if st := router.Classify(q); st.Sticky || st.Kind == router.KindOther || st.Kind == router.KindTxn || st.Kind == router.KindEmpty {
			return true
		}
	}
	return false
}

// trackedSet reports whether a SET is one local runs itself (tracked
// variables, SET NAMES with a known character set).
func (h *handler) trackedSet(sql string) bool {
	mode := h.c.st.Mode()
	if router.HasExecutableComment(sql) {
		return false
	}
	if _, ok := router.ParseSet(sql, mode); ok {
		return true
	}
	if cs, coll, ok := router.ParseSetNames(sql, mode); ok {
		_, ok := mysql.CollationByName(cs, coll)
		return ok
	}
	return false
}

// allowed applies the statement policy (deny_statements,
// blacklist_sql_file) to a text a client wants to run, or prepare.
func (h *handler) allowed(sql, keyword string) error {
	switch why := h.c.srv.lv().policy.Check(sql, keyword); why {
	case "":
		return nil
	case "blacklist":
		return mysql.NewError(mysql.ErSpecificAccessDenied, "Access denied; this statement is in shardgate's blacklist_sql_file")
	case router.DenyStoredProgram:
		return mysql.NewError(mysql.ErSpecificAccessDenied, "Access denied; shardgate does not create stored programs whose body has KILL, dynamic SQL (PREPARE, EXECUTE) or a statement it refuses: they would run with the rights of the backend account every client shares (deny_statements: stored_program; quote a name spelled like one of these words)")
	default:
		return mysql.NewError(mysql.ErSpecificAccessDenied, "Access denied; shardgate does not run %s statements for clients: they act on the server every client shares through the proxy's backend account (deny_statements: %s)", strings.ReplaceAll(why, "_", " "), why)
	}
}

// local runs the statements other than transaction control of a
// single-statement text that the proxy answers itself (SQL-level PREPARE,
// tracked SET, SET NAMES, USE); handled is false for the others.
func (h *handler) local(sql string, stmt router.Stmt) (handled bool, err error) {
	c := h.c
	// Statements that run other statements: the proxy must see what they
	// run (to route it, and to keep KILL its own).
	switch {
	case stmt.Keyword == "EXECUTE" && isExecuteImmediate(sql):
		if h.immediate {
			return false, nil // checked: the server runs it
		}
		return true, h.executeImmediate(sql)
	case stmt.Keyword == "PREPARE" && h.immediate:
		return false, nil // prepareFromExpr's: checked, the server runs it
	case stmt.Keyword == "PREPARE":
		if router.HasExecutableComment(sql) {
			return true, mysql.NewError(mysql.ErNotSupported, "this form of PREPARE is not supported by shardgate: prepare from a string literal, a user variable or an expression, without executable comments")
		}
		if _, ok := router.ParseSQLPrepare(sql, c.st.Mode()); !ok {
			name, expr, near, ok := router.PrepareFromExpr(sql)
			if !ok {
				// Not PREPARE name FROM something: the server's syntax
				// error, without the server seeing it.
				return true, mysql.NewError(mysql.ErSyntax, "You have an error in your SQL syntax; check the manual that corresponds to your MariaDB server version for the right syntax to use near '%s' at line 1", near)
			}
			return true, h.prepareFromExpr(name, expr)
		}
	}
	if router.HasExecutableComment(sql) {
		// What the server runs may not be what the proxy reads: the
		// statement goes to the session's own connection.
		return false, nil
	}
	switch {
	case stmt.Keyword == "PREPARE" || stmt.Keyword == "EXECUTE" || stmt.Keyword == "DEALLOCATE" || stmt.Keyword == "DROP":
		return h.sqlPrepare(sql)
	case stmt.Keyword == "SET":
		if vars, ok := router.ParseSet(sql, c.st.Mode()); ok {
			return true, h.setTracked(sql, vars)
		}
		if cs, coll, ok := router.ParseSetNames(sql, c.st.Mode()); ok {
			if id, ok := mysql.CollationByName(cs, coll); ok {
				// The connections the session uses follow on next use.
				c.st.SetNames(id)
				return true, c.okStatus()
			}
		}
	case stmt.Keyword == "USE":
		if db, ok := router.ParseUse(sql); ok {
			if err := h.useDB(db); err != nil {
				return true, err
			}
			return true, c.okStatus()
		}
	}
	return false, nil
}

// txnStatement runs a transaction control statement. handled is false when
// the statement is not one the proxy manages (it then runs as usual).
func (h *handler) txnStatement(sql string) (handled bool, err error) {
	st := h.c.st
	var warnings uint16
	if router.HasExecutableComment(sql) {
		// mysqldump's START TRANSACTION /*!40100 WITH CONSISTENT SNAPSHOT */
		node, _ := h.c.srv.rt().DefaultNode(h.c.user)
		sql = router.InlineExecutable(sql, router.VersionID(h.c.srv.nodes[node].Version()))
	}
	txn := session.ParseTxn(sql)
	switch txn.Verb {
	case session.TxnNone:
		// Not a form the proxy composes: the server answers it (its
		// syntax error, typically); what it changes shows in the status
		// flags and session tracking like any statement's.
		return false, nil
	case session.TxnBegin:
		err = st.Begin(txn.SQL)
		if err == nil && strings.Contains(txn.SQL, "CONSISTENT SNAPSHOT") {
			// The snapshot is taken now, as on the server (on the default
			// node; others take theirs when the transaction reaches them).
			node, _ := h.c.srv.rt().DefaultNode(h.c.user)
			var bc *backend.Conn
			if bc, err = st.Acquire(node, false); err == nil {
				st.Release(bc, false, backend.Outcome{})
			}
		}
	case session.TxnCommit, session.TxnRollback:
		again := st.TxnSQL()
		err = st.End(txn.Verb == session.TxnCommit)
		warnings = st.EndWarnings
		// Without AND [NO] CHAIN or [NO] RELEASE, the session's
		// completion_type decides, as on the server.
		ct := st.CompletionType
		txn.Chain = txn.Chain || ct == 1 && !txn.NoChain
		txn.Release = txn.Release || ct == 2 && !txn.NoRelease
		if err == nil && txn.Chain && !txn.Release {
			// A new transaction with the same access mode, as the
			// server's AND CHAIN starts one.
			if again == "" {
				again = "START TRANSACTION"
			}
			err = st.Begin(again)
		}
		if err == nil && txn.Release {
			h.c.writeOK(mysql.OK{Status: h.c.status(), Warnings: warnings})
			h.c.c.Flush()
			return true, errCloseSession
		}
	default:
		err = st.Savepoint(txn.Verb, txn.Name, txn.SQL)
	}
	if err != nil {
		return true, h.settle(err)
	}
	return true, h.c.writeOK(mysql.OK{Status: h.c.status(), Warnings: warnings})
}

// setTracked runs a SET statement whose assignments the session tracks:
// on a pooled connection, then the values are read back.
func (h *handler) setTracked(sql string, vars []router.SetVar) error {
	c, st := h.c, h.c.st
	node, _ := c.srv.rt().DefaultNode(c.user)
	if st.XATxn().ID != 0 && st.Status&mysql.StatusAutocommit == 0 &&
		slices.ContainsFunc(vars, func(v router.SetVar) bool { return !v.User && v.Name == "autocommit" && !v.Off }) {
		// Turning autocommit on commits the open transaction first, as in
		// MariaDB (which refuses it inside XA: the proxy's XA is the
		// session's ordinary transaction).
		if err := st.End(true); err != nil {
			return err
		}
	}
	bc, err := st.AcquireOutsideTxn(node)
	if err != nil {
		return err
	}
	c.running.Store(bc)
	res, err := bc.Exec(sql)
	keep := false // the statement set something the session cannot carry
	if err == nil {
		// What the server says the statement set is read back too, so a
		// variable set in a way the proxy did not parse travels with the
		// session like the others instead of staying on the connection.
		for _, v := range reportedVars(res.State) {
			if !router.Carried(v.Name) {
				keep = true
				continue
			}
			vars = append(vars, v)
		}
		err = st.ReadBack(bc, vars)
		if err == nil && st.CheckCarry(bc, vars) != nil {
			keep = true // the values cannot be set on another connection
		}
	}
	c.running.Store(nil)
	if err != nil {
		var se *mysql.SQLError
		if !bc.Broken() && errors.As(err, &se) {
			h.afterFailedSet(bc, vars)
			st.Release(bc, false, backend.Outcome{})
			return err
		}
		bc.MarkBroken()
		st.Release(bc, false, backend.Outcome{})
		c.log.Warn("backend failed during SET", zap.String("node", node), zap.Error(err))
		return h.backendLost(bc)
	}
	if keep {
		st.Keep()
	}
	st.Release(bc, false, backend.Outcome{OK: true, Status: res.OK.Status, Warnings: res.OK.Warnings})
	return c.writeOK(mysql.OK{Status: st.Status, Warnings: res.OK.Warnings})
}

// afterFailedSet handles the connection a tracked SET failed on: MariaDB
// may have made the assignments before the failing one (a read-only
// variable set to DEFAULT fails after them), and its error says nothing of
// them. The user variables are read back, and the session keeps the
// connection from then on, with whatever else the statement left there,
// as a session directly would: no other session gets it.
func (h *handler) afterFailedSet(bc *backend.Conn, vars []router.SetVar) {
	st := h.c.st
	var users []router.SetVar
	for _, v := range vars {
		if v.User {
			users = append(users, v)
		}
	}
	if len(users) > 0 && st.ReadBack(bc, users) != nil {
		bc.MarkBroken()
		return
	}
	if len(vars) > 1 {
		st.Keep()
	}
}

// reportedVars returns the system variables session state information
// says a statement set.
func reportedVars(state []byte) []router.SetVar {
	changes, _ := mysql.ParseStateChanges(state)
	var vars []router.SetVar
	for _, ch := range changes {
		if name, _, ok := ch.SystemVariable(); ok {
			vars = append(vars, router.SetVar{Name: strings.ToLower(name)})
		}
	}
	return vars
}

// queryPacket builds a COM_QUERY packet for sql in a buffer that is valid
// until the next call.
func (h *handler) queryPacket(sql string) []byte {
	h.qbuf = append(append(h.qbuf[:0], mysql.ComQuery), sql...)
	return h.qbuf
}

func (h *handler) logSQL(sql, node string, d time.Duration, err error) {
	c := h.c
	if c.srv.sqlLog != nil {
		c.srv.sqlLog.Info("sql", zap.Uint32("conn", c.id), zap.String("user", c.user), zap.String("db", c.st.DB),
			zap.String("node", node), zap.Duration("took", d), zap.String("sql", sql), zap.Error(err))
	}
}

// passthrough sends COM_FIELD_LIST or COM_STATISTICS to the default node
// and relays its response.
func (h *handler) passthrough(p []byte) error {
	node, _ := h.c.srv.rt().DefaultNode(h.c.user)
	relay := engine.RelayOne
	if p[0] == mysql.ComFieldList {
		relay = engine.RelayFieldList
	}
	_, err := h.x.Forward(node, p, false, false, relay)
	return h.settle(err)
}

// useDB switches the session's database after checking it on the backend.
func (h *handler) useDB(db string) error {
	st := h.c.st
	node, _ := h.c.srv.rt().DefaultNode(h.c.user)
	bc, err := st.Acquire(node, false)
	if err != nil {
		return err
	}
	err = bc.UseDB(db)
	st.Release(bc, false, backend.Outcome{OK: true, Status: st.Status})
	if err != nil {
		return err
	}
	st.DB = db
	h.c.act.setDB(db)
	return nil
}

// changeUser implements COM_CHANGE_USER.
func (h *handler) changeUser(p []byte) error {
	c := h.c
	cu, err := mysql.ParseChangeUser(p, c.caps)
	if err != nil {
		return err
	}
	plugin := cu.AuthPlugin
	if plugin == "" {
		plugin = mysql.AuthNativePassword
	}
	coll := c.st.HandshakeColl
	if _, ok := mysql.CollationByID(byte(cu.Charset)); ok && cu.Charset != 0 {
		coll = byte(cu.Charset)
	}
	if c.failedChangeUser >= 3 {
		// MariaDB's limit on guessing passwords this way (MDEV-3915).
		return mysql.NewError(mysql.ErUnknownComError, "Unknown command")
	}
	_, listed := c.srv.lv().users[cu.User]
	if bc := c.st.Dedicated(); bc != nil && !listed && c.srv.cfg().BackendLogins != "" {
		return h.changeUserRelayed(bc, cu, coll)
	}
	var bc *backend.Conn
	if !listed && c.srv.cfg().BackendLogins != "" {
		bc, err = c.dialLogin(cu.User, "", coll)
	} else {
		err = c.authenticate(cu.User, plugin, cu.AuthResponse)
	}
	if err != nil {
		var se *mysql.SQLError
		if errors.As(err, &se) {
			// The client has its ERR; as on MariaDB, the session goes on
			// as it was, with the account it had.
			c.failedChangeUser++
			return engine.ErrAnswered
		}
		return errCloseSession
	}
	// The session's own backend connection (a backend account's login)
	// goes: the new user gets a new one, or pooled ones.
	c.st.Undedicate()
	c.st.Reset()
	if bc != nil {
		c.st.Dedicate(bc)
		c.user = c.srv.cfg().BackendLogins
	} else {
		c.user = cu.User
	}
	c.act.setUser(cu.User)
	c.st.SetTxnMode(c.srv.cfg().TxnMode(c.user), c.srv.xa)
	c.st.DB = ""
	c.act.setDB("")
	if cu.Charset != 0 {
		if _, ok := mysql.CollationByID(byte(cu.Charset)); ok {
			c.st.Coll, c.st.HandshakeColl = byte(cu.Charset), byte(cu.Charset)
		}
	}
	if _, ok := c.srv.rt().DefaultNode(c.user); !ok {
		c.writeErr(mysql.NewError(mysql.ErDBAccessDenied, "Access denied for user '%s'@'%s': no schema in schema_list", c.user, c.host()))
		return errCloseSession
	}
	if cu.Database != "" {
		if err := h.useDB(cu.Database); err != nil {
			return err
		}
	}
	return c.okStatus()
}

// changeUserRelayed changes the user of a session logged in with a
// backend account to another backend account, on the session's own
// connection: the client answered that connection's challenge at login,
// and answers COM_CHANGE_USER with it again (libmariadb does so even
// after a plugin switch), so only that connection's server can check it.
// The server decides as for its own clients: a wrong password leaves the
// session as it was (and a fourth attempt gets 1047).
func (h *handler) changeUserRelayed(bc *backend.Conn, cu *mysql.ChangeUser, coll byte) error {
	c := h.c
	fwd := *cu
	fwd.Charset = uint16(coll)
	if fwd.AuthPlugin == "" {
		fwd.AuthPlugin = mysql.AuthNativePassword
	}
	err := bc.ChangeUserAs(&fwd, func(req []byte) ([]byte, error) {
		if err := c.writeFlush(req); err != nil {
			return nil, err
		}
		p, err := c.c.ReadPacket()
		if err != nil {
			return nil, err
		}
		return append([]byte(nil), p...), nil
	})
	if err != nil {
		var se *mysql.SQLError
		if errors.As(err, &se) && !bc.Broken() {
			c.failedChangeUser++
			return se
		}
		c.log.Info("backend connection lost during COM_CHANGE_USER", zap.Error(err))
		return errCloseSession
	}
	c.st.HandshakeColl = coll
	c.st.Reset()
	c.act.setUser(cu.User)
	c.st.DB = cu.Database
	c.act.setDB(cu.Database)
	return c.okStatus()
}

// setOption implements COM_SET_OPTION; the backend follows on next use.
func (h *handler) setOption(p []byte) error {
	c := h.c
	if len(p) < 3 {
		return mysql.ErrBadPacket
	}
	switch binary.LittleEndian.Uint16(p[1:3]) {
	case mysql.OptionMultiStatementsOn:
		c.st.MultiStmts = true
	case mysql.OptionMultiStatementsOff:
		c.st.MultiStmts = false
	default:
		return mysql.NewError(mysql.ErUnknownComError, "Unknown command")
	}
	if c.caps&mysql.ClientDeprecateEOF != 0 {
		return c.c.WritePacket(mysql.AppendOK(c.buf[:0], mysql.EOFHeader, mysql.OK{Status: c.st.Status}))
	}
	return c.c.WritePacket(mysql.AppendEOF(c.buf[:0], 0, c.st.Status))
}

// comName names a command byte for error messages.
func comName(cmd byte) string {
	names := map[byte]string{
		mysql.ComSleep: "COM_SLEEP", mysql.ComCreateDB: "COM_CREATE_DB", mysql.ComDropDB: "COM_DROP_DB",
		mysql.ComRefresh: "COM_REFRESH", mysql.ComShutdown: "COM_SHUTDOWN", mysql.ComProcessInfo: "COM_PROCESS_INFO",
		mysql.ComConnect: "COM_CONNECT", mysql.ComDebug: "COM_DEBUG", mysql.ComTime: "COM_TIME",
		mysql.ComDelayedInsert: "COM_DELAYED_INSERT", mysql.ComBinlogDump: "COM_BINLOG_DUMP",
		mysql.ComTableDump: "COM_TABLE_DUMP", mysql.ComConnectOut: "COM_CONNECT_OUT",
		mysql.ComRegisterSlave: "COM_REGISTER_SLAVE", mysql.ComDaemon: "COM_DAEMON",
		mysql.ComBinlogDumpGTID: "COM_BINLOG_DUMP_GTID", mysql.ComStmtExecute: "mysqld_stmt_execute",
		mysql.ComStmtFetch: "mysqld_stmt_fetch", mysql.ComStmtReset: "mysqld_stmt_reset",
	}
	if n, ok := names[cmd]; ok {
		return fmt.Sprintf("%s (0x%02x)", n, cmd)
	}
	return fmt.Sprintf("0x%02x", cmd)
}
