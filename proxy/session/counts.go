package session

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/router"
)

// stmtState is what the session knows of its statements beyond the
// variables and the transaction: the values ROW_COUNT() and FOUND_ROWS()
// return for it (the proxy answers them: router.BindCounts), and, for the
// statement under way, whether it assigns user variables outside SET
// (read back and carried like a SET's, so it ties no connection to the
// session) and whether it reads any of the session's state at all (one
// that does not may run on another node while the session keeps state
// it cannot repeat there). It is part of State (embedded).
type stmtState struct {
	s *State
	// RowCount is what ROW_COUNT() returns: the affected rows of the last
	// statement that answered OK, -1 after a result set or an error.
	RowCount int64
	// FoundRows is what FOUND_ROWS() returns: the rows of the last result
	// set the session got.
	FoundRows uint64
	// readBack: the statement under way assigns user variables
	// (router.AssignedVars); held is the connection kept for reading
	// them back that nothing else keeps.
	readBack bool
	held     *backend.Conn
	// portable: the statement under way reads no state the session keeps
	// where the proxy cannot repeat it (router.Stmt.ReadsHeld, user
	// variables it could not read back): it may run on another node.
	// stateless: it leaves nothing there either, so the connection it
	// gets there is lent for the statement.
	portable, stateless bool
	// varsUnknown: user variables may have been set where the proxy
	// could not read them back (a statement on several shards, state the
	// server reported): statements that read user variables run only
	// where the session's state is.
	varsUnknown bool
	// varsHomes are the nodes where they may have been set (varsLost);
	// varsAnywhere: on nodes the proxy does not know.
	varsHomes    []string
	varsAnywhere bool
	// replayedSet: the statement under way is a SET the session repeats
	// on every connection it takes (NoteState): what the server reports
	// it changed travels with it.
	replayedSet bool
	// inStmt is set between Before and After; homes are the nodes where
	// the session left state the proxy cannot repeat elsewhere (checkHome).
	inStmt bool
	homes  []string
	// leaves: the statement under way may leave state on every
	// connection it runs on (Release keeps them all, on any plan).
	// varsRead: its connection's user variables were read back; warned:
	// its response carried warnings (which a read of the proxy's own
	// would clear before the client's SHOW WARNINGS).
	leaves, varsRead, warned bool
	// fillRead: the statement is a result cache fill (FillRead).
	fillRead bool
	// afterHit: the last statement was answered by the result cache;
	// clearDiag: the statement under way reads the diagnostics that
	// answer left, none, which the connection it runs on must then show
	// (cache.go).
	afterHit, clearDiag bool
	// insertSelect: the statement under way is INSERT ... SELECT; ddl:
	// it is DDL; offset: its LIMIT's offset.
	insertSelect, ddl bool
	offset            uint64
	// warnNode is the node whose connection holds the last statement's
	// warnings (DiagnosticsNode).
	warnNode string
	// lending is set while lend allowed a connection to another node;
	// lentConns are the connections lent to the statement under way.
	lending   bool
	lentConns []*backend.Conn
	// using are the connections Acquire gave the statement under way and
	// Release has not taken back: a connection kept only for SHOW
	// WARNINGS goes back to its pool when the session moves to another
	// node, unless the statement is still reading from it (an exact
	// fallback copying its rows).
	using []*backend.Conn
	// opaque: the state the session keeps on a node may include system
	// variables (a multi-statement text, a stored routine, a change the
	// server reported, a SET not repeated): no statement runs elsewhere.
	opaque bool
}

// carry settles, before a statement runs, what the session does for it
// (see stmtState): a statement that is sticky only for what the session
// carries itself is not sticky.
func (ss *stmtState) carry(st *router.Stmt) {
	if st.Carried && !st.Multi {
		st.Sticky = false
		ss.readBack = st.AssignsVars
	}
	ss.lendable(st)
	ss.replayedSet = st.Keyword == "SET" && !st.Effects && !st.Multi && len(ss.s.replay) < maxReplay
	ss.inStmt = true
	ss.using = ss.using[:0]
	if !st.Diagnostics {
		ss.warnNode = "" // a statement's warnings replace the last one's
	}
	ss.clearDiag, ss.afterHit = ss.afterHit && st.Diagnostics, false
	ss.insertSelect = st.InsertSelect && !st.Multi
	ss.ddl, ss.offset = st.Kind == router.KindDDL && !st.Multi, st.LimitOffset
	// Locks, sequences, routines: on every connection the plan uses; and
	// SQL_CALC_FOUND_ROWS, whose count is read after it on the
	// connection that ran it (an exact fallback's too).
	ss.leaves = st.Effects || st.CalcFoundRows && !st.Multi
}

// lendable settles whether the statement under way may run on another
// node than the one where the session keeps state it cannot repeat
// (portable), and whether the connection it takes there is lent for it
// (stateless).
func (ss *stmtState) lendable(st *router.Stmt) {
	ss.portable = !st.Multi && !st.ReadsHeld && (!st.ReadsVars || !ss.varsUnknown)
	ss.stateless = !st.Sticky && !st.AssignsVars // assigned variables are read back where the session keeps them
}

// Executing settles, for an execution of a binary prepared statement the
// proxy routes (it runs without Before and After), what carry settles for
// a text statement: one that reads none of the state the session keeps
// on a node may take a connection to another node, lent for the
// execution (lend, lent, giveBack), as the same statement sent as text
// would. Executed ends the execution.
func (ss *stmtState) Executing(st router.Stmt) {
	if st.Carried {
		st.Sticky = false
	}
	ss.lendable(&st)
	// Nothing after the execution would record what it left there (no
	// After): only one that leaves nothing runs on another node.
	ss.portable = ss.portable && ss.stateless
}

// Executed ends what Executing settled.
func (ss *stmtState) Executed() { ss.portable, ss.stateless, ss.lending = false, false, false }

// NoteAnswer records what the last statement answered, for ROW_COUNT()
// and FOUND_ROWS(): an OK with its affected rows, or a result set of rows
// rows, or an error.
func (ss *stmtState) NoteAnswer(failed, resultSet bool, affected, rows uint64) {
	switch {
	case failed:
		ss.RowCount = -1
	case resultSet:
		ss.RowCount, ss.FoundRows = -1, rows
		if rows > 0 {
			ss.FoundRows += ss.offset // MariaDB counts the rows LIMIT skipped as found
		}
	default:
		ss.RowCount = int64(affected)
		switch {
		case ss.insertSelect:
			ss.FoundRows = affected // the rows its SELECT found, as far as the proxy can tell
		case ss.ddl:
			ss.FoundRows = 0 // as MariaDB's DDL leaves it
		}
	}
}

// HoldForReadBack turns off (or back on) the holding of released
// connections for the read-back of the statement's user variables, and
// reports whether it was on: the proxy turns it off while it computes the
// row of a SELECT ... INTO over several targets, whose connections
// assign nothing (the row is assigned afterwards on one connection).
func (ss *stmtState) HoldForReadBack(on bool) (was bool) {
	was, ss.readBack = ss.readBack, on
	return was
}

// ReadBackAssigned reads back the user variables a binary execution of a
// SELECT ... INTO assigned on the connection of plan's one target (held
// for it: HoldForReadBack), as After does for a text statement, and lets
// the connection go.
func (ss *stmtState) ReadBackAssigned(sql string, plan *router.Plan) error {
	if !ss.readBack {
		return nil
	}
	return ss.readBackVars(sql, plan)
}

// hold reports whether Release must keep bc for the read back of the
// statement's user variables, and remembers it when nothing else keeps
// it.
func (ss *stmtState) hold(bc *backend.Conn, kept bool) bool {
	if !ss.readBack {
		return false
	}
	if !kept && ss.held == nil {
		ss.held = bc
	}
	return true
}

// readBackVars reads back, after a statement that assigned user variables
// on node's connection, their values into the session's (carried to
// every connection as a SET's are), then lets go of the connection if it
// was held for that alone. A statement on several targets leaves the
// session sticky as before: the values stay where they are. An error
// means the values are lost with the connection (the caller ends the
// session, as for a SET whose values could not be read back).
func (ss *stmtState) readBackVars(sql string, plan *router.Plan) error {
	s := ss.s
	held := ss.held
	ss.readBack, ss.held = false, nil
	var bc *backend.Conn
	if plan != nil && (plan.Kind == router.Forward || plan.Kind == router.Fallback) && len(plan.Targets) == 1 {
		bc = s.pinnedOn(s.node(plan.Targets[0].Node))
	}
	if bc == nil {
		if held != nil {
			s.sticky = true
			ss.varsLost(plan.Nodes()...)
			if s.unreplayable == "" {
				s.unreplayable = "user variables assigned by a statement on several shards"
			}
		}
		return nil
	}
	// The read uses no table: MariaDB keeps the statement's warnings for
	// the client's SHOW WARNINGS.
	var err error
	if vars := router.AssignedVars(sql, s.Mode()); len(vars) > 0 {
		if err = s.ReadBack(bc, vars); err != nil {
			bc.MarkBroken()
		}
	}
	if held == bc || bc.Broken() {
		s.unpin(bc)
		bc.Node().Put(bc)
	}
	return err
}

// lend reports whether the statement under way may take a connection to
// another node while the session keeps state it cannot repeat there: it
// reads none of it (independent) and no transaction is open. The
// connection is lent for the statement (lent, giveBack), so one MariaDB
// runs what the session asks.
func (ss *stmtState) lend(inTxn bool) bool {
	if !ss.portable || ss.opaque {
		return false
	}
	ss.lending = ss.stateless && !inTxn // in a transaction the connection is the transaction's
	return true
}

// lent records bc, taken from the pool for the statement lend allowed.
func (ss *stmtState) lent(bc *backend.Conn) {
	if ss.lending {
		ss.lentConns = append(ss.lentConns, bc)
		ss.lending = false
	}
}

// giveBack returns a lent connection to its pool after its statement,
// reset first when the session's SET statements were repeated on it or
// the statement changed its state; it reports whether bc was lent.
func (ss *stmtState) giveBack(bc *backend.Conn, o backend.Outcome, noisy bool) bool {
	i := slices.Index(ss.lentConns, bc)
	if i < 0 {
		return false
	}
	ss.lentConns = slices.Delete(ss.lentConns, i, i+1)
	if o.Warnings > 0 {
		return false // kept for the client's SHOW WARNINGS, like any connection
	}
	s := ss.s
	s.unpin(bc)
	if (len(s.replay) > 0 || o.StateChanged && !(noisy && onlyFillNoise(o.State))) && !bc.Private() {
		if err := bc.ChangeUser(""); err != nil {
			bc.MarkBroken()
		} else {
			bc.Disown()
		}
	}
	bc.Node().Put(bc)
	return true
}

// NoteState records how a statement that made the session sticky can be
// repeated on another node.
func (ss *stmtState) NoteState(st router.Stmt, sql string, multi bool) {
	s := ss.s
	if s.unreplayable != "" {
		return
	}
	if st.Keyword == "SET" && !multi && !st.Effects && len(s.replay) < maxReplay {
		s.replay = append(s.replay, sql)
		return
	}
	// Changes of system variables are reported, whatever statement made
	// them (and make the session opaque: absorb); what a statement leaves
	// unreported (user variables, locks, temporary tables, sequences,
	// prepared statements) a statement that names no user variable does
	// not read. A multi-statement text is taken for opaque as a whole.
	s.opaque = s.opaque || multi
	switch {
	case multi:
		s.unreplayable = "a multi-statement text"
	case st.Keyword == "SET" && st.Effects:
		s.unreplayable = "a SET that takes a lock, a sequence value or calls a stored function"
	case st.Keyword == "SET":
		s.unreplayable = fmt.Sprintf("more than %d SET statements", maxReplay)
		s.opaque = true
	case st.CallsRoutine:
		s.unreplayable = "a stored routine's call (" + st.Keyword + ")"
	default:
		s.unreplayable = "a " + st.Keyword + " statement"
	}
}

// Keep makes the session keep its connections for good (sticky) because
// one carries state the proxy cannot repeat on another node.
func (ss *stmtState) Keep() {
	s := ss.s
	s.keep()
	s.opaque = true // a variable's value other nodes cannot be given
}

func (ss *stmtState) keep() {
	s := ss.s
	s.sticky = true
	if s.unreplayable == "" {
		s.unreplayable = "a statement that changed the session's state"
	}
}

// readRoutineVars reads back, after a stored routine ran on node's
// connection, every user variable the connection has (MariaDB lists them
// in information_schema.USER_VARIABLES): what the routine's body assigned
// is then carried like a SET's, and statements that read user variables
// may run on other nodes. A server without the list leaves them unknown.
func (ss *stmtState) readRoutineVars(plan *router.Plan) {
	s := ss.s
	if plan == nil || plan.Kind != router.Forward || len(plan.Targets) != 1 {
		if plan != nil {
			ss.varsLost(plan.Nodes()...)
		} else {
			ss.varsLost()
		}
		return
	}
	bc := s.pinnedOn(s.node(plan.Targets[0].Node))
	if bc == nil || ss.varsRead || s.nodeCount() < 2 {
		// Not kept (the statement failed before it ran), read already,
		// or nowhere else to carry them (one node: the session keeps
		// the connection that has them).
		return
	}
	if ss.readUserVars(bc) != nil {
		ss.varsLost(bc.Node().Name)
		return
	}
	// Read back: what this connection has is known again.
	if i := slices.Index(ss.varsHomes, bc.Node().Name); i >= 0 {
		ss.varsHomes = slices.Delete(ss.varsHomes, i, i+1)
	}
	ss.varsUnknown = len(ss.varsHomes) > 0 || ss.varsAnywhere
}

// varsLost records that user variables may have been set on the nodes'
// connections where the proxy could not read them back.
func (ss *stmtState) varsLost(nodes ...string) {
	ss.varsUnknown = true
	ss.varsAnywhere = ss.varsAnywhere || len(nodes) == 0
	for _, n := range nodes {
		if !slices.Contains(ss.varsHomes, n) {
			ss.varsHomes = append(ss.varsHomes, n)
		}
	}
}

// VarsNode returns the node on whose connection a statement must read a
// user variable's value (PREPARE ... FROM @v, EXECUTE IMMEDIATE @v): the
// one node where the session's variables may have changed unseen, else
// def.
func (ss *stmtState) VarsNode(def string) string {
	if ss.varsUnknown && len(ss.varsHomes) == 1 {
		return ss.varsHomes[0]
	}
	return def
}

// readUserVars reads back every user variable bc has into the session's.
func (ss *stmtState) readUserVars(bc *backend.Conn) error {
	if ss.s.nodeCount() < 2 {
		// With one node there is nowhere to carry them (the session
		// keeps the connection).
		return errWarned
	}
	if ss.warned {
		// A read of a table clears the warnings the client may ask for
		// (one without, as ReadBack's, does not): a SET's own variables
		// are read by name (a SET uses no table, so its response carries
		// the warnings of the statement before it), others stay unknown.
		if len(ss.s.setUsers) > 0 {
			return ss.s.ReadBack(bc, ss.s.setUsers)
		}
		return errWarned
	}
	res, err := ss.s.ownExec(bc, "SELECT VARIABLE_NAME FROM information_schema.USER_VARIABLES")
	if err != nil {
		return err
	}
	vars := make([]router.SetVar, 0, len(res.Rows))
	for _, r := range res.Rows {
		vars = append(vars, router.SetVar{Name: strings.ToLower(string(r[0])), User: true})
	}
	ss.varsRead = true
	if len(vars) == 0 {
		return nil
	}
	return ss.s.ReadBack(bc, vars)
}

// readFoundRows reads, after a SELECT SQL_CALC_FOUND_ROWS on one
// connection, the server's count of the rows it would have returned
// without LIMIT: the session's FOUND_ROWS() until the next result set.
// (Over several shards the statement is refused by the router.)
func (ss *stmtState) readFoundRows(plan *router.Plan) {
	s := ss.s
	if plan == nil || plan.Kind != router.Forward && plan.Kind != router.Fallback || len(plan.Targets) != 1 {
		return
	}
	bc := s.pinnedOn(s.node(plan.Targets[0].Node))
	if bc == nil {
		return
	}
	res, err := s.ownExec(bc, "SELECT FOUND_ROWS()") // no table: the warnings stay
	if err != nil || len(res.Rows) != 1 || len(res.Rows[0]) != 1 {
		return
	}
	if n, err := strconv.ParseUint(string(res.Rows[0][0]), 10, 64); err == nil {
		ss.FoundRows = n
	}
}

// carrySysVar reads back a system variable the server reported a
// statement set (a stored routine's SET, say) into the session's
// variables, when the session can carry it (router.Carried): the session
// then has it on every connection, as after its own SET.
func (ss *stmtState) carrySysVar(bc *backend.Conn, name string) bool {
	name = strings.ToLower(name)
	if !router.Carried(name) {
		return false
	}
	return ss.s.ReadBack(bc, []router.SetVar{{Name: name}}) == nil
}

// checkHome refuses a statement that is not portable on a node other than
// those where the session keeps state it cannot repeat (homes), even when
// the session holds a connection there (taken by an earlier, portable
// statement inside a transaction, or by one that left state of its own).
func (ss *stmtState) checkHome(n *backend.Node) error {
	s := ss.s
	if !ss.inStmt || ss.portable || s.unreplayable == "" || len(ss.homes) == 0 || slices.Contains(ss.homes, n.Name) {
		return nil
	}
	return ss.heldElsewhere(n.Name, ss.homes[0])
}

// noteHomes records where a statement that left state the proxy cannot
// repeat ran.
func (ss *stmtState) noteHomes(st *router.Stmt, plan *router.Plan, o Outcome) {
	if !st.Sticky || o.Err != nil || plan == nil {
		return
	}
	for _, n := range plan.Nodes() {
		if !slices.Contains(ss.homes, n) {
			ss.homes = append(ss.homes, n)
		}
	}
}

// canUseAnotherNode checks that the session may take a connection to n
// while it holds connections to other nodes, and lets go of connections
// held only for SHOW WARNINGS.
func (ss *stmtState) canUseAnotherNode(n *backend.Node) error {
	s := ss.s
	if len(s.pinned) == 0 {
		return nil
	}
	other := s.pinned[0].Node()
	inTxn := s.InTxn()
	if inTxn {
		if err := s.txnNodeCheck(n); err != nil {
			return err
		}
	}
	switch {
	case s.sticky && s.unreplayable != "" && !s.lend(inTxn):
		return ss.heldElsewhere(n.Name, other.Name)
	case inTxn:
		// The transaction extends to n (transaction_mode multi).
	case !s.sticky:
		// Held for SHOW WARNINGS only: the statement under way replaces
		// the warnings. One it still uses goes back at its Release.
		kept := s.pinned[:0]
		for _, bc := range s.pinned {
			if slices.Contains(ss.using, bc) {
				kept = append(kept, bc)
				continue
			}
			bc.Node().Put(bc)
		}
		clear(s.pinned[len(kept):])
		s.pinned = kept
	}
	return nil
}

// errWarned: a read-back skipped so as not to clear the statement's
// warnings.
var errWarned = errors.New("the statement's warnings are kept for the client")

// DiagnosticsNode returns the node a statement that reads the last
// statement's warnings (router.Stmt.Diagnostics) must run on: the one
// whose connection, which the session kept, has them; "" when they are
// where the statement's plan goes anyway.
func (ss *stmtState) DiagnosticsNode(st *router.Stmt) string {
	if !st.Diagnostics {
		return ""
	}
	return ss.warnNode
}

// noteWarnings records where a statement's warnings are.
func (ss *stmtState) noteWarnings(bc *backend.Conn, o backend.Outcome) {
	if o.Warnings > 0 {
		ss.warnNode = bc.Node().Name
	}
}

// heldElsewhere is the error of a statement for node that the session's
// state on home cannot follow.
func (ss *stmtState) heldElsewhere(node, home string) error {
	return mysql.NewError(mysql.ErNotSupported, "this statement runs on node %s but the session holds state on node %s created by %s, which cannot be repeated on another node; use a separate connection", node, home, ss.s.unreplayable)
}
