package router

import (
	"slices"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"

	"github.com/shardgate/shardgate/mysql"
)

// planLock plans LOCK TABLES naming tables with rules: on every node that
// holds one of the tables, LOCK TABLES of what that node holds of them
// (every subtable of a sharded table there, a global table's copy, the
// unsharded tables on the default node), each on the session's own
// connection, which keeps the locks (Plan.Sticky) until UNLOCK TABLES.
// Without rule tables it is the default plan.
func (sc *userRules) planLock(x *ast.LockTablesStmt, s Session) (*Plan, error) {
	per := map[string][]string{} // node -> "`db`.`t` TYPE"
	var order []string
	var tables []string
	add := func(node, db, name, typ string) {
		if _, ok := per[node]; !ok {
			order = append(order, node)
		}
		per[node] = append(per[node], mysql.QuoteIdent(db)+"."+mysql.QuoteIdent(name)+" "+typ)
	}
	rules := false
	for _, tl := range x.TableLocks {
		db := tl.Table.Schema.O
		if db == "" {
			db = s.DB
		}
		if db == "" {
			return nil, mysql.NewError(mysql.ErNoDB, "No database selected")
		}
		typ := tl.Type.String()
		r := sc.rules[tableKey{db, tl.Table.Name.O}]
		switch {
		case r == nil:
			add(sc.def, db, tl.Table.Name.O, typ)
		case !r.sharded():
			rules = true
			tables = append(tables, r.table)
			for _, n := range r.nodes {
				add(n, db, r.table, typ)
			}
		default:
			rules = true
			tables = append(tables, r.table)
			for _, sub := range r.subs {
				add(sub.node, db, sub.name, typ)
			}
		}
	}
	if !rules {
		return sc.defPlan, nil
	}
	p := &Plan{Kind: Fanout, Sticky: true, Tables: tables}
	slices.Sort(order) // a fixed order: two sessions lock nodes alike
	for _, n := range order {
		p.Targets = append(p.Targets, Target{Node: n, SQL: "LOCK TABLES " + strings.Join(per[n], ", ")})
	}
	return p, nil
}
