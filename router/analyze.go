package router

import (
	"sort"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/opcode"
	"github.com/pingcap/tidb/pkg/parser/test_driver"
)

// This file finds the tables a statement uses, the query blocks (scopes)
// they belong to, the shard key equalities that join them, and what each
// scope's WHERE says about the shard key.
//
// Correctness argument, in short. A group is a set of sharded table
// references of one scope joined on their shard keys (a.k = b.k in that
// scope's WHERE or ON, or USING(k)); co-located rules put equal keys in
// subtables with equal indexes, so the rows a group combines always come
// from one index. A reference in a subquery may be linked to a reference
// of an enclosing scope by an equality in the subquery (b.k = a.k): for
// each outer row, the inner rows it can see are then in the outer row's
// index. A statement runs per index when one group is the shallowest and
// every deeper group is linked to it (directly or through other linked
// groups). Otherwise it can still run as one statement on one node when
// every group's WHERE pins it to a single subtable and all those subtables
// share a node. A scope's WHERE only ever narrows the rows of that scope's
// own references; it says nothing about outer rows (NOT EXISTS).

// inst is one reference to a table in a statement.
type inst struct {
	tn    *ast.TableName
	ts    *ast.TableSource // the FROM item naming it, or nil
	sc    *scope
	db    string
	rule  *rule // nil for tables without a shard rule
	sys   bool  // a system schema, present on every node
	skip  bool  // the sharded INSERT target, planned by planInsert
	group int   // sharded and not skip: index into stmt.groups
	phys  string

	needAlias bool
	quals     []*ast.ColumnName // qualifiers to rewrite to the physical name
	wquals    []*ast.WildCardField
	dquals    []*ast.TableName // multi-table DELETE list entries naming it
}

func (in *inst) alias() string {
	if in.ts != nil {
		return in.ts.AsName.O
	}
	return ""
}

func (in *inst) sharded() bool { return in.rule != nil && in.rule.sharded() && !in.skip }
func (in *inst) global() bool  { return in.rule != nil && in.rule.kind == ruleGlobal }

// plain reports whether the table lives only on the default node.
func (in *inst) plain() bool { return in.rule == nil && !in.sys }

// scope is one query block: a SELECT, or the UPDATE/DELETE/INSERT itself.
type scope struct {
	parent *scope
	depth  int
	insts  []*inst
	// others names FROM items that are not tables (derived tables, CTE
	// references): their columns are unknown.
	others []string
	where  ast.ExprNode
	ons    []ast.ExprNode
	usings []*ast.Join
}

func (s *scope) within(anc *scope) bool {
	for p := s.parent; p != nil; p = p.parent {
		if p == anc {
			return true
		}
	}
	return false
}

type colRef struct {
	col *ast.ColumnName
	sc  *scope
}

type wildRef struct {
	w  *ast.WildCardField
	sc *scope
}

type delRef struct {
	tn *ast.TableName
	sc *scope
}

// group is a set of references joined on their shard keys in one scope.
type group struct {
	sc    *scope
	insts []*inst
	rule  *rule  // the rule of the first reference (all share its layout when valid)
	keys  keySet // subtables the scope's WHERE allows
	links []*inst
}

// inSplit is an IN list on a group's shard key that is cut per target.
type inSplit struct {
	in   *ast.PatternInExpr
	g    int
	idx  []int
	orig []ast.ExprNode
}

// stmt is the analysis of one parsed statement. It is built and used by
// one Route call.
type stmt struct {
	sc   *userRules
	sess Session
	bind binder

	top    *scope
	scopes []*scope
	insts  []*inst
	ctes   map[string]bool
	cols   []colRef
	wilds  []wildRef
	dels   []delRef
	groups []*group
	splits []inSplit

	lockShare *ast.SelectStmt // root SELECT ... LOCK IN SHARE MODE
	// main is the query block whose rows the statement returns or
	// writes: the top scope, or the SELECT of INSERT ... SELECT. Only a
	// group there may run on several subtables.
	main    *scope
	scopeOf map[ast.Node]*scope
	params  []*test_driver.ParamMarkerExpr
}

// walker collects scopes and references. It implements ast.Visitor.
type walker struct {
	st     *stmt
	root   ast.Node
	cur    *scope
	ts     *ast.TableSource
	inDel  int
	pushed []ast.Node
}

func (sc *userRules) walk(root ast.Node, sess Session, bind binder) *stmt {
	st := &stmt{sc: sc, sess: sess, bind: bind, scopeOf: make(map[ast.Node]*scope)}
	st.top = &scope{}
	st.scopes = []*scope{st.top}
	st.scopeOf[root] = st.top
	st.main = st.top
	w := &walker{st: st, root: root, cur: st.top}
	root.Accept(w)
	// Outer query blocks first: the walk visits a SELECT's fields (and
	// their subqueries) before its FROM.
	sort.SliceStable(st.insts, func(i, j int) bool { return st.insts[i].sc.depth < st.insts[j].sc.depth })
	// Number the placeholders in text order, as COM_STMT_EXECUTE sends
	// their values.
	sort.Slice(st.params, func(i, j int) bool { return st.params[i].Offset < st.params[j].Offset })
	for i, p := range st.params {
		p.Order = i
	}
	return st
}

func (w *walker) push(n ast.Node) {
	s := &scope{parent: w.cur, depth: w.cur.depth + 1}
	w.st.scopes = append(w.st.scopes, s)
	w.st.scopeOf[n] = s
	w.cur = s
	w.pushed = append(w.pushed, n)
}

func (w *walker) Enter(n ast.Node) (ast.Node, bool) {
	st := w.st
	switch x := n.(type) {
	case *ast.SelectStmt:
		if x != w.root {
			w.push(n)
		}
		w.cur.where = x.Where
	case *ast.UpdateStmt:
		if x != w.root {
			w.push(n)
		}
		w.cur.where = x.Where
	case *ast.DeleteStmt:
		if x != w.root {
			w.push(n)
		}
		w.cur.where = x.Where
	case *ast.TableSource:
		w.ts = x
		switch x.Source.(type) {
		case *ast.SelectStmt, *ast.SetOprStmt:
			w.cur.others = append(w.cur.others, x.AsName.O)
		}
	case *ast.TableName:
		if w.inDel > 0 {
			st.dels = append(st.dels, delRef{tn: x, sc: w.cur})
			break
		}
		var ts *ast.TableSource
		if w.ts != nil && w.ts.Source == x {
			ts = w.ts
		}
		if x.Schema.O == "" && st.ctes[x.Name.O] {
			name := x.Name.O
			if ts != nil && ts.AsName.O != "" {
				name = ts.AsName.O
			}
			w.cur.others = append(w.cur.others, name)
			break
		}
		in := &inst{tn: x, ts: ts, sc: w.cur, db: x.Schema.O, group: -1}
		if in.db == "" {
			in.db = st.sess.DB
		}
		in.rule = st.sc.rules[tableKey{in.db, x.Name.O}]
		in.sys = in.rule == nil && isSystemDB(in.db)
		w.cur.insts = append(w.cur.insts, in)
		st.insts = append(st.insts, in)
	case *ast.OnCondition:
		w.cur.ons = append(w.cur.ons, x.Expr)
	case *ast.Join:
		if len(x.Using) > 0 {
			w.cur.usings = append(w.cur.usings, x)
		}
	case *ast.ColumnName:
		if x.Table.O != "" {
			st.cols = append(st.cols, colRef{col: x, sc: w.cur})
		}
	case *ast.SelectField:
		if x.WildCard != nil && x.WildCard.Table.O != "" {
			st.wilds = append(st.wilds, wildRef{w: x.WildCard, sc: w.cur})
		}
	case *ast.DeleteTableList:
		w.inDel++
	case *ast.CommonTableExpression:
		if st.ctes == nil {
			st.ctes = make(map[string]bool)
		}
		st.ctes[x.Name.O] = true
	case *test_driver.ValueExpr:
		stripDefaultCharset(x)
	case *test_driver.ParamMarkerExpr:
		st.params = append(st.params, x)
	}
	return n, false
}

func (w *walker) Leave(n ast.Node) (ast.Node, bool) {
	if k := len(w.pushed); k > 0 && w.pushed[k-1] == n {
		w.pushed = w.pushed[:k-1]
		w.cur = w.cur.parent
	}
	if _, ok := n.(*ast.DeleteTableList); ok {
		w.inDel--
	}
	return n, true
}

func isSystemDB(db string) bool {
	switch strings.ToLower(db) {
	case "information_schema", "mysql", "performance_schema", "sys":
		return true
	}
	return false
}

// ruleInsts reports whether the statement references any table with a
// shard rule.
func (st *stmt) ruleInsts() bool {
	for _, in := range st.insts {
		if in.rule != nil {
			return true
		}
	}
	return false
}

// tables lists the logical tables with rules, in order of first mention.
func (st *stmt) tables() []string {
	var out []string
	for _, in := range st.insts {
		if in.rule == nil {
			continue
		}
		dup := false
		for _, t := range out {
			if t == in.rule.table {
				dup = true
				break
			}
		}
		if !dup {
			out = append(out, in.rule.table)
		}
	}
	return out
}

// lookup finds the table reference a qualifier (db.)table names from
// scope s, searching enclosing scopes outwards as MySQL does.
func (st *stmt) lookup(db, table string, s *scope) *inst {
	for ; s != nil; s = s.parent {
		for _, in := range s.insts {
			if a := in.alias(); a != "" {
				if db == "" && a == table {
					return in
				}
				continue
			}
			if in.tn.Name.O == table && (db == "" || db == in.db) {
				return in
			}
		}
		if db == "" {
			for _, o := range s.others {
				if o == table {
					return nil
				}
			}
		}
	}
	return nil
}

// keyOf returns the sharded reference whose shard key column c is, seen
// from scope s, or nil when c is not (or may not be) a shard key.
func (st *stmt) keyOf(c *ast.ColumnName, s *scope) *inst {
	if c.Table.O != "" {
		in := st.lookup(c.Schema.O, c.Table.O, s)
		if in != nil && in.sharded() && c.Name.L == in.rule.key {
			return in
		}
		return nil
	}
	for ; s != nil; s = s.parent {
		var found *inst
		n, other := 0, len(s.others) > 0
		for _, in := range s.insts {
			if in.sharded() {
				if c.Name.L == in.rule.key {
					found = in
					n++
				}
			} else {
				other = true
			}
		}
		switch {
		case n == 1:
			return found
		case n > 1 && found.group >= 0 && st.sameGroup(s, c.Name.L, found.group):
			// USING (k) or NATURAL JOIN coalesced the keys (otherwise
			// MySQL rejects the ambiguous name): any of them will do.
			return found
		case n > 1 || other:
			// Ambiguous, or a table whose columns the router does not
			// know may have a column of that name.
			return nil
		}
	}
	return nil
}

// sameGroup reports whether every sharded reference of scope s whose key
// is named key belongs to group g.
func (st *stmt) sameGroup(s *scope, key string, g int) bool {
	for _, in := range s.insts {
		if in.sharded() && in.rule.key == key && in.group != g {
			return false
		}
	}
	return true
}

func colOf(e ast.ExprNode) *ast.ColumnName {
	for {
		switch x := e.(type) {
		case *ast.ColumnNameExpr:
			return x.Name
		case *ast.ParenthesesExpr:
			e = x.Expr
		default:
			return nil
		}
	}
}

// conjuncts appends the top-level AND terms of e.
func conjuncts(e ast.ExprNode, out []ast.ExprNode) []ast.ExprNode {
	switch x := e.(type) {
	case nil:
		return out
	case *ast.BinaryOperationExpr:
		if x.Op == opcode.LogicAnd {
			return conjuncts(x.R, conjuncts(x.L, out))
		}
	case *ast.ParenthesesExpr:
		return conjuncts(x.Expr, out)
	}
	return append(out, e)
}

// tablesIn lists the table references of a FROM subtree, not descending
// into derived tables.
func (st *stmt) tablesIn(n ast.ResultSetNode, out []*inst) []*inst {
	switch x := n.(type) {
	case *ast.Join:
		out = st.tablesIn(x.Left, out)
		if x.Right != nil {
			out = st.tablesIn(x.Right, out)
		}
	case *ast.TableSource:
		if tn, ok := x.Source.(*ast.TableName); ok {
			for _, in := range st.insts {
				if in.tn == tn {
					out = append(out, in)
				}
			}
		} else if j, ok := x.Source.(*ast.Join); ok {
			out = st.tablesIn(j, out)
		}
	}
	return out
}

// link groups the sharded references by shard key equalities, records
// the cross-scope links, resolves qualifiers, and analyses every group's
// WHERE. It returns a coded error for keys outside every range.
func (st *stmt) link() error {
	var ids []*inst
	parent := map[*inst]*inst{}
	for _, in := range st.insts {
		if in.sharded() {
			parent[in] = in
			ids = append(ids, in)
		}
	}
	var find func(*inst) *inst
	find = func(x *inst) *inst {
		for parent[x] != x {
			parent[x] = parent[parent[x]]
			x = parent[x]
		}
		return x
	}
	unite := func(a, b *inst) { parent[find(a)] = find(b) }
	type cross struct{ inner, outer *inst }
	var crosses []cross
	var terms []ast.ExprNode
	for _, s := range st.scopes {
		terms = conjuncts(s.where, terms[:0])
		for _, on := range s.ons {
			terms = conjuncts(on, terms)
		}
		for _, t := range terms {
			b, ok := t.(*ast.BinaryOperationExpr)
			if !ok || (b.Op != opcode.EQ && b.Op != opcode.NullEQ) {
				continue
			}
			l, r := colOf(b.L), colOf(b.R)
			if l == nil || r == nil {
				continue
			}
			x, y := st.keyOf(l, s), st.keyOf(r, s)
			if x == nil || y == nil || x == y || x.rule.coloc != y.rule.coloc {
				// Equal keys of tables laid out differently live in
				// subtables with different indexes: no join per index.
				continue
			}
			switch {
			case x.sc == s && y.sc == s:
				unite(x, y)
			case x.sc == s && s.within(y.sc):
				crosses = append(crosses, cross{x, y})
			case y.sc == s && s.within(x.sc):
				crosses = append(crosses, cross{y, x})
			}
		}
		for _, j := range s.usings {
			left, right := st.tablesIn(j.Left, nil), st.tablesIn(j.Right, nil)
			for _, c := range j.Using {
				for _, a := range left {
					for _, b := range right {
						if a.sharded() && b.sharded() && a.rule.key == c.Name.L && b.rule.key == c.Name.L && a.rule.coloc == b.rule.coloc {
							unite(a, b)
						}
					}
				}
			}
		}
	}
	roots := map[*inst]int{}
	for _, in := range ids {
		r := find(in)
		g, ok := roots[r]
		if !ok {
			g = len(st.groups)
			roots[r] = g
			st.groups = append(st.groups, &group{sc: in.sc, rule: in.rule})
		}
		in.group = g
		st.groups[g].insts = append(st.groups[g].insts, in)
	}
	for _, c := range crosses {
		g := st.groups[c.inner.group]
		g.links = append(g.links, c.outer)
	}
	for gi, g := range st.groups {
		k, err := st.cond(g.sc.where, gi, true)
		if err != nil {
			return err
		}
		g.keys = k
	}
	return nil
}

// isKey reports whether e is the shard key of a reference in group g.
func (st *stmt) isKey(e ast.ExprNode, g int) bool {
	c := colOf(e)
	if c == nil {
		return false
	}
	in := st.keyOf(c, st.groups[g].sc)
	return in != nil && in.group == g
}

// point returns the subtable of key value v in group g's layout.
func (st *stmt) point(v value, g int) (keySet, error) {
	r := st.groups[g].rule
	if unreadString(st.sess.Catalog, r, v) {
		s, err := r.unreadKeys(v)
		if err != nil {
			return keySet{}, outOfRange(st.groups[g].insts[0].rule, v)
		}
		return s, nil
	}
	i, ok, alt, err := st.keyIndex(r, v)
	if err != nil {
		return keySet{}, outOfRange(st.groups[g].insts[0].rule, v)
	}
	if !ok {
		return allKeys(), nil
	}
	s := newKeySet(len(r.subs))
	s.add(i)
	if alt {
		if j, ok := r.numericAlt(v); ok {
			s.add(j)
		}
	}
	return s, nil
}

var flipOp = map[compareOp]compareOp{opLT: opGT, opLE: opGE, opGT: opLT, opGE: opLE}

func compareOf(op opcode.Op) (compareOp, bool) {
	switch op {
	case opcode.LT:
		return opLT, true
	case opcode.LE:
		return opLE, true
	case opcode.GT:
		return opGT, true
	case opcode.GE:
		return opGE, true
	}
	return 0, false
}

// cond returns the subtables of group g whose rows may satisfy e: the
// shard key under =, <=>, IN, BETWEEN, <, <=, >, >=, combined with AND and
// OR. Anything else allows every subtable. split records IN lists that may
// be cut per target (only reached through AND and OR).
func (st *stmt) cond(e ast.ExprNode, g int, split bool) (keySet, error) {
	r := st.groups[g].rule
	switch x := e.(type) {
	case nil:
		return allKeys(), nil
	case *ast.ParenthesesExpr:
		return st.cond(x.Expr, g, split)
	case *ast.BinaryOperationExpr:
		switch x.Op {
		case opcode.LogicAnd, opcode.LogicOr:
			a, err := st.cond(x.L, g, split)
			if err != nil {
				return a, err
			}
			b, err := st.cond(x.R, g, split)
			if err != nil {
				return b, err
			}
			if x.Op == opcode.LogicAnd {
				return intersect(a, b), nil
			}
			return union(a, b), nil
		case opcode.EQ, opcode.NullEQ:
			if lr, ok := x.L.(*ast.RowExpr); ok {
				if rr, ok := x.R.(*ast.RowExpr); ok && len(lr.Values) == len(rr.Values) {
					out := allKeys()
					for i := range lr.Values {
						s, err := st.cond(&ast.BinaryOperationExpr{Op: x.Op, L: lr.Values[i], R: rr.Values[i]}, g, false)
						if err != nil {
							return s, err
						}
						out = intersect(out, s)
					}
					return out, nil
				}
			}
			if st.isKey(x.L, g) {
				return st.point(valueOf(x.R, st.bind), g)
			}
			if st.isKey(x.R, g) {
				return st.point(valueOf(x.L, st.bind), g)
			}
		default:
			op, ok := compareOf(x.Op)
			if !ok || !r.ordered() {
				break
			}
			var v value
			switch {
			case st.isKey(x.L, g):
				v = valueOf(x.R, st.bind)
			case st.isKey(x.R, g):
				v = valueOf(x.L, st.bind)
				op = flipOp[op]
			default:
				return allKeys(), nil
			}
			if v.kind == valString && intKey(st.sess.Catalog, r) {
				v = rangeOperand(v.s)
			}
			if s, ok := r.rangeSet(op, v, newKeySet(len(r.subs))); ok {
				return s, nil
			}
		}
	case *ast.PatternInExpr:
		if x.Not || x.Sel != nil || !st.isKey(x.Expr, g) {
			break
		}
		s := newKeySet(len(r.subs))
		idx := make([]int, len(x.List))
		for k, item := range x.List {
			v := valueOf(item, st.bind)
			if unreadString(st.sess.Catalog, r, v) {
				u, err := r.unreadKeys(v)
				if err != nil {
					return s, outOfRange(st.groups[g].insts[0].rule, v)
				}
				if u.all {
					return allKeys(), nil
				}
				s = union(s, u)
				split = false // the value may be in more than one
				continue
			}
			i, ok, alt, err := st.keyIndex(r, v)
			if err != nil {
				return s, outOfRange(st.groups[g].insts[0].rule, v)
			}
			if !ok {
				return allKeys(), nil
			}
			if v.kind == valString && !alt {
				// Not cut: a strict UPDATE fails on a row compared
				// with a string that is more than a number ('7abc',
				// 1292), and every target must see the comparison
				// MariaDB makes with each of its rows.
				split = false
			}
			idx[k] = i
			s.add(i)
			if j, ok := r.numericAlt(v); alt && ok {
				s.add(j)
				split = false // the value may be in either subtable
			}
		}
		// Lists with placeholders are not cut: the parameters of a
		// prepared statement are numbered across the whole text.
		if split && len(x.List) > 1 && !hasParam(x.List) {
			st.splits = append(st.splits, inSplit{in: x, g: g, idx: idx, orig: x.List})
		}
		return s, nil
	case *ast.BetweenExpr:
		if x.Not || !r.ordered() || !st.isKey(x.Expr, g) {
			break
		}
		lo, ok1 := r.rangeSet(opGE, st.rangeBound(r, valueOf(x.Left, st.bind)), newKeySet(len(r.subs)))
		hi, ok2 := r.rangeSet(opLE, st.rangeBound(r, valueOf(x.Right, st.bind)), newKeySet(len(r.subs)))
		if ok1 && ok2 {
			return intersect(lo, hi), nil
		}
	}
	return allKeys(), nil
}

func hasParam(list []ast.ExprNode) bool {
	for _, e := range list {
		if _, ok := e.(*test_driver.ParamMarkerExpr); ok {
			return true
		}
	}
	return false
}
