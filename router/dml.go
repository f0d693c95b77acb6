package router

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/shardgate/shardgate/mysql"
)

// build renders n for every target. kind is the plan kind used when there
// is more than one target.
func (st *stmt) build(n ast.Node, ts []tgt, kind PlanKind) (*Plan, error) {
	p := &Plan{Kind: Forward, Tables: st.tables()}
	if len(ts) > 1 {
		p.Kind = kind
	}
	if tmpl, ok := st.template(n, ts); ok {
		// One restore for every target: the subtables' names go into
		// the text.
		for _, t := range ts {
			sql := tmpl
			for i, in := range st.insts {
				if in.sharded() {
					sql = strings.ReplaceAll(sql, subToken(i), in.rule.subs[t.gidx[in.group]].name)
				}
			}
			p.Targets = append(p.Targets, Target{Node: t.node, Subtable: st.subtableOf(t), SQL: sql})
		}
		return p, nil
	}
	for _, t := range ts {
		sql, err := st.render(n, t)
		if err != nil {
			return nil, err
		}
		p.Targets = append(p.Targets, Target{Node: t.node, Subtable: st.subtableOf(t), SQL: sql})
	}
	return p, nil
}

// template restores n once for several targets that differ only in the
// names of their subtables, each written as subToken(inst index); ok is
// false when the targets differ otherwise (IN lists cut per subtable, an
// INSERT target), or a token could be mistaken for text of the statement.
func (st *stmt) template(n ast.Node, ts []tgt) (string, bool) {
	if len(ts) < 2 || len(st.splits) > 0 {
		return "", false
	}
	for _, in := range st.insts {
		if in.skip {
			return "", false
		}
	}
	for i, in := range st.insts {
		if !in.sharded() {
			continue
		}
		in.phys = subToken(i)
		in.rename(in.phys)
	}
	sql, err := restore(n, st.lockShare, st.sess.Mode)
	if err != nil || strings.Count(sql, subTokenPrefix) != st.tokens() {
		return "", false
	}
	return sql, true
}

// subTokenPrefix starts the stand-in of a subtable's name in a template.
const subTokenPrefix = "_sg\x01sub"

func subToken(i int) string { return subTokenPrefix + strconv.Itoa(i) + "_" }

// tokens counts the stand-ins template writes: one per table name and
// qualifier of a sharded instance.
func (st *stmt) tokens() int {
	n := 0
	for _, in := range st.insts {
		if in.sharded() {
			n += 1 + len(in.quals) + len(in.wquals) + len(in.dquals)
		}
	}
	return n
}

// globalRead plans a statement whose rule tables are all global: one node
// that has every global table (and the default node if unsharded tables
// are used too), unchanged SQL.
func (st *stmt) globalRead() (*Plan, error) {
	var cands []string
	for _, n := range st.sc.nodes {
		ok := true
		for _, in := range st.insts {
			if (in.plain() && n != st.sc.def) || (in.global() && !in.rule.hasNode(n)) {
				ok = false
				break
			}
		}
		if ok {
			cands = append(cands, n)
		}
	}
	var first *rule
	for _, in := range st.insts {
		if in.global() {
			first = in.rule
			break
		}
	}
	if len(cands) == 0 {
		return nil, notSupported("statement combines global tables %s and tables that are not sharded in a way no single node holds: unsharded tables live on the default node %s",
			strings.Join(st.tables(), ", "), st.sc.def)
	}
	node := cands[0]
	if contains(cands, st.sc.def) {
		node = st.sc.def
	} else if contains(cands, first.readNode) {
		node = first.readNode
	}
	return &Plan{Kind: Forward, Targets: []Target{{Node: node, Subtable: first.table}}, Tables: st.tables()}, nil
}

// globalWrite plans a write to global table g: the same statement on every
// node of g's rule. Every other table it reads must be there too.
func (st *stmt) globalWrite(g *inst) (*Plan, error) {
	nodes := g.rule.nodes
	for _, in := range st.insts {
		switch {
		case in == g || in.sys:
		case in.rule != nil && in.rule.sharded():
			return nil, notSupported("a write to global table %s cannot read sharded table %s: the write runs unchanged on every node of %s",
				g.rule.table, in.rule.table, g.rule.table)
		case in.rule == nil && !(len(nodes) == 1 && nodes[0] == st.sc.def):
			return nil, notSupported("a write to global table %s (on %s) cannot read table %s, which is not sharded and lives only on the default node %s",
				g.rule.table, strings.Join(nodes, ", "), in.tn.Name.O, st.sc.def)
		case in.global():
			for _, n := range nodes {
				if !in.rule.hasNode(n) {
					return nil, notSupported("a write to global table %s (on %s) cannot read global table %s, which has no copy on %s",
						g.rule.table, strings.Join(nodes, ", "), in.rule.table, n)
				}
			}
		}
	}
	p := &Plan{Kind: SumOK, Copies: true, Tables: st.tables()}
	if len(nodes) == 1 {
		p.Kind, p.Copies = Forward, false
	}
	for _, n := range nodes {
		p.Targets = append(p.Targets, Target{Node: n, Subtable: g.rule.table})
	}
	return p, nil
}

// planSelect plans SELECT, TABLE, VALUES and UNION statements.
func (sc *userRules) planSelect(n ast.StmtNode, s Session, bind binder) (*Plan, error) {
	st := sc.walk(n, s, bind)
	if !st.ruleInsts() {
		return sc.defPlan, nil
	}
	if err := st.link(); err != nil {
		return nil, err
	}
	if len(st.groups) == 0 {
		return st.globalRead()
	}
	sel, isSel := n.(*ast.SelectStmt)
	if isSel && sel.LockInfo != nil && sel.LockInfo.LockType == ast.SelectLockForShare {
		st.lockShare = sel
	}
	st.qualify(true)
	ts, err := st.place()
	if err != nil {
		return nil, err
	}
	if isSel && sel.Fields != nil {
		// The targets run restored text: keep MySQL's column names.
		for _, f := range sel.Fields.Fields {
			keepName(f)
		}
	}
	if len(ts) > 1 {
		in := st.groups[0].insts[0]
		if !isSel {
			return nil, notSupported("cross-shard UNION on table %s (%d subtables) is not supported yet; add a condition on the shard key %s", in.rule.table, len(ts), in.rule.key)
		}
		if why := mergeNeeded(sel); why != "" {
			// planMerge rewrites sel into what each target runs, so it
			// comes before build restores the targets' SQL.
			m, err := planMerge(sel)
			if err != nil {
				return nil, err
			}
			if err := st.checkNodes(ts); err != nil {
				return nil, err
			}
			p, err := st.build(n, ts, Concat)
			if err != nil {
				return nil, err
			}
			p.Merge = m
			return p, nil
		}
	}
	if err := st.checkNodes(ts); err != nil {
		return nil, err
	}
	return st.build(n, ts, Concat)
}

// mergeNeeded names what makes the rows of several subtables differ from
// their concatenation, or returns "".
func mergeNeeded(sel *ast.SelectStmt) string {
	var why []string
	if sel.Distinct {
		why = append(why, "DISTINCT")
	}
	if sel.SelectStmtOpts != nil && sel.SelectStmtOpts.CalcFoundRows {
		why = append(why, "SQL_CALC_FOUND_ROWS")
	}
	if sel.GroupBy != nil {
		why = append(why, "GROUP BY")
	}
	if sel.Having != nil {
		why = append(why, "HAVING")
	}
	if sel.OrderBy != nil {
		why = append(why, "ORDER BY")
	}
	if sel.Limit != nil {
		why = append(why, "LIMIT")
	}
	if sel.SelectIntoOpt != nil {
		why = append(why, "INTO")
	}
	f := &aggFinder{}
	if sel.Fields != nil {
		sel.Fields.Accept(f)
	}
	if sel.Having != nil {
		sel.Having.Accept(f)
	}
	if sel.OrderBy != nil {
		sel.OrderBy.Accept(f)
	}
	if f.agg {
		why = append(why, "aggregate functions")
	}
	if f.win || len(sel.WindowSpecs) > 0 {
		why = append(why, "window functions")
	}
	return strings.Join(why, ", ")
}

// aggFinder looks for aggregate and window functions outside subqueries.
type aggFinder struct{ agg, win bool }

func (f *aggFinder) Enter(n ast.Node) (ast.Node, bool) {
	switch n.(type) {
	case *ast.AggregateFuncExpr:
		f.agg = true
	case *ast.WindowFuncExpr:
		f.win = true
	case *ast.SubqueryExpr:
		return n, true
	}
	return n, false
}

func (f *aggFinder) Leave(n ast.Node) (ast.Node, bool) { return n, true }

// assigned returns the top-scope reference an UPDATE assignment writes,
// or nil when it cannot tell.
func (st *stmt) assigned(c *ast.ColumnName) *inst {
	if c.Table.O != "" {
		return st.lookup(c.Schema.O, c.Table.O, st.top)
	}
	if len(st.top.insts) == 1 && len(st.top.others) == 0 {
		return st.top.insts[0]
	}
	if in := st.keyOf(c, st.top); in != nil {
		return in
	}
	return nil
}

func (sc *userRules) planUpdate(x *ast.UpdateStmt, s Session, bind binder) (*Plan, error) {
	st := sc.walk(x, s, bind)
	if !st.ruleInsts() {
		return sc.defPlan, nil
	}
	if err := st.link(); err != nil {
		return nil, err
	}
	var written []*inst
	unknown := false
	for _, a := range x.List {
		if in := st.assigned(a.Column); in != nil {
			written = append(written, in)
		} else {
			unknown = true
		}
	}
	for _, in := range written {
		if in.global() {
			if len(st.groups) > 0 {
				return nil, notSupported("UPDATE of global table %s together with sharded tables is not supported", in.rule.table)
			}
			return st.globalWrite(in)
		}
	}
	if len(st.groups) == 0 {
		for _, in := range st.top.insts {
			if in.global() && unknown {
				return nil, notSupported("UPDATE joining global table %s: qualify the assigned columns (table.column) so shardgate can tell which table is written", in.rule.table)
			}
		}
		return st.globalRead()
	}
	st.qualify(true)
	ts, err := st.place()
	if err != nil {
		return nil, err
	}
	if len(ts) > 1 {
		in := st.groups[0].insts[0]
		if x.Order != nil || x.Limit != nil {
			return nil, notSupported("UPDATE with ORDER BY or LIMIT over %d subtables of %s is not supported yet; add a condition on the shard key %s", len(ts), in.rule.table, in.rule.key)
		}
		if x.MultipleTable || len(st.top.insts)+len(st.top.others) > 1 {
			return nil, notSupported("multi-table UPDATE over %d subtables of %s is not supported yet; add a condition on the shard key %s", len(ts), in.rule.table, in.rule.key)
		}
	}
	for _, a := range x.List {
		in := st.assigned(a.Column)
		if in == nil || !in.sharded() || a.Column.Name.L != in.rule.key {
			continue
		}
		r := in.rule
		if len(ts) > 1 {
			return nil, notSupported("UPDATE would move rows of %s to another subtable: it sets the shard key %s on rows in %d subtables; add a condition on %s that pins them to one", r.table, r.key, len(ts), r.key)
		}
		v := valueOf(a.Expr, bind)
		v = st.storedKey(r, v)
		if err := needDefinition(st.sess.Catalog, r, v); err != nil {
			return nil, err
		}
		i, ok, err := r.index(v)
		if err != nil {
			return nil, outOfRange(r, v)
		}
		if j, alt := r.numericAlt(v); alt {
			i = j // as INSERT places it
		}
		cur := ts[0].gidx[in.group]
		if !ok {
			return nil, notSupported("UPDATE would move rows of %s to another subtable: the new value of shard key %s is not a constant shardgate can map", r.table, r.key)
		}
		if i != cur {
			return nil, notSupported("UPDATE would move rows of %s to another subtable: %s = %s belongs in %s, the rows are in %s", r.table, r.key, v, r.subs[i].name, r.subs[cur].name)
		}
	}
	if err := st.checkNodes(ts); err != nil {
		return nil, err
	}
	return st.build(x, ts, SumOK)
}

func (sc *userRules) planDelete(x *ast.DeleteStmt, s Session, bind binder) (*Plan, error) {
	st := sc.walk(x, s, bind)
	if !st.ruleInsts() {
		return sc.defPlan, nil
	}
	if err := st.link(); err != nil {
		return nil, err
	}
	var deleted []*inst
	if x.IsMultiTable {
		for _, d := range st.dels {
			if in := st.lookup(d.tn.Schema.O, d.tn.Name.O, d.sc); in != nil {
				deleted = append(deleted, in)
			}
		}
	} else {
		deleted = st.top.insts
	}
	for _, in := range deleted {
		if in.global() {
			if len(st.groups) > 0 {
				return nil, notSupported("DELETE from global table %s together with sharded tables is not supported", in.rule.table)
			}
			return st.globalWrite(in)
		}
	}
	if len(st.groups) == 0 {
		return st.globalRead()
	}
	st.qualify(false)
	ts, err := st.place()
	if err != nil {
		return nil, err
	}
	if len(ts) > 1 {
		in := st.groups[0].insts[0]
		if x.Order != nil || x.Limit != nil {
			return nil, notSupported("DELETE with ORDER BY or LIMIT over %d subtables of %s is not supported yet; add a condition on the shard key %s", len(ts), in.rule.table, in.rule.key)
		}
		if x.IsMultiTable || len(st.top.insts)+len(st.top.others) > 1 {
			return nil, notSupported("multi-table DELETE over %d subtables of %s is not supported yet; add a condition on the shard key %s", len(ts), in.rule.table, in.rule.key)
		}
	}
	if err := st.checkNodes(ts); err != nil {
		return nil, err
	}
	return st.build(x, ts, SumOK)
}

// insertTarget returns the reference of the table an INSERT writes.
func (st *stmt) insertTarget(x *ast.InsertStmt) *inst {
	if x.Table == nil || x.Table.TableRefs == nil {
		return nil
	}
	ts, ok := x.Table.TableRefs.Left.(*ast.TableSource)
	if !ok {
		return nil
	}
	for _, in := range st.insts {
		if in.tn == ts.Source {
			return in
		}
	}
	return nil
}

func (sc *userRules) planInsert(x *ast.InsertStmt, s Session, bind binder) (*Plan, error) {
	st := sc.walk(x, s, bind)
	if !st.ruleInsts() {
		return sc.defPlan, nil
	}
	T := st.insertTarget(x)
	if T == nil {
		return nil, mysql.NewError(mysql.ErUnknownError, "shardgate found no target table in INSERT")
	}
	if sel, ok := x.Select.(*ast.SelectStmt); ok {
		st.main = st.scopeOf[sel]
	}
	switch {
	case T.rule == nil:
		if err := st.link(); err != nil {
			return nil, err
		}
		if len(st.groups) == 0 {
			return st.globalRead()
		}
		st.qualify(true)
		ts, err := st.place()
		if err != nil {
			return nil, err
		}
		if len(ts) > 1 {
			in := st.groups[0].insts[0]
			return nil, notSupported("INSERT ... SELECT into %s from %d subtables of %s is not supported yet; add a condition on the shard key %s",
				T.tn.Name.O, len(ts), in.rule.table, in.rule.key)
		}
		if err := st.checkNodes(ts); err != nil {
			return nil, err
		}
		return st.build(x, ts, Forward)
	case T.global():
		if err := st.link(); err != nil {
			return nil, err
		}
		return st.globalWrite(T)
	}
	T.skip = true
	return st.insertSharded(x, T)
}

func (st *stmt) insertSharded(x *ast.InsertStmt, T *inst) (*Plan, error) {
	r := T.rule
	for _, a := range x.OnDuplicate {
		if a.Column.Name.L == r.key && (a.Column.Table.O == "" || st.lookup(a.Column.Schema.O, a.Column.Table.O, st.top) == T) {
			return nil, notSupported("ON DUPLICATE KEY UPDATE of shard key %s of table %s is not supported: it would move the row to another subtable", r.key, r.table)
		}
	}
	names, err := st.insertColumns(x, r)
	if err != nil {
		return nil, err
	}
	var gen []uint64
	var past uint64 // the largest explicit value of the sequence column
	if r.seq != "" && x.Select == nil {
		if names, gen, past, err = st.fillSequence(x, r, names); err != nil {
			return nil, err
		}
	}
	keyPos := slices.Index(names, r.key)
	if keyPos < 0 {
		return nil, missingKey(r, x.Select != nil)
	}
	if err := st.link(); err != nil {
		return nil, err
	}
	if x.Select != nil {
		return st.insertSelect(x, T, keyPos)
	}
	if len(st.groups) > 0 {
		return nil, notSupported("INSERT into sharded table %s with a subquery on sharded table %s is not supported yet", r.table, st.groups[0].insts[0].rule.table)
	}
	rows := map[int][][]ast.ExprNode{}
	var order []int
	first := -1 // subtable of the first row
	for ri, row := range x.Lists {
		if len(row) != len(names) {
			return nil, &mysql.SQLError{Code: ErWrongValueCount, State: "21S01", Message: fmt.Sprintf("Column count doesn't match value count at row %d", ri+1)}
		}
		v := valueOf(row[keyPos], st.bind)
		v = st.storedKey(r, v)
		if err := needDefinition(st.sess.Catalog, r, v); err != nil {
			return nil, err
		}
		i, ok, err := r.index(v)
		if err != nil {
			return nil, outOfRange(r, v)
		}
		if j, alt := r.numericAlt(v); alt {
			i = j // where an INT column's row is; looked up in both
		}
		if !ok {
			what := "an expression"
			switch {
			case v.kind == valNull:
				what = "NULL"
			case isDefault(row[keyPos]):
				what = "DEFAULT"
			case v.kind != valNone:
				what = fmt.Sprintf("%s, which the %s rule cannot map", v, ruleTypeName(r.kind))
			}
			return nil, notSupported("the shard key %s of table %s in row %d is %s; shardgate needs a constant to pick the subtable", r.key, r.table, ri+1, what)
		}
		if _, seen := rows[i]; !seen {
			order = append(order, i)
		}
		if ri == 0 {
			first = i
		}
		rows[i] = append(rows[i], row)
	}
	sort.Ints(order)
	st.qualify(false)
	p := &Plan{Kind: Forward, Tables: st.tables()}
	if len(order) > 1 || len(gen) > 0 {
		p.Kind = SumOK
	}
	if len(gen) > 0 {
		p.Generated, p.FirstID = len(gen), gen[0]
	}
	if r.seqAdvance && past > 0 {
		p.Advance = &Advance{DB: r.db, Table: r.table, Past: past}
	}
	all := x.Lists
	defer func() { x.Lists = all }()
	for k, i := range order {
		if i == first {
			p.IDTarget = k
		}
		t := tgt{node: r.subs[i].node}
		T.phys = r.subs[i].name
		if err := st.checkNode(t); err != nil {
			return nil, err
		}
		x.Lists = rows[i]
		sql, err := st.render(x, t)
		if err != nil {
			return nil, err
		}
		p.Targets = append(p.Targets, Target{Node: t.node, Subtable: T.phys, SQL: sql})
	}
	return p, nil
}

// insertColumns returns the lower-case names of the columns an INSERT into
// sharded table r sets, in the order of its values: its column list, or
// without one every column of the table in table order, which the session's
// Catalog must know (NeedSchemaError when it does not).
func (st *stmt) insertColumns(x *ast.InsertStmt, r *rule) ([]string, error) {
	if len(x.Columns) > 0 {
		names := make([]string, len(x.Columns))
		for i, c := range x.Columns {
			names[i] = c.Name.L
		}
		return names, nil
	}
	var cols []string
	ok := false
	if st.sess.Catalog != nil {
		cols, ok = st.sess.Catalog.Columns(r.db, r.table)
	}
	if !ok {
		return nil, &NeedSchemaError{DB: r.db, Table: r.table, Err: mysql.NewError(mysql.ErNotSupported,
			"INSERT into sharded table %s without a column list: shardgate does not know the table's columns (no subtable of %s.%s could be read); name the columns", r.table, r.db, r.table)}
	}
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = strings.ToLower(c)
	}
	return names, nil
}

// fillSequence puts global sequence values into an INSERT's rows where the
// sequence column r.seq is left out, NULL, DEFAULT or 0 (0 unless the
// session's sql_mode has NO_AUTO_VALUE_ON_ZERO), as MariaDB fills an
// AUTO_INCREMENT column. A column left out is added to the column list.
// It returns the columns as they now are, the values used, in row order,
// and the largest explicit (positive integer) value of the column.
func (st *stmt) fillSequence(x *ast.InsertStmt, r *rule, names []string) (_ []string, _ []uint64, past uint64, _ error) {
	pos := slices.Index(names, r.seq)
	if pos < 0 && len(x.Columns) == 0 {
		return nil, nil, 0, notSupported("sharded table %s has no column %s, which its rule's sequence names", r.table, r.seq)
	}
	var rows []int
	for ri, row := range x.Lists {
		if pos < 0 {
			rows = append(rows, ri)
			continue
		}
		if pos >= len(row) {
			continue // the column count error comes later
		}
		e := row[pos]
		v := valueOf(e, st.bind)
		zero := (v.kind == valInt && v.i == 0 || v.kind == valUint && v.u == 0) && st.sess.Mode&ModeNoAutoValueOnZero == 0
		switch {
		case v.kind == valNull || isDefault(e) || zero:
			rows = append(rows, ri)
		case v.kind == valInt && v.i > 0:
			past = max(past, uint64(v.i))
		case v.kind == valUint:
			past = max(past, v.u)
		}
	}
	if len(rows) == 0 {
		return names, nil, past, nil
	}
	if st.sess.IDs == nil {
		return nil, nil, 0, &NeedIDsError{DB: r.db, Table: r.table, N: len(rows), Peek: st.sess.explain,
			Err: mysql.NewError(mysql.ErNotSupported, "INSERT into sharded table %s needs values of its sequence (column %s), and none can be had here", r.table, r.seq)}
	}
	ids := make([]uint64, len(rows))
	next := st.sess.IDs.NextIDs
	if pk, ok := st.sess.IDs.(IDPeeker); ok && st.sess.explain {
		next = pk.PeekIDs // EXPLAIN shows the values and takes none
	}
	if err := next(r.db, r.table, ids); err != nil {
		return nil, nil, 0, err
	}
	if pos < 0 {
		// Rows with the wrong number of values keep it: the column count
		// error comes later, as MariaDB gives it.
		x.Columns = append(x.Columns, &ast.ColumnName{Name: ast.NewCIStr(r.seq)})
		names = append(names, r.seq)
		for k, ri := range rows {
			if len(x.Lists[ri]) == len(names)-1 {
				x.Lists[ri] = append(x.Lists[ri], ast.NewValueExpr(ids[k], "", ""))
			}
		}
		return names, ids, past, nil
	}
	for k, ri := range rows {
		x.Lists[ri][pos] = ast.NewValueExpr(ids[k], "", "")
	}
	return names, ids, past, nil
}

func isDefault(e ast.ExprNode) bool {
	_, ok := e.(*ast.DefaultExpr)
	return ok
}

func ruleTypeName(k ruleKind) string {
	return [...]string{"hash", "range", "date_year", "date_month", "date_day", "global"}[k]
}

// insertSelect plans INSERT ... SELECT into sharded table T: it runs only
// as one statement, reading one subtable (or unsharded and global tables)
// on the node of the target subtable.
func (st *stmt) insertSelect(x *ast.InsertStmt, T *inst, keyPos int) (*Plan, error) {
	r := T.rule
	sel, ok := x.Select.(*ast.SelectStmt)
	if !ok || sel.Fields == nil {
		return nil, notSupported("INSERT ... SELECT with UNION into sharded table %s is not supported yet", r.table)
	}
	for _, f := range sel.Fields.Fields {
		if f.WildCard != nil {
			return nil, notSupported("INSERT ... SELECT * into sharded table %s is not supported: list the selected columns so shardgate can find the shard key %s", r.table, r.key)
		}
	}
	if len(sel.Fields.Fields) != len(x.Columns) {
		return nil, &mysql.SQLError{Code: ErWrongValueCount, State: "21S01", Message: "Column count doesn't match value count at row 1"}
	}
	st.qualify(true)
	var src tgt
	sharded := len(st.groups) > 0
	if sharded {
		ts, err := st.place()
		if err != nil {
			return nil, err
		}
		if len(ts) > 1 {
			in := st.groups[0].insts[0]
			return nil, notSupported("INSERT ... SELECT into sharded table %s reads %d subtables of %s; it runs only when the source is pinned to one subtable (add a condition on its shard key %s)",
				r.table, len(ts), in.rule.table, in.rule.key)
		}
		src = ts[0]
	} else {
		src = tgt{gidx: nil}
	}
	keyExpr := sel.Fields.Fields[keyPos].Expr
	j := -1
	v := valueOf(keyExpr, st.bind)
	v = st.storedKey(r, v)
	if err := needDefinition(st.sess.Catalog, r, v); err != nil {
		return nil, err
	}
	i, ok, err := r.index(v)
	if j, alt := r.numericAlt(v); alt {
		i = j // as INSERT ... VALUES places it
	}
	switch {
	case err != nil:
		return nil, outOfRange(r, v)
	case ok:
		j = i
	case sharded:
		if c := colOf(keyExpr); c != nil {
			if in := st.keyOf(c, st.scopeOf[sel]); in != nil && in.rule.coloc == r.coloc {
				j = src.gidx[in.group]
			}
		}
	}
	if j < 0 {
		return nil, notSupported("INSERT ... SELECT into sharded table %s: shardgate cannot tell which subtable the selected value of %s belongs to; select a constant or the shard key of a co-located source table", r.table, r.key)
	}
	for gi, g := range st.groups {
		if g.rule.coloc == r.coloc && src.gidx[gi] != j {
			return nil, notSupported("INSERT ... SELECT into sharded table %s: the rows go to subtable %s but are read from subtable %s; source and target must be the same subtable",
				r.table, r.subs[j].name, g.insts[0].rule.subs[src.gidx[gi]].name)
		}
	}
	node := r.subs[j].node
	if sharded && src.node != node {
		return nil, notSupported("INSERT ... SELECT into sharded table %s: the rows go to subtable %s on %s but are read from %s; source and target must be on the same node",
			r.table, r.subs[j].name, node, st.pinnedList(src.gidx))
	}
	T.phys = r.subs[j].name
	t := tgt{node: node, gidx: src.gidx}
	if err := st.checkNode(t); err != nil {
		return nil, err
	}
	sql, err := st.render(x, t)
	if err != nil {
		return nil, err
	}
	return &Plan{Kind: Forward, Targets: []Target{{Node: node, Subtable: T.phys, SQL: sql}}, Tables: st.tables()}, nil
}

// planExplain plans EXPLAIN <statement> and DESCRIBE <table>.
func (sc *userRules) planExplain(x *ast.ExplainStmt, sql string, s Session, bind binder) (*Plan, error) {
	if x.Stmt == nil {
		// TiDB's EXPLAIN 'digest' forms name no statement.
		return sc.defPlan, nil
	}
	if sh, ok := x.Stmt.(*ast.ShowStmt); ok {
		return sc.planShow(sh, x, s)
	}
	if !x.Analyze {
		s.explain = true // the server explains the statement without running it
	}
	inner, err := sc.planStmt(x.Stmt, sql, s, bind)
	if err != nil {
		return nil, err
	}
	if inner.Kind != Forward || len(inner.Targets) != 1 {
		return nil, notSupported("EXPLAIN of a statement that runs on %d targets is not supported yet; EXPLAIN FORMAT='shard' shows where it runs", len(inner.Targets))
	}
	t := inner.Targets[0]
	if t.SQL == "" {
		return inner, nil
	}
	prefix := "EXPLAIN "
	if x.Analyze {
		prefix = "EXPLAIN ANALYZE "
	}
	switch f := strings.ToLower(x.Format); f {
	case "", "row", "traditional":
	case "json":
		prefix += "FORMAT=JSON "
	default:
		prefix += "FORMAT=" + strings.ToUpper(f) + " "
	}
	t.SQL = prefix + t.SQL
	return &Plan{Kind: Forward, Targets: []Target{t}, Renames: inner.Renames, Tables: inner.Tables}, nil
}
