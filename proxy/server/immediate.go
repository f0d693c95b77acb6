package server

import (
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/router"
)

// executeImmediate runs EXECUTE IMMEDIATE <expr> [USING ...]. The proxy
// must see the statement the server would run, as it sees every other:
// KILL takes the proxy's ids, the statement policy applies, and sharded
// tables need routing. So it evaluates the expression first (on the
// session's connection to the default node, with the session's variables)
// and checks the text it gives; the server then runs exactly that text,
// passed as a literal in its own character set.
func (l *localStmts) executeImmediate(sql string) error {
	h := l.h
	c := h.c
	expr, using, ok := router.ExecuteImmediate(sql)
	if !ok || router.HasExecutableComment(sql) {
		return mysql.NewError(mysql.ErNotSupported, "this form of EXECUTE IMMEDIATE is not supported by shardgate")
	}
	text, lit, err := h.ls.evalString(expr, "EXECUTE IMMEDIATE")
	if err != nil {
		return err
	}
	if lit != "NULL" {
		stmt := router.Classify(text, h.c.st.Mode())
		if stmt.Kind == router.KindKill {
			if k, ok := router.ParseKill(text); ok && using == "" {
				return h.ls.kill(k)
			}
			return mysql.NewError(mysql.ErNotSupported, "KILL with parameters (EXECUTE IMMEDIATE ... USING) is not supported by shardgate; write the id in the statement")
		}
		if err := h.allowed(text, &stmt); err != nil {
			return err
		}
		if stmt.Keyword == "PREPARE" || stmt.Keyword == "EXECUTE" && stmt.SecondIs("IMMEDIATE") {
			return mysql.NewError(mysql.ErNotSupported, "EXECUTE IMMEDIATE of %s is not supported by shardgate: send it on its own", stmt.Keyword)
		}
		if c.srv.rt().Sharded(c.user) && c.srv.rt().Prepared(text, h.routerSession()) != nil {
			return mysql.NewError(mysql.ErNotSupported, "EXECUTE IMMEDIATE of a statement on sharded tables is not supported by shardgate: send the statement itself, or PREPARE it and EXECUTE it")
		}
	}
	final := "EXECUTE IMMEDIATE " + lit
	if using != "" {
		final += " " + using
	}
	h.immediate = true
	defer func() { h.immediate = false }()
	return h.query(append([]byte{mysql.ComQuery}, final...))
}

// evalString evaluates an EXECUTE IMMEDIATE expression on the session's
// connection to the default node: its value as text in the connection's
// character set (for the proxy to read), and as a literal that gives the
// same bytes in the value's own character set ("NULL" for NULL), which
// the server then converts as it converts the text of an EXECUTE IMMEDIATE
// of the expression itself (a character it cannot convert is not a '?'
// there: its syntax error shows it escaped). The server evaluates the
// expression as the parameter of an EXECUTE IMMEDIATE ... USING of its
// own, so what it refuses there (subqueries, stored functions: 1970) it
// refuses here. The value comes through as a binary string (a string
// parameter would be converted to the connection's character set), with
// CHARSET() beside it, which reads the expression's type and does not
// evaluate it again; both in hexadecimal or plain names, so no
// character_set_results changes them.
func (l *localStmts) evalString(expr, stmtName string) (text, lit string, err error) {
	h := l.h
	c := h.c
	node, _ := c.srv.rt().DefaultNode(c.user)
	// Where the session's variables are: a stored function may have set
	// them on another node, unseen.
	bc, err := c.st.Acquire(c.st.VarsNode(node), false)
	if err != nil {
		return "", "", err
	}
	// CONCAT(a, ''): a number as its text (HEX of a number is the
	// number's hexadecimal), a string unchanged. CONVERT(... USING
	// binary), not CAST(... AS BINARY), whose value as a parameter loses
	// its first byte (MariaDB 10.11).
	value := "CONCAT(" + expr + ", '')"
	// The client's expression runs as long as the server lets it
	// (backend.Conn.Run), not under the deadline of the proxy's own
	// commands; KILL reaches it (running).
	c.running.Store(bc)
	res, err := bc.Run("EXECUTE IMMEDIATE 'SELECT HEX(?), ?, @@character_set_connection LIMIT 1' USING CONVERT(" + value +
		" USING binary), CHARSET(" + value + ")")
	c.running.Store(nil)
	if err == nil && len(res.Rows) == 1 && len(res.Rows[0]) == 3 && res.Rows[0][0] != nil {
		if cs := string(res.Rows[0][1]); cs != "binary" && cs != string(res.Rows[0][2]) {
			// The text the proxy reads is the value converted as the
			// server converts it.
			var conv *backend.Result
			conv, err = bc.Exec("SELECT HEX(CONVERT(_" + cs + " X'" + string(res.Rows[0][0]) + "' USING " + string(res.Rows[0][2]) + ")) LIMIT 1")
			if err == nil && len(conv.Rows) == 1 && len(conv.Rows[0]) == 1 {
				res.Rows[0] = append(res.Rows[0], conv.Rows[0][0])
			}
		}
	}
	if err != nil {
		c.st.Release(bc, false, backend.Outcome{})
		var se *mysql.SQLError
		if errors.As(err, &se) && se.Code == mysql.ErSubqueryNotSupportedUsing {
			// The server names the USING it was given; the client's
			// statement has none.
			se.Message = stmtName + " does not support subqueries or stored functions"
		}
		if bc.Broken() {
			return "", "", h.backendLost(bc)
		}
		return "", "", err
	}
	c.st.Release(bc, false, backend.Outcome{OK: true, Status: res.OK.Status})
	if len(res.Rows) != 1 || len(res.Rows[0]) < 3 {
		return "", "", mysql.NewError(mysql.ErOperandColumns, "Operand should contain 1 column(s)")
	}
	row := res.Rows[0]
	hx, cs := row[0], string(row[1])
	if hx == nil {
		return "", "NULL", nil
	}
	readable := hx
	if len(row) > 3 && row[3] != nil {
		readable = row[3]
	}
	v, err := hex.DecodeString(string(readable))
	if err != nil {
		return "", "", fmt.Errorf("EXECUTE IMMEDIATE: the server's HEX() gave %q: %w", readable, err)
	}
	// In hexadecimal whatever the bytes: quoted, they would be read in
	// the connection's character set first (whose multi-byte characters
	// can take in the closing quote).
	return string(v), "_" + cs + " X'" + string(hx) + "'", nil
}

// prepareFromExpr runs PREPARE name FROM expr for an expression other than
// a string literal or a user variable: the expression is evaluated as for
// EXECUTE IMMEDIATE, and the statement runs as PREPARE name FROM the
// literal of its value, so the proxy sees the text like any other (KILL is
// the proxy's, the statement policy applies, sharded tables are routed).
func (l *localStmts) prepareFromExpr(name, expr string) error {
	h := l.h
	c := h.c
	text, lit, err := h.ls.evalString(expr, "PREPARE..FROM")
	if err != nil {
		return err
	}
	if lit != "NULL" {
		stmt := router.Classify(text, h.c.st.Mode())
		if err := h.allowed(text, &stmt); err != nil {
			return err
		}
		if stmt.Kind == router.KindKill || c.srv.rt().Prepared(text, h.routerSession()) != nil {
			// The proxy's own, as for PREPARE FROM a literal.
			if err := c.st.Stmts.SetNamed(name, text); err != nil {
				return err
			}
			return c.writeOK(mysql.OK{Status: c.st.Status, Info: "Statement prepared"})
		}
	}
	c.st.Stmts.DropNamed(name)
	q := "PREPARE " + mysql.QuoteIdent(name) + " FROM " + lit
	h.immediate = true
	defer func() { h.immediate = false }()
	return h.query(append([]byte{mysql.ComQuery}, q...))
}
