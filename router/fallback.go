package router

import (
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/opcode"
	"github.com/pingcap/tidb/pkg/parser/test_driver"
	"github.com/shardgate/shardgate/mysql"
)

// The exact fallback answers a read that no streaming merge can (a derived
// table or subquery over a sharded table, an aggregate inside an
// expression, COUNT(DISTINCT), GROUP_CONCAT, window functions, joins that
// are not co-located, ...) the way one server holding all rows would: the
// proxy gathers every row of each sharded table the statement names into a
// temporary table on one connection to the default node, runs the
// statement there with the names replaced, and drops the temporary tables.
// MariaDB computes the answer, so it is exactly MariaDB's; the price is
// moving the rows, bounded by fallback_max_rows and fallback_max_bytes.

// FallbackSuffix ends the name of a fallback's temporary table: the
// logical name, then this. It reads as a subtable name to the column
// renaming (LogicalName) and is no real subtable's name (date rules use
// valid dates, hash and range rules four digits).
const FallbackSuffix = "_00000000"

// Gather is one table a Fallback plan copies into a temporary table.
type Gather struct {
	DB, Table string // the logical table
	Temp      string // the temporary table, in database DB
	// Key is the shard key column (lower case; "" for a global table):
	// the copy keeps the keys that contain it, which are unique over the
	// whole table, so it reads in the order one server's table would.
	Key string
	// Subtables are read with SELECT * (Target.SQL) and copied; the first
	// one's SHOW CREATE TABLE gives the temporary table's columns.
	Subtables []Target
}

// planFallback plans sql, a SELECT over sharded tables that the merge
// planner refused, as an exact fallback. ok is false when the statement
// cannot run so (it writes, locks or assigns; a table it names has no
// copy on the default node); the caller then returns its own refusal.
func (sc *userRules) planFallback(sql string, s Session) (p *Plan, ok bool) {
	stmts, release, err := parsePooled(sql, s.Mode)
	defer release()
	if err != nil || len(stmts) != 1 {
		return nil, false
	}
	n := stmts[0]
	switch x := n.(type) {
	case *ast.SelectStmt:
		if x.LockInfo != nil && x.LockInfo.LockType != ast.SelectLockNone || x.SelectIntoOpt != nil {
			return nil, false
		}
	case *ast.SetOprStmt:
	default:
		return nil, false
	}
	n.Accept(charsetStripper{})
	f := &fallbackFinder{db: s.DB, sc: sc}
	n.Accept(f)
	if f.bad || len(f.names) == 0 {
		return nil, false
	}
	where := pushdown(n, f, s.Mode)
	p = &Plan{Kind: Fallback}
	seen := map[*rule]bool{}
	for _, tn := range f.names {
		r := f.rules[tn]
		tn.Schema = ast.NewCIStr(r.db)
		tn.Name = ast.NewCIStr(r.table + FallbackSuffix)
		if seen[r] {
			continue
		}
		seen[r] = true
		g := Gather{DB: r.db, Table: r.table, Temp: r.table + FallbackSuffix, Key: r.key}
		if r.sharded() {
			for _, sub := range r.subs {
				g.Subtables = append(g.Subtables, Target{Node: sub.node, Subtable: sub.name,
					SQL: "SELECT * FROM " + mysql.QuoteIdent(r.db) + "." + mysql.QuoteIdent(sub.name) + where})
			}
		} else {
			g.Subtables = []Target{{Node: r.readNode, Subtable: r.table,
				SQL: "SELECT * FROM " + mysql.QuoteIdent(r.db) + "." + mysql.QuoteIdent(r.table) + where}}
		}
		p.Gathers = append(p.Gathers, g)
		p.Tables = append(p.Tables, r.table)
	}
	for _, ts := range f.sources {
		if ts.AsName.O == "" {
			// Column references qualified by the table's name keep
			// working under the temporary table's.
			ts.AsName = f.orig[ts]
		}
	}
	if sel, isSel := n.(*ast.SelectStmt); isSel && sel.Fields != nil {
		for _, fl := range sel.Fields.Fields {
			keepName(fl)
		}
	}
	q, err := restore(n, nil, s.Mode)
	if err != nil {
		return nil, false
	}
	p.Targets = []Target{{Node: sc.def, SQL: q}}
	return p, true
}

// fallbackFinder collects the table names of a statement that have rules
// needing a copy: sharded tables, and global tables without a copy on the
// default node. Tables without rules are read on the default node as
// they are.
type fallbackFinder struct {
	db      string
	sc      *userRules
	names   []*ast.TableName
	rules   map[*ast.TableName]*rule
	sources []*ast.TableSource
	orig    map[*ast.TableSource]ast.CIStr
	bad     bool
}

func (f *fallbackFinder) Enter(n ast.Node) (ast.Node, bool) {
	switch x := n.(type) {
	case *ast.TableSource:
		if tn, ok := x.Source.(*ast.TableName); ok {
			if r := f.rule(tn); r != nil {
				f.sources = append(f.sources, x)
				if f.orig == nil {
					f.orig = map[*ast.TableSource]ast.CIStr{}
				}
				f.orig[x] = tn.Name
			}
		}
	case *ast.TableName:
		if r := f.rule(x); r != nil {
			if f.rules == nil {
				f.rules = map[*ast.TableName]*rule{}
			}
			f.rules[x] = r
			f.names = append(f.names, x)
		}
	}
	return n, false
}

func (f *fallbackFinder) Leave(n ast.Node) (ast.Node, bool) { return n, true }

// rule returns the rule of a table that needs a copy, or nil.
func (f *fallbackFinder) rule(tn *ast.TableName) *rule {
	db := tn.Schema.O
	if db == "" {
		db = f.db
	}
	r := f.sc.rules[tableKey{db, tn.Name.O}]
	if r == nil || !r.sharded() && r.hasNode(f.sc.def) {
		return nil
	}
	if strings.HasSuffix(tn.Name.O, FallbackSuffix) {
		f.bad = true
	}
	return r
}

// pushdown returns the part of a single-table SELECT's WHERE that the copy
// of its table can apply itself (" AS `alias` WHERE ..."), so that only
// the rows the statement can use are copied: the AND terms made of the
// table's columns, constants, comparisons, arithmetic and logic only (no
// subquery, variable or function, which could read other rows or change
// between rows). "" when nothing can be pushed (joins, several tables,
// UNION).
func pushdown(n ast.StmtNode, f *fallbackFinder, mode Mode) string {
	sel, ok := n.(*ast.SelectStmt)
	if !ok || sel.From == nil || sel.From.TableRefs == nil || sel.From.TableRefs.Right != nil || sel.Where == nil || len(f.sources) != 1 || len(f.names) != 1 {
		return ""
	}
	ts, ok := sel.From.TableRefs.Left.(*ast.TableSource)
	if !ok || ts != f.sources[0] {
		return ""
	}
	var terms []string
	for _, term := range andTerms(sel.Where) {
		if !pushable(term) {
			continue
		}
		q, err := restore(term, nil, mode)
		if err != nil {
			return ""
		}
		terms = append(terms, "("+q+")")
	}
	if len(terms) == 0 {
		return ""
	}
	alias := ts.AsName.O
	if alias == "" {
		alias = f.orig[ts].O
	}
	return " AS " + mysql.QuoteIdent(alias) + " WHERE " + strings.Join(terms, " AND ")
}

// andTerms splits e at its top-level ANDs.
func andTerms(e ast.ExprNode) []ast.ExprNode {
	if b, ok := e.(*ast.BinaryOperationExpr); ok && b.Op == opcode.LogicAnd {
		return append(andTerms(b.L), andTerms(b.R)...)
	}
	return []ast.ExprNode{e}
}

// pushable reports whether a WHERE term reads only the row's own columns
// with plain operators.
func pushable(e ast.ExprNode) bool {
	ok := true
	var check func(e ast.ExprNode)
	check = func(e ast.ExprNode) {
		if !ok {
			return
		}
		switch x := e.(type) {
		case *ast.ColumnNameExpr:
			if x.Name.Schema.O != "" {
				ok = false
			}
		case *test_driver.ValueExpr:
		case *ast.ParenthesesExpr:
			check(x.Expr)
		case *ast.BinaryOperationExpr:
			check(x.L)
			check(x.R)
		case *ast.UnaryOperationExpr:
			check(x.V)
		case *ast.IsNullExpr:
			check(x.Expr)
		case *ast.BetweenExpr:
			check(x.Expr)
			check(x.Left)
			check(x.Right)
		case *ast.PatternInExpr:
			if x.Sel != nil {
				ok = false
				return
			}
			check(x.Expr)
			for _, v := range x.List {
				check(v)
			}
		case *ast.PatternLikeOrIlikeExpr:
			check(x.Expr)
			check(x.Pattern)
		default:
			ok = false
		}
	}
	check(e)
	return ok
}

// charsetStripper makes plain string literals restore without the
// _utf8mb4 introducer (stripDefaultCharset).
type charsetStripper struct{}

func (charsetStripper) Enter(n ast.Node) (ast.Node, bool) {
	if v, ok := n.(*test_driver.ValueExpr); ok {
		stripDefaultCharset(v)
	}
	return n, false
}

func (charsetStripper) Leave(n ast.Node) (ast.Node, bool) { return n, true }
