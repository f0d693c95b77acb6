package router

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
)

// Statement policy. Every client runs its statements through the proxy's
// backend account, which all clients share: a statement that acts on the
// server rather than on the client's session (stopping it, changing global
// settings or accounts, locking every table, replication) would reach every
// other client. Such statements are refused by kind (DenyKinds, the config
// key deny_statements), and an operator can refuse more by fingerprint
// (kingshard's blacklist_sql_file).

// Kinds of statements the policy refuses by default (config.DenyKinds).
const (
	DenyShutdown    = "shutdown"    // SHUTDOWN
	DenySetGlobal   = "set_global"  // SET GLOBAL ..., SET @@GLOBAL.x
	DenyAccount     = "account"     // CREATE/ALTER/DROP/RENAME USER or ROLE, GRANT, REVOKE, SET PASSWORD
	DenyReadLock    = "read_lock"   // FLUSH ... WITH READ LOCK, FLUSH ... FOR EXPORT, BACKUP STAGE/LOCK
	DenyPlugin      = "plugin"      // INSTALL/UNINSTALL PLUGIN or SONAME
	DenyReplication = "replication" // CHANGE MASTER, START/STOP/RESET SLAVE, RESET MASTER, PURGE BINARY LOGS
	DenySQLLogBin   = "sql_log_bin" // SET sql_log_bin
)

// The kinds are config.DenyKinds (the config validates deny_statements).

// Policy decides which statements clients may not run. It is safe for
// concurrent use.
type Policy struct {
	deny      map[string]bool
	blacklist map[string]bool // fingerprints
}

// NewPolicy refuses the kinds in deny (config.DenyKinds) and the statements
// whose fingerprints are in blacklist (one statement per line; blank lines
// and lines starting with # are skipped).
func NewPolicy(deny []string, blacklist io.Reader) (*Policy, error) {
	p := &Policy{deny: map[string]bool{}}
	for _, k := range deny {
		p.deny[k] = true
	}
	if blacklist != nil {
		p.blacklist = map[string]bool{}
		sc := bufio.NewScanner(blacklist)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			p.blacklist[Fingerprint(line)] = true
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("reading the blacklist: %w", err)
		}
	}
	return p, nil
}

// Check returns why sql may not run ("" when it may): the kind it belongs
// to, or "blacklist". st is the text's classification (Classify's). A
// text of several statements, and a stored program's body, is checked
// statement by statement. A single
// statement whose keyword the policy does not care about costs nothing.
func (p *Policy) Check(sql string, st *Stmt) string {
	if p == nil {
		return ""
	}
	if !st.Multi && !st.Program {
		return p.checkOne(sql, st.Keyword)
	}
	for _, one := range splitStatements(sql) {
		kw, _ := firstKeyword(one)
		if why := p.checkOne(one, kw); why != "" {
			return why
		}
	}
	if p.deny[DenyStoredProgram] {
		// The split cuts a stored program's body at its semicolons.
		return programKind(sql)
	}
	return ""
}

func (p *Policy) checkOne(sql, keyword string) string {
	if len(p.deny) > 0 {
		if k := denyKind(sql, keyword); k != "" && p.deny[k] {
			return k
		}
	}
	if p.blacklist != nil && p.blacklist[Fingerprint(sql)] {
		return "blacklist"
	}
	return ""
}

// denyKind returns the kind of a server-wide statement, "" for others.
func denyKind(sql, kw string) string {
	switch kw {
	case "SHUTDOWN", "SET", "GRANT", "REVOKE", "CREATE", "ALTER", "DROP", "RENAME", "FLUSH", "BACKUP",
		"INSTALL", "UNINSTALL", "CHANGE", "PURGE", "START", "STOP", "RESET":
	default:
		return ""
	}
	_, rest := firstKeyword(sql)
	second, _ := firstKeyword(rest)
	up := strings.ToUpper(sql)
	switch kw {
	case "SHUTDOWN":
		return DenyShutdown
	case "SET":
		return setKind(sql, up)
	case "GRANT", "REVOKE":
		return DenyAccount
	case "CREATE", "ALTER", "DROP", "RENAME":
		if second == "USER" || second == "ROLE" {
			return DenyAccount
		}
		if k := programKind(sql); k != "" {
			return k
		}
	case "FLUSH":
		if strings.Contains(up, "READ LOCK") || strings.Contains(up, "FOR EXPORT") {
			return DenyReadLock
		}
	case "BACKUP":
		return DenyReadLock
	case "INSTALL", "UNINSTALL":
		return DenyPlugin
	case "CHANGE", "PURGE":
		return DenyReplication
	case "START", "STOP":
		if second == "SLAVE" || second == "REPLICA" || second == "ALL" {
			return DenyReplication
		}
	case "RESET":
		if second == "MASTER" || second == "SLAVE" || second == "REPLICA" {
			return DenyReplication
		}
	}
	return ""
}

// setKind classifies a SET statement by parsing it; the text of one with
// an executable comment, whose content the parser may not read as the
// server does, is checked for the words themselves.
func setKind(sql, up string) string {
	if HasExecutableComment(sql) {
		switch {
		case strings.Contains(up, "GLOBAL"):
			return DenySetGlobal
		case strings.Contains(up, "PASSWORD"):
			return DenyAccount
		case strings.Contains(up, "SQL_LOG_BIN"):
			return DenySQLLogBin
		}
	}
	stmts, release, err := parsePooled(sql, 0)
	defer release()
	if err != nil || len(stmts) != 1 {
		// Text the parser does not read (SET STATEMENT ... FOR ...): the
		// words decide.
		switch {
		case strings.Contains(up, "GLOBAL"):
			return DenySetGlobal
		case strings.Contains(up, "SQL_LOG_BIN"):
			return DenySQLLogBin
		}
		return ""
	}
	switch x := stmts[0].(type) {
	case *ast.SetPwdStmt:
		return DenyAccount
	case *ast.SetStmt:
		for _, v := range x.Variables {
			switch {
			case v.IsGlobal || v.IsInstance:
				return DenySetGlobal
			case v.IsSystem && strings.EqualFold(v.Name, "sql_log_bin"):
				return DenySQLLogBin
			}
		}
	}
	return ""
}

// Fingerprint is a statement's text with comments removed, literals
// replaced by ?, blanks kept only between words (one space) and keywords
// and names lower-cased: statements that differ only in their constants
// and layout share it.
func Fingerprint(sql string) string { return string(AppendFingerprint(nil, sql)) }

// AppendFingerprint appends sql's Fingerprint to dst, without allocating
// when dst has room.
func AppendFingerprint(dst []byte, sql string) []byte {
	b := dst
	base := len(dst)
	space := false
	var last byte
	wordish := func(c byte) bool { return isIdentByte(c) || c == '?' || c == '`' || c == '@' }
	emitLower := func(s string) {
		// Blanks count only between two words: "id = 1" and "id=1" are
		// one fingerprint.
		if space && len(b) > base && wordish(last) && wordish(s[0]) {
			b = append(b, ' ')
		}
		space = false
		for k := 0; k < len(s); k++ {
			c := s[k]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			b = append(b, c)
		}
		last = b[len(b)-1]
	}
	for i := 0; i < len(sql); {
		c := sql[i]
		switch {
		case isSpace(c):
			space = true
			i++
		case c == '/' && i+1 < len(sql) && sql[i+1] == '*':
			end := strings.Index(sql[i+2:], "*/")
			if end < 0 {
				i = len(sql)
				break
			}
			i += end + 4
			space = true
		case lineComment(sql, i):
			for i < len(sql) && sql[i] != '\n' {
				i++
			}
		case c == '\'' || c == '"':
			end, _ := scanString(sql, i)
			if end < 0 {
				end = len(sql)
			}
			emitLower("?")
			i = end
		case c == '`':
			end := scanQuoted(sql, i, '`')
			if end < 0 {
				end = len(sql)
			}
			emitLower(sql[i:end])
			i = end
		case isDigit(c) && (i == 0 || !isIdentByte(sql[i-1])):
			end, _ := scanNumber(sql, i)
			if end <= i {
				end = i + 1
			}
			emitLower("?")
			i = end
		case isIdentByte(c):
			j := i
			for j < len(sql) && isIdentByte(sql[j]) {
				j++
			}
			emitLower(sql[i:j])
			i = j
		case c == ';':
			i++
		default:
			emitLower(sql[i : i+1])
			i++
		}
	}
	return b
}

// splitStatements splits a text at the semicolons outside quotes and
// comments (the content of executable comments is code).
func splitStatements(sql string) []string {
	var out []string
	start := 0
	for i := 0; i < len(sql); {
		c := sql[i]
		switch {
		case c == '\'' || c == '"':
			end, _ := scanString(sql, i)
			if end < 0 {
				return append(out, sql[start:])
			}
			i = end
		case c == '`':
			end := scanQuoted(sql, i, '`')
			if end < 0 {
				return append(out, sql[start:])
			}
			i = end
		case c == '/' && i+2 < len(sql) && sql[i+1] == '*' && sql[i+2] != '!' && sql[i+2] != 'M':
			end := strings.Index(sql[i+2:], "*/")
			if end < 0 {
				return append(out, sql[start:])
			}
			i += end + 4
		case lineComment(sql, i):
			for i < len(sql) && sql[i] != '\n' {
				i++
			}
		case c == ';':
			out = append(out, sql[start:i])
			i++
			start = i
		default:
			i++
		}
	}
	if strings.TrimSpace(sql[start:]) != "" || len(out) == 0 {
		out = append(out, sql[start:])
	}
	return out
}
