package router

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/opcode"
	"github.com/pingcap/tidb/pkg/parser/test_driver"

	"github.com/shardgate/shardgate/mysql"
)

// The result cache (issue 39) stores the answers of single-table SELECTs
// that read rows by an integer key, and drops them when the binlog shows a
// write to one of those rows. Which statements qualify, and which rows an
// answer depends on, are facts of the parsed statement: CacheFacts
// decides them here, once, so that nothing above the router reads SQL
// text to guess them. A statement qualifies only when its answer is a
// function of the rows it names and of the session state the cache keys
// on: no function other than an aggregate (time, randomness, the
// connection's identity), no variable, no locking read, no INTO, no
// subquery, and a WHERE whose top-level AND terms pin the key to integer
// points (or, for the primary key, to one range). Anything the checks do
// not know is refused: a wrongly refused statement costs a backend read, a
// wrongly accepted one serves a stale answer.

// KeyTyper is what a Catalog may also answer for the result cache: whether column is, by itself, the
// primary key (primary) or a one-column unique key (unique) of logical table db.table, and of an
// integer type (TINYINT..BIGINT, signed or not). ok is false otherwise or when the table is not known.
// db and table are spelled as the shard rule spells them, column in lower case.
type KeyTyper interface {
	IntegerKey(db, table, column string) (primary bool, ok bool)
}

// Cacheable is what the result cache may do with a statement (Router.CacheFacts).
type Cacheable struct {
	// Why is "" when the answer may be cached; otherwise a short reason
	// for EXPLAIN and logs ("calls NOW()", "locking read", ...).
	Why string
	// Table is the logical "db.table" (lower case) the statement reads;
	// set whenever a single table was found, even when not cacheable.
	Table string
	// Column is the key column (lower case) the lookup is on.
	Column string
	// Primary: Column is the primary key (ranges only on the primary key).
	Primary bool
	// Points: the statement reads only rows whose Column is one of these
	// values (col = v, col IN (...)), in increasing order, each once.
	// Otherwise Range: only rows with Lo <= Column <= Hi.
	Points []int64
	Range  *KeyRange
	// Fill is the plan a fill runs instead of the statement's own plan: a
	// Forward plan with one target whose SQL is the target's statement
	// (subtable named as routing names it) followed by
	// " LOCK IN SHARE MODE NOWAIT". A locking read sees the latest
	// committed row and fails at once, rather than wait, when a
	// transaction holds it: that keeps a fill from storing a row older
	// than a binlogged write. For a prepared statement (args != nil) the
	// target SQL keeps its ? placeholders, as the plan cache's prepared
	// plans do.
	Fill *Plan
}

// KeyRange is an inclusive range of key values; NoLo and NoHi mean
// unbounded on that side (Lo or Hi is then 0).
type KeyRange struct {
	Lo, Hi     int64
	NoLo, NoHi bool
}

// fillLock is what a fill appends to its target's statement.
const fillLock = " LOCK IN SHARE MODE NOWAIT"

// CacheFacts parses sql (one statement) and reports whether its answer may be cached. args are the bound values of a
// prepared statement's placeholders (nil for text). It plans the statement as Route would, without the plan cache
// (whose counters it leaves alone); the plan it reports is Fill's. It is pure and safe for concurrent use.
func (r *Router) CacheFacts(sql string, s Session, args []Arg) Cacheable {
	sc := r.schemas[s.User]
	switch {
	case sc == nil:
		return Cacheable{Why: "no schema for user " + s.User}
	case s.Mode&ModeForeign != 0:
		return Cacheable{Why: "sql_mode=ORACLE"}
	case len(sc.rules) == 0:
		return Cacheable{Why: "table has no shard rule"}
	}
	if _, ok := explainShard(sql); ok {
		return Cacheable{Why: "EXPLAIN"}
	}
	if hintIn(sql, sc.hints) != nil {
		return Cacheable{Why: "names a node (hint)"}
	}
	why := ""
	if rest, _, ok := splitIntoVars(sql, s.Mode); ok {
		sql, why = rest, "INTO"
	} else {
		parse := func() Cacheable { return sc.parsedFacts(sql, "", s, args) }
		var c Cacheable
		var known bool
		if args == nil {
			c, known = sc.shapeFacts(sql, s, parse)
		} else {
			c, known = sc.argsShapeFacts(sql, s, args, parse)
		}
		if known {
			return c
		}
	}
	return sc.parsedFacts(sql, why, s, args)
}

// parsedFacts is CacheFacts from the parsed statement; why is a reason
// found already in its text.
func (sc *userRules) parsedFacts(sql, why string, s Session, args []Arg) Cacheable {
	stmts, release, err := parsePooled(sql, s.Mode)
	defer release()
	switch {
	case err != nil:
		return Cacheable{Why: "does not parse"}
	case len(stmts) != 1:
		return Cacheable{Why: fmt.Sprintf("%d statements", len(stmts))}
	}
	sel, selWhy := plainSelect(stmts[0])
	if why == "" {
		why = selWhy
	}
	if sel == nil {
		return Cacheable{Why: why}
	}
	var bind binder
	if args != nil {
		bind = argsBinder(args)
	}
	return sc.cacheFacts(sel, why, s, args, bind)
}

// plainSelect returns n when it is a SELECT, and why it is not a plain
// SELECT without the clauses that make its answer depend on more than the
// rows it reads ("" when it is).
func plainSelect(n ast.StmtNode) (*ast.SelectStmt, string) {
	switch n.(type) {
	case *ast.SelectStmt:
	case *ast.SetOprStmt:
		return nil, "set operation (UNION, EXCEPT, INTERSECT)"
	case *ast.ExplainStmt:
		return nil, "EXPLAIN"
	default:
		return nil, whyNotSelect
	}
	sel := n.(*ast.SelectStmt)
	opts := sel.SelectStmtOpts
	switch {
	case sel.Kind == ast.SelectStmtKindTable:
		return sel, "TABLE statement"
	case sel.Kind == ast.SelectStmtKindValues:
		return sel, "VALUES statement"
	case sel.Kind != ast.SelectStmtKindSelect:
		return sel, whyNotSelect
	case sel.With != nil:
		return sel, "WITH"
	case sel.SelectIntoOpt != nil:
		return sel, "INTO"
	case sel.LockInfo != nil && sel.LockInfo.LockType != ast.SelectLockNone:
		return sel, "locking read"
	case opts != nil && opts.CalcFoundRows:
		return sel, "SQL_CALC_FOUND_ROWS"
	case opts != nil && !opts.SQLCache:
		return sel, "SQL_NO_CACHE"
	}
	return sel, ""
}

// cacheFacts decides the facts of a SELECT; why is the reason, found
// already, why it is not a plain one.
func (sc *userRules) cacheFacts(sel *ast.SelectStmt, why string, s Session, args []Arg, bind binder) Cacheable {
	tn, fromWhy := oneTable(sel)
	if why == "" {
		why = fromWhy
	}
	if tn == nil {
		return Cacheable{Why: why}
	}
	db := tn.Schema.O
	if db == "" {
		db = s.DB
	}
	if db == "" {
		return Cacheable{Why: "no database selected"}
	}
	c := Cacheable{Table: strings.ToLower(db + "." + tn.Name.O), Why: why}
	if why != "" {
		return c
	}
	w := &cacheWalker{root: sel, args: args}
	sel.Accept(w)
	if w.why != "" {
		c.Why = w.why
		return c
	}
	ru := sc.rules[tableKey{db, tn.Name.O}]
	if ru == nil {
		c.Why = "table has no shard rule"
		return c
	}
	kt, _ := s.Catalog.(KeyTyper)
	if why := c.lookup(kt, ru, sel.Where, bind); why != "" {
		return Cacheable{Why: why, Table: c.Table}
	}
	fill, why := sc.fillPlan(sel, s, bind, w.markers)
	if why != "" {
		return Cacheable{Why: why, Table: c.Table}
	}
	c.Fill = fill
	return c
}

// oneTable returns the one base table of a SELECT's FROM clause, or why
// there is not one.
func oneTable(sel *ast.SelectStmt) (*ast.TableName, string) {
	if sel.From == nil || sel.From.TableRefs == nil {
		return nil, "reads no table"
	}
	if n := countSources(sel.From.TableRefs); n != 1 {
		return nil, fmt.Sprintf("joins %d tables", n)
	}
	ts, ok := sel.From.TableRefs.Left.(*ast.TableSource)
	if !ok {
		return nil, "joins tables"
	}
	tn, ok := ts.Source.(*ast.TableName)
	if !ok {
		return nil, "reads a derived table"
	}
	return tn, ""
}

// countSources counts the table sources of a FROM clause's join tree.
func countSources(rs ast.ResultSetNode) int {
	switch x := rs.(type) {
	case nil:
		return 0
	case *ast.Join:
		return countSources(x.Left) + countSources(x.Right)
	}
	return 1
}

// cacheWalker walks a whole SELECT and records the first thing in it that
// makes its answer depend on more than the rows it reads and the session
// state the cache keys on. It lets through only the node types it knows.
type cacheWalker struct {
	root    *ast.SelectStmt
	args    []Arg
	markers int    // ? placeholders seen
	why     string // the first reason, or ""
}

// cacheAggregates are the aggregate functions a cacheable SELECT may call.
var cacheAggregates = map[string]bool{
	ast.AggFuncCount: true, ast.AggFuncSum: true, ast.AggFuncMin: true, ast.AggFuncMax: true, ast.AggFuncAvg: true,
	ast.AggFuncGroupConcat: true, ast.AggFuncBitOr: true, ast.AggFuncBitAnd: true, ast.AggFuncBitXor: true,
	ast.AggFuncStddevPop: true, ast.AggFuncStddevSamp: true, ast.AggFuncVarPop: true, ast.AggFuncVarSamp: true,
}

// Enter implements ast.Visitor.
func (w *cacheWalker) Enter(n ast.Node) (ast.Node, bool) {
	if w.why != "" {
		return n, true
	}
	w.why = w.judge(n)
	return n, w.why != ""
}

// judge returns why node n keeps the statement from being cached, or "".
func (w *cacheWalker) judge(n ast.Node) string {
	switch x := n.(type) {
	case *ast.SelectStmt:
		if x != w.root {
			return "has a subquery"
		}
	case *ast.SetOprStmt, *ast.SubqueryExpr, *ast.ExistsSubqueryExpr, *ast.CompareSubqueryExpr:
		return "has a subquery"
	case *ast.VariableExpr:
		if x.IsSystem {
			return "reads a system variable"
		}
		return "reads a user variable"
	case *test_driver.ParamMarkerExpr:
		w.markers++
		if w.args == nil || x.Order >= len(w.args) {
			return "has a ? without a bound value"
		}
	case *ast.AggregateFuncExpr:
		if !cacheAggregates[strings.ToLower(x.F)] {
			return "calls " + strings.ToUpper(x.F) + "()"
		}
	case *ast.WindowFuncExpr:
		return "calls window function " + strings.ToUpper(x.Name) + "()"
	case *ast.FuncCallExpr:
		switch x.FnName.L {
		case ast.DateLiteral, ast.TimeLiteral, ast.TimestampLiteral:
			// DATE '2016-03-06' is a literal the parser spells as a call.
		default:
			return "calls " + strings.ToUpper(x.FnName.O) + "()"
		}
	case *ast.FuncCastExpr:
		if x.FunctionType == ast.CastConvertFunction {
			return "calls CONVERT()"
		}
		return "calls CAST()"
	case *ast.TableOptimizerHint:
		// MAX_EXECUTION_TIME, SET_VAR and the like: state of their own.
		return "has an optimizer hint"
	case *ast.DefaultExpr:
		return "calls DEFAULT()"
	case *ast.MatchAgainst:
		return "uses MATCH ... AGAINST"
	case *ast.PatternRegexpExpr:
		// Its answer depends on default_regex_flags as well.
		return "uses REGEXP"
	case *ast.TableRefsClause, *ast.Join, *ast.TableSource, *ast.TableName,
		*ast.FieldList, *ast.SelectField, *ast.ColumnNameExpr, *ast.ColumnName, *test_driver.ValueExpr,
		*ast.BinaryOperationExpr, *ast.UnaryOperationExpr, *ast.ParenthesesExpr, *ast.PatternInExpr,
		*ast.BetweenExpr, *ast.PatternLikeOrIlikeExpr, *ast.IsNullExpr, *ast.IsTruthExpr, *ast.CaseExpr,
		*ast.WhenClause, *ast.RowExpr, *ast.SetCollationExpr, *ast.GroupByClause, *ast.HavingClause,
		*ast.OrderByClause, *ast.ByItem, *ast.PositionExpr, *ast.Limit:
	default:
		return "uses " + strings.TrimPrefix(fmt.Sprintf("%T", n), "*ast.")
	}
	return ""
}

// Leave implements ast.Visitor.
func (w *cacheWalker) Leave(n ast.Node) (ast.Node, bool) { return n, true }

// keyTerm is what one top-level AND term of a WHERE says of one column.
type keyTerm struct {
	col    string
	points []int64 // col = v, col IN (...)
	isSet  bool    // points is a set of values (possibly narrowed to none)
	lo, hi int64   // inclusive bounds of col, when hasLo / hasHi
	hasLo  bool
	hasHi  bool
	empty  bool   // a bound no integer satisfies (> MaxInt64, < MinInt64)
	bad    string // the column is compared with a value that is not a BIGINT
}

// lookup finds, in where's top-level AND terms, the key the statement
// reads by and sets c's Column, Primary and Points or Range; it returns
// why there is none.
func (c *Cacheable) lookup(kt KeyTyper, ru *rule, where ast.ExprNode, bind binder) string {
	var terms []keyTerm
	for _, e := range conjuncts(where, nil) {
		if t, ok := keyTermOf(e, bind); ok {
			terms = append(terms, t)
		}
	}
	if len(terms) == 0 {
		return "no key lookup on table " + c.Table
	}
	if kt == nil {
		return "key column not known to be an integer primary or unique key"
	}
	type keyCol struct {
		name                    string
		primary, points, ranged bool
	}
	var cols []keyCol
	known, bad := false, ""
	for _, t := range terms {
		if slices.ContainsFunc(cols, func(k keyCol) bool { return k.name == t.col }) {
			continue
		}
		primary, ok := kt.IntegerKey(ru.db, ru.table, t.col)
		if !ok {
			continue
		}
		known = true
		k := keyCol{name: t.col, primary: primary}
		for _, u := range terms {
			if u.col == t.col {
				k.points = k.points || u.isSet
				k.ranged = k.ranged || u.hasLo || u.hasHi
				if u.bad != "" && bad == "" {
					bad = u.bad
				}
			}
		}
		cols = append(cols, k)
	}
	if !known {
		return "key column not known to be an integer primary or unique key"
	}
	// Points on the primary key, then on a unique key, then a range on
	// the primary key.
	best := -1
	for i, k := range cols {
		switch {
		case k.points && (best < 0 || !cols[best].points || k.primary && !cols[best].primary):
			best = i
		case k.ranged && k.primary && best < 0:
			best = i
		}
	}
	if best < 0 {
		if bad != "" {
			return bad
		}
		return "range on a key that is not the primary key of " + c.Table
	}
	c.Column, c.Primary = cols[best].name, cols[best].primary
	return c.combine(terms, cols[best].points)
}

// combine sets c's Points (points) or Range from the terms on c.Column.
func (c *Cacheable) combine(terms []keyTerm, points bool) string {
	var set []int64
	haveSet := false
	r := KeyRange{NoLo: true, NoHi: true}
	for _, t := range terms {
		if t.col != c.Column {
			continue
		}
		if t.bad != "" {
			return t.bad
		}
		switch {
		case t.empty:
			return "contradictory range"
		case t.isSet && !haveSet:
			set, haveSet = slices.Clone(t.points), true
		case t.isSet:
			set = slices.DeleteFunc(set, func(v int64) bool { return !slices.Contains(t.points, v) })
		}
		if t.hasLo && (r.NoLo || t.lo > r.Lo) {
			r.Lo, r.NoLo = t.lo, false
		}
		if t.hasHi && (r.NoHi || t.hi < r.Hi) {
			r.Hi, r.NoHi = t.hi, false
		}
	}
	if points {
		slices.Sort(set)
		c.Points = slices.Compact(set)
		if len(c.Points) == 0 {
			c.Points = nil
			return "no key value satisfies the WHERE"
		}
		return ""
	}
	if !r.NoLo && !r.NoHi && r.Lo > r.Hi {
		return "contradictory range"
	}
	c.Range = &r
	return ""
}

// keyTermOf reads one top-level AND term: a comparison of a column with
// constants (=, <=>, IN, <, <=, >, >=, BETWEEN). ok is false for any
// other term, which only narrows the rows further and is left out.
func keyTermOf(e ast.ExprNode, bind binder) (keyTerm, bool) {
	switch x := unparen(e).(type) {
	case *ast.BinaryOperationExpr:
		l, r, op := unparen(x.L), unparen(x.R), x.Op
		switch op {
		case opcode.EQ, opcode.NullEQ, opcode.GE, opcode.GT, opcode.LE, opcode.LT:
		default:
			return keyTerm{}, false
		}
		if _, ok := l.(*ast.ColumnNameExpr); !ok {
			l, r, op = r, l, flipCompare(op)
		}
		col, ok := l.(*ast.ColumnNameExpr)
		if !ok {
			return keyTerm{}, false
		}
		t := keyTerm{col: col.Name.Name.L}
		v, ok := keyInt(r, bind, &t)
		if !ok {
			return t, t.bad != ""
		}
		switch op {
		case opcode.EQ, opcode.NullEQ:
			t.points, t.isSet = []int64{v}, true
		case opcode.GE:
			t.lo, t.hasLo = v, true
		case opcode.GT:
			t.lo, t.hasLo, t.empty = v+1, true, v == math.MaxInt64
		case opcode.LE:
			t.hi, t.hasHi = v, true
		case opcode.LT:
			t.hi, t.hasHi, t.empty = v-1, true, v == math.MinInt64
		}
		return t, true
	case *ast.PatternInExpr:
		col, ok := unparen(x.Expr).(*ast.ColumnNameExpr)
		if !ok || x.Not || x.Sel != nil {
			return keyTerm{}, false
		}
		t := keyTerm{col: col.Name.Name.L, isSet: true}
		for _, item := range x.List {
			v, ok := keyInt(item, bind, &t)
			if !ok {
				return t, t.bad != ""
			}
			t.points = append(t.points, v)
		}
		return t, true
	case *ast.BetweenExpr:
		col, ok := unparen(x.Expr).(*ast.ColumnNameExpr)
		if !ok || x.Not {
			return keyTerm{}, false
		}
		t := keyTerm{col: col.Name.Name.L, hasLo: true, hasHi: true}
		var lok, hok bool
		if t.lo, lok = keyInt(x.Left, bind, &t); lok {
			t.hi, hok = keyInt(x.Right, bind, &t)
		}
		return t, lok && hok || t.bad != ""
	}
	return keyTerm{}, false
}

// keyInt returns the BIGINT value of constant e. When e is a constant of
// another kind it sets t.bad; when it is not a constant (a column, an
// expression) it leaves t alone: the term then says nothing of the key.
func keyInt(e ast.ExprNode, bind binder, t *keyTerm) (int64, bool) {
	switch v := valueOf(e, bind); v.kind {
	case valInt:
		return v.i, true
	case valNone:
	case valUint:
		t.bad = "key compared with an integer above BIGINT"
	default:
		t.bad = "key compared with a non-integer value"
	}
	return 0, false
}

// flipCompare returns the comparison that holds with its operands swapped.
func flipCompare(op opcode.Op) opcode.Op {
	switch op {
	case opcode.GT:
		return opcode.LT
	case opcode.GE:
		return opcode.LE
	case opcode.LT:
		return opcode.GT
	case opcode.LE:
		return opcode.GE
	}
	return op
}

// fillPlan plans sel as routing does and returns the plan of a fill: its
// one target's statement with the lock clause appended. markers is the
// number of ? placeholders of a prepared statement, all of which the
// target must keep (it runs with the execution's arguments).
func (sc *userRules) fillPlan(sel *ast.SelectStmt, s Session, bind binder, markers int) (*Plan, string) {
	p, err := sc.planSelect(sel, s, bind)
	if err != nil {
		var se *mysql.SQLError
		if errors.As(err, &se) {
			return nil, "not routed: " + se.Message
		}
		return nil, "not routed: " + err.Error()
	}
	switch {
	case p.Kind != Forward && len(p.Targets) > 1:
		return nil, fmt.Sprintf("reads %d subtables (one only in this version)", len(p.Targets))
	case p.Kind != Forward || len(p.Targets) != 1 || p.Merge != nil || len(p.Renames) > 0 || len(p.Gathers) > 0 || p.Into != "":
		return nil, "not a plan on one target"
	}
	tg := p.Targets[0]
	if tg.SQL == "" {
		// The client's statement as is: restored here, so that the lock
		// clause follows the statement's own text, with MySQL's column
		// names as the client's text would give them.
		if sel.Fields != nil {
			for _, f := range sel.Fields.Fields {
				keepName(f)
			}
		}
		if tg.SQL, err = restore(sel, nil, s.Mode); err != nil {
			return nil, "not restored"
		}
	}
	if bind != nil && Placeholders(tg.SQL, s.Mode) != markers {
		return nil, "the target's statement drops a ?"
	}
	tg.SQL += fillLock
	q := *p
	q.Targets = []Target{tg}
	return &q, ""
}

// whyNotSelect is Cacheable.Why of a statement that reads no rows as a
// SELECT: EXPLAIN leaves its cache column empty.
const whyNotSelect = "not a SELECT"

// cacheVerdict is the result cache's column of EXPLAIN FORMAT='shard':
// "yes: ..." with what the answer depends on, or "no: <why>"; table is
// the logical table when cacheable. Whether cache: names the table is
// the caller's to say.
func (r *Router) cacheVerdict(sql string, s Session, args []Arg) (verdict, table string) {
	c := r.CacheFacts(sql, s, args)
	switch {
	case c.Why == whyNotSelect:
		return "", ""
	case c.Why != "":
		return "no: " + c.Why, ""
	case c.Range != nil:
		lo, hi := "-inf", "+inf"
		if !c.Range.NoLo {
			lo = strconv.FormatInt(c.Range.Lo, 10)
		}
		if !c.Range.NoHi {
			hi = strconv.FormatInt(c.Range.Hi, 10)
		}
		return "yes: " + c.Table + " rows with " + c.Column + " in [" + lo + ", " + hi + "]", c.Table
	}
	return "yes: " + c.Table + " rows with " + c.Column + " in " + strconv.Itoa(len(c.Points)) + " value(s)", c.Table
}
