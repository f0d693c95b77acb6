package server

import (
	"errors"
	"slices"
	"strings"

	"go.uber.org/zap"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/proxy/engine"
	"github.com/shardgate/shardgate/router"
)

// localStmts runs the statements of a session that the proxy answers
// itself instead of routing them: transaction control (BEGIN, COMMIT,
// SAVEPOINT, ..., and UNLOCK TABLES), tracked SET (on a pooled connection,
// values read back and carried by the session), SET NAMES, USE, and the
// statements that run other statements (SQL-level PREPARE and EXECUTE,
// EXECUTE IMMEDIATE), which the proxy must see to route and check what
// they run. It is owned by its handler's goroutine.
type localStmts struct {
	h *handler
}

// trackedSet reports whether a SET is one local runs itself (tracked
// variables, SET NAMES with a known character set).
func (l *localStmts) trackedSet(sql string) bool {
	h := l.h
	mode := h.c.st.Mode()
	if router.HasExecutableComment(sql) {
		return false
	}
	if _, ok := router.ParseSet(sql, mode); ok {
		return true
	}
	if _, any := router.SetsTrackers(sql, mode); any {
		return true
	}
	if cs, coll, ok := router.ParseSetNames(sql, mode); ok {
		_, ok := mysql.CollationByName(cs, coll)
		return ok
	}
	return false
}

// local runs the statements other than transaction control of a
// single-statement text that the proxy answers itself (SQL-level PREPARE,
// tracked SET, SET NAMES, USE); handled is false for the others.
func (l *localStmts) local(sql string, stmt router.Stmt) (handled bool, err error) {
	h := l.h
	c := h.c
	// Statements that run other statements: the proxy must see what they
	// run (to route it, and to keep KILL its own).
	switch {
	case stmt.Keyword == "EXECUTE" && stmt.SecondIs("IMMEDIATE"):
		if h.immediate {
			return false, nil // checked: the server runs it
		}
		return true, h.ls.executeImmediate(sql)
	case stmt.Keyword == "PREPARE" && h.immediate:
		return false, nil // prepareFromExpr's: checked, the server runs it
	case stmt.Keyword == "PREPARE":
		// An executable comment in the statement (outside its literal,
		// whose text sqlPrepare checks) is refused: the text prepared
		// must be the text checked.
		if stmt.Executable {
			return true, mysql.NewError(mysql.ErNotSupported, "this form of PREPARE is not supported by shardgate: prepare from a string literal, a user variable or an expression, without executable comments")
		}
		if _, ok := router.ParseSQLPrepare(sql, c.st.Mode()); !ok {
			name, expr, near, ok := router.PrepareFromExpr(sql)
			if !ok {
				// Not PREPARE name FROM something: the server's syntax
				// error, without the server seeing it.
				return true, mysql.NewError(mysql.ErSyntax, "You have an error in your SQL syntax; check the manual that corresponds to your MariaDB server version for the right syntax to use near '%s' at line 1", near)
			}
			return true, h.ls.prepareFromExpr(name, expr)
		}
	}
	if stmt.Executable {
		// What the server runs may not be what the proxy reads: the
		// statement goes to the session's own connection.
		return false, nil
	}
	switch {
	case stmt.Keyword == "PREPARE" || stmt.Keyword == "EXECUTE" || stmt.Keyword == "DEALLOCATE" || stmt.Keyword == "DROP":
		return h.ls.sqlPrepare(sql)
	case stmt.Keyword == "SET" && !stmt.Effects:
		if only, any := router.SetsTrackers(sql, c.st.Mode()); any {
			return true, h.track.set(sql, !only) // track.go
		}
		// A SET that takes a lock, advances a sequence or calls a stored
		// function leaves more than variables: it runs on the session's
		// own connection.
		if vars, ok := router.ParseSet(sql, c.st.Mode()); ok {
			return true, h.ls.setTracked(sql, vars)
		}
		if cs, coll, ok := router.ParseSetNames(sql, c.st.Mode()); ok {
			if id, ok := mysql.CollationByName(cs, coll); ok {
				// The connections the session uses follow on next use.
				return true, h.track.setNames(sql, id) // track.go
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

// setTracked runs a SET statement whose assignments the session tracks:
// on a pooled connection, then the values are read back.
func (l *localStmts) setTracked(sql string, vars []router.SetVar) error {
	h := l.h
	c, st := h.c, h.c.st
	node, _ := c.srv.rt().DefaultNode(c.user)
	if st.Status&mysql.StatusAutocommit == 0 &&
		slices.ContainsFunc(vars, func(v router.SetVar) bool { return !v.User && v.Name == "autocommit" && !v.Off }) {
		// Turning autocommit on commits the open transaction first, on
		// every node it reached, as MariaDB commits it (and refuses the
		// SET inside XA: the proxy's XA is the session's ordinary
		// transaction).
		if err := st.End(true); err != nil {
			return err
		}
	}
	bc, err := st.AcquireOutsideTxn(node)
	if err != nil {
		return err
	}
	c.running.Store(bc)
	res, err := bc.Run(sql)
	keep := false // the statement set something the session cannot carry
	if err == nil {
		vars, keep, err = l.carrySet(bc, res, vars)
	}
	c.running.Store(nil)
	if err != nil {
		var se *mysql.SQLError
		if !bc.Broken() && errors.As(err, &se) {
			h.ls.afterFailedSet(bc, vars)
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
	st.NoteServerState(res.State, false)
	return c.writeOK(mysql.OK{Status: st.Status, Warnings: res.OK.Warnings})
}

// carrySet reads back into the session the values a SET of vars left on
// bc (res its answer), so that they travel with the session (also
// clientTrackers.set's, for the other assignments of a SET of trackers).
// What the server says the statement set is read back too, so a variable
// set in a way the proxy did not parse travels with the session like the
// others instead of staying on the connection; the trackers are not
// variables the session carries (clientTrackers keeps them). It returns
// the variables read back, and keep when the statement set something the
// session cannot carry.
func (l *localStmts) carrySet(bc *backend.Conn, res *backend.Result, vars []router.SetVar) ([]router.SetVar, bool, error) {
	st := l.h.c.st
	keep := false
	for _, v := range reportedVars(res.State) {
		switch {
		case router.IsTracker(v.Name):
		case !router.Carried(v.Name):
			keep = true
		default:
			vars = append(vars, v)
		}
	}
	if len(vars) == 0 {
		return vars, keep, nil
	}
	err := st.ReadBack(bc, vars)
	if err == nil && st.CheckCarry(bc, vars) != nil {
		keep = true // the values cannot be set on another connection
	}
	return vars, keep, err
}

// afterFailedSet handles the connection a tracked SET failed on: MariaDB
// may have made the assignments before the failing one (a read-only
// variable set to DEFAULT fails after them), and its error says nothing of
// them. The user variables are read back, and the session keeps the
// connection from then on, with whatever else the statement left there,
// as a session directly would: no other session gets it.
func (l *localStmts) afterFailedSet(bc *backend.Conn, vars []router.SetVar) {
	h := l.h
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

// unlockTables answers UNLOCK TABLES: the session's table locks are
// released on every node that holds some; without any, the statement goes
// to the default node as it is (it also ends FLUSH TABLES WITH READ LOCK
// there) and leaves nothing behind.
func (l *localStmts) unlockTables(p []byte) error {
	h := l.h
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

// txnStatement runs a transaction control statement. handled is false when
// the statement is not one the proxy manages (it then runs as usual).
func (l *localStmts) txnStatement(sql string, stmt *router.Stmt) (handled bool, err error) {
	h := l.h
	st := h.c.st
	var warnings uint16
	if stmt.Executable {
		// mysqldump's START TRANSACTION /*!40100 WITH CONSISTENT SNAPSHOT */
		sql = router.InlineExecutable(sql, h.defaultVersion())
	}
	txn := router.ParseTxn(sql)
	switch txn.Verb {
	case router.TxnNone:
		// Not a form the proxy composes: the server answers it (its
		// syntax error, typically); what it changes shows in the status
		// flags and session tracking like any statement's.
		return false, nil
	case router.TxnBegin:
		err = st.Begin(txn)
		if err == nil && txn.Snapshot {
			// The snapshot is taken now, as on the server (on the default
			// node; others take theirs when the transaction reaches them).
			node, _ := h.c.srv.rt().DefaultNode(h.c.user)
			var bc *backend.Conn
			if bc, err = st.Acquire(node, false); err == nil {
				st.Release(bc, false, backend.Outcome{})
			}
		}
	case router.TxnCommit, router.TxnRollback:
		again := st.OpenTxn()
		err = st.End(txn.Verb == router.TxnCommit)
		warnings = st.EndWarnings
		// Without AND [NO] CHAIN or [NO] RELEASE, the session's
		// completion_type decides, as on the server.
		ct := st.CompletionType
		txn.Chain = txn.Chain || ct == 1 && !txn.NoChain
		txn.Release = txn.Release || ct == 2 && !txn.NoRelease
		if err == nil && txn.Chain && !txn.Release {
			// A new transaction with the same access mode, as the
			// server's AND CHAIN starts one.
			if again.Verb == router.TxnNone {
				again = router.Txn{Verb: router.TxnBegin, SQL: "START TRANSACTION"}
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
	noteTxn(st, txn) // track.go
	return true, h.c.writeOK(mysql.OK{Status: h.c.status(), Warnings: warnings})
}
