package server

import (
	"errors"
	"slices"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/proxy/engine"
	"github.com/shardgate/shardgate/proxy/session"
	"github.com/shardgate/shardgate/router"
)

// The execution of the binary prepared statements the proxy owns: routed
// with their bound values, run on the backend prepared as the routed text,
// and relayed, with cursors and long data.

// execute runs COM_STMT_EXECUTE on one of the proxy's statements.
func (s *stmtHandler) execute(ps *session.Stmt, p []byte) error {
	h, c := s.h, s.h.c
	e := &s.exec
	switch ps.LongSize {
	case -1:
		c.srv.longDataTooLarge.Add(1)
		s.clearLong(ps)
		return mysql.NewError(mysql.ErUnknownError, "Parameter of prepared statement which is set through mysql_send_long_data() is longer than 'max_allowed_packet' bytes (%d)", c.srv.cfg().MaxAllowedPacket)
	case -2:
		s.clearLong(ps)
		return mysql.NewError(mysql.ErOutOfResources, "Out of memory: the proxy holds its packet_memory_total for packets being received and long data (mysql_send_long_data) of prepared statements; try again later")
	}
	defer s.clearLong(ps) // long data serves one execution, as on MariaDB
	if err := e.Parse(p, ps.NParams, ps.Types, ps.HasLong); err != nil {
		return err
	}
	if e.NewTypes {
		ps.Types = append(ps.Types[:0], e.Types...)
	}
	ps.Cursor = nil // a new execution closes the statement's cursor
	if !c.srv.rt().Sharded(c.user) {
		return s.executeUnsharded(ps, e)
	}
	if e.Flags != 0 {
		return mysql.NewError(mysql.ErNotSupported, "cursors on prepared statements on sharded tables are not supported yet; execute without a cursor")
	}
	if served, err := h.rc.serveExec(ps, e); served { // rcache_exec.go
		return err
	}
	args := s.bindArgs(ps.NParams, e)
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
		if order, err = s.placeholderOrder(ps); err != nil {
			return err
		}
		if order != nil {
			e = reorderParams(e, order)
		}
	}
	if t.Subtable != "" {
		s.execTables = plan.Tables
	}
	s.classify(ps)
	c.st.Route(&ps.Class, plan.Kind, c.readSplit())
	if done, err := h.rc.fillExec(ps, e, plan, args, order); done { // rcache_exec.go
		return err
	}
	err = s.executeOn(ps, e, t.Node, q, order, false)
	c.st.Read = session.ReadMaster
	s.execTables = nil
	if err = h.fence.executed(h, plan, e, err); err == errFenceAgain { // a fenced subtable (stale.go)
		return h.fence.againExecute(s, ps, p)
	}
	if err == nil && plan.Advance != nil {
		h.seqs.advance(plan.Advance)
	}
	return err
}

// placeholderOrder is the order of ps's placeholders in its restored
// SQL, read once: the restoring may move them (LIMIT ? OFFSET ? becomes
// LIMIT ?,? with the offset first); nil when unchanged.
func (s *stmtHandler) placeholderOrder(ps *session.Stmt) ([]int, error) {
	if !ps.Ordered {
		var err error
		if ps.Order, err = router.PlaceholderOrder(ps.SQL, s.h.c.st.Mode()); err != nil {
			return nil, err
		}
		ps.Ordered = true
	}
	return ps.Order, nil
}

// executeUnsharded runs an execution for a schema without shard rules:
// unchanged on the default node, where a read may go to a replica (a
// cursor stays on the master's connection).
func (s *stmtHandler) executeUnsharded(ps *session.Stmt, e *mysql.StmtExecute) error {
	c := s.h.c
	node, _ := c.srv.rt().DefaultNode(c.user)
	c.act.set("Execute", ps.SQL)
	if e.Flags == 0 {
		s.classify(ps)
		c.st.Route(&ps.Class, router.Forward, c.readSplit())
		defer func() { c.st.Read = session.ReadMaster }()
	}
	return s.executeOn(ps, e, node, ps.SQL, nil, e.Flags != 0)
}

// bindArgs turns an execution's bound values into the router's arguments,
// in a buffer the handler reuses (valid until the next execution).
func (s *stmtHandler) bindArgs(n int, e *mysql.StmtExecute) []router.Arg {
	args := slices.Grow(s.args[:0], n)[:n]
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
	return args
}

// classify reads the statement's facts once, at its first execution.
func (s *stmtHandler) classify(ps *session.Stmt) {
	if !ps.Classified {
		ps.Class, ps.Classified = router.Classify(ps.SQL, s.h.c.st.Mode()), true
	}
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
	s.clearLong(ps)
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
	s.classify(ps)
	h.ob = stmtObs{sql: ps.SQL, keyword: ps.Class.Keyword, plan: plan, reads0: c.st.ReplicaReads}
	c.st.Route(&ps.Class, plan.Kind, c.readSplit())
	if plan.Into != "" {
		// SELECT ... INTO @variables over several shards: the row is
		// assigned by a statement of its own on one node (into.go), and
		// read back from there as after the text statement.
		c.st.HoldForReadBack(true)
		var assigned *router.Plan
		assigned, _, err = h.into.run(plan, &ps.Class)
		if rerr := c.st.ReadBackAssigned(text, assigned); rerr != nil && err == nil {
			err = rerr
		}
	} else {
		err = h.execute(plan, text)
	}
	c.st.Read = session.ReadMaster
	c.binary = false
	if err == nil && plan.Advance != nil {
		h.seqs.advance(plan.Advance)
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
	s.classify(ps)
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
		if !ps.Once || cursor {
			s.record(ps.ID, bc, q)
		}
		err = sendLongData(bc, st, ps, order)
	}
	if err == nil && ps.Class.ReadsTrackers {
		err = h.track.lend(bc) // track.go
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
	relay := h.fence.wrapExec(s.relayExec, s.execTables != nil) // stale.go
	if watch {
		relay = readOnlyGuard(relay, from != "")
	}
	if ps.Class.ReadsTrackers {
		relay = h.track.restoring(relay)
	}
	res, err := h.x.RunOn(bc, s.pbuf, cursor, relay)
	if err == nil && cursor {
		ps.Cursor, ps.CursorID = bc, st.ID
	}
	s.execRes, s.execForwarded = res, !cursor
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
	for i := range ps.HasLong {
		j := i
		if order != nil {
			j = order[i]
		}
		if !ps.HasLong[j] {
			continue
		}
		// In chunks, as clients send it: joined, a parameter of
		// max_allowed_packet would be a packet past it.
		for data := ps.Long[j]; ; {
			k := min(len(data), longDataChunk)
			if err := bc.SendLongData(st.ID, uint16(i), data[:k]); err != nil {
				return err
			}
			if data = data[k:]; len(data) == 0 {
				break
			}
		}
	}
	return nil
}

// longDataChunk is the size of the COM_STMT_SEND_LONG_DATA packets the
// proxy sends a backend.
const longDataChunk = 1 << 20

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
