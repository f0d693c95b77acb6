package server

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/router"
)

// KILL of an expression and KILL QUERY ID: the id is evaluated as the
// server evaluates it, then names a proxy session (processlist.go) or, for
// a query id, the session running that query on a backend.

// kill runs a KILL statement parsed by router.ParseKill, whatever route it
// came by (a query, EXECUTE IMMEDIATE, a prepared statement).
func (l *localStmts) kill(k router.Kill) error {
	c := l.h.c
	if k.Expr != "" {
		id, err := l.evalKillID(k.Expr, k.SQL)
		if err != nil {
			return err
		}
		k.ID, k.Expr = id, ""
	}
	if k.QueryID {
		return c.srv.killQueryID(c, k)
	}
	return c.srv.kill(c, k)
}

// evalKillID evaluates the id of KILL expr on the session's connection to
// the default node, with the session's variables, as the server's KILL
// does: the integer value (val_int: NULL and strings that are no number
// are 0, a negative number is read unsigned), and an expression that
// reads a table (a sequence too) or calls a stored function is refused
// with 1970, while a subquery without tables is taken. SET STATEMENT makes
// the same check as KILL (LEX::table_or_sp_used) and evaluates the value
// once; default_master_connection is a session string any value fits.
// The server's messages name its statement ('SET', 'SET STATEMENT'); the
// client's is KILL. A syntax error is the server's for the KILL itself,
// sql (serverParse).
func (l *localStmts) evalKillID(expr, sql string) (uint64, error) {
	h := l.h
	c := h.c
	node, _ := c.srv.rt().DefaultNode(c.user)
	bc, err := c.st.Acquire(node, false)
	if err != nil {
		return 0, err
	}
	q := "SET STATEMENT default_master_connection = CAST(IFNULL(CAST((" + expr +
		"\n) AS SIGNED), 0) AS CHAR) FOR SELECT @@default_master_connection"
	res, err := bc.Run(q)
	if err != nil {
		var se *mysql.SQLError
		if errors.As(err, &se) && se.Code == mysql.ErSyntax {
			err = serverParse(bc, sql, mysql.NewError(mysql.ErNotSupported, "KILL with a placeholder is not supported by shardgate: write the id in the statement"))
		}
		c.st.Release(bc, false, backend.Outcome{})
		if bc.Broken() {
			return 0, h.backendLost(bc)
		}
		if errors.As(err, &se) {
			if se.Code == mysql.ErSubqueryNotSupportedUsing {
				se.Message = "KILL does not support subqueries or stored functions"
			} else if m, where := se.Message, " in 'SET'"; len(m) > len(where) && m[len(m)-len(where):] == where {
				// The server's message (1054), not SQL text.
				se.Message = m[:len(m)-len(where)] + " in 'KILL'"
			}
		}
		return 0, err
	}
	c.st.Release(bc, false, backend.Outcome{OK: true, Status: res.OK.Status})
	if len(res.Rows) != 1 || len(res.Rows[0]) != 1 {
		return 0, mysql.NewError(mysql.ErOperandColumns, "Operand should contain 1 column(s)")
	}
	v, err := strconv.ParseInt(string(res.Rows[0][0]), 10, 64)
	if err != nil {
		return 0, err
	}
	return uint64(v), nil
}

// serverParse returns the server's error for the text sql, which the
// server parses (PREPARE) without running it, and refused when it parses:
// the text is then one the proxy does not run (a KILL whose expression it
// cannot evaluate alone, a text with an executable comment).
func serverParse(bc *backend.Conn, sql string, refused error) error {
	const name = "`shardgate_parse_check`"
	if _, err := bc.Exec("PREPARE " + name + " FROM " + mysql.QuoteString(sql, "")); err != nil {
		return err
	}
	if _, err := bc.Exec("DEALLOCATE PREPARE " + name); err != nil {
		return err
	}
	return refused
}

// killQueryID runs KILL [HARD | SOFT] QUERY ID n: n is a query id of one
// of the nodes' servers. The query of a session of the killer's account
// stops as KILL QUERY of that session would stop it; another account's
// session is refused (1979) unless it logged in with its own MariaDB
// account, whose privileges the server then checks, as it does for a
// thread that is no session's. A query of the proxy's pooled connections
// is unknown (1957), as their threads are.
func (r *registry) killQueryID(c *conn, k router.Kill) error {
	n, thread := r.queryThread(k.ID, c.act.owner())
	if n == nil {
		return mysql.NewError(mysql.ErUnknownQuery, "Unknown query id: %d", k.ID)
	}
	target := r.sessionRunning(thread, c.act.owner())
	if target == nil {
		target = r.sessionRunning(thread, "")
	}
	switch {
	case target != nil && target.act.owner() == c.act.owner():
		return r.killSession(c, target, router.Kill{ID: uint64(thread), Query: true})
	case target != nil && target.st.Dedicated() == nil:
		return mysql.NewError(mysql.ErKillQueryDenied, "You are not owner of query %d", k.ID)
	case target == nil && n.HasThread(thread):
		return mysql.NewError(mysql.ErUnknownQuery, "Unknown query id: %d", k.ID)
	}
	kc, done, err := killerConn(c, n)
	if err != nil {
		return err
	}
	defer done()
	if _, err := kc.Exec("KILL QUERY ID " + strconv.FormatUint(k.ID, 10)); err != nil {
		return err
	}
	return c.okStatus()
}

// queryThread finds the node and thread running (or that last ran) query
// id on its server, looking at every node's server from a connection of
// its own; two servers may both know id: a thread a session of user holds
// is taken first. n is nil when no server knows id.
func (r *registry) queryThread(id uint64, user string) (n *backend.Node, thread uint32) {
	q := "SELECT ID FROM information_schema.PROCESSLIST WHERE QUERY_ID = " + strconv.FormatUint(id, 10) +
		" AND COMMAND <> 'Daemon' AND ID <> CONNECTION_ID()"
	for _, node := range r.conf.nodeMap() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		kc, err := node.Dial(ctx)
		cancel()
		if err != nil {
			continue
		}
		res, err := kc.Exec(q)
		kc.Close()
		if err != nil {
			continue
		}
		for _, row := range res.Rows {
			t, err := strconv.ParseUint(string(row[0]), 10, 32)
			if err != nil {
				continue
			}
			if n == nil || r.sessionRunning(uint32(t), user) != nil {
				n, thread = node, uint32(t)
			}
		}
	}
	return n, thread
}

// sessionRunning returns the session of user (any user when "") that
// holds or runs a statement on the backend connection whose thread id is
// thread, if any.
func (r *registry) sessionRunning(thread uint32, user string) *conn {
	for _, s := range r.list() {
		if user != "" && s.act.owner() != user {
			continue
		}
		if s.holds(uint64(thread)) {
			return s
		}
		if bc := s.running.Load(); bc != nil && bc.ThreadID == thread {
			return s
		}
		if many := s.runningMany.Load(); many != nil {
			for _, bc := range *many {
				if bc.ThreadID == thread {
					return s
				}
			}
		}
	}
	return nil
}
