package server

import (
	"encoding/binary"
	"errors"
	"slices"
	"strings"

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
	// exec and args are scratch for one COM_STMT_EXECUTE: its parameters
	// and their values as the router takes them.
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
}

// prepare answers COM_STMT_PREPARE.
func (s *stmtHandler) prepare(p []byte) error {
	h := s.h
	sql := string(p[1:])
	stmt := router.Classify(sql, h.c.st.Mode())
	if err := h.allowed(sql, stmt.Keyword); err != nil {
		return err
	}
	switch {
	case stmt.Kind == router.KindTxn && router.ParseTxn(sql).Verb == router.TxnNone:
		// Not a transaction statement the proxy composes (BEGIN NOT
		// ATOMIC ... END, a compound statement): the backend keeps it,
		// like CALL.
		return s.prepareKept(p, sql)
	case stmt.Keyword == "SET" && router.CountPlaceholders(sql, h.c.st.Mode()) == 0 && h.ls.trackedSet(sql):
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
	if err := c.st.Stmts.Room(); err != nil {
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
	var backendID uint32
	_, err = h.x.RunOn(bc, p, true, engine.RelayPrepareAs(ps.ID, &backendID))
	if err != nil || backendID == 0 {
		c.st.Stmts.Close(ps.ID)
		return h.settle(err)
	}
	ps.Conn, ps.BackendID = bc, backendID
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
		c.st.Stmts.Close(ps.ID)
	}
	_, err := h.x.RunOn(ps.Conn, p, true, relay)
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
	return s.h.c.st.Stmts.Get(id)
}

// prepareRouted answers COM_STMT_PREPARE for a statement the proxy owns.
// The metadata comes from preparing the statement as the backend will run
// it, on the subtable a placeholder value of 0 routes to.
func (s *stmtHandler) prepareRouted(sql string) error {
	h, c := s.h, s.h.c
	if err := c.st.Stmts.Room(); err != nil {
		return err
	}
	probe := make([]router.Arg, strings.Count(sql, "?"))
	for i := range probe {
		probe[i] = router.Arg{Kind: router.ArgInt, Text: "0"}
	}
	sess := h.probeSession()
	plan, err := h.routeArgs(sql, sess, probe)
	nparams := -1 // from the backend's answer
	if err != nil {
		// Placeholders where the merge needs constants (HAVING, LIMIT):
		// take the metadata from the statement with 0 in their place.
		lits := make([]string, router.CountPlaceholders(sql, c.st.Mode()))
		for i := range lits {
			lits[i] = "0"
		}
		text, ierr := router.Inline(sql, lits, c.st.Mode())
		if ierr != nil {
			return err
		}
		if plan, ierr = c.srv.rt().Route(text, sess); ierr != nil {
			return err
		}
		nparams = len(lits)
	} else if plan.Generated > 0 {
		// A sequence value stands where the client may have a ?: the
		// client's placeholders are counted in its text.
		nparams = router.CountPlaceholders(sql, c.st.Mode())
	}
	t := &plan.Targets[0]
	q := t.SQL
	if q == "" {
		q = sql
	}
	cls := router.Classify(sql, h.c.st.Mode())
	var st *backend.Stmt
	if plan.Kind == router.Fallback {
		// The statement reads copies of sharded tables: prepared against
		// empty copies, for its metadata, and closed at once.
		err = h.x.WithFallbackTables(plan, false, func(bc *backend.Conn) (backend.Outcome, error) {
			var perr error
			if st, perr = bc.Prepare(q); perr == nil {
				perr = bc.Forget(q)
			}
			return backend.Outcome{}, perr
		})
		if err != nil {
			return h.settle(err)
		}
	} else {
		bc, err := c.st.Acquire(t.Node, cls.UsesLastInsertID)
		if err != nil {
			return err
		}
		// Prepared now, not taken from the cache: the client gets the
		// server's current metadata and warnings (the session keeps the
		// connection for SHOW WARNINGS when there are some).
		st, err = bc.Prepare(q)
		var o backend.Outcome
		if err == nil {
			o.Warnings = st.Warnings
			if !cacheable(cls) {
				err = bc.Forget(q)
			}
		}
		c.st.Release(bc, false, o)
		if err != nil {
			if bc.Broken() {
				return h.backendLost(bc)
			}
			return err
		}
	}
	params := st.Params
	if nparams >= 0 {
		params = make([][]byte, nparams)
		for i := range params {
			params[i] = mysql.AppendColumn(nil, &mysql.Column{Catalog: "def", Name: "?", Charset: 63, Type: mysql.TypeVarString})
		}
	}
	ps, err := c.st.Stmts.Add(sql, len(params))
	if err != nil {
		return err
	}
	ps.UsesIDs = cls.UsesLastInsertID
	ps.Once = !cacheable(cls)
	cols := st.Cols
	if plan.Merge != nil && plan.Merge.Hidden > 0 && plan.Merge.Hidden < len(cols) {
		// Helper columns the merge strips are not the client's.
		cols = cols[:len(cols)-plan.Merge.Hidden]
	}
	ok := make([]byte, 0, 12)
	ok = append(ok, mysql.OKHeader)
	ok = binary.LittleEndian.AppendUint32(ok, ps.ID)
	ok = binary.LittleEndian.AppendUint16(ok, uint16(len(cols)))
	ok = binary.LittleEndian.AppendUint16(ok, uint16(len(params)))
	ok = append(ok, 0)
	ok = binary.LittleEndian.AppendUint16(ok, st.Warnings)
	if err := c.c.WritePacket(ok); err != nil {
		return err
	}
	for _, defs := range [][][]byte{params, cols} {
		for _, d := range defs {
			if err := c.c.WritePacket(logicalColumn(d, t.Subtable, plan)); err != nil {
				return err
			}
		}
		if len(defs) > 0 && c.caps&mysql.ClientDeprecateEOF == 0 {
			// The EOFs carry the prepare's warnings too, as the server's
			// do (libmariadb reads the count from the last one).
			if err := c.c.WritePacket(mysql.AppendEOF(c.buf[:0], st.Warnings, c.st.Status)); err != nil {
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
	if err := c.st.Stmts.Room(); err != nil {
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
		c.st.Stmts.Close(ps.ID)
		return nil
	case mysql.ComStmtSendLongData:
		if len(p) < 7 {
			return nil // no reply is due, even for a malformed packet
		}
		i := int(binary.LittleEndian.Uint16(p[5:7]))
		if i >= ps.NParams {
			return nil
		}
		if ps.Long == nil {
			ps.Long, ps.HasLong = make([][]byte, ps.NParams), make([]bool, ps.NParams)
		}
		ps.HasLong[i] = true
		if ps.LongSize += len(p) - 7; ps.LongSize > c.srv.cfg().MaxAllowedPacket {
			// The data is dropped; the execution gets the error, as the
			// server reports it (no reply is due here).
			ps.Long[i] = nil
			return nil
		}
		ps.Long[i] = append(ps.Long[i], p[7:]...)
		return nil
	case mysql.ComStmtReset:
		ps.ClearLong()
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
		if len(p) < 10 {
			return mysql.ErrBadPacket
		}
		c.act.set("Execute", ps.SQL)
		if k, ok := router.ParseKill(ps.SQL); ok {
			return c.srv.kill(c, k)
		}
		stmt := router.Classify(ps.SQL, c.st.Mode())
		if handled, err := h.txnStatement(ps.SQL, &stmt); handled {
			return err
		}
		if handled, err := h.ls.local(ps.SQL, stmt); handled {
			return err
		}
		return mysql.NewError(mysql.ErNotSupported, "%s as a prepared statement is not supported by shardgate", stmt.Keyword)
	}
	return s.execute(ps, p)
}

// execute runs COM_STMT_EXECUTE on one of the proxy's statements.
func (s *stmtHandler) execute(ps *session.Stmt, p []byte) error {
	h, c := s.h, s.h.c
	e := &s.exec
	if ps.LongSize > c.srv.cfg().MaxAllowedPacket {
		c.srv.longDataTooLarge.Add(1)
		ps.ClearLong()
		return mysql.NewError(mysql.ErUnknownError, "Parameter of prepared statement which is set through mysql_send_long_data() is longer than 'max_allowed_packet' bytes (%d)", c.srv.cfg().MaxAllowedPacket)
	}
	if err := e.Parse(p, ps.NParams, ps.Types, ps.HasLong); err != nil {
		return err
	}
	if e.NewTypes {
		ps.Types = append(ps.Types[:0], e.Types...)
	}
	ps.Cursor = nil // a new execution closes the statement's cursor
	if !c.srv.rt().Sharded(c.user) {
		// Every statement runs unchanged on the default node.
		node, _ := c.srv.rt().DefaultNode(c.user)
		c.act.set("Execute", ps.SQL)
		if e.Flags == 0 { // a cursor stays on the master's connection
			if !ps.Classified {
				ps.Class, ps.Classified = router.Classify(ps.SQL, h.c.st.Mode()), true
			}
			c.st.Route(&ps.Class, router.Forward, c.readSplit())
			defer func() { c.st.Read = session.ReadMaster }()
		}
		return s.executeOn(ps, e, node, ps.SQL, nil, e.Flags != 0)
	}
	if e.Flags != 0 {
		return mysql.NewError(mysql.ErNotSupported, "cursors on prepared statements on sharded tables are not supported yet; execute without a cursor")
	}
	args := slices.Grow(s.args[:0], ps.NParams)[:ps.NParams]
	clear(args)
	s.args = args
	for i := range args {
		switch {
		case e.Null[i]:
			args[i].Kind = router.ArgNull
		case e.Values[i] == nil:
			args[i].Kind = router.ArgUnknown
		default:
			text, isInt, ok := mysql.ParamText(e.Types[2*i], e.Types[2*i+1], e.Values[i])
			switch {
			case !ok:
			case isInt:
				args[i] = router.Arg{Kind: router.ArgInt, Text: text}
			case e.Types[2*i] == mysql.TypeFloat || e.Types[2*i] == mysql.TypeDouble:
				args[i] = router.Arg{Kind: router.ArgFloat, Text: text}
			default:
				args[i] = router.Arg{Kind: router.ArgString, Text: text}
			}
		}
	}
	c.act.set("Execute", ps.SQL)
	// Probed: an execution that takes sequence values runs inlined
	// (below), planned again there with the values taken once.
	plan, err := h.routeArgs(ps.SQL, h.probeSession(), args)
	if err != nil {
		var se *mysql.SQLError
		if errors.As(err, &se) && se.Code == mysql.ErNotSupported {
			// Placeholders where a merge needs constants (HAVING, LIMIT):
			// the inlined text may plan.
			return s.executeInlined(ps, e)
		}
		return err
	}
	t := &plan.Targets[0]
	q := t.SQL
	if q == "" {
		q = ps.SQL
	}
	if plan.Kind != router.Forward || (t.SQL != "" && router.Placeholders(q, c.st.Mode()) != ps.NParams) {
		return s.executeInlined(ps, e)
	}
	var order []int
	if t.SQL != "" {
		// The restored SQL may have moved placeholders (LIMIT ? OFFSET ?
		// becomes LIMIT ?,? with the offset first).
		if !ps.Ordered {
			if ps.Order, err = router.PlaceholderOrder(ps.SQL, c.st.Mode()); err != nil {
				return err
			}
			ps.Ordered = true
		}
		if order = ps.Order; order != nil {
			e = reorderParams(e, order)
		}
	}
	if t.Subtable != "" {
		s.execTables = plan.Tables
	}
	if !ps.Classified {
		ps.Class, ps.Classified = router.Classify(ps.SQL, h.c.st.Mode()), true
	}
	c.st.Route(&ps.Class, plan.Kind, c.readSplit())
	err = s.executeOn(ps, e, t.Node, q, order, false)
	c.st.Read = session.ReadMaster
	s.execTables = nil
	if err == nil && plan.Advance != nil {
		h.advance(plan.Advance)
	}
	return err
}

// executeInlined runs an execution that needs several targets: the bound
// values become literals in the statement's text, which is planned and
// merged like a text query, and the rows are sent in the binary protocol.
func (s *stmtHandler) executeInlined(ps *session.Stmt, e *mysql.StmtExecute) error {
	h, c := s.h, s.h.c
	// Values become literals the router reads as the server will: quoted
	// for the session's sql_mode, non-ASCII text of a non-UTF-8 character
	// set in hex with that character set as introducer (ParamLiteral).
	coll, _ := mysql.CollationByID(c.st.Coll)
	charset := coll.Charset
	if c.st.ClientCharset != "" {
		charset = c.st.ClientCharset
	}
	if charset == "" {
		charset = "utf8mb4"
	}
	if !inlineCharsets[charset] {
		return mysql.NewError(mysql.ErNotSupported, "a prepared statement that runs on several subtables is not supported by shardgate while the client's character set is %s (its values would be inlined, and the proxy's parser reads only utf8mb4, utf8, latin1, ascii and binary literals); use SET NAMES utf8mb4, or send it as text", charset)
	}
	lits := make([]string, ps.NParams)
	for i := range lits {
		v := e.Values[i]
		if e.Null[i] {
			v = nil
		} else if i < len(ps.HasLong) && ps.HasLong[i] {
			v = mysql.LongDataValue(ps.Long[i])
		}
		lit, ok := mysql.ParamLiteral(e.Types[2*i], e.Types[2*i+1], v, charset, c.st.Mode()&router.ModeNoBackslashEscapes != 0)
		if !ok {
			return mysql.NewError(mysql.ErWrongArguments, "Incorrect arguments to mysqld_stmt_execute: parameter %d (type %#x) cannot be used in a cross-shard execution", i+1, e.Types[2*i])
		}
		lits[i] = lit
	}
	ps.ClearLong()
	if mode := c.st.Mode(); ps.Offsets == nil || ps.OffsetsMode != uint8(mode) {
		offs, err := router.MarkerOffsets(ps.SQL, mode)
		if err != nil {
			return err
		}
		ps.Offsets, ps.OffsetsMode = offs, uint8(mode)
	}
	text, err := router.InlineAt(ps.SQL, ps.Offsets, lits)
	if err != nil {
		return err
	}
	plan, err := h.route(text, h.routerSession())
	if err != nil {
		return err
	}
	switch plan.Kind {
	case router.Concat, router.SumOK, router.Fanout, router.Fallback:
	default:
		return mysql.NewError(mysql.ErNotSupported, "this prepared statement cannot run across shards; send it as text")
	}
	c.srv.queries.Add(1)
	c.binary = true
	if !ps.Classified {
		ps.Class, ps.Classified = router.Classify(ps.SQL, h.c.st.Mode()), true
	}
	h.ob = stmtObs{sql: ps.SQL, keyword: ps.Class.Keyword, plan: plan, reads0: c.st.ReplicaReads}
	c.st.Route(&ps.Class, plan.Kind, c.readSplit())
	err = h.execute(plan, text)
	c.st.Read = session.ReadMaster
	c.binary = false
	if err == nil && plan.Advance != nil {
		h.advance(plan.Advance)
	}
	return err
}

// inlineCharsets are the character sets whose introducers the router's
// parser reads.
var inlineCharsets = map[string]bool{"utf8mb4": true, "utf8": true, "utf8mb3": true, "latin1": true, "ascii": true, "binary": true}

// executeOn runs one execution of ps as statement q, prepared on a pooled
// connection to node (and cached there); order maps q's parameters to the
// client's (nil: the same order). An execution that opens a cursor
// (schemas without shard rules) leaves the cursor on that connection, so
// the session keeps the connection from then on, as it keeps one for any
// other state, and COM_STMT_FETCH and COM_STMT_RESET go there.
func (s *stmtHandler) executeOn(ps *session.Stmt, e *mysql.StmtExecute, node, q string, order []int, cursor bool) error {
	h, c := s.h, s.h.c
	c.srv.queries.Add(1)
	if !ps.Classified {
		ps.Class, ps.Classified = router.Classify(ps.SQL, h.c.st.Mode()), true
	}
	h.ob = stmtObs{sql: ps.SQL, keyword: ps.Class.Keyword, node: node, reads0: c.st.ReplicaReads}
	// As for text statements: a write a read-only master refuses before
	// the session did anything there waits for the switch (afterReadOnly).
	// (Not with long data: it is sent once.)
	var from string
	watch := !cursor && c.st.Read != session.ReadReplica && h.watchesReadOnly(node)
	if watch && !slices.Contains(ps.HasLong, true) {
		from = h.beforeMasterStatement(node)
	}
	bc, err := c.st.Acquire(node, ps.UsesIDs)
	if err != nil {
		return err
	}
	if cursor {
		c.st.Release(bc, true, backend.Outcome{}) // kept by the session
	}
	st, err := bc.PrepareCached(q)
	if err == nil && len(st.Params) != ps.NParams {
		err = mysql.NewError(mysql.ErNotSupported, "the statement on node %s has %d parameters, the prepared one %d", node, len(st.Params), ps.NParams)
	}
	if err == nil {
		err = sendLongData(bc, st, ps, order)
	}
	if err != nil {
		if !cursor {
			c.st.Release(bc, false, backend.Outcome{})
		}
		if bc.Broken() {
			return h.backendLost(bc)
		}
		return err
	}
	s.pbuf = mysql.AppendStmtExecute(s.pbuf[:0], st.ID, e)
	if s.relayExec == nil {
		s.relayExec = s.relayExecution
	}
	s.execSQL, s.execCursor, s.execOnce = q, cursor, ps.Once && !cursor
	relay := engine.Relay(s.relayExec)
	if watch {
		relay = readOnlyGuard(relay, from != "")
	}
	if _, err = h.x.RunOn(bc, s.pbuf, cursor, relay); err == nil && cursor {
		ps.Cursor, ps.CursorID = bc, st.ID
	}
	if from != "" && errors.Is(err, errReadOnlyMaster) {
		_, err = h.afterReadOnly(node, from, func() (backend.Outcome, error) {
			return backend.Outcome{}, s.executeOn(ps, e, node, q, order, false)
		})
		return err
	}
	return h.settle(err)
}

// relayExecution relays the response to the execution executeOn sent.
// When the server answers that the statement must be prepared again
// (1615: it re-prepared it after metadata changes, and gave up), the
// connection's cached statement is dropped, so the next execution
// prepares it anew.
func (s *stmtHandler) relayExecution(x *engine.Executor, bc *backend.Conn) (backend.Outcome, error) {
	r, err := engine.RelayResultLogical(x, bc, s.execTables, s.execCursor)
	if err == nil && (r.ErrCode == erNeedReprepare || s.execOnce) {
		err = bc.Forget(s.execSQL)
	}
	return r, err
}

// cacheable reports whether a statement's backend prepared statement may
// stay prepared on its pooled connection after the client's execution
// (reads and writes, what applications execute again and again). Others
// (DDL, administration) are closed at once, as a client's COM_STMT_CLOSE
// would close them directly: a prepared CREATE TABLE ... ENGINE=X holds
// the engine plugin until it is closed (UNINSTALL PLUGIN then says it is
// busy, mtr main.blackhole_plugin).
func cacheable(cls router.Stmt) bool {
	return cls.Kind == router.KindRead || cls.Kind == router.KindWrite
}

// erNeedReprepare is ER_NEED_REPREPARE.
const erNeedReprepare = 1615

// erStmtHasNoOpenCursor is ER_STMT_HAS_NO_OPEN_CURSOR.
const erStmtHasNoOpenCursor = 1421

// cursorConn returns the connection holding ps's open cursor, if the
// session still holds it.
func (s *stmtHandler) cursorConn(ps *session.Stmt) *backend.Conn {
	if ps.Cursor == nil || !s.h.c.st.Holds(ps.Cursor) {
		return nil
	}
	return ps.Cursor
}

// sendLongData passes the long data a client sent for this execution on to
// the backend statement, whose parameter i is the client's order[i] (i
// when order is nil); MySQL keeps it only until the execution.
func sendLongData(bc *backend.Conn, st *backend.Stmt, ps *session.Stmt, order []int) error {
	defer ps.ClearLong()
	for i := range ps.HasLong {
		j := i
		if order != nil {
			j = order[i]
		}
		if !ps.HasLong[j] {
			continue
		}
		if err := bc.SendLongData(st.ID, uint16(i), ps.Long[j]); err != nil {
			return err
		}
	}
	return nil
}

// reorderParams returns e with its parameters in the order of the target's
// SQL: parameter i is the client's order[i].
func reorderParams(e *mysql.StmtExecute, order []int) *mysql.StmtExecute {
	r := &mysql.StmtExecute{ID: e.ID, Flags: e.Flags, Iterations: e.Iterations, NewTypes: e.NewTypes,
		Types: make([]byte, 0, len(e.Types)), Null: make([]bool, len(order)), Values: make([][]byte, len(order))}
	for i, j := range order {
		r.Types = append(r.Types, e.Types[2*j], e.Types[2*j+1])
		r.Null[i], r.Values[i] = e.Null[j], e.Values[j]
	}
	return r
}
