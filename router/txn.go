package router

import (
	"slices"
	"strings"

	"github.com/shardgate/shardgate/mysql"
)

// Transaction control statements the proxy runs itself (BEGIN, COMMIT,
// SAVEPOINT, ...): the session composes what it sends to each node from
// what ParseTxn recognised, never from the client's text.

// TxnVerb is what a transaction statement does.
type TxnVerb uint8

const (
	TxnNone TxnVerb = iota
	TxnBegin
	TxnCommit
	TxnRollback
	TxnSavepoint
	TxnRollbackTo
	TxnRelease
)

// Txn is a transaction control statement the proxy runs itself.
type Txn struct {
	Verb TxnVerb
	Name string // savepoint name, lower case (names are case-insensitive)
	// SQL is the statement the proxy sends to the backends: composed from
	// what was recognised, never the client's text, so nothing else the
	// text holds (a second statement, an executable comment) reaches a
	// connection.
	SQL string
	// Chain (COMMIT/ROLLBACK AND CHAIN) starts a new transaction with
	// the same characteristics; Release (RELEASE) ends the client's
	// connection after the answer.
	Chain, Release bool
	// NoChain and NoRelease are AND NO CHAIN and NO RELEASE: said
	// explicitly, they override completion_type.
	NoChain, NoRelease bool
	// ReadOnly is START TRANSACTION READ ONLY: the transaction writes
	// nothing, so it needs no XA branch.
	ReadOnly bool
	// ReadWrite is START TRANSACTION READ WRITE, said explicitly (the
	// session tracker reports it).
	ReadWrite bool
	// Snapshot is START TRANSACTION WITH CONSISTENT SNAPSHOT: the snapshot
	// is taken when the statement runs, not at the first read.
	Snapshot bool
}

// ParseTxn recognises transaction control statements: BEGIN [WORK], START
// TRANSACTION [READ ONLY | READ WRITE | WITH CONSISTENT SNAPSHOT, ...],
// COMMIT [WORK], ROLLBACK [WORK], SAVEPOINT name, ROLLBACK [WORK] TO
// [SAVEPOINT] name, RELEASE SAVEPOINT name. Anything else, including these
// with more in them (AND CHAIN, RELEASE, a comment, a second statement), is
// TxnNone.
func ParseTxn(sql string) Txn {
	text := strings.TrimRight(stripComments(sql), "; \t\r\n")
	if strings.Contains(text, "/*") || strings.ContainsAny(text, ";#") || strings.Contains(text, "--") {
		return Txn{}
	}
	orig := strings.Fields(strings.ReplaceAll(text, ",", " , "))
	w := make([]string, len(orig))
	for i, f := range orig {
		w[i] = strings.ToUpper(f)
	}
	if len(w) == 0 {
		return Txn{}
	}
	savepoint := func(verb TxnVerb, i int, sqlPrefix string) Txn {
		if i != len(w)-1 {
			return Txn{}
		}
		name, ok := identifier(orig[i])
		if !ok {
			return Txn{}
		}
		return Txn{Verb: verb, Name: strings.ToLower(name), SQL: sqlPrefix + mysql.QuoteIdent(name)}
	}
	switch w[0] {
	case "BEGIN":
		if len(w) == 1 || (len(w) == 2 && w[1] == "WORK") {
			return Txn{Verb: TxnBegin, SQL: "START TRANSACTION"}
		}
	case "START":
		if len(w) < 2 || w[1] != "TRANSACTION" {
			return Txn{}
		}
		var opts []string
		for i := 2; i < len(w); {
			switch {
			case i+1 < len(w) && w[i] == "READ" && (w[i+1] == "ONLY" || w[i+1] == "WRITE"):
				if slices.ContainsFunc(opts, func(o string) bool { return strings.HasPrefix(o, "READ ") }) {
					return Txn{} // a second access mode: the server's syntax error
				}
				opts = append(opts, "READ "+w[i+1])
				i += 2
			case i+2 < len(w) && w[i] == "WITH" && w[i+1] == "CONSISTENT" && w[i+2] == "SNAPSHOT":
				opts = append(opts, "WITH CONSISTENT SNAPSHOT")
				i += 3
			default:
				return Txn{}
			}
			if i < len(w) {
				if w[i] != "," || i == len(w)-1 {
					return Txn{}
				}
				i++
			}
		}
		q := "START TRANSACTION"
		if len(opts) > 0 {
			q += " " + strings.Join(opts, ", ")
		}
		return Txn{Verb: TxnBegin, SQL: q, ReadOnly: slices.Contains(opts, "READ ONLY"),
			ReadWrite: slices.Contains(opts, "READ WRITE"), Snapshot: slices.Contains(opts, "WITH CONSISTENT SNAPSHOT")}
	case "COMMIT", "ROLLBACK":
		i := 1
		if i < len(w) && w[i] == "WORK" {
			i++
		}
		if w[0] == "ROLLBACK" && i < len(w) && w[i] == "TO" {
			i++
			if i < len(w) && w[i] == "SAVEPOINT" {
				i++
			}
			return savepoint(TxnRollbackTo, i, "ROLLBACK TO SAVEPOINT ")
		}
		var t Txn
		if i+1 < len(w) && w[i] == "AND" && w[i+1] == "CHAIN" {
			t.Chain, i = true, i+2
		} else if i+2 < len(w) && w[i] == "AND" && w[i+1] == "NO" && w[i+2] == "CHAIN" {
			t.NoChain, i = true, i+3
		}
		if i < len(w) && w[i] == "RELEASE" {
			t.Release, i = true, i+1
		} else if i+1 < len(w) && w[i] == "NO" && w[i+1] == "RELEASE" {
			t.NoRelease, i = true, i+2
		}
		if i != len(w) || t.Chain && t.Release {
			return Txn{} // AND CHAIN RELEASE is a syntax error on the server
		}
		t.Verb, t.SQL = TxnCommit, "COMMIT"
		if w[0] == "ROLLBACK" {
			t.Verb, t.SQL = TxnRollback, "ROLLBACK"
		}
		return t
	case "SAVEPOINT":
		return savepoint(TxnSavepoint, 1, "SAVEPOINT ")
	case "RELEASE":
		if len(w) >= 2 && w[1] == "SAVEPOINT" {
			return savepoint(TxnRelease, 2, "RELEASE SAVEPOINT ")
		}
	}
	return Txn{}
}

// identifier returns the name an identifier token spells: a bare one
// (letters, digits, _ and $) or a backquoted one without blanks.
func identifier(tok string) (string, bool) {
	if len(tok) >= 2 && tok[0] == '`' && tok[len(tok)-1] == '`' {
		name := strings.ReplaceAll(tok[1:len(tok)-1], "``", "`")
		return name, name != "" && !strings.Contains(strings.ReplaceAll(tok[1:len(tok)-1], "``", ""), "`")
	}
	for _, r := range tok {
		if !(r == '_' || r == '$' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= 0x80) {
			return "", false
		}
	}
	return tok, tok != ""
}

// stripComments removes leading /* */ and -- comments (a client may put a
// hint or a trace id there).
func stripComments(sql string) string {
	for {
		s := strings.TrimLeft(sql, " \t\r\n")
		switch {
		case strings.HasPrefix(s, "/*"):
			end := strings.Index(s[2:], "*/")
			if end < 0 {
				return s
			}
			sql = s[end+4:]
		case strings.HasPrefix(s, "-- "), strings.HasPrefix(s, "#"):
			end := strings.IndexByte(s, '\n')
			if end < 0 {
				return ""
			}
			sql = s[end+1:]
		default:
			return s
		}
	}
}
