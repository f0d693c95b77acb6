package server

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"go.uber.org/zap"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/router"
)

// Session variables travel with the session, not with a connection. A
// SET of session system variables and user variables runs on a pooled
// connection; the proxy then reads the resulting values back and keeps
// them as literals. Before any connection runs a statement for the
// session, syncState brings its variables to the session's with one SET:
// the session's values, DEFAULT for system variables only the connection
// has, NULL for such user variables (MySQL cannot unset a user variable;
// an unset one reads as NULL). So SET costs no pooled connection, and
// nothing one client sets reaches another.

// trackedVar is one variable the session set: its assignment target and
// its value as an SQL literal.
type trackedVar struct {
	target, literal string
}

// setTracked runs a SET statement whose assignments the session tracks.
func (ss *session) setTracked(sql string, vars []router.SetVar) error {
	node, _ := ss.srv.router.DefaultNode(ss.user)
	bc, err := ss.acquire(node, false)
	if err != nil {
		return err
	}
	ss.running.Store(bc)
	res, err := bc.Exec(sql)
	if err == nil {
		err = ss.readBack(bc, vars)
	}
	ss.running.Store(nil)
	if err != nil {
		var se *mysql.SQLError
		if !bc.Broken() && errors.As(err, &se) {
			ss.release(bc, false, result{ok: false, status: ss.status})
			return err
		}
		bc.MarkBroken()
		ss.release(bc, false, result{})
		ss.log.Warn("backend failed during SET", zap.String("node", node), zap.Error(err))
		return ss.backendLost(bc)
	}
	ss.status = res.OK.Status
	ss.release(bc, false, result{ok: true, status: res.OK.Status, warnings: res.OK.Warnings})
	return ss.writeOK(mysql.OK{Status: ss.status, Warnings: res.OK.Warnings})
}

// readBack reads the values a SET left on bc into the session's and the
// connection's variables.
func (ss *session) readBack(bc *backend.Conn, vars []router.SetVar) error {
	targets := make([]string, 0, len(vars))
	for _, v := range vars {
		t := varTarget(v)
		if !slices.Contains(targets, t) {
			targets = append(targets, t)
		}
	}
	res, err := bc.Exec("SELECT " + strings.Join(targets, ", "))
	if err != nil {
		return err
	}
	if len(res.Rows) != 1 || len(res.Rows[0]) != len(targets) {
		return fmt.Errorf("reading back %d session variables: got %d rows", len(targets), len(res.Rows))
	}
	if bc.Vars == nil {
		bc.Vars = make(map[string]string)
	}
	for i, t := range targets {
		lit := literalOf(res.Columns[i], res.Rows[0][i])
		ss.vars = slices.DeleteFunc(ss.vars, func(v trackedVar) bool { return v.target == t })
		if lit == "NULL" && strings.HasPrefix(t, "@`") {
			delete(bc.Vars, t) // a NULL user variable is an unset one
			continue
		}
		ss.vars = append(ss.vars, trackedVar{target: t, literal: lit})
		bc.Vars[t] = lit
	}
	return nil
}

// varTarget is the SQL that names a variable in SET and SELECT.
func varTarget(v router.SetVar) string {
	name := "`" + strings.ReplaceAll(v.Name, "`", "``") + "`"
	if v.User {
		return "@" + name
	}
	return "@@SESSION." + name
}

// literalOf renders a value read back from the server as an SQL literal
// of the same type: numbers as they are, strings in hex with their
// character set, NULL.
func literalOf(c *mysql.Column, v []byte) string {
	if v == nil {
		return "NULL"
	}
	switch c.Type {
	case mysql.TypeTiny, mysql.TypeShort, mysql.TypeLong, mysql.TypeLongLong, mysql.TypeInt24, mysql.TypeYear,
		mysql.TypeDecimal, mysql.TypeNewDecimal, mysql.TypeFloat, mysql.TypeDouble:
		return string(v)
	}
	hex := fmt.Sprintf("X'%x'", v)
	if c.Charset == 63 {
		return hex
	}
	if coll, ok := mysql.CollationByID(byte(c.Charset)); ok && c.Charset < 256 && coll.Charset != "" {
		return "_" + coll.Charset + " " + hex
	}
	return hex
}

// syncVars brings bc's variables to the session's with one SET.
func (ss *session) syncVars(bc *backend.Conn) error {
	var assign []string
	for _, v := range ss.vars {
		if bc.Vars[v.target] != v.literal {
			assign = append(assign, v.target+" = "+v.literal)
		}
	}
	for _, t := range slices.Sorted(maps.Keys(bc.Vars)) {
		if slices.ContainsFunc(ss.vars, func(v trackedVar) bool { return v.target == t }) {
			continue
		}
		if strings.HasPrefix(t, "@`") {
			assign = append(assign, t+" = NULL")
		} else {
			assign = append(assign, t+" = DEFAULT")
		}
	}
	if len(assign) == 0 {
		return nil
	}
	if _, err := bc.Exec("SET " + strings.Join(assign, ", ")); err != nil {
		return fmt.Errorf("bringing session variables to node %s: %w", bc.Node().Name, err)
	}
	bc.Vars = make(map[string]string, len(ss.vars))
	for _, v := range ss.vars {
		bc.Vars[v.target] = v.literal
	}
	return nil
}
