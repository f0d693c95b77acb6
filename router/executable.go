package router

import (
	"strconv"
	"strings"
)

// UnwrapExecutable returns the statement inside a text that is one
// executable comment, /*!NNNNN stmt */ or /*M!NNNNNN stmt */ (the way
// mysqldump and mariadb-tzinfo-to-sql write statements), when the server,
// whose version is version (major*10000+minor*100+patch), runs it: its
// version is not above the server's. ok is false for any other text, and
// for a comment the server would skip (which then goes to it unchanged).
func UnwrapExecutable(sql string, version int) (inner string, ok bool) {
	body, v, ok := executableComment(sql)
	if !ok || v > version {
		return "", false
	}
	return body, body != ""
}

// executableComment splits a text that is one executable comment into the
// statement inside and the version it asks for (0: none).
func executableComment(sql string) (body string, version int, ok bool) {
	s := strings.TrimRight(strings.TrimSpace(sql), "; \t\r\n")
	var digits int
	switch {
	case strings.HasPrefix(s, "/*M!"), strings.HasPrefix(s, "/*m!"):
		s, digits = s[4:], 6
	case strings.HasPrefix(s, "/*!"):
		s, digits = s[3:], 5
	default:
		return "", 0, false
	}
	if !strings.HasSuffix(s, "*/") {
		return "", 0, false
	}
	s = s[:len(s)-2]
	if strings.Contains(s, "*/") || strings.Contains(s, "/*") {
		return "", 0, false // several comments, or one nested: not one statement
	}
	n := 0
	for n < len(s) && n < digits && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	if n != 0 {
		if n != digits {
			return "", 0, false
		}
		v, err := strconv.Atoi(s[:n])
		if err != nil {
			return "", 0, false
		}
		version = v
	}
	return strings.TrimSpace(s[n:]), version, true
}

// VersionID reads a server version string ("10.11.19-MariaDB", or with the
// 5.5.5- prefix MariaDB sends old clients) as major*10000+minor*100+patch;
// 0 when it cannot.
func VersionID(v string) int {
	v = strings.TrimPrefix(v, "5.5.5-")
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 3 {
		return 0
	}
	id := 0
	for i, p := range parts {
		end := 0
		for end < len(p) && p[end] >= '0' && p[end] <= '9' {
			end++
		}
		n, err := strconv.Atoi(p[:end])
		if err != nil {
			return 0
		}
		id += n * []int{10000, 100, 1}[i]
	}
	return id
}

// SkipIgnored returns sql without the comments at its start that a server
// of the given version reads as comments: /* ... */, "-- " and "#" to the
// end of the line, and executable comments for a later version
// (mariadb-dump's /*M!999999\- enable the sandbox mode */, which the
// client sends glued to the next statement). An executable comment the
// server runs ends the skipping.
func SkipIgnored(sql string, version int) string {
	s := sql
	for {
		t := strings.TrimLeft(s, " \t\r\n\f")
		switch {
		case strings.HasPrefix(t, "/*!") || strings.HasPrefix(t, "/*M!") || strings.HasPrefix(t, "/*m!"):
			end := strings.Index(t, "*/")
			if end < 0 {
				return s
			}
			if _, v, ok := executableComment(t[:end+2]); !ok || v <= version {
				return t
			}
			s = t[end+2:]
		case strings.HasPrefix(t, "/*"):
			end := strings.Index(t[2:], "*/")
			if end < 0 {
				return s
			}
			s = t[end+4:]
		case strings.HasPrefix(t, "#"), strings.HasPrefix(t, "--") && (len(t) == 2 || t[2] <= ' '):
			nl := strings.IndexByte(t, '\n')
			if nl < 0 {
				return ""
			}
			s = t[nl+1:]
		default:
			return t
		}
	}
}

// InlineExecutable returns sql with its executable comments resolved as a
// server of the given version reads them: /*!NNNNN text */ becomes text
// when NNNNN is not above the version (and /*!text */ always), and
// disappears otherwise. Quoted strings and names are left alone. It is for
// statements the proxy composes itself (START TRANSACTION /*!40100 WITH
// CONSISTENT SNAPSHOT */, as mysqldump writes it).
func InlineExecutable(sql string, version int) string {
	if !strings.Contains(sql, "/*!") && !strings.Contains(sql, "/*M!") {
		return sql
	}
	var b strings.Builder
	for i := 0; i < len(sql); {
		switch c := sql[i]; {
		case c == '\'' || c == '"' || c == '`':
			j := i + 1
			for j < len(sql) && sql[j] != c {
				if sql[j] == '\\' && c != '`' {
					j++
				}
				j++
			}
			j = min(j+1, len(sql))
			b.WriteString(sql[i:j])
			i = j
		case strings.HasPrefix(sql[i:], "/*!") || strings.HasPrefix(sql[i:], "/*M!"):
			end := strings.Index(sql[i:], "*/")
			if end < 0 {
				b.WriteString(sql[i:])
				return b.String()
			}
			if body, v, ok := executableComment(sql[i : i+end+2]); ok && v <= version {
				b.WriteString(" " + body + " ")
			} else if !ok {
				b.WriteString(sql[i : i+end+2])
			}
			i += end + 2
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String()
}

// Unwrapped is what the server runs of a text that starts with comments
// (Unwrap).
type Unwrapped struct {
	// SQL is the statement the server runs: the text inside one
	// executable comment, the text after comments the server skips, or
	// the text itself.
	SQL string
	// Changed is set when SQL is not the client's text.
	Changed bool
	// CommentsOnly is set when nothing but comments (and semicolons) is
	// left: the server answers such a text itself.
	CommentsOnly bool
}

// Unwrap reads a text as a server of the given version does when it
// starts with comments: a statement written as one executable comment
// (mysqldump's /*!40101 SET ... */, /*M!100602 ... */) is what is inside
// it; comments before it that the server skips (mariadb-dump's sandbox
// line, for a later version) are dropped. Any other text is returned as it
// is. It costs nothing for a text without executable comments.
func Unwrap(sql string, version int) Unwrapped {
	if len(sql) <= 3 || !(sql[0] == '/' || sql[0] <= ' ' || sql[0] == '-' || sql[0] == '#') || !HasExecutableComment(sql) {
		return Unwrapped{SQL: sql}
	}
	rest := SkipIgnored(sql, version)
	if inner, ok := UnwrapExecutable(rest, version); ok {
		return Unwrapped{SQL: inner, Changed: true}
	}
	if strings.TrimSpace(strings.TrimRight(rest, "; \t\r\n")) == "" {
		return Unwrapped{SQL: sql, CommentsOnly: true}
	}
	if len(rest) < len(sql) {
		return Unwrapped{SQL: rest, Changed: true}
	}
	return Unwrapped{SQL: sql}
}
