package session

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/router"
)

// Session variables travel with the session, not with a connection. A
// SET of session system variables and user variables runs on a pooled
// connection; the proxy then reads the resulting values back (ReadBack)
// and keeps them as literals. Before any connection runs a statement for
// the session, Acquire brings its variables to the session's with one
// SET: the session's values, DEFAULT for system variables only the
// connection has, NULL for such user variables (MySQL cannot unset a user
// variable; an unset one reads as NULL). So SET costs no pooled
// connection, and nothing one client sets reaches another.

// varState is what the session carries to every connection it uses: the
// variables the client set, and the settings the proxy itself acts on
// (wait_timeout, completion_type). It is part of State (embedded).
type varState struct {
	s *State
	// vars are the session and user variables the client set, carried to
	// every connection the session uses (see vars.go).
	vars []trackedVar
	// WaitTimeout is the session's wait_timeout once the client set it
	// (0: not set, the server's default applies): the proxy closes the
	// client's connection after that long without a command, as the
	// server would.
	WaitTimeout time.Duration
	// CompletionType is the session's completion_type: 0 (NO_CHAIN), 1
	// (CHAIN) or 2 (RELEASE).
	CompletionType int
	// divPrec is the session's div_precision_increment plus one (0: not
	// set, the server's default), for the merges that divide.
	divPrec int
	// setUsers are the user variables the statement under way assigns
	// when it is a SET the backend runs as the client sent it (a binary
	// SET @k = ?, which the backend keeps): they are read back by name,
	// without a table, when the statement's response carries warnings
	// (readUserVars cannot list them then).
	setUsers []router.SetVar
}

// RunningSet notes, before the backend runs a statement the session does
// not parse itself (an execution of a prepared statement the backend
// keeps), the user variables it assigns when it is a SET of variables
// (none when it is not); DoneSet forgets them.
func (vs *varState) RunningSet(sql string) {
	s := vs.s
	vs.setUsers = vs.setUsers[:0]
	st := router.Classify(sql, s.Mode())
	if st.Keyword != "SET" || st.Effects || st.Multi || st.CallsRoutine {
		return
	}
	vars, ok := router.ParseSet(sql, s.Mode())
	if !ok {
		return
	}
	for _, v := range vars {
		if v.User {
			vs.setUsers = append(vs.setUsers, v)
		}
	}
}

// DoneSet ends what RunningSet noted.
func (vs *varState) DoneSet() { vs.setUsers = vs.setUsers[:0] }

// DivPrecision returns the session's div_precision_increment, when the
// client set it (ok false: the server's default).
func (vs *varState) DivPrecision() (n int, ok bool) { return vs.divPrec - 1, vs.divPrec > 0 }

// setDivPrecision records the session's div_precision_increment.
func (vs *varState) setDivPrecision(v string) {
	if n, err := strconv.ParseUint(v, 10, 8); err == nil {
		vs.divPrec = int(n) + 1
	}
}

// trackedVar is one variable the session set: its assignment target and
// its value as an SQL literal.
type trackedVar struct {
	target, literal string
}

// ReadBack reads the values a SET of vars left on bc into the session's
// and the connection's variables.
func (vs *varState) ReadBack(bc *backend.Conn, vars []router.SetVar) error {
	s := vs.s
	targets := make([]string, 0, len(vars))
	for _, v := range vars {
		t := varTarget(v)
		if !slices.Contains(targets, t) {
			targets = append(targets, t)
		}
	}
	// A user variable is read with its bytes in hexadecimal, its
	// character set and collation: the value column alone arrives
	// converted to character_set_results.
	cols := make([]string, 0, len(targets))
	for _, t := range targets {
		cols = append(cols, t)
		if strings.HasPrefix(t, "@`") {
			cols = append(cols, "HEX("+t+")", "CHARSET("+t+")", "COLLATION("+t+")")
		}
	}
	// LIMIT 1: the session's sql_select_limit (0, say) must not hide the row.
	res, err := s.ownExec(bc, "SELECT "+strings.Join(cols, ", ")+" LIMIT 1")
	if err != nil {
		return err
	}
	if len(res.Rows) != 1 || len(res.Rows[0]) != len(cols) {
		return fmt.Errorf("reading back %d session variables: got %d rows", len(targets), len(res.Rows))
	}
	if bc.Vars == nil {
		bc.Vars = make(map[string]string)
	}
	col := 0
	for _, t := range targets {
		i := col
		col++
		lit := literalOf(res.Columns[i], res.Rows[0][i])
		if strings.HasPrefix(t, "@`") {
			row := res.Rows[0]
			lit = userLiteral(res.Columns[i], row[i], row[i+1], row[i+2], row[i+3])
			col += 3
		}
		switch t {
		case "@@SESSION.`sql_mode`":
			s.mode = router.ParseMode(string(res.Rows[0][i]))
		case "@@SESSION.`wait_timeout`":
			s.setWaitTimeout(string(res.Rows[0][i]))
		case "@@SESSION.`completion_type`":
			s.setCompletionType(string(res.Rows[0][i]))
		case "@@SESSION.`div_precision_increment`":
			s.setDivPrecision(string(res.Rows[0][i]))
		}
		s.vars = slices.DeleteFunc(s.vars, func(v trackedVar) bool { return v.target == t })
		if lit == "NULL" && strings.HasPrefix(t, "@`") {
			delete(bc.Vars, t) // a NULL user variable is an unset one
			continue
		}
		s.vars = append(s.vars, trackedVar{target: t, literal: lit})
		bc.Vars[t] = lit
	}
	return nil
}

// CheckCarry sets the session's variables on bc again, from the values
// read back: a value the server reads out but does not take back (some
// variables read 'DEFAULT' or a form they refuse) cannot travel to another
// connection. On error the caller keeps bc for the session.
func (vs *varState) CheckCarry(bc *backend.Conn, vars []router.SetVar) error {
	s := vs.s
	var assign []string
	for _, v := range vars {
		t := varTarget(v)
		for _, tv := range s.vars {
			if tv.target == t && !slices.Contains(assign, t+" = "+tv.literal) {
				assign = append(assign, t+" = "+tv.literal)
			}
		}
	}
	if len(assign) == 0 {
		return nil
	}
	_, err := s.ownExec(bc, "SET "+strings.Join(assign, ", "))
	return err
}

// UserVar returns user variable name's value as an SQL literal (NULL when
// the session has not set it).
func (vs *varState) UserVar(name string) string {
	s := vs.s
	target := "@" + mysql.QuoteIdent(name)
	if s.varsUnknown && len(s.varsHomes) == 1 {
		// The variables may have changed on that node's connection
		// where the proxy could not read them back (a statement whose
		// warnings a read of the list would have cleared): the value is
		// read there, by name and without a table, so the warnings stay.
		if bc := s.pinnedOn(s.node(s.varsHomes[0])); bc != nil && !bc.Broken() {
			if err := vs.ReadBack(bc, []router.SetVar{{Name: name, User: true}}); err != nil {
				bc.MarkBroken()
			}
		}
	}
	for _, v := range s.vars {
		if v.target == target {
			return v.literal
		}
	}
	return "NULL"
}

// varTarget is the SQL that names a variable in SET and SELECT.
func varTarget(v router.SetVar) string {
	name := mysql.QuoteIdent(v.Name)
	if v.User {
		return "@" + name
	}
	return "@@SESSION." + name
}

// userLiteral renders a user variable read back as an SQL literal that
// gives it the same type, bytes, character set and collation: numbers as
// literalOf renders them, strings as _charset X'..' COLLATE collation,
// geometries (SRID and WKB) through ST_GeomFromWKB.
func userLiteral(c *mysql.Column, v, hx, cs, coll []byte) string {
	if v == nil {
		return "NULL"
	}
	switch c.Type {
	case mysql.TypeTiny, mysql.TypeShort, mysql.TypeLong, mysql.TypeLongLong, mysql.TypeInt24, mysql.TypeYear,
		mysql.TypeDecimal, mysql.TypeNewDecimal, mysql.TypeFloat, mysql.TypeDouble:
		return literalOf(c, v)
	case mysql.TypeGeometry:
		if raw, err := hex.DecodeString(string(hx)); err == nil && len(raw) > 4 {
			srid := uint32(raw[0]) | uint32(raw[1])<<8 | uint32(raw[2])<<16 | uint32(raw[3])<<24
			return fmt.Sprintf("ST_GeomFromWKB(X'%X', %d)", raw[4:], srid)
		}
	}
	if len(cs) == 0 || len(coll) == 0 {
		return literalOf(c, v)
	}
	if string(cs) == "binary" {
		// MariaDB's grammar has no COLLATE binary (a keyword there):
		// the binary string has no other collation.
		return "_binary X'" + string(hx) + "'"
	}
	return "_" + string(cs) + " X'" + string(hx) + "' COLLATE " + string(coll)
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
		mysql.TypeDecimal, mysql.TypeNewDecimal:
		return string(v)
	case mysql.TypeFloat, mysql.TypeDouble:
		// An exponent keeps the value a DOUBLE: "1" would make a user
		// variable set to SQRT(1) an integer on the next connection.
		if bytes.ContainsAny(v, "eE") {
			return string(v)
		}
		return string(v) + "E0"
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
func (vs *varState) syncVars(bc *backend.Conn) error {
	s := vs.s
	var assign []string
	for _, v := range s.vars {
		if bc.Vars[v.target] != v.literal {
			assign = append(assign, v.target+" = "+v.literal)
		}
	}
	for _, t := range slices.Sorted(maps.Keys(bc.Vars)) {
		if slices.ContainsFunc(s.vars, func(v trackedVar) bool { return v.target == t }) {
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
	if _, err := s.ownExec(bc, "SET "+strings.Join(assign, ", ")); err != nil {
		return fmt.Errorf("bringing session variables to node %s: %w", bc.Node().Name, err)
	}
	bc.Vars = make(map[string]string, len(s.vars))
	for _, v := range s.vars {
		bc.Vars[v.target] = v.literal
	}
	return nil
}

// setWaitTimeout records the session's wait_timeout, in seconds as the
// server reports it.
func (vs *varState) setWaitTimeout(v string) {
	s := vs.s
	if n, err := strconv.ParseUint(v, 10, 32); err == nil {
		s.WaitTimeout = time.Duration(n) * time.Second
	}
}

// setCompletionType records the session's completion_type as the server
// reports it (a name or its number).
func (vs *varState) setCompletionType(v string) {
	s := vs.s
	switch strings.ToUpper(v) {
	case "NO_CHAIN", "0":
		s.CompletionType = 0
	case "CHAIN", "1":
		s.CompletionType = 1
	case "RELEASE", "2":
		s.CompletionType = 2
	}
}
