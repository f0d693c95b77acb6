package router

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/format"
	"github.com/pingcap/tidb/pkg/parser/opcode"
	driver "github.com/pingcap/tidb/pkg/parser/test_driver"
)

// planMerge prepares a SELECT that runs on several subtables for merging:
// it rewrites sel in place into the statement every target runs (hidden
// columns appended for sort keys, grouping keys and aggregates the client
// did not select; AVG split into SUM and COUNT; HAVING removed; LIMIT
// pushed down as LIMIT offset+count where that is correct) and returns how
// the proxy combines the targets' rows.
//
// Column references in the returned Merge are indexes into the targets'
// rows; negative indexes count from the end (-1 is the last column), which
// is how hidden columns are addressed when the select list has a wildcard
// and the number of visible columns is only known at run time.
func planMerge(sel *ast.SelectStmt) (*Merge, error) {
	m := &Merge{Distinct: sel.Distinct}
	mp := &mergePlanner{sel: sel, m: m}
	for _, f := range sel.Fields.Fields {
		if f.WildCard != nil {
			mp.wildcard = true
		}
	}
	mp.visible = len(sel.Fields.Fields)
	for _, f := range sel.Fields.Fields {
		keepName(f)
		text := ""
		if f.WildCard == nil {
			text = restoreExpr(f.Expr)
		}
		mp.texts = append(mp.texts, text)
	}
	if sel.GroupBy != nil && sel.GroupBy.Rollup {
		return nil, notSupported("cross-shard GROUP BY ... WITH ROLLUP is not supported yet; add a condition on the shard key")
	}
	if sel.SelectStmtOpts != nil && sel.SelectStmtOpts.CalcFoundRows {
		return nil, notSupported("cross-shard SQL_CALC_FOUND_ROWS is not supported yet; add a condition on the shard key or run SELECT COUNT(*) separately")
	}
	if sel.SelectIntoOpt != nil {
		return nil, notSupported("cross-shard SELECT ... INTO is not supported")
	}
	if len(sel.WindowSpecs) > 0 {
		return nil, notSupported("cross-shard window functions are not supported yet; add a condition on the shard key")
	}
	// Aggregates in the select list.
	for i := 0; i < mp.visible; i++ {
		f := sel.Fields.Fields[i]
		if f.WildCard != nil {
			continue
		}
		if agg, ok := unparen(f.Expr).(*ast.AggregateFuncExpr); ok {
			if mp.wildcard {
				return nil, notSupported("cross-shard SELECT * together with aggregates is not supported yet; name the columns")
			}
			if err := mp.addAgg(i, f, agg); err != nil {
				return nil, err
			}
			continue
		}
		if err := noNestedAggregate(f.Expr); err != nil {
			return nil, err
		}
	}
	if sel.GroupBy != nil {
		m.Grouped = true
		for _, it := range sel.GroupBy.Items {
			c, err := mp.column(it.Expr)
			if err != nil {
				return nil, err
			}
			m.GroupBy = append(m.GroupBy, c)
		}
	}
	if len(m.Aggs) > 0 {
		m.Grouped = true
	}
	if sel.Having != nil {
		if !m.Grouped {
			return nil, notSupported("cross-shard HAVING without GROUP BY or aggregates is not supported yet")
		}
		e, err := mp.expr(sel.Having.Expr)
		if err != nil {
			return nil, err
		}
		m.Having = e
		sel.Having = nil
	}
	if sel.OrderBy != nil {
		for _, it := range sel.OrderBy.Items {
			c, err := mp.column(it.Expr)
			if err != nil {
				return nil, err
			}
			m.OrderBy = append(m.OrderBy, SortKey{Col: c, Desc: it.Desc})
		}
	}
	if sel.Limit != nil {
		count, ok1 := literalUint(sel.Limit.Count)
		offset, ok2 := uint64(0), true
		if sel.Limit.Offset != nil {
			offset, ok2 = literalUint(sel.Limit.Offset)
		}
		if !ok1 || !ok2 {
			return nil, notSupported("cross-shard LIMIT needs literal numbers")
		}
		m.HasLimit, m.Offset, m.Count = true, offset, count
		if m.Grouped || m.Distinct {
			// Partial groups or duplicates on one subtable say nothing
			// about the final rows: every target returns all its rows.
			sel.Limit = nil
		} else {
			sel.Limit = &ast.Limit{Count: ast.NewValueExpr(offset+count, "", "")}
		}
	}
	m.Hidden = len(sel.Fields.Fields) - mp.visible
	mp.finish()
	return m, nil
}

type mergePlanner struct {
	sel      *ast.SelectStmt
	m        *Merge
	visible  int
	wildcard bool
	// texts are the select fields' expressions as the client wrote them
	// (restored), for matching ORDER BY and GROUP BY items: AVG fields
	// are rewritten to SUM, which must not match ORDER BY SUM(...).
	texts []string
}

// finish turns positions of hidden columns into negative indexes (from the
// end of the row) when the select list has a wildcard, since the number of
// visible columns is then only known when the targets answer.
func (mp *mergePlanner) finish() {
	if !mp.wildcard {
		return
	}
	total := len(mp.sel.Fields.Fields)
	fix := func(i *int) {
		if *i >= mp.visible {
			*i -= total
		}
	}
	m := mp.m
	for i := range m.Aggs {
		fix(&m.Aggs[i].Col)
		fix(&m.Aggs[i].CountCol)
	}
	for i := range m.GroupBy {
		fix(&m.GroupBy[i])
	}
	for i := range m.OrderBy {
		fix(&m.OrderBy[i].Col)
	}
	var walk func(e *Expr)
	walk = func(e *Expr) {
		if e == nil {
			return
		}
		if e.Op == OpCol {
			fix(&e.Col)
		}
		for _, a := range e.Args {
			walk(a)
		}
	}
	walk(m.Having)
}

func (mp *mergePlanner) addAgg(pos int, f *ast.SelectField, agg *ast.AggregateFuncExpr) error {
	name := strings.ToLower(agg.F)
	if agg.Distinct {
		return notSupported("cross-shard %s(DISTINCT ...) is not supported yet; add a condition on the shard key", strings.ToUpper(name))
	}
	switch name {
	case ast.AggFuncCount:
		mp.m.Aggs = append(mp.m.Aggs, Agg{Col: pos, Func: AggCount})
	case ast.AggFuncSum:
		mp.m.Aggs = append(mp.m.Aggs, Agg{Col: pos, Func: AggSum})
	case ast.AggFuncMin:
		mp.m.Aggs = append(mp.m.Aggs, Agg{Col: pos, Func: AggMin})
	case ast.AggFuncMax:
		mp.m.Aggs = append(mp.m.Aggs, Agg{Col: pos, Func: AggMax})
	case ast.AggFuncAvg:
		keepName(f) // the target's column is SUM(...)
		sum := &ast.AggregateFuncExpr{F: ast.AggFuncSum, Args: agg.Args}
		f.Expr = sum
		cnt := mp.hidden(&ast.AggregateFuncExpr{F: ast.AggFuncCount, Args: agg.Args})
		mp.texts[cnt] = "" // a partial count the proxy does not finish: ORDER BY COUNT(...) must not use it
		mp.m.Aggs = append(mp.m.Aggs, Agg{Col: pos, Func: AggAvg, CountCol: cnt})
	default:
		return notSupported("cross-shard %s() is not supported yet; add a condition on the shard key", strings.ToUpper(name))
	}
	return nil
}

// hidden appends a column the client does not see and returns its
// position.
func (mp *mergePlanner) hidden(e ast.ExprNode) int {
	fs := mp.sel.Fields
	fs.Fields = append(fs.Fields, &ast.SelectField{Expr: e, AsName: ast.NewCIStr("_sg_" + strconv.Itoa(len(fs.Fields)))})
	mp.texts = append(mp.texts, restoreExpr(e))
	return len(fs.Fields) - 1
}

// column finds the select-list position an ORDER BY / GROUP BY item refers
// to (by position, alias, column name or identical expression), appending a
// hidden column when it is not selected.
func (mp *mergePlanner) column(e ast.ExprNode) (int, error) {
	if p, ok := e.(*ast.PositionExpr); ok {
		if p.P != nil || p.N < 1 || p.N > mp.visible {
			return 0, notSupported("ORDER BY/GROUP BY position must be a number between 1 and %d", mp.visible)
		}
		if mp.wildcard {
			return 0, notSupported("cross-shard ORDER BY/GROUP BY by position with SELECT * is not supported yet; name the column")
		}
		return p.N - 1, nil
	}
	if err := noNestedAggregate(e); err != nil {
		if _, isAgg := unparen(e).(*ast.AggregateFuncExpr); !isAgg {
			return 0, err
		}
	}
	if i := mp.find(e); i >= 0 {
		return i, nil
	}
	if mp.wildcard {
		// A field next to the wildcard (often by its alias, which the
		// targets cannot select again): its position is known only at run
		// time, so the targets compute its expression once more.
		for i := 0; i < mp.visible; i++ {
			if mp.matches(i, e) {
				return mp.hidden(mp.sel.Fields.Fields[i].Expr), nil
			}
		}
	}
	if agg, ok := unparen(e).(*ast.AggregateFuncExpr); ok {
		pos := mp.hidden(agg)
		if err := mp.addAgg(pos, mp.sel.Fields.Fields[pos], agg); err != nil {
			return 0, err
		}
		return pos, nil
	}
	return mp.hidden(e), nil
}

// find returns the select-list position matching e, or -1. With a
// wildcard only the hidden columns have known positions.
func (mp *mergePlanner) find(e ast.ExprNode) int {
	for i := range mp.sel.Fields.Fields {
		if i < mp.visible && mp.wildcard {
			continue // positions next to a wildcard are not known
		}
		if mp.matches(i, e) {
			return i
		}
	}
	return -1
}

// matches reports whether select field i is what e refers to: by alias,
// by column name or by identical expression.
func (mp *mergePlanner) matches(i int, e ast.ExprNode) bool {
	f := mp.sel.Fields.Fields[i]
	if f.WildCard != nil {
		return false
	}
	cn, isCol := unparen(e).(*ast.ColumnNameExpr)
	if isCol && cn.Name.Table.O == "" && f.AsName.L != "" && f.AsName.L == cn.Name.Name.L {
		return true
	}
	if fc, ok := unparen(f.Expr).(*ast.ColumnNameExpr); ok && isCol && fc.Name.Name.L == cn.Name.Name.L &&
		(cn.Name.Table.L == "" || fc.Name.Table.L == "" || cn.Name.Table.L == fc.Name.Table.L) {
		return true
	}
	return mp.texts[i] == restoreExpr(e)
}

// expr translates a HAVING expression; aggregates and columns become
// select-list references (hidden when not selected).
func (mp *mergePlanner) expr(e ast.ExprNode) (*Expr, error) {
	switch x := e.(type) {
	case *ast.ParenthesesExpr:
		return mp.expr(x.Expr)
	case *driver.ValueExpr:
		v, ok := constText(x)
		if !ok {
			return nil, notSupported("cross-shard HAVING with the constant %s is not supported yet", restoreExpr(x))
		}
		if k := x.Kind(); k == driver.KindString || k == driver.KindBytes {
			return &Expr{Op: OpString, Value: v}, nil
		}
		return &Expr{Op: OpConst, Value: v}, nil
	case *ast.BinaryOperationExpr:
		ops := map[opcode.Op]ExprOp{opcode.EQ: OpEQ, opcode.NE: OpNE, opcode.LT: OpLT, opcode.LE: OpLE, opcode.GT: OpGT,
			opcode.GE: OpGE, opcode.NullEQ: OpNullEQ, opcode.LogicAnd: OpAnd, opcode.LogicOr: OpOr, opcode.Plus: OpAdd,
			opcode.Minus: OpSub, opcode.Mul: OpMul, opcode.Div: OpDiv}
		op, ok := ops[x.Op]
		if !ok {
			return nil, notSupported("cross-shard HAVING with operator %s is not supported yet", x.Op)
		}
		l, err := mp.expr(x.L)
		if err != nil {
			return nil, err
		}
		r, err := mp.expr(x.R)
		if err != nil {
			return nil, err
		}
		return &Expr{Op: op, Args: []*Expr{l, r}}, nil
	case *ast.UnaryOperationExpr:
		a, err := mp.expr(x.V)
		if err != nil {
			return nil, err
		}
		switch x.Op {
		case opcode.Not, opcode.Not2:
			return &Expr{Op: OpNot, Args: []*Expr{a}}, nil
		case opcode.Plus:
			return a, nil
		case opcode.Minus:
			if a.Op == OpConst && a.Value != nil {
				if v, ok := negateText(a.Value); ok {
					return &Expr{Op: OpConst, Value: v}, nil
				}
			}
			return &Expr{Op: OpSub, Args: []*Expr{{Op: OpConst, Value: []byte("0")}, a}}, nil
		}
		return nil, notSupported("cross-shard HAVING with operator %s is not supported yet", x.Op)
	case *ast.BetweenExpr:
		var args []*Expr
		for _, a := range []ast.ExprNode{x.Expr, x.Left, x.Right} {
			e, err := mp.expr(a)
			if err != nil {
				return nil, err
			}
			args = append(args, e)
		}
		e := &Expr{Op: OpBetween, Args: args}
		if x.Not {
			e = &Expr{Op: OpNot, Args: []*Expr{e}}
		}
		return e, nil
	case *ast.IsNullExpr:
		a, err := mp.expr(x.Expr)
		if err != nil {
			return nil, err
		}
		op := OpIsNull
		if x.Not {
			op = OpIsNotNull
		}
		return &Expr{Op: op, Args: []*Expr{a}}, nil
	case *ast.ColumnNameExpr, *ast.AggregateFuncExpr:
		c, err := mp.column(x)
		if err != nil {
			return nil, err
		}
		return &Expr{Op: OpCol, Col: c}, nil
	}
	return nil, notSupported("cross-shard HAVING with %s is not supported yet; add a condition on the shard key", restoreExpr(e))
}

// constText returns a literal's value as text (nil for NULL).
func constText(x *driver.ValueExpr) ([]byte, bool) {
	switch x.Kind() {
	case driver.KindNull:
		return nil, true
	case driver.KindInt64:
		return strconv.AppendInt(nil, x.GetInt64(), 10), true
	case driver.KindUint64:
		return strconv.AppendUint(nil, x.GetUint64(), 10), true
	case driver.KindFloat32, driver.KindFloat64:
		// With an exponent, so that the merge takes it for the DOUBLE it is
		// (1.5e3 is not the integer 1500 when compared with a string).
		return strconv.AppendFloat(nil, x.GetFloat64(), 'e', -1, 64), true
	case driver.KindMysqlDecimal:
		return []byte(x.GetMysqlDecimal().String()), true
	case driver.KindString, driver.KindBytes:
		return []byte(x.GetString()), true
	}
	return nil, false
}

// negateText returns the text of -v for a numeric literal's text.
func negateText(v []byte) ([]byte, bool) {
	if _, err := strconv.ParseFloat(string(v), 64); err != nil {
		return nil, false
	}
	if v[0] == '-' {
		return v[1:], true
	}
	return append([]byte{'-'}, v...), true
}

// noNestedAggregate refuses aggregates inside larger expressions, which the
// proxy cannot finish yet.
func noNestedAggregate(e ast.ExprNode) error {
	f := &aggFinder{}
	e.Accept(f)
	if f.agg {
		return notSupported("cross-shard aggregates inside expressions (%s) are not supported yet; select the aggregate on its own", restoreExpr(e))
	}
	if f.win {
		return notSupported("cross-shard window functions are not supported yet; add a condition on the shard key")
	}
	return nil
}

func unparen(e ast.ExprNode) ast.ExprNode {
	for {
		p, ok := e.(*ast.ParenthesesExpr)
		if !ok {
			return e
		}
		e = p.Expr
	}
}

func literalUint(e ast.ExprNode) (uint64, bool) {
	v, ok := e.(*driver.ValueExpr)
	if !ok {
		return 0, false
	}
	switch v.Kind() {
	case driver.KindInt64:
		return uint64(v.GetInt64()), v.GetInt64() >= 0
	case driver.KindUint64:
		return v.GetUint64(), true
	}
	return 0, false
}

// restoreExpr prints an expression in the parser's canonical form, for
// comparing expressions.
func restoreExpr(e ast.Node) string {
	var sb strings.Builder
	if err := e.Restore(format.NewRestoreCtx(format.DefaultRestoreFlags, &sb)); err != nil {
		return ""
	}
	return sb.String()
}

// keepName aliases an unaliased select field to the name MySQL gives it,
// its original text, since the targets run the restored text ("COUNT(*)"
// restores as "COUNT(1)", "a + b" as "`a`+`b`"). Columns and literals keep
// the names the targets give them; names longer than MySQL allows for an
// alias are left alone.
func keepName(f *ast.SelectField) {
	if f.WildCard != nil || f.AsName.O != "" {
		return
	}
	switch unparen(f.Expr).(type) {
	case *ast.ColumnNameExpr, *driver.ValueExpr:
		return
	}
	if t := fieldText(f); utf8.RuneCountInString(t) <= 256 {
		f.AsName = ast.NewCIStr(t)
	}
}

// fieldText is the column name MySQL gives an unaliased select field: its
// original text.
func fieldText(f *ast.SelectField) string {
	if t := trimComments(f.Text()); t != "" {
		return t
	}
	if t := trimComments(f.Expr.Text()); t != "" {
		return t
	}
	return restoreExpr(f.Expr)
}

// trimComments drops spaces and /* */ comments around a field's text,
// which are not part of MySQL's column name.
func trimComments(t string) string {
	for {
		t = strings.TrimSpace(t)
		switch {
		case strings.HasSuffix(t, "*/") && strings.Contains(t, "/*"):
			t = t[:strings.LastIndex(t, "/*")]
		case strings.HasPrefix(t, "/*") && strings.Contains(t, "*/"):
			t = t[strings.Index(t, "*/")+2:]
		default:
			return t
		}
	}
}
