package server

import (
	"encoding/binary"
	"errors"
	"slices"
	"strings"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/router"
)

// Binary prepared statements on sharded tables.
//
// A statement that touches no sharded table is forwarded to the default
// node as is (see dispatch): its id is the backend's. A statement on a
// sharded table is the proxy's own (ids from routedStmtBase up): each
// COM_STMT_EXECUTE routes it with the bound values, and the target's SQL
// runs as a binary prepared statement of the backend connection that runs
// it, prepared once per connection and cached there (backend.PrepareCached),
// with the client's parameter block passed on (reordered when the
// router's restored SQL moved placeholders: LIMIT ? OFFSET ? is restored
// as LIMIT ?,? with the offset first, see router.PlaceholderOrder). The
// result is relayed as raw packets, like any single-target result.
//
// Executions that need several targets (cross-shard reads and writes) run
// through the text path with the bound values inlined as literals, so the
// merges are the text queries' merges; their rows are converted to the
// binary protocol. Cursors are refused.

// routedStmtBase is the first id of the proxy's own statements; backend ids
// of forwarded statements are small per-connection counters.
const routedStmtBase = 1 << 31

// maxRoutedStmts is MySQL's default max_prepared_stmt_count.
const maxRoutedStmts = 16382

// erMaxPreparedStmtCount is ER_MAX_PREPARED_STMT_COUNT_REACHED.
const erMaxPreparedStmtCount = 1461

// routedStmt is one of the session's statements on sharded tables, or a
// transaction statement the proxy runs itself (local).
type routedStmt struct {
	id      uint32
	sql     string
	local   bool
	nparams int
	types   []byte   // parameter types bound by the last execution
	long    [][]byte // COM_STMT_SEND_LONG_DATA per parameter, until the next execution
	hasLong []bool
	// order maps the placeholders of the targets' restored SQL to the
	// client's (router.PlaceholderOrder), nil when they are in the
	// client's order; ordered says it has been computed.
	order   []int
	ordered bool
	// cursor is the connection holding the statement's open cursor, and
	// cursorID the statement's id there (see executeOn).
	cursor   *backend.Conn
	cursorID uint32
}

// routedStmt returns the proxy statement a COM_STMT_* packet names, or
// nil when the id is not one of the proxy's.
func (ss *session) routedStmt(p []byte) *routedStmt {
	id, ok := mysql.StmtExecuteID(p)
	if !ok || id < routedStmtBase {
		return nil
	}
	return ss.stmts[id]
}

// prepareRouted answers COM_STMT_PREPARE for a statement on sharded tables.
// The metadata comes from preparing the statement as the backend will run
// it, on the subtable a placeholder value of 0 routes to.
func (ss *session) prepareRouted(sql string) error {
	if len(ss.stmts) >= maxRoutedStmts {
		return mysql.NewError(erMaxPreparedStmtCount, "Can't create more than max_prepared_stmt_count statements (current value: %d)", maxRoutedStmts)
	}
	probe := make([]router.Arg, strings.Count(sql, "?"))
	for i := range probe {
		probe[i] = router.Arg{Kind: router.ArgInt, Text: "0"}
	}
	sess := router.Session{User: ss.user, DB: ss.db}
	plan, err := ss.srv.router.RouteArgs(sql, sess, probe)
	nparams := -1 // from the backend's answer
	if err != nil {
		// Placeholders where the merge needs constants (HAVING, LIMIT):
		// take the metadata from the statement with 0 in their place.
		lits := make([]string, router.CountPlaceholders(sql))
		for i := range lits {
			lits[i] = "0"
		}
		text, ierr := router.Inline(sql, lits)
		if ierr != nil {
			return err
		}
		if plan, ierr = ss.srv.router.Route(text, sess); ierr != nil {
			return err
		}
		nparams = len(lits)
	}
	t := &plan.Targets[0]
	q := t.SQL
	if q == "" {
		q = sql
	}
	bc, err := ss.acquire(t.Node, false)
	if err != nil {
		return err
	}
	st, err := bc.PrepareCached(q)
	ss.release(bc, false, result{ok: err == nil, status: ss.status})
	if err != nil {
		if bc.Broken() {
			return ss.backendLost(bc)
		}
		return err
	}
	params := st.Params
	if nparams >= 0 {
		params = make([][]byte, nparams)
		for i := range params {
			params[i] = mysql.AppendColumn(nil, &mysql.Column{Catalog: "def", Name: "?", Charset: 63, Type: mysql.TypeVarString})
		}
	}
	ps := ss.newRoutedStmt(sql, len(params))

	cols := st.Cols
	if plan.Merge != nil && plan.Merge.Hidden > 0 && plan.Merge.Hidden < len(cols) {
		// Helper columns the merge strips are not the client's.
		cols = cols[:len(cols)-plan.Merge.Hidden]
	}
	ok := make([]byte, 0, 12)
	ok = append(ok, mysql.OKHeader)
	ok = binary.LittleEndian.AppendUint32(ok, ps.id)
	ok = binary.LittleEndian.AppendUint16(ok, uint16(len(cols)))
	ok = binary.LittleEndian.AppendUint16(ok, uint16(len(params)))
	ok = append(ok, 0)
	ok = binary.LittleEndian.AppendUint16(ok, st.Warnings)
	if err := ss.c.WritePacket(ok); err != nil {
		return err
	}
	for _, defs := range [][][]byte{params, cols} {
		for _, d := range defs {
			if err := ss.c.WritePacket(ss.logicalColumn(d, t.Subtable, plan)); err != nil {
				return err
			}
		}
		if len(defs) > 0 && ss.caps&mysql.ClientDeprecateEOF == 0 {
			if err := ss.c.WritePacket(mysql.AppendEOF(ss.buf[:0], 0, ss.status)); err != nil {
				return err
			}
		}
	}
	return nil
}

// prepareLocal answers COM_STMT_PREPARE for a transaction statement
// (BEGIN, COMMIT, ROLLBACK, SAVEPOINT, ...), which takes no parameters
// and returns no rows: executing it runs it as the text statement would.
func (ss *session) prepareLocal(sql string) error {
	if len(ss.stmts) >= maxRoutedStmts {
		return mysql.NewError(erMaxPreparedStmtCount, "Can't create more than max_prepared_stmt_count statements (current value: %d)", maxRoutedStmts)
	}
	if n := router.CountPlaceholders(sql); n != 0 {
		return mysql.NewError(mysql.ErSyntax, "You have an error in your SQL syntax near '?': %s takes no parameters", router.Classify(sql).Keyword)
	}
	ps := ss.newRoutedStmt(sql, 0)
	ps.local = true
	ok := make([]byte, 0, 12)
	ok = append(ok, mysql.OKHeader)
	ok = binary.LittleEndian.AppendUint32(ok, ps.id)
	ok = append(ok, 0, 0, 0, 0, 0, 0, 0)
	return ss.c.WritePacket(ok)
}

// newRoutedStmt registers a statement of the proxy's own.
func (ss *session) newRoutedStmt(sql string, nparams int) *routedStmt {
	if ss.stmts == nil {
		ss.stmts = make(map[uint32]*routedStmt)
		ss.nextStmtID = routedStmtBase
	}
	ps := &routedStmt{id: ss.nextStmtID, sql: sql, nparams: nparams}
	ss.nextStmtID++
	ss.stmts[ps.id] = ps
	return ps
}

// logicalColumn renames the subtable in a column definition to its logical
// table, so the metadata describes the statement the client prepared.
func (ss *session) logicalColumn(d []byte, subtable string, plan *router.Plan) []byte {
	if subtable == "" || len(plan.Tables) != 1 {
		return d
	}
	col, err := mysql.ParseColumn(d)
	if err != nil || (col.Table != subtable && col.OrgTable != subtable) {
		return d
	}
	if col.Table == subtable {
		col.Table = plan.Tables[0]
	}
	if col.OrgTable == subtable {
		col.OrgTable = plan.Tables[0]
	}
	return mysql.AppendColumn(nil, col)
}

// executeInlined runs an execution that needs several targets: the bound
// values become literals in the statement's text, which is planned and
// merged like a text query, and the rows are sent in the binary protocol.
func (ss *session) executeInlined(ps *routedStmt, e *mysql.StmtExecute) error {
	coll, _ := mysql.CollationByID(ss.coll)
	charset := coll.Charset
	if charset == "" {
		charset = "utf8mb4"
	}
	lits := make([]string, ps.nparams)
	for i := range lits {
		v := e.Values[i]
		if e.Null[i] {
			v = nil
		} else if i < len(ps.hasLong) && ps.hasLong[i] {
			v = mysql.LongDataValue(ps.long[i])
		}
		lit, ok := mysql.ParamLiteral(e.Types[2*i], e.Types[2*i+1], v, charset)
		if !ok {
			return mysql.NewError(mysql.ErWrongArguments, "Incorrect arguments to mysqld_stmt_execute: parameter %d (type %#x) cannot be used in a cross-shard execution", i+1, e.Types[2*i])
		}
		lits[i] = lit
	}
	ps.long, ps.hasLong = nil, nil
	text, err := router.Inline(ps.sql, lits)
	if err != nil {
		return err
	}
	plan, err := ss.srv.router.Route(text, router.Session{User: ss.user, DB: ss.db})
	if err != nil {
		return err
	}
	switch plan.Kind {
	case router.Concat, router.SumOK, router.Fanout:
	default:
		return mysql.NewError(mysql.ErNotSupported, "this prepared statement cannot run across shards; send it as text")
	}
	ss.srv.queries.Add(1)
	ss.stmt, ss.binary = text, true
	defer func() { ss.binary = false }()
	return ss.execPlan(plan)
}

// routedStmtCommand runs COM_STMT_EXECUTE, SEND_LONG_DATA, RESET, CLOSE and
// FETCH on one of the proxy's statements.
func (ss *session) routedStmtCommand(ps *routedStmt, p []byte) error {
	switch p[0] {
	case mysql.ComStmtClose:
		delete(ss.stmts, ps.id)
		return nil
	case mysql.ComStmtSendLongData:
		if len(p) < 7 {
			return nil // no reply is due, even for a malformed packet
		}
		i := int(binary.LittleEndian.Uint16(p[5:7]))
		if i >= ps.nparams {
			return nil
		}
		if ps.long == nil {
			ps.long, ps.hasLong = make([][]byte, ps.nparams), make([]bool, ps.nparams)
		}
		ps.long[i] = append(ps.long[i], p[7:]...)
		ps.hasLong[i] = true
		return nil
	case mysql.ComStmtReset:
		ps.long, ps.hasLong = nil, nil
		if bc := ss.cursorConn(ps); bc != nil {
			// Closes the cursor there too.
			ss.qbuf = binary.LittleEndian.AppendUint32(append(ss.qbuf[:0], mysql.ComStmtReset), ps.cursorID)
			_, err := ss.runOn(bc, bc.Node().Name, ss.qbuf, true, ss.relayOne)
			return err
		}
		return ss.writeOK(mysql.OK{Status: ss.status})
	case mysql.ComStmtFetch:
		bc := ss.cursorConn(ps)
		if bc == nil || len(p) < 9 {
			return mysql.NewError(erStmtHasNoOpenCursor, "The statement (%d) has no open cursor.", ps.id)
		}
		ss.qbuf = append(binary.LittleEndian.AppendUint32(append(ss.qbuf[:0], mysql.ComStmtFetch), ps.cursorID), p[5:9]...)
		_, err := ss.runOn(bc, bc.Node().Name, ss.qbuf, true, ss.relayFetch)
		return err
	}
	if ps.local {
		if len(p) < 10 {
			return mysql.ErrMalformedPacket
		}
		ss.act.set("Execute", ps.sql)
		if handled, err := ss.txnStatement(ps.sql); handled {
			return err
		}
		return mysql.NewError(mysql.ErNotSupported, "%s as a prepared statement is not supported by shardgate", router.Classify(ps.sql).Keyword)
	}
	return ss.executeRouted(ps, p)
}

// executeRouted runs COM_STMT_EXECUTE on one of the proxy's statements.
func (ss *session) executeRouted(ps *routedStmt, p []byte) error {
	e := &ss.exec
	if err := e.Parse(p, ps.nparams, ps.types, ps.hasLong); err != nil {
		return err
	}
	if e.NewTypes {
		ps.types = append(ps.types[:0], e.Types...)
	}
	ps.cursor = nil // a new execution closes the statement's cursor
	sess := router.Session{User: ss.user, DB: ss.db}
	if !ss.srv.router.Sharded(ss.user) {
		// Every statement runs unchanged on the default node.
		node, _ := ss.srv.router.DefaultNode(ss.user)
		ss.act.set("Execute", ps.sql)
		return ss.executeOn(ps, e, node, ps.sql, nil, e.Flags != 0)
	}
	if e.Flags != 0 {
		return mysql.NewError(mysql.ErNotSupported, "cursors on prepared statements on sharded tables are not supported yet; execute without a cursor")
	}
	args := slices.Grow(ss.args[:0], ps.nparams)[:ps.nparams]
	clear(args)
	ss.args = args
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
	ss.act.set("Execute", ps.sql)
	plan, err := ss.srv.router.RouteArgs(ps.sql, sess, args)
	if err != nil {
		var se *mysql.SQLError
		if errors.As(err, &se) && se.Code == mysql.ErNotSupported {
			// Placeholders where a merge needs constants (HAVING, LIMIT):
			// the inlined text may plan.
			return ss.executeInlined(ps, e)
		}
		return err
	}
	t := &plan.Targets[0]
	q := t.SQL
	if q == "" {
		q = ps.sql
	}
	if plan.Kind != router.Forward || (t.SQL != "" && router.Placeholders(q) != ps.nparams) {
		return ss.executeInlined(ps, e)
	}
	var order []int
	if t.SQL != "" {
		// The restored SQL may have moved placeholders (LIMIT ? OFFSET ?
		// becomes LIMIT ?,? with the offset first).
		if !ps.ordered {
			if ps.order, err = router.PlaceholderOrder(ps.sql); err != nil {
				return err
			}
			ps.ordered = true
		}
		if order = ps.order; order != nil {
			e = reorderParams(e, order)
		}
	}
	return ss.executeOn(ps, e, t.Node, q, order, false)
}

// executeOn runs one execution of ps as statement q, prepared on a pooled
// connection to node (and cached there); order maps q's parameters to the
// client's (nil: the same order). An execution that opens a cursor
// (schemas without shard rules) leaves the cursor on that connection, so
// the session keeps the connection from then on, as it keeps one for any
// other state, and COM_STMT_FETCH and COM_STMT_RESET go there.
func (ss *session) executeOn(ps *routedStmt, e *mysql.StmtExecute, node, q string, order []int, cursor bool) error {
	ss.srv.queries.Add(1)
	bc, err := ss.acquire(node, false)
	if err != nil {
		return err
	}
	if cursor {
		ss.release(bc, true, result{ok: true, status: ss.status}) // kept by the session
	}
	st, err := bc.PrepareCached(q)
	if err == nil && len(st.Params) != ps.nparams {
		err = mysql.NewError(mysql.ErNotSupported, "the statement on node %s has %d parameters, the prepared one %d", node, len(st.Params), ps.nparams)
	}
	if err == nil {
		err = ss.sendLongData(bc, st, ps, order)
	}
	if err != nil {
		if !cursor {
			ss.release(bc, false, result{ok: false, status: ss.status})
		}
		if bc.Broken() {
			return ss.backendLost(bc)
		}
		return err
	}
	ss.qbuf = mysql.AppendStmtExecute(ss.qbuf[:0], st.ID, e)
	if _, err = ss.runOn(bc, node, ss.qbuf, cursor, ss.relayResult); err == nil && cursor {
		ps.cursor, ps.cursorID = bc, st.ID
	}
	return err
}

// erStmtHasNoOpenCursor is ER_STMT_HAS_NO_OPEN_CURSOR.
const erStmtHasNoOpenCursor = 1421

// cursorConn returns the connection holding ps's open cursor, if the
// session still holds it.
func (ss *session) cursorConn(ps *routedStmt) *backend.Conn {
	if ps.cursor == nil || !slices.Contains(ss.pinned, ps.cursor) {
		return nil
	}
	return ps.cursor
}

// sendLongData passes the long data a client sent for this execution on to
// the backend statement, whose parameter i is the client's order[i] (i
// when order is nil); MySQL keeps it only until the execution.
func (ss *session) sendLongData(bc *backend.Conn, st *backend.Stmt, ps *routedStmt, order []int) error {
	defer func() { ps.long, ps.hasLong = nil, nil }()
	for i := range ps.hasLong {
		j := i
		if order != nil {
			j = order[i]
		}
		if !ps.hasLong[j] {
			continue
		}
		if err := bc.SendLongData(st.ID, uint16(i), ps.long[j]); err != nil {
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
