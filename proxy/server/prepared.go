package server

import (
	"encoding/binary"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/proxy/engine"
	"github.com/shardgate/shardgate/proxy/session"
	"github.com/shardgate/shardgate/router"
)

// Binary prepared statements (COM_STMT_*).
//
// The proxy owns every prepared statement that leaves no state on its
// connection (session.Stmts, ids from session.StmtBase up): each
// COM_STMT_EXECUTE routes it with the bound values, and the target's SQL
// runs as a binary prepared statement of the backend connection that runs
// it, prepared once per connection and cached there
// (backend.PrepareCached), with the client's parameter block passed on
// (reordered when the router's restored SQL moved placeholders: LIMIT ?
// OFFSET ? is restored as LIMIT ?,? with the offset first, see
// router.PlaceholderOrder). The result is relayed as raw packets, like any
// single-target result. So a prepared statement does not tie the session
// to a backend connection, and many more clients than pooled connections
// can use them.
//
// Executions that need several targets (cross-shard reads and writes) run
// through the engine with the bound values inlined as literals, so the
// merges are the text queries' merges; their rows are converted to the
// binary protocol. Cursors are refused on sharded tables; in schemas
// without shard rules an execution that opens a cursor keeps the
// connection holding it. Statements that leave state (KindOther, sticky)
// are forwarded to the default node, whose ids they keep.

// stmtHandler runs one session's binary prepared statement commands. It is
// owned by the conn's goroutine.
type stmtHandler struct {
	h *handler
	execScratch
	// stmtBudget accounts for the session's statements and closes their
	// backend statements (prepared_budget.go).
	stmtBudget
}

// execScratch is what one COM_STMT_EXECUTE uses and leaves: reused by the
// next, owned by the handler's goroutine.
type execScratch struct {
	// exec and args are its parameters and their values as the router
	// takes them.
	exec mysql.StmtExecute
	args []router.Arg
	pbuf []byte // scratch for packets sent to backends
	// relayExec is relayExecution as a func value, made once; execSQL and
	// execCursor are its arguments for the current execution.
	relayExec  engine.Relay
	execSQL    string
	execCursor bool
	execOnce   bool // close the backend statement after the execution
	// execTables are the logical tables whose subtables the execution
	// reads: its column definitions name them (engine.RelayResultLogical).
	execTables []string
	// execRes is the response an execution forwarded (executeOn), for
	// the session's ROW_COUNT() and FOUND_ROWS(); execForwarded says
	// there was one.
	execRes       backend.Outcome
	execForwarded bool
}

// prepare answers COM_STMT_PREPARE.
func (s *stmtHandler) prepare(p []byte) error {
	h := s.h
	s.lastID = 0
	sql := string(p[1:])
	stmt := router.Classify(sql, h.c.st.Mode())
	if err := h.allowed(sql, &stmt); err != nil {
		return err
	}
	switch {
	case stmt.Kind == router.KindTxn && router.ParseTxn(sql).Verb == router.TxnNone:
		// Not a transaction statement the proxy composes (BEGIN NOT
		// ATOMIC ... END, a compound statement): the backend keeps it,
		// like CALL.
		return s.prepareKept(p, sql)
	case stmt.Keyword == "SET" && !stmt.Effects && router.CountPlaceholders(sql, h.c.st.Mode()) == 0 && h.ls.trackedSet(sql):
		// A SET the proxy tracks (variables, SET NAMES), prepared as
		// mysqltest --ps-protocol prepares everything: executing it runs
		// it as the text statement, so the session carries its values.
		return s.prepareLocal(sql)
	case stmt.Kind == router.KindTxn || stmt.Keyword == "SAVEPOINT" || stmt.Keyword == "RELEASE" || stmt.Kind == router.KindKill:
		// BEGIN, COMMIT, ... prepared (sysbench does this) run as the
		// proxy's transaction statements, like their text forms; KILL is
		// the proxy's, on its own connection ids.
		return s.prepareLocal(sql)
	case !stmt.Sticky && stmt.Kind != router.KindOther || h.c.srv.rt().Prepared(sql, h.routerSession()) != nil:
		return s.prepareRouted(sql)
	}
	return s.prepareKept(p, sql)
}

// prepareKept prepares a statement that leaves state on its connection
// (CALL, ...) on the default node, where the backend keeps it: the
// session keeps that connection from now on (other nodes do not need the
// statement, so this state needs no replay). The client gets an id of the
// proxy's, mapped to the backend's at each command.
func (s *stmtHandler) prepareKept(p []byte, sql string) error {
	h, c := s.h, s.h.c
	if err := s.room(); err != nil {
		return err
	}
	node, _ := c.srv.rt().DefaultNode(c.user)
	bc, err := c.st.Acquire(node, false)
	if err != nil {
		return err
	}
	ps, err := c.st.Stmts.Add(sql, 0)
	if err != nil {
		c.st.Release(bc, false, backend.Outcome{})
		return err
	}
	s.sync()
	var backendID uint32
	_, err = h.x.RunOn(bc, p, true, engine.RelayPrepareAs(ps.ID, &backendID))
	if err != nil || backendID == 0 {
		s.close(ps.ID)
		return h.settle(err)
	}
	ps.Conn, ps.BackendID = bc, backendID
	s.lastID = ps.ID
	return nil
}

// keptCommand runs a COM_STMT_* command on a statement the backend keeps,
// with the backend's id in place of the client's.
func (s *stmtHandler) keptCommand(ps *session.Stmt, p []byte) error {
	h, c := s.h, s.h.c
	cmd := p[0]
	if !c.st.Holds(ps.Conn) {
		// The connection holding it is gone (a backend failure).
		c.st.Stmts.Close(ps.ID)
		return unknownStmt(cmd, ps.ID)
	}
	binary.LittleEndian.PutUint32(p[1:5], ps.BackendID) // p is ours until the next read
	var relay engine.Relay
	switch cmd {
	case mysql.ComStmtExecute:
		relay = engine.RelayResult
		if len(p) > 5 && p[5] != 0 { // a cursor type
			relay = engine.RelayCursorResult
		}
	case mysql.ComStmtFetch:
		relay = engine.RelayFetch
	case mysql.ComStmtReset:
		relay = engine.RelayOne
	case mysql.ComStmtClose:
		s.close(ps.ID)
	}
	if cmd != mysql.ComStmtExecute {
		_, err := h.x.RunOn(ps.Conn, p, true, relay)
		return h.settle(err)
	}
	// An execution answers ROW_COUNT() and FOUND_ROWS() next, as any
	// other statement's does.
	h.x.Rows = 0
	c.st.RunningSet(ps.SQL) // a SET's variables are read back by name
	res, err := h.x.RunOn(ps.Conn, p, true, relay)
	c.st.DoneSet()
	h.counts.note(len(p) <= 5 || p[5] == 0, res, err)
	return h.settle(err)
}

// unknownStmt is the error for a COM_STMT_* command naming no statement of
// the session.
func unknownStmt(cmd byte, id uint32) error {
	name := map[byte]string{mysql.ComStmtExecute: "mysqld_stmt_execute", mysql.ComStmtFetch: "mysqld_stmt_fetch",
		mysql.ComStmtReset: "mysqld_stmt_reset"}[cmd]
	return mysql.NewError(mysql.ErUnknownStmtHandler, "Unknown prepared statement handler (%d) given to %s", id, name)
}

// lookup returns the proxy statement a COM_STMT_* packet names, or nil
// when the id is not one of the proxy's.
func (s *stmtHandler) lookup(p []byte) *session.Stmt {
	id, ok := mysql.StmtExecuteID(p)
	if !ok {
		return nil
	}
	return s.h.c.st.Stmts.Get(s.stmtID(id))
}

// prepareRouted answers COM_STMT_PREPARE for a statement the proxy owns.
// The metadata comes from preparing the statement as the backend will run
// it, on the subtable a placeholder value of 0 routes to.
func (s *stmtHandler) prepareRouted(sql string) error {
	c := s.h.c
	if err := s.room(); err != nil {
		return err
	}
	rp := routedPrepare{s: s, sql: sql, cls: router.Classify(sql, c.st.Mode())}
	if err := rp.run(); err != nil {
		return err
	}
	plan, nparams, q, st, bc, cls := rp.plan, rp.nparams, rp.q, rp.st, rp.bc, rp.cls
	params := st.Params
	if nparams >= 0 {
		params = make([][]byte, nparams)
		for i := range params {
			params[i] = mysql.AppendColumn(nil, extColumn(&mysql.Column{Catalog: "def", Name: "?", Charset: 63, Type: mysql.TypeVarString}, c.extMetadata()))
		}
	}
	ps, err := c.st.Stmts.Add(sql, len(params))
	if err != nil {
		return err
	}
	s.sync()
	if bc != nil {
		s.record(ps.ID, bc, q)
	}
	s.lastID = ps.ID
	ps.UsesIDs = cls.UsesLastInsertID
	ps.Once = !cacheable(cls)
	cols := st.Cols
	if plan.Merge != nil && plan.Merge.Hidden > 0 && plan.Merge.Hidden < len(cols) {
		// Helper columns the merge strips are not the client's.
		cols = cols[:len(cols)-plan.Merge.Hidden]
	}
	return s.writePrepareOK(ps.ID, params, cols, st.Warnings, plan.Targets[0].Subtable, plan)
}

// writePrepareOK answers COM_STMT_PREPARE: the OK with the statement's
// id and counts, then the parameter and column definitions (named for
// the logical table), each list closed by an EOF that carries the
// prepare's warnings, as the server's do (libmariadb reads the count from
// the last one).
func (s *stmtHandler) writePrepareOK(id uint32, params, cols [][]byte, warnings uint16, subtable string, plan *router.Plan) error {
	c := s.h.c
	ok := make([]byte, 0, 12)
	ok = append(ok, mysql.OKHeader)
	ok = binary.LittleEndian.AppendUint32(ok, id)
	ok = binary.LittleEndian.AppendUint16(ok, uint16(len(cols)))
	ok = binary.LittleEndian.AppendUint16(ok, uint16(len(params)))
	ok = append(ok, 0)
	ok = binary.LittleEndian.AppendUint16(ok, warnings)
	if err := c.c.WritePacket(ok); err != nil {
		return err
	}
	for _, defs := range [][][]byte{params, cols} {
		for _, d := range defs {
			if err := c.c.WritePacket(logicalColumn(d, subtable, plan)); err != nil {
				return err
			}
		}
		if len(defs) > 0 && c.caps&mysql.ClientDeprecateEOF == 0 {
			if err := c.c.WritePacket(mysql.AppendEOF(c.buf[:0], warnings, c.st.Status)); err != nil {
				return err
			}
		}
	}
	return nil
}

// prepareLocal answers COM_STMT_PREPARE for a transaction statement
// (BEGIN, COMMIT, ROLLBACK, SAVEPOINT, ...), which takes no parameters
// and returns no rows: executing it runs it as the text statement would.
func (s *stmtHandler) prepareLocal(sql string) error {
	c := s.h.c
	if err := s.room(); err != nil {
		return err
	}
	if n := router.CountPlaceholders(sql, c.st.Mode()); n != 0 {
		return mysql.NewError(mysql.ErSyntax, "You have an error in your SQL syntax near '?': %s takes no parameters", router.Classify(sql, c.st.Mode()).Keyword)
	}
	ps, err := c.st.Stmts.Add(sql, 0)
	if err != nil {
		return err
	}
	ps.Local = true
	s.sync()
	s.lastID = ps.ID
	ok := make([]byte, 0, 12)
	ok = append(ok, mysql.OKHeader)
	ok = binary.LittleEndian.AppendUint32(ok, ps.ID)
	ok = append(ok, 0, 0, 0, 0, 0, 0, 0)
	return c.c.WritePacket(ok)
}

// logicalColumn renames the subtable in a column definition to its logical
// table, so the metadata describes the statement the client prepared.
func logicalColumn(d []byte, subtable string, plan *router.Plan) []byte {
	if subtable == "" && plan.Kind != router.Fallback {
		return d
	}
	if out, ok := mysql.RenameColumnTables(nil, d, func(name []byte) (string, bool) { return engine.LogicalName(plan.Tables, name) }); ok {
		return out
	}
	return d
}

// command runs COM_STMT_EXECUTE, SEND_LONG_DATA, RESET, CLOSE and FETCH on
// one of the proxy's statements.
func (s *stmtHandler) command(ps *session.Stmt, p []byte) error {
	h, c := s.h, s.h.c
	if ps.Conn != nil {
		return s.keptCommand(ps, p)
	}
	switch p[0] {
	case mysql.ComStmtClose:
		s.close(ps.ID)
		return nil
	case mysql.ComStmtSendLongData:
		s.longData(ps, p, c.srv.cfg().MaxAllowedPacket)
		return nil // no reply is due, even for a malformed packet
	case mysql.ComStmtReset:
		s.clearLong(ps)
		if bc := s.cursorConn(ps); bc != nil {
			// Closes the cursor there too.
			s.pbuf = binary.LittleEndian.AppendUint32(append(s.pbuf[:0], mysql.ComStmtReset), ps.CursorID)
			_, err := h.x.RunOn(bc, s.pbuf, true, engine.RelayOne)
			return h.settle(err)
		}
		return c.okStatus()
	case mysql.ComStmtFetch:
		bc := s.cursorConn(ps)
		if bc == nil || len(p) < 9 {
			return mysql.NewError(erStmtHasNoOpenCursor, "The statement (%d) has no open cursor.", ps.ID)
		}
		s.pbuf = append(binary.LittleEndian.AppendUint32(append(s.pbuf[:0], mysql.ComStmtFetch), ps.CursorID), p[5:9]...)
		_, err := h.x.RunOn(bc, s.pbuf, true, engine.RelayFetch)
		return h.settle(err)
	}
	if ps.Local {
		return s.executeLocal(ps, p)
	}
	s.execRes, s.execForwarded = backend.Outcome{}, false
	h.x.Rows = 0
	// As a text statement: one that reads none of the state the session
	// keeps on a node may run on another (session.Executing).
	s.classify(ps)
	c.st.Executing(ps.Class)
	err := s.execute(ps, p)
	c.st.Executed()
	h.counts.note(s.execForwarded, s.execRes, err) // what ROW_COUNT() and FOUND_ROWS() say next
	return err
}

// executeLocal runs COM_STMT_EXECUTE of a statement the proxy answers
// itself (prepareLocal): as its text statement would run.
func (s *stmtHandler) executeLocal(ps *session.Stmt, p []byte) error {
	h, c := s.h, s.h.c
	if len(p) < 10 {
		return mysql.ErrBadPacket
	}
	c.act.set("Execute", ps.SQL)
	if k, ok := router.ParseKill(ps.SQL); ok {
		return h.ls.kill(k)
	}
	stmt := router.Classify(ps.SQL, c.st.Mode())
	if handled, err := h.ls.txnStatement(ps.SQL, &stmt); handled {
		return err
	}
	if handled, err := h.ls.local(ps.SQL, stmt); handled {
		return err
	}
	return mysql.NewError(mysql.ErNotSupported, "%s as a prepared statement is not supported by shardgate", stmt.Keyword)
}
