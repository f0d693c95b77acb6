package server

import (
	"strings"

	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/router"
)

// SQL-level PREPARE / EXECUTE / DEALLOCATE PREPARE of statements on sharded
// tables are the proxy's: PREPARE keeps the text under its name, EXECUTE
// puts the values of its USING user variables (which the session carries,
// see vars.go) in place of the placeholders and runs the result like any
// text query, routed and merged. Statements without sharded tables are
// prepared on the default node as before.

// sqlPrepare handles a PREPARE, EXECUTE or DEALLOCATE statement; handled is
// false when it is not one the proxy runs itself.
func (ss *session) sqlPrepare(sql string) (handled bool, err error) {
	sp, ok := router.ParseSQLPrepare(sql)
	if !ok {
		return false, nil
	}
	switch sp.Verb {
	case "PREPARE":
		if sp.Text == "" || ss.srv.router.Prepared(sp.Text, router.Session{User: ss.user, DB: ss.db}) == nil {
			// No sharded table (or FROM @variable): the backend's.
			delete(ss.sqlStmts, sp.Name)
			return false, nil
		}
		if ss.sqlStmts == nil {
			ss.sqlStmts = make(map[string]string)
		}
		if len(ss.sqlStmts) >= maxRoutedStmts {
			return true, mysql.NewError(erMaxPreparedStmtCount, "Can't create more than max_prepared_stmt_count statements (current value: %d)", maxRoutedStmts)
		}
		ss.sqlStmts[sp.Name] = sp.Text
		return true, ss.writeOK(mysql.OK{Status: ss.status, Info: "Statement prepared"})
	case "DEALLOCATE":
		if _, ok := ss.sqlStmts[sp.Name]; !ok {
			return false, nil
		}
		delete(ss.sqlStmts, sp.Name)
		return true, ss.writeOK(mysql.OK{Status: ss.status})
	}
	text, ok := ss.sqlStmts[sp.Name]
	if !ok {
		return false, nil
	}
	n := router.CountPlaceholders(text)
	if n != len(sp.Using) {
		return true, mysql.NewError(mysql.ErWrongArguments, "Incorrect arguments to EXECUTE")
	}
	lits := make([]string, n)
	for i, u := range sp.Using {
		lits[i] = "NULL"
		target := "@`" + strings.ReplaceAll(u, "`", "``") + "`"
		for _, v := range ss.vars {
			if v.target == target {
				lits[i] = v.literal
			}
		}
	}
	inlined, err := router.Inline(text, lits)
	if err != nil {
		return true, err
	}
	return true, ss.query(append([]byte{mysql.ComQuery}, inlined...))
}
