package router

import (
	"slices"
	"strconv"
	"strings"

	"github.com/shardgate/shardgate/mysql"
)

// ROW_COUNT() and FOUND_ROWS() return what the connection's previous
// statement left: its affected rows (-1 after a result set or an error)
// and the rows of its last result set. A session's statements run on
// pooled connections, several nodes and the proxy itself, so the
// connection's values are not the session's: BindCounts replaces the
// calls with the session's values before the statement runs, and keeps
// the column name a select-list item without an alias would have had
// (its text as written, as MariaDB names it).

// lexTok is one token of a statement's text, for the rewrites that need
// positions (BindCounts).
type lexTok struct {
	start, end int
	kind       byte // 'w' word, 'q' quoted name, 's' string, 'v' variable, 'p' punctuation
}

// lexTokens splits sql into tokens, skipping whitespace and comments, and
// reading into executable comments as the server does (their markers are
// no tokens). ok is false for a text with an unterminated comment.
func lexTokens(sql string, mode Mode) (toks []lexTok, ok bool) {
	sc := stmtScanner{s: sql, mode: mode}
	s := sql
	inExecutable := 0
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case isSpace(c):
			i++
		case c == '/' && i+2 < len(s) && s[i+1] == '*' && (s[i+2] == '!' || (s[i+2] == 'M' || s[i+2] == 'm') && i+3 < len(s) && s[i+3] == '!'):
			// An executable comment: its content is read as the server
			// reads it (the markers are no tokens).
			i += 3
			if s[i-1] != '!' {
				i++
			}
			for i < len(s) && isDigit(s[i]) {
				i++
			}
			inExecutable++
		case c == '*' && inExecutable > 0 && i+1 < len(s) && s[i+1] == '/':
			inExecutable--
			i += 2
		case c == '#' || c == '-' && lineComment(s, i):
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == '/' && i+1 < len(s) && s[i+1] == '*':
			_, end, _ := plainComment(s, i)
			if end < 0 {
				return nil, false
			}
			i = end
		case c == '\'' || c == '"':
			sc.i = i
			end := sc.skipString(c)
			toks = append(toks, lexTok{i, end, 's'})
			i = end
		case c == '`':
			end := scanQuoted(s, i, '`')
			if end < 0 {
				return nil, false
			}
			toks = append(toks, lexTok{i, end, 'q'})
			i = end
		case c == '@':
			j := i + 1
			if j < len(s) && s[j] == '@' {
				j++
			}
			switch {
			case j < len(s) && (s[j] == '\'' || s[j] == '"'):
				sc.i = j
				j = sc.skipString(s[j])
			case j < len(s) && s[j] == '`':
				if j = scanQuoted(s, j, '`'); j < 0 {
					return nil, false
				}
			}
			for j < len(s) && (isIdent(s[j]) || s[j] == '.') {
				j++
			}
			toks = append(toks, lexTok{i, j, 'v'})
			i = j
		case isIdent(c):
			j := i
			for j < len(s) && isIdent(s[j]) {
				j++
			}
			toks = append(toks, lexTok{i, j, 'w'})
			i = j
		default:
			toks = append(toks, lexTok{i, i + 1, 'p'})
			i++
		}
	}
	return toks, true
}

// BindCounts returns sql with its calls of ROW_COUNT() and FOUND_ROWS()
// replaced by rowCount and foundRows; ok is false when it cannot be done
// safely (an executable comment: the caller runs the statement as it is).
func BindCounts(sql string, mode Mode, rowCount int64, foundRows uint64) (string, bool) {
	toks, ok := lexTokens(sql, mode)
	if !ok {
		return sql, false
	}
	var b strings.Builder
	last := 0
	itemStart, depth, inList := -1, 0, false
	itemCalls, itemAlias := false, false
	endItem := func(end int) {
		if itemCalls && !itemAlias && itemStart >= 0 {
			b.WriteString(sql[last:end])
			b.WriteString(" AS ")
			b.WriteString(mysql.QuoteIdent(strings.TrimSpace(sql[itemStart:end])))
			last = end
		}
		itemCalls, itemAlias = false, false
	}
	for k := 0; k < len(toks); k++ {
		t := toks[k]
		w := sql[t.start:t.end]
		switch {
		case k == 0 && t.kind == 'w' && equalFoldASCII(w, "SELECT"):
			inList = true
			continue
		case inList && depth == 0 && t.kind == 'w' && itemStart < 0 && selectModifier(w):
			continue
		case inList && depth == 0 && t.kind == 'w' && endsSelectList(w):
			endItem(toks[k-1].end)
			inList = false
		case inList && depth == 0 && t.kind == 'p' && (w == "," || w == ";"):
			endItem(toks[k-1].end)
			itemStart = -1
			if w == ";" {
				inList = false
			}
			continue
		case t.kind == 'p' && w == "(":
			depth++
		case t.kind == 'p' && w == ")":
			depth--
		}
		if inList && itemStart < 0 {
			itemStart = t.start
		}
		if inList && depth == 0 && t.kind == 'w' && equalFoldASCII(w, "AS") {
			itemAlias = true
		}
		if inList && depth == 0 && k > 0 && (t.kind == 'w' || t.kind == 'q' || t.kind == 's') && aliasAfter(sql, toks[k-1]) && !notRoutine(w) {
			itemAlias = true // expr alias, without AS
		}
		if t.kind != 'w' || k+2 >= len(toks) || sql[toks[k+1].start:toks[k+1].end] != "(" || sql[toks[k+2].start:toks[k+2].end] != ")" {
			continue
		}
		if k > 0 && sql[toks[k-1].start:toks[k-1].end] == "." {
			continue
		}
		var lit string
		switch {
		case equalFoldASCII(w, "ROW_COUNT"):
			lit = countLiteral(strconv.FormatInt(rowCount, 10))
		case equalFoldASCII(w, "FOUND_ROWS"):
			lit = countLiteral(strconv.FormatUint(foundRows, 10))
		default:
			continue
		}
		// In the select list, the item's name is its text as written:
		// endItem appends it as the alias.
		itemCalls = itemCalls || inList
		b.WriteString(sql[last:t.start])
		b.WriteString(lit)
		last = toks[k+2].end
		k += 2
	}
	if inList && len(toks) > 0 {
		end := len(toks) - 1
		if sql[toks[end].start:toks[end].end] == ";" && end > 0 {
			end--
		}
		endItem(toks[end].end)
	}
	b.WriteString(sql[last:])
	return b.String(), true
}

// countLiteral is n typed as ROW_COUNT() and FOUND_ROWS() are: BIGINT,
// length 21, NOT NULL (the column definition a client sees).
func countLiteral(n string) string {
	return "CAST(CAST(" + n + " AS DECIMAL(20)) AS SIGNED)"
}

// aliasAfter reports whether a name after token prev is an alias: it
// follows the end of an expression (')', a name, a number, a string).
func aliasAfter(sql string, prev lexTok) bool {
	switch prev.kind {
	case 'p':
		return sql[prev.start:prev.end] == ")"
	case 'q', 's':
		return true
	case 'w':
		w := sql[prev.start:prev.end]
		return isDigit(w[0]) || !notRoutine(w)
	}
	return false
}

// selectModifier reports whether w is one of the words that may stand
// between SELECT and its first item.
func selectModifier(w string) bool {
	switch strings.ToUpper(w) {
	case "ALL", "DISTINCT", "DISTINCTROW", "HIGH_PRIORITY", "STRAIGHT_JOIN", "SQL_SMALL_RESULT", "SQL_BIG_RESULT",
		"SQL_BUFFER_RESULT", "SQL_CACHE", "SQL_NO_CACHE", "SQL_CALC_FOUND_ROWS":
		return true
	}
	return false
}

// endsSelectList reports whether w, outside parentheses, ends a select
// list.
func endsSelectList(w string) bool {
	switch strings.ToUpper(w) {
	case "FROM", "INTO", "WHERE", "GROUP", "HAVING", "ORDER", "LIMIT", "UNION", "EXCEPT", "INTERSECT", "FOR", "LOCK",
		"WINDOW", "PROCEDURE", "OFFSET", "FETCH":
		return true
	}
	return false
}

// splitIntoVars cuts the INTO @a, @b ... clause out of a SELECT (the
// parser reads INTO only for files): it returns the statement without it
// and the clause, followed by a space when more of the statement came
// after it (withIntoVars puts it back before FROM). ok is false when
// there is none.
func splitIntoVars(sql string, mode Mode) (rest, into string, ok bool) {
	start, end, ok := intoSpan(sql, mode)
	if !ok {
		return "", "", false
	}
	into = sql[start:end]
	if toks, _ := lexTokens(sql[end:], mode); len(toks) > 0 && sql[end+toks[0].start:end+toks[0].end] != ";" {
		into += " "
	}
	return sql[:start] + sql[end:], into, true
}

// intoSpan finds the INTO @a, @b ... clause of a SELECT: sql[start:end].
func intoSpan(sql string, mode Mode) (start, end int, ok bool) {
	if strings.IndexByte(sql, '@') < 0 {
		return 0, 0, false
	}
	toks, ok := lexTokens(sql, mode)
	if !ok || len(toks) == 0 || !equalFoldASCII(sql[toks[0].start:toks[0].end], "SELECT") {
		return 0, 0, false
	}
	depth := 0
	for k, t := range toks {
		w := sql[t.start:t.end]
		switch {
		case w == "(":
			depth++
		case w == ")":
			depth--
		case depth == 0 && t.kind == 'w' && equalFoldASCII(w, "INTO") && k+1 < len(toks) && toks[k+1].kind == 'v':
			last := k + 1
			for last+2 < len(toks) && sql[toks[last+1].start:toks[last+1].end] == "," && toks[last+2].kind == 'v' {
				last += 2
			}
			return t.start, toks[last].end, true
		}
	}
	return 0, 0, false
}

// withIntoVars puts an INTO @variables clause cut out by splitIntoVars
// back into the plan of the statement without it: at the end of the one
// target's statement (MariaDB reads INTO there too). Over several targets
// each shard would assign its own row: a Concat or Fallback plan keeps the
// clause in Into for the caller, which assigns the row it computes.
func withIntoVars(p *Plan, into string) (*Plan, error) {
	if (p.Kind == Concat || p.Kind == Fallback) && !slices.ContainsFunc(p.Targets, func(t Target) bool { return t.SQL == "" }) {
		q := *p
		q.Into, q.IntoAtEnd = strings.TrimSpace(into), !strings.HasSuffix(into, " ")
		return &q, nil
	}
	if p.Kind != Forward || len(p.Targets) != 1 {
		return nil, mysql.NewError(mysql.ErNotSupported, "SELECT ... %s over several shards is not supported by shardgate for this statement: select the row, then SET the variables", strings.TrimSpace(into))
	}
	q := *p
	t := q.Targets[0]
	if t.SQL == "" {
		return p, nil // the client's text goes as it is, INTO included
	}
	t.SQL = putInto(t.SQL, into)
	q.Targets = []Target{t}
	return &q, nil
}

// putInto puts an INTO clause into the SELECT sql where the client had
// it: before the first FROM outside parentheses when it stood before
// more of the statement (into ends with a space), at the end otherwise
// (where MariaDB warns that the form is deprecated, as it would have
// warned the client).
func putInto(sql, into string) string {
	if strings.HasSuffix(into, " ") {
		if toks, ok := lexTokens(sql, 0); ok {
			depth := 0
			for _, t := range toks {
				w := sql[t.start:t.end]
				switch {
				case w == "(":
					depth++
				case w == ")":
					depth--
				case depth == 0 && t.kind == 'w' && equalFoldASCII(w, "FROM"):
					return sql[:t.start] + into + sql[t.start:]
				}
			}
		}
	}
	return strings.TrimRight(sql, " \t\r\n;") + " " + strings.TrimSpace(into)
}
