package router

import "strings"

// DenyStoredProgram is the policy kind of stored programs (procedures,
// functions, triggers, events, packages) whose body holds a statement the
// policy refuses, a KILL, or dynamic SQL. A stored program runs with the
// rights of the proxy's backend account, which every client shares: a
// procedure could otherwise KILL another client's backend thread (the
// account may kill its own threads) or run what the policy refuses
// outside it, and dynamic SQL (PREPARE, EXECUTE IMMEDIATE) could build
// any of those from strings no check can read.
const DenyStoredProgram = "stored_program"

// programKind returns DenyStoredProgram for a CREATE or ALTER of a stored
// program whose body has such a statement, "" otherwise. The body is read
// word by word (strings, names in backquotes and comments skipped, the
// content of executable comments kept), in both readings of a backslash
// in a string (sql_mode NO_BACKSLASH_ESCAPES or not), so no spelling of a
// string hides a word from the check. A word of these kinds used as an
// unquoted name refuses the program too; quote it.
//
// In a text of several statements, each CREATE or ALTER that starts one
// is checked with everything after it: a program's body has semicolons of
// its own.
func programKind(sql string) string {
	for _, escapes := range []bool{true, false} {
		words := sqlWords(sql, escapes)
		for j, w := range words {
			if (w == "CREATE" || w == "ALTER") && (j == 0 || words[j-1] == ";") &&
				isProgramDDL(words[j:]) && bodyDenied(words[j:]) {
				return DenyStoredProgram
			}
		}
	}
	return ""
}

// isProgramDDL reports whether words (upper case) start a CREATE or ALTER
// of a stored program: CREATE [OR REPLACE] [DEFINER = x] [AGGREGATE]
// PROCEDURE|FUNCTION|TRIGGER|EVENT|PACKAGE [BODY], ALTER [DEFINER = x]
// EVENT.
func isProgramDDL(words []string) bool {
	for i := 1; i < len(words) && i < 12; i++ {
		switch words[i] {
		case "PROCEDURE", "FUNCTION", "TRIGGER", "EVENT", "PACKAGE":
			return true
		case "TABLE", "VIEW", "INDEX", "DATABASE", "SCHEMA", "USER", "ROLE", "SEQUENCE", "SERVER", "TABLESPACE":
			return false
		}
	}
	return false
}

// bodyDenied reports whether words hold a statement the policy refuses
// in any stored program.
func bodyDenied(words []string) bool {
	next := func(i int) string {
		if i+1 < len(words) {
			return words[i+1]
		}
		return ""
	}
	// until reports whether a word after i, before the end of the
	// statement (a ; word), satisfies f.
	until := func(i int, f func(w string) bool) bool {
		for k := i + 1; k < len(words) && words[k] != ";"; k++ {
			if f(words[k]) {
				return true
			}
		}
		return false
	}
	for i, w := range words {
		switch w {
		case "KILL", "SHUTDOWN", "PREPARE", "EXECUTE", "GRANT", "REVOKE", "INSTALL", "UNINSTALL", "PURGE", "BACKUP":
			return true
		case "FLUSH":
			if until(i, func(w string) bool { return w == "READ" || w == "EXPORT" }) {
				return true
			}
		case "SET":
			if until(i, func(w string) bool {
				return w == "GLOBAL" || strings.HasPrefix(w, "@@GLOBAL.") || w == "PASSWORD" || strings.HasSuffix(w, "SQL_LOG_BIN")
			}) {
				return true
			}
		case "CREATE", "ALTER", "DROP", "RENAME":
			if i > 0 && (next(i) == "USER" || next(i) == "ROLE") {
				return true
			}
		case "CHANGE":
			if next(i) == "MASTER" || next(i) == "REPLICATION" {
				return true
			}
		case "START", "STOP":
			if n := next(i); n == "SLAVE" || n == "REPLICA" || n == "ALL" {
				return true
			}
		case "RESET":
			if n := next(i); n == "MASTER" || n == "SLAVE" || n == "REPLICA" {
				return true
			}
		}
	}
	return false
}

// sqlWords splits sql into upper-case words (runs of name characters, @
// and . included, so @@GLOBAL.x is one word starting with @@GLOBAL) and ;
// separators, skipping strings, quoted names and comments but reading the
// content of executable comments (/*! ... */, /*M! ... */, their version
// numbers dropped). escapes says whether a backslash in a string escapes
// the next character.
func sqlWords(sql string, escapes bool) []string {
	var words []string
	for i := 0; i < len(sql); {
		c := sql[i]
		switch {
		case c == '\'' || c == '"':
			i = skipString(sql, i, escapes)
		case c == '`':
			if end := scanQuoted(sql, i, '`'); end > 0 {
				i = end
			} else {
				i = len(sql)
			}
		case c == '/' && i+1 < len(sql) && sql[i+1] == '*':
			k := i + 2
			if k < len(sql) && sql[k] == 'M' && k+1 < len(sql) && sql[k+1] == '!' {
				k++
			}
			if k < len(sql) && sql[k] == '!' {
				// Executable: its content is read; the */ that ends it is
				// skipped below.
				k++
				for k < len(sql) && sql[k] >= '0' && sql[k] <= '9' {
					k++
				}
				i = k
				continue
			}
			end := strings.Index(sql[i+2:], "*/")
			if end < 0 {
				return words
			}
			i += end + 4
		case c == '*' && i+1 < len(sql) && sql[i+1] == '/':
			i += 2
		case lineComment(sql, i):
			for i < len(sql) && sql[i] != '\n' {
				i++
			}
		case c == ';':
			words = append(words, ";")
			i++
		case isIdentByte(c) || c == '@':
			k := i
			for k < len(sql) && (isIdentByte(sql[k]) || sql[k] == '@' || sql[k] == '.') {
				k++
			}
			words = append(words, strings.ToUpper(sql[i:k]))
			i = k
		default:
			i++
		}
	}
	return words
}

// skipString returns the index after the string starting at i (its end
// when unterminated).
func skipString(s string, i int, escapes bool) int {
	q := s[i]
	for k := i + 1; k < len(s); k++ {
		switch {
		case s[k] == '\\' && escapes:
			k++
		case s[k] == q:
			if k+1 < len(s) && s[k+1] == q {
				k++
				continue
			}
			return k + 1
		}
	}
	return len(s)
}
