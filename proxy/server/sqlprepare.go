package server

import (
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
func (h *handler) sqlPrepare(sql string) (handled bool, err error) {
	c, stmts := h.c, &h.c.st.Stmts
	sp, ok := router.ParseSQLPrepare(sql)
	if !ok {
		return false, nil
	}
	switch sp.Verb {
	case "PREPARE":
		if sp.Text == "" || c.srv.router.Prepared(sp.Text, h.routerSession()) == nil {
			// No sharded table (or FROM @variable): the backend's.
			stmts.DropNamed(sp.Name)
			return false, nil
		}
		if err := stmts.SetNamed(sp.Name, sp.Text); err != nil {
			return true, err
		}
		return true, c.writeOK(mysql.OK{Status: c.st.Status, Info: "Statement prepared"})
	case "DEALLOCATE":
		if !stmts.DropNamed(sp.Name) {
			return false, nil
		}
		return true, c.okStatus()
	}
	text, ok := stmts.Named(sp.Name)
	if !ok {
		return false, nil
	}
	n := router.CountPlaceholders(text)
	if n != len(sp.Using) {
		return true, mysql.NewError(mysql.ErWrongArguments, "Incorrect arguments to EXECUTE")
	}
	lits := make([]string, n)
	for i, u := range sp.Using {
		lits[i] = c.st.UserVar(u)
	}
	inlined, err := router.Inline(text, lits)
	if err != nil {
		return true, err
	}
	return true, h.query(append([]byte{mysql.ComQuery}, inlined...))
}
