package server

import (
	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/router"
)

// SQL-level PREPARE / EXECUTE / DEALLOCATE PREPARE of statements on sharded
// tables are the proxy's: PREPARE keeps the text under its name, EXECUTE
// puts the values of its USING user variables (which the session carries)
// in place of the placeholders and runs the result like any text query,
// routed and merged. Statements without sharded tables are prepared on the
// default node as before.

// sqlPrepare handles a PREPARE, EXECUTE or DEALLOCATE statement; handled is
// false when it is not one the proxy runs itself.
func (l *localStmts) sqlPrepare(sql string) (handled bool, err error) {
	h := l.h
	c, stmts := h.c, &h.c.st.Stmts
	sp, ok := router.ParseSQLPrepare(sql, c.st.Mode())
	if !ok {
		return false, nil
	}
	switch sp.Verb {
	case "PREPARE":
		return l.sqlPrepareText(sp)
	case "DEALLOCATE":
		if !stmts.DropNamed(sp.Name) {
			return false, nil
		}
		h.ps.sync()
		c.st.NoteStateChange()
		return true, c.okStatus()
	}
	text, ok := stmts.Named(sp.Name)
	if !ok {
		return false, nil
	}
	n := router.CountPlaceholders(text, c.st.Mode())
	if n != len(sp.Using) {
		return true, mysql.NewError(mysql.ErWrongArguments, "Incorrect arguments to EXECUTE")
	}
	lits := make([]string, n)
	for i, u := range sp.Using {
		lits[i] = c.st.UserVar(u)
	}
	if n == 0 {
		// Nothing to put in place (a KILL of an expression, which the
		// router's parser does not read, among others).
		return true, h.query(append([]byte{mysql.ComQuery}, text...))
	}
	inlined, err := router.Inline(text, lits, c.st.Mode())
	if err != nil {
		return true, err
	}
	return true, h.query(append([]byte{mysql.ComQuery}, inlined...))
}

// sqlPrepareText handles PREPARE name FROM ...: the proxy keeps the text
// when it names a sharded table (or is a KILL or reads the client's
// trackers); otherwise the backend prepares it (handled false).
func (l *localStmts) sqlPrepareText(sp router.SQLPrepare) (handled bool, err error) {
	h := l.h
	c, stmts := h.c, &h.c.st.Stmts
	text := sp.Text
	if sp.FromVar != "" {
		// The statement is in a user variable: the proxy must see it
		// to route it, and to keep KILL its own. It is read on the
		// session's connection, always: a statement can change it
		// where the proxy does not see (SELECT ... INTO, a stored
		// function), and the session then keeps that connection.
		v, lit, err := h.ls.evalString("@"+mysql.QuoteIdent(sp.FromVar), "PREPARE..FROM")
		if err != nil {
			return true, err
		}
		if lit == "NULL" {
			return false, nil // the server's own error
		}
		text = v
	}
	cls := router.Classify(text, h.c.st.Mode())
	if cls.Executable {
		return true, h.ls.prepareExecutable(text)
	}
	if err := h.allowed(text, &cls); err != nil {
		return true, err
	}
	// KILL is the proxy's (its ids are the proxy's connection ids, and
	// only their owner may kill them), whatever route it comes by.
	_, setsTrackers := router.SetsTrackers(text, h.c.st.Mode())
	if cls.Kind != router.KindKill && !cls.ReadsTrackers && !setsTrackers && c.srv.rt().Prepared(text, h.routerSession()) == nil {
		// No sharded table: the backend's. (A read of the client's
		// trackers, or a SET of them, is the proxy's: EXECUTE runs it as
		// text, with the values the trackers have then, track.go.)
		stmts.DropNamed(sp.Name)
		h.ps.sync()
		return false, nil
	}
	if _, ok := stmts.Named(sp.Name); !ok {
		if err := h.ps.room(); err != nil {
			return true, err
		}
	}
	if err := stmts.SetNamed(sp.Name, text); err != nil {
		return true, err
	}
	h.ps.sync()
	c.st.NoteStateChange() // as MariaDB reports a PREPARE (track.go)
	return true, c.writeOK(mysql.OK{Status: c.st.Status, Info: "Statement prepared"})
}

// prepareExecutable answers PREPARE of a text with an executable comment
// (/*! */, /*M! */), whose content the server may read otherwise than the
// router: the text prepared must be the text checked, so the proxy does
// not prepare it. The server parses it first, on the session's connection
// to the default node, so a text it refuses (an unfinished comment) gets
// its own syntax error, as directly.
func (l *localStmts) prepareExecutable(text string) error {
	h := l.h
	c := h.c
	node, _ := c.srv.rt().DefaultNode(c.user)
	bc, err := c.st.Acquire(node, false)
	if err != nil {
		return err
	}
	err = serverParse(bc, text, mysql.NewError(mysql.ErNotSupported, "this form of PREPARE is not supported by shardgate: the text prepared holds an executable comment (/*! */), which the server may read otherwise than the proxy"))
	c.st.Release(bc, false, backend.Outcome{})
	if bc.Broken() {
		return h.backendLost(bc)
	}
	return err
}
