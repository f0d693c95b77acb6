package router

import (
	"cmp"
	"maps"
	"slices"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/test_driver"

	"github.com/shardgate/shardgate/mysql"
)

// Queries of information_schema's table catalog (what GUI tools, ORM
// reflection and Connector/J's DatabaseMetaData read) see the logical
// schema: a sharded table appears once, under its logical name, with the
// definition of one of its subtables on the default node (its
// representative); the other subtables do not appear.
//
// The query still runs on the default node. Each catalog view it reads is
// replaced by a derived table of the same name that leaves out every
// non-representative subtable; string literals that are a logical table's
// name (TABLE_NAME = 'items') become its representative's; and the
// representative's name in the result is renamed back (Plan.Renames).

// infoSchemaViews are the information_schema views rewritten: those with
// a row per table (or per column, index, constraint of one) named by
// TABLE_SCHEMA and TABLE_NAME.
var infoSchemaViews = map[string]bool{
	"tables": true, "columns": true, "statistics": true, "key_column_usage": true,
	"table_constraints": true, "referential_constraints": true, "partitions": true, "check_constraints": true,
	"column_privileges": true, "table_privileges": true,
}

// representatives returns, per sharded rule with a subtable on the default
// node, its first such subtable, and the names of every other subtable of
// every sharded rule, by database.
func (sc *userRules) representatives() (reps map[tableKey]string, hidden map[string][]string) {
	reps = map[tableKey]string{}
	hidden = map[string][]string{}
	keys := slices.SortedFunc(maps.Keys(sc.rules), func(a, b tableKey) int {
		return cmp.Or(cmp.Compare(a.db, b.db), cmp.Compare(a.table, b.table))
	})
	for _, k := range keys {
		r := sc.rules[k]
		if !r.sharded() {
			continue
		}
		rep := ""
		for _, sub := range r.subs {
			if rep == "" && sub.node == sc.def {
				rep = sub.name
				continue
			}
			hidden[r.db] = append(hidden[r.db], sub.name)
		}
		if rep != "" {
			reps[k] = rep
		}
	}
	return reps, hidden
}

// infoSchemaFinder finds the table sources that read a rewritten view.
type infoSchemaFinder struct {
	db      string // the session's database, for unqualified names
	sources []*ast.TableSource
}

func (f *infoSchemaFinder) Enter(n ast.Node) (ast.Node, bool) {
	if ts, ok := n.(*ast.TableSource); ok {
		if tn, ok := ts.Source.(*ast.TableName); ok {
			db := tn.Schema.L
			if db == "" {
				db = strings.ToLower(f.db)
			}
			if db == "information_schema" && infoSchemaViews[tn.Name.L] {
				f.sources = append(f.sources, ts)
			}
		}
	}
	return n, false
}

func (f *infoSchemaFinder) Leave(n ast.Node) (ast.Node, bool) { return n, true }

// literalRenamer replaces string literals naming a logical table.
type literalRenamer struct{ names map[string]string }

func (r *literalRenamer) Enter(n ast.Node) (ast.Node, bool) {
	if v, ok := n.(*test_driver.ValueExpr); ok && v.Kind() == test_driver.KindString {
		stripDefaultCharset(v)
		if to, ok := r.names[v.GetString()]; ok {
			v.SetString(to)
		}
	}
	return n, false
}

func (r *literalRenamer) Leave(n ast.Node) (ast.Node, bool) { return n, true }

// planInfoSchema plans a SELECT that reads information_schema's table
// catalog; ok is false when n reads none of it.
func (sc *userRules) planInfoSchema(n ast.StmtNode, s Session) (p *Plan, ok bool, err error) {
	f := &infoSchemaFinder{db: s.DB}
	n.Accept(f)
	if len(f.sources) == 0 || sc.walk(n, s, nil).ruleInsts() {
		// A statement that also reads tables with rules is planned as
		// such: information_schema is on every node.
		return nil, false, nil
	}
	reps, hidden := sc.representatives()
	if len(reps) == 0 && len(hidden) == 0 {
		return nil, false, nil
	}
	// Hide the other subtables: each view becomes a derived table of the
	// same name.
	var cond strings.Builder
	first := true
	for _, db := range slices.Sorted(maps.Keys(hidden)) {
		names := hidden[db]
		if !first {
			cond.WriteString(" OR ")
		}
		first = false
		cond.WriteString("(TABLE_SCHEMA = " + sqlString(db) + " AND TABLE_NAME IN (")
		for i, name := range names {
			if i > 0 {
				cond.WriteString(",")
			}
			cond.WriteString(sqlString(name))
		}
		cond.WriteString("))")
	}
	var releases []func()
	defer func() {
		for _, r := range releases {
			r()
		}
	}()
	for _, ts := range f.sources {
		tn := ts.Source.(*ast.TableName)
		q := "SELECT * FROM information_schema." + tn.Name.O
		if cond.Len() > 0 {
			q += " WHERE NOT (" + cond.String() + ")"
		}
		stmts, release, err := parsePooled(q, 0)
		releases = append(releases, release)
		if err != nil || len(stmts) != 1 {
			return nil, true, notSupported("shardgate could not rewrite information_schema.%s for the logical schema", tn.Name.O)
		}
		sel := stmts[0].(*ast.SelectStmt)
		if ts.AsName.O == "" {
			ts.AsName = tn.Name
		}
		ts.Source = sel
	}
	// Literals naming a logical table name its representative.
	names := map[string]string{}
	p = &Plan{Kind: Forward}
	for _, k := range slices.SortedFunc(maps.Keys(reps), func(a, b tableKey) int {
		return cmp.Or(cmp.Compare(a.db, b.db), cmp.Compare(a.table, b.table))
	}) {
		rep := reps[k]
		names[k.table] = rep
		p.Renames = append(p.Renames, Rename{Physical: rep, Logical: k.table})
	}
	n.Accept(&literalRenamer{names: names})
	if sel, isSel := n.(*ast.SelectStmt); isSel && sel.Fields != nil {
		for _, fl := range sel.Fields.Fields {
			keepName(fl)
		}
	}
	sql, err := restore(n, nil, s.Mode)
	if err != nil {
		return nil, true, err
	}
	p.Targets = []Target{{Node: sc.def, SQL: sql}}
	return p, true, nil
}

// sqlString quotes s as a string literal for restored SQL
// (mysql.QuoteString).
func sqlString(s string) string { return mysql.QuoteString(s, "") }
