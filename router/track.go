package router

import (
	"strings"

	"github.com/shardgate/shardgate/mysql"

	"github.com/pingcap/tidb/pkg/parser/ast"
)

// SetsTrackers recognises a SET that assigns the session's own session
// state trackers (session_track_system_variables, session_track_schema,
// session_track_state_change, session_track_transaction_info): any is
// set when one of its assignments does, only when all of them do. The
// proxy keeps every tracker of its backend connections on for itself; the
// client's trackers are the session's, and a SET of them is the proxy's
// to answer.
func SetsTrackers(sql string, mode Mode) (only, any bool) {
	stmts, release, err := parsePooled(sql, mode)
	defer release()
	if err != nil || len(stmts) != 1 {
		return false, false
	}
	set, ok := stmts[0].(*ast.SetStmt)
	if !ok || len(set.Variables) == 0 {
		return false, false
	}
	only = true
	for _, v := range set.Variables {
		if v.IsSystem && !v.IsGlobal && !v.IsInstance && IsTracker(strings.ToLower(v.Name)) {
			any = true
		} else {
			only = false
		}
	}
	return only && any, any
}

// StatementSetsTrackers recognises SET STATEMENT assignments FOR
// statement (MariaDB's per-statement variables) whose assignments set
// one of the session's trackers: for that statement, the client's
// trackers are what it says, which the proxy's connections do not have.
func StatementSetsTrackers(sql string, mode Mode) bool {
	toks, ok := lexTokens(sql, mode)
	if !ok || len(toks) < 4 {
		return false
	}
	word := func(k int) string { return sql[toks[k].start:toks[k].end] }
	if toks[0].kind != 'w' || !equalFoldASCII(word(0), "SET") || toks[1].kind != 'w' || !equalFoldASCII(word(1), "STATEMENT") {
		return false
	}
	depth := 0
	for k := 2; k < len(toks); k++ {
		w := word(k)
		switch {
		case w == "(":
			depth++
		case w == ")":
			depth--
		case depth != 0:
		case toks[k].kind == 'w' && equalFoldASCII(w, "FOR"):
			return false
		case k == 2 || word(k-1) == ",":
			// An assignment's variable: name, @@name or @@session.name.
			name := w
			if toks[k].kind == 'v' {
				if len(name) < 3 || name[:2] != "@@" {
					continue
				}
				name = name[2:]
				if i := strings.IndexByte(name, '.'); i >= 0 {
					if scope := strings.ToLower(name[:i]); scope != "session" && scope != "local" {
						continue
					}
					name = name[i+1:]
				}
			} else if toks[k].kind != 'w' {
				continue
			}
			if IsTracker(strings.ToLower(name)) {
				return true
			}
		}
	}
	return false
}

// IsTracker reports whether name (lower case) is one of the session
// state trackers' variables.
func IsTracker(name string) bool {
	switch name {
	case "session_track_system_variables", "session_track_schema", "session_track_state_change", "session_track_transaction_info":
		return true
	}
	return false
}

// BindTrackers returns sql with its reads of the session's trackers
// (@@session_track_x, @@SESSION.session_track_x, @@LOCAL.session_track_x;
// not @@GLOBAL, and not the target of an assignment) replaced by value's
// literal for the variable (lower case name); a read that is a select
// list item of its own is named as written, as the server names it. ok is
// false when the text cannot be read (an unterminated comment).
func BindTrackers(sql string, mode Mode, value func(name string) string) (string, bool) {
	toks, ok := lexTokens(sql, mode)
	if !ok {
		return sql, false
	}
	var b strings.Builder
	last := 0
	inList := false
	for k, t := range toks {
		w := sql[t.start:t.end]
		switch {
		case k == 0 && t.kind == 'w' && equalFoldASCII(w, "SELECT"):
			inList = true
		case inList && t.kind == 'w' && endsSelectList(w):
			inList = false
		}
		if t.kind != 'v' || !strings.HasPrefix(w, "@@") {
			continue
		}
		name := strings.ToLower(w[2:])
		if i := strings.IndexByte(name, '.'); i >= 0 {
			if scope := name[:i]; scope != "session" && scope != "local" {
				continue
			}
			name = name[i+1:]
		}
		if !IsTracker(name) {
			continue
		}
		next := func(j int) string {
			if k+j < len(toks) {
				return sql[toks[k+j].start:toks[k+j].end]
			}
			return ""
		}
		if next(1) == "=" || next(1) == ":" && next(2) == "=" {
			continue // assigned, not read
		}
		b.WriteString(sql[last:t.start])
		b.WriteString(value(name))
		last = t.end
		prev := ""
		if k > 0 {
			prev = sql[toks[k-1].start:toks[k-1].end]
		}
		n := next(1)
		alone := inList && (prev == "," || equalFoldASCII(prev, "SELECT") || selectModifier(prev)) &&
			(n == "" || n == "," || n == ";" || k+1 < len(toks) && toks[k+1].kind == 'w' && endsSelectList(n))
		if alone {
			b.WriteString(" AS ")
			b.WriteString(mysql.QuoteIdent(w))
		}
	}
	b.WriteString(sql[last:])
	return b.String(), true
}
