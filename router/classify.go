package router

import (
	"strconv"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/test_driver"
)

func isIdent(c byte) bool {
	return c == '_' || c == '$' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c >= 0x80
}

// firstKeyword skips whitespace, comments and an opening parenthesis, and
// returns the first word in upper case and the text after it. Executable
// comments (/*! ... */, /*M! ... */) are read into, as the server does.
func firstKeyword(s string) (string, string) {
	i := 0
	for i < len(s) {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '(' || c == ';':
			i++
		case c == '#':
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == '-' && i+2 < len(s) && s[i+1] == '-' && (s[i+2] == ' ' || s[i+2] == '\t' || s[i+2] == '\n'):
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == '-' && i+2 == len(s) && s[i+1] == '-':
			i = len(s)
		case c == '/' && i+1 < len(s) && s[i+1] == '*':
			if i+2 < len(s) && (s[i+2] == '!' || (s[i+2] == 'M' && i+3 < len(s) && s[i+3] == '!')) {
				i += 3
				if s[i-1] == 'M' {
					i++
				}
				for i < len(s) && s[i] >= '0' && s[i] <= '9' {
					i++
				}
				continue
			}
			end := strings.Index(s[i+2:], "*/")
			if end < 0 {
				return "", ""
			}
			i += end + 4
		default:
			j := i
			for j < len(s) && isIdent(s[j]) {
				j++
			}
			if j == i {
				return "", s[i:]
			}
			return upperASCII(s[i:j]), s[j:]
		}
	}
	return "", ""
}

func upperASCII(w string) string {
	for i := 0; i < len(w); i++ {
		if w[i] >= 'a' && w[i] <= 'z' {
			return strings.ToUpper(w)
		}
	}
	return w
}

// Kill is a parsed KILL statement.
type Kill struct {
	ID    uint64
	Query bool // KILL QUERY: stop the statement, keep the connection
	// QueryID is KILL QUERY ID: ID (or Expr) names a server's query id
	// (information_schema.PROCESSLIST.QUERY_ID), not a connection.
	QueryID bool
	Self    bool // KILL CONNECTION_ID(): the session's own connection
	// Expr is the id as written when it is not a number: an expression
	// the server evaluates (KILL @id, KILL 1+1, KILL (SELECT ...)).
	Expr string
	// User is the account of KILL ... USER account, as written.
	User string
	// SQL is the statement's text.
	SQL string
}

// ParseKill parses MariaDB's KILL [HARD | SOFT] [CONNECTION | QUERY [ID]]
// expr and KILL [HARD | SOFT] [CONNECTION | QUERY] USER account. ok is
// false when no id or account follows, or for a text that is no KILL.
// After QUERY ID an expression always follows: USER there is a column's
// name, as the server reads it.
func ParseKill(sql string) (Kill, bool) {
	kw, rest := firstKeyword(sql)
	if kw != "KILL" {
		return Kill{}, false
	}
	k := Kill{SQL: sql}
	for {
		w, r := firstKeyword(rest)
		switch w {
		case "HARD", "SOFT", "CONNECTION":
			rest = r
			continue
		case "QUERY":
			k.Query = true
			rest = r
			if w, r := firstKeyword(rest); w == "ID" {
				k.QueryID, rest = true, r
			}
			continue
		}
		break
	}
	t := strings.TrimSpace(strings.TrimRight(strings.TrimSpace(rest), ";"))
	if t == "" {
		return Kill{}, false
	}
	if w, r := firstKeyword(t); w == "USER" && !k.QueryID && t[0] != '(' {
		if k.User = strings.TrimSpace(r); k.User == "" {
			return Kill{}, false
		}
		return k, true
	}
	if u := strings.ToUpper(strings.ReplaceAll(t, " ", "")); u == "CONNECTION_ID()" && !k.QueryID {
		k.Self = true // the session's own connection
		return k, true
	}
	if id, err := strconv.ParseUint(t, 10, 64); err == nil {
		k.ID = id
		return k, true
	}
	k.Expr = t
	return k, true
}

// IsShowProcesslist reports whether sql is SHOW [FULL] PROCESSLIST, which
// the proxy answers itself with its own connection ids.
func IsShowProcesslist(sql string) (full, ok bool) {
	kw, rest := firstKeyword(sql)
	if kw != "SHOW" {
		return false, false
	}
	kw, rest = firstKeyword(rest)
	if kw == "FULL" {
		full = true
		kw, rest = firstKeyword(rest)
	}
	if kw != "PROCESSLIST" {
		return false, false
	}
	if w, _ := firstKeyword(rest); w != "" {
		return false, false
	}
	return full, true
}

// ParseUse parses `USE db` (the name may be quoted with backticks) and
// returns the database name.
func ParseUse(sql string) (string, bool) {
	kw, rest := firstKeyword(sql)
	if kw != "USE" {
		return "", false
	}
	t := strings.TrimSpace(strings.TrimRight(strings.TrimSpace(rest), ";"))
	if len(t) >= 2 && t[0] == '`' && t[len(t)-1] == '`' {
		name := strings.ReplaceAll(t[1:len(t)-1], "``", "`")
		return name, name != ""
	}
	for i := 0; i < len(t); i++ {
		if !isIdent(t[i]) {
			return "", false
		}
	}
	return t, t != ""
}

// SetVar is one assignment of a SET statement whose effect the session
// layer tracks: a session system variable, or a user variable (User).
type SetVar struct {
	Name string // lower case (MySQL compares both kinds case-insensitively)
	User bool
	// Off: the value is a constant that turns a boolean variable off (0,
	// FALSE, OFF, 'OFF'); an expression the proxy does not evaluate is not.
	Off bool
}

// untracked are session variables whose value cannot simply be set again on
// another connection (one-shot or tied to the connection), or that the
// session layer tracks otherwise (character sets, transactions).
var untracked = map[string]bool{
	"insert_id": true, "last_insert_id": true, "identity": true, "rand_seed1": true, "rand_seed2": true,
	"pseudo_thread_id": true, "sql_log_bin": true, "character_set_client": true, "character_set_connection": true,
	"character_set_results": true, "collation_connection": true, "names": true, "character set": true,
	"tx_isolation": true, "transaction_isolation": true, "tx_read_only": true, "transaction_read_only": true,
	"session_track_system_variables": true, "session_track_state_change": true, "session_track_schema": true,
	"session_track_transaction_info": true, "tx_isolation_one_shot": true, "skip_replication": true,
	"gtid_seq_no": true, "gtid_domain_id": true, "server_id": true, "timestamp": true,
	// Profiles are the connection's history: the session keeps it.
	"profiling": true, "profiling_history_size": true,
}

// Carried reports whether a session can carry system variable name (lower
// case) from one pooled connection to another by setting it again.
func Carried(name string) bool { return !untracked[name] }

// ParseSet recognises a SET statement made only of assignments to session
// system variables and user variables that a session can carry from one
// pooled connection to another (see untracked). It returns them in order.
func ParseSet(sql string, mode Mode) ([]SetVar, bool) { return parseSet(sql, mode, false) }

// ParseSetBesideTrackers is ParseSet for a SET that also assigns session
// state trackers (SetsTrackers): it returns the other assignments, which
// the session carries as ParseSet's (none when it assigns only trackers).
func ParseSetBesideTrackers(sql string, mode Mode) ([]SetVar, bool) { return parseSet(sql, mode, true) }

// parseSet is ParseSet's, skipping the session's trackers when
// besideTrackers.
func parseSet(sql string, mode Mode, besideTrackers bool) ([]SetVar, bool) {
	stmts, release, err := parsePooled(sql, mode)
	defer release()
	if err != nil || len(stmts) != 1 {
		return nil, false
	}
	set, ok := stmts[0].(*ast.SetStmt)
	if !ok || len(set.Variables) == 0 {
		return nil, false
	}
	var out []SetVar
	for _, v := range set.Variables {
		name := strings.ToLower(v.Name)
		switch {
		case besideTrackers && v.IsSystem && !v.IsGlobal && !v.IsInstance && IsTracker(name):
			continue
		case v.IsGlobal || v.IsInstance || v.Name == ast.SetNames || v.Name == ast.SetCharset || untracked[name]:
			return nil, false
		case v.IsSystem:
			out = append(out, SetVar{Name: name, Off: isOff(v.Value)})
		default:
			out = append(out, SetVar{Name: strings.ToLower(v.Name), User: true}) // case-insensitive in MySQL
		}
	}
	return out, true
}

// isOff reports whether e is a constant that sets a boolean variable off.
// The parser reads OFF as a column name, ON and 'off' as strings, FALSE
// as 0.
func isOff(e ast.ExprNode) bool {
	switch e := e.(type) {
	case *test_driver.ValueExpr:
		switch v := e.GetValue().(type) {
		case int64:
			return v == 0
		case uint64:
			return v == 0
		case string:
			return strings.EqualFold(v, "off")
		}
	case *ast.ColumnNameExpr:
		return e.Name.Table.L == "" && e.Name.Name.L == "off"
	}
	return false
}

// ParseSetNames recognises SET NAMES charset [COLLATE collation] and SET
// CHARACTER SET charset (which sets the connection's character set to the
// server's, so only NAMES is reported as such). It returns the names as
// written; DEFAULT is not recognised.
func ParseSetNames(sql string, mode Mode) (charset, collation string, ok bool) {
	stmts, release, err := parsePooled(sql, mode)
	defer release()
	if err != nil || len(stmts) != 1 {
		return "", "", false
	}
	set, isSet := stmts[0].(*ast.SetStmt)
	if !isSet || len(set.Variables) != 1 || set.Variables[0].Name != ast.SetNames {
		return "", "", false
	}
	v := set.Variables[0]
	cs, ok := valueString(v.Value)
	if !ok || strings.EqualFold(cs, "default") {
		return "", "", false
	}
	if v.ExtendValue != nil {
		if collation, ok = valueString(v.ExtendValue); !ok {
			return "", "", false
		}
	}
	return cs, collation, true
}

// valueString returns a string literal's value.
func valueString(e ast.Node) (string, bool) {
	x, ok := e.(*test_driver.ValueExpr)
	if !ok || x.Kind() != test_driver.KindString {
		return "", false
	}
	return x.GetString(), true
}

// SQLPrepare is a parsed SQL-level PREPARE, EXECUTE or DEALLOCATE PREPARE.
type SQLPrepare struct {
	Verb string // "PREPARE", "EXECUTE" or "DEALLOCATE"
	Name string // lower case: statement names are case-insensitive
	Text string // PREPARE name FROM 'text' ("" for FROM @variable)
	// FromVar is the user variable of PREPARE name FROM @variable, lower
	// case.
	FromVar string
	// Using are the user variables of EXECUTE ... USING, lower case.
	Using []string
}

// ParseSQLPrepare recognises PREPARE, EXECUTE and DEALLOCATE/DROP PREPARE.
func ParseSQLPrepare(sql string, mode Mode) (SQLPrepare, bool) {
	stmts, release, err := parsePooled(sql, mode)
	defer release()
	if err != nil || len(stmts) != 1 {
		return SQLPrepare{}, false
	}
	switch x := stmts[0].(type) {
	case *ast.PrepareStmt:
		sp := SQLPrepare{Verb: "PREPARE", Name: strings.ToLower(x.Name), Text: x.SQLText}
		if x.SQLVar != nil {
			if x.SQLVar.IsSystem {
				return SQLPrepare{}, false
			}
			sp.FromVar = strings.ToLower(x.SQLVar.Name)
		}
		return sp, true
	case *ast.DeallocateStmt:
		return SQLPrepare{Verb: "DEALLOCATE", Name: strings.ToLower(x.Name)}, true
	case *ast.ExecuteStmt:
		sp := SQLPrepare{Verb: "EXECUTE", Name: strings.ToLower(x.Name)}
		for _, u := range x.UsingVars {
			v, ok := u.(*ast.VariableExpr)
			if !ok || v.IsSystem {
				return SQLPrepare{}, false
			}
			sp.Using = append(sp.Using, strings.ToLower(v.Name))
		}
		return sp, true
	}
	return SQLPrepare{}, false
}

// HasExecutableComment reports whether sql holds an executable comment
// (/*! ... */, /*M! ... */), whose content the server runs but the parser
// the router uses may not see as the server does. The proxy runs such a
// statement only on the session's own connection.
func HasExecutableComment(sql string) bool {
	return strings.Contains(sql, "/*!") || strings.Contains(sql, "/*M!") || strings.Contains(sql, "/*m!")
}

// PrepareFromExpr reads PREPARE name FROM expr, the form whose text is an
// expression (other than a string literal or a user variable, which
// ParseSQLPrepare reads): the statement's name (lower case) and the
// expression's text. ok is false when sql does not have that shape, which
// the server refuses as a syntax error; near is then the text from the
// token where it stops, as its message quotes it. Texts with executable
// comments are the caller's to refuse first.
func PrepareFromExpr(sql string) (name, expr, near string, ok bool) {
	rest0 := strings.TrimRight(strings.TrimSpace(sql), "; \t\r\n")
	nearOf := func(rest string) string { return strings.TrimSpace(rest) }
	kw, rest := firstKeyword(rest0)
	if kw != "PREPARE" {
		return "", "", nearOf(rest0), false
	}
	if t := strings.TrimLeft(rest, " \t\r\n\f"); strings.HasPrefix(t, "`") {
		end := scanQuoted(t, 0, '`')
		if end <= 1 {
			return "", "", nearOf(t), false
		}
		name, rest = strings.ReplaceAll(t[1:end-1], "``", "`"), t[end:]
	} else {
		w, r := firstKeyword(rest)
		if w == "" || w == "FROM" {
			return "", "", nearOf(rest), false
		}
		name, rest = w, r
	}
	kw, r := firstKeyword(rest)
	if kw != "FROM" {
		return "", "", nearOf(rest), false
	}
	expr = strings.TrimSpace(r)
	if expr == "" {
		return "", "", "", false
	}
	return strings.ToLower(name), expr, "", true
}
