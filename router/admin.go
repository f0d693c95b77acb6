package router

import (
	"regexp"
	"strings"

	"github.com/shardgate/shardgate/mysql"
)

// The proxy's admin SQL, run by admin_user on the client port, is read
// here like every other statement (the admin package acts on it):
//
//	admin node(opt,node,k,v) values('add'|'del'|'up'|'down', 'node1', 'slave'|'master', 'host:port')
//	admin server(opt,k,v) values('show'|'add'|'del'|'change', ...)
//	admin reshard(...) values(...), admin import(...) values(...), admin workflow(opt,name) values(...)
//	admin digest(opt) values('reset')
//	show proxy config | show node status | show node config | show schema config | show workflow status
//	show shardgate digest

// Admin is one statement of the admin SQL.
type Admin struct {
	// Target is what the statement acts on, lower case: node, server,
	// reshard, import, workflow or digest.
	Target string
	// Values are its quoted values, unquoted ('' read as ').
	Values []string
}

var (
	adminRE       = regexp.MustCompile(`(?is)^\s*admin\s+(node|server|reshard|import|workflow|digest)\s*\(([^)]*)\)\s*values\s*\((.*)\)\s*;?\s*$`)
	adminShowRE   = regexp.MustCompile(`(?is)^\s*show\s+(proxy|node|schema|workflow)\s+(config|status)\s*;?\s*$`)
	adminDigestRE = regexp.MustCompile(`(?is)^\s*show\s+shardgate\s+digest\s*;?\s*$`)
	adminValueRE  = regexp.MustCompile(`\s*'((?:[^'\\]|\\.|'')*)'\s*(,|$)`)
)

// ParseAdmin reads a statement whose first keyword is keyword (Classify's)
// as admin SQL. ok is false
// for a statement that is not admin SQL (a SHOW of the server's, any
// other statement); err is a syntax error (1064) for an ADMIN statement
// that is not well formed.
func ParseAdmin(sql, keyword string) (a Admin, ok bool, err error) {
	var target, values string
	switch keyword {
	case "ADMIN":
		m := adminRE.FindStringSubmatch(sql)
		if m == nil {
			return a, true, mysql.NewError(mysql.ErSyntax, "You have an error in your SQL syntax: shardgate's admin SQL is admin node(opt,node,k,v) values(...) or admin server(opt,k,v) values(...)")
		}
		target, values = strings.ToLower(m[1]), m[3]
	case "SHOW":
		if adminDigestRE.MatchString(sql) {
			return Admin{Target: "digest", Values: []string{"show"}}, true, nil
		}
		m := adminShowRE.FindStringSubmatch(sql)
		if m == nil {
			return a, false, nil
		}
		return Admin{Target: "server", Values: []string{"show", strings.ToLower(m[1]), "config"}}, true, nil
	default:
		return a, false, nil
	}
	var out []string
	for rest := strings.TrimSpace(values); rest != ""; {
		m := adminValueRE.FindStringSubmatchIndex(rest)
		if m == nil || m[0] != 0 {
			return a, true, mysql.NewError(mysql.ErSyntax, "You have an error in your SQL syntax: the values of admin SQL are quoted strings, as in values('add','node1','slave','127.0.0.1:3307')")
		}
		out = append(out, strings.ReplaceAll(rest[m[2]:m[3]], "''", "'"))
		rest = rest[m[1]:]
	}
	if len(out) == 0 {
		return a, true, mysql.NewError(mysql.ErSyntax, "You have an error in your SQL syntax: the values of admin SQL are quoted strings, as in values('add','node1','slave','127.0.0.1:3307')")
	}
	return Admin{Target: target, Values: out}, true, nil
}
