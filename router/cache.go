package router

import (
	"maps"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/opcode"
	"github.com/pingcap/tidb/pkg/parser/test_driver"
)

// The plan cache routes single-shard statements it has seen before
// without parsing them. A statement's shape is its text with the literals
// stripped (normalize); the first time a shape is seen again, the router
// plans the shape itself, with ? in place of the literals, and keeps a
// template when the plan provably picks its subtable from one literal
// alone: one table with a shard rule, no subquery, and "key = literal" as
// a top-level AND term of the WHERE (or the key's value in a one-row
// INSERT). Every row such a statement reads or writes has that key value,
// so it lives in the subtable the rule maps the value to, whatever else
// the statement says. A hit then maps the literal through the rule and
// splices the client's literals into the template's text. Everything
// else (merges, fan-outs, joins, unparsable shapes) is planned as before;
// the cache only remembers not to try again.
//
// Binary prepared statements use the same templates, keyed by their text
// with its ? placeholders, and take the key value from the bound
// arguments; their targets keep the placeholders, so a hit allocates
// nothing.

// templateState says what is known of a shape.
type templateState uint8

const (
	seenOnce   templateState = iota // planned normally once; build on the next sighting
	noTemplate                      // planned normally, always
	ready                           // routed from the template
)

// template is the cached plan of one shape.
type template struct {
	state  templateState
	rule   *rule
	key    int      // order of the ? (literal) holding the shard key
	pieces []piece  // the target statement, with the subtable's name and the ? left open
	tables []string // Plan.Tables
	fixed  int      // bytes of text pieces
	plans  []*Plan  // prepared statements: the plan of each subtable
	// A scatter template runs on every target of a Concat plan whose
	// targets and merge no literal decides; rule and key are then unused.
	scatter *scatter
	// facts is what the result cache's CacheFacts learned of the shape
	// (cacheshape.go); nil until it first asks.
	facts atomic.Pointer[shapeFacts]
}

// scatter is the literal-independent part of a cached Concat plan.
type scatter struct {
	targets []Target // node and subtable of each; SQL unset
	merge   *Merge
}

// piece is part of a template's statement: text, the subtable's name, or
// the literal with the given order.
type piece struct {
	text  string
	kind  uint8
	order int
}

const (
	pieceText uint8 = iota
	pieceTable
	pieceLiteral
)

// planCache maps shape keys to templates. It is bounded: when full, it
// first forgets the shapes seen only once, so that a stream of one-off
// statements does not evict the templates in use, and starts over only
// when those were not the bulk of it.
type planCache struct {
	mu  sync.RWMutex
	m   map[string]*template
	max int

	hits, misses atomic.Uint64
}

func newPlanCache(max int) *planCache {
	if max <= 0 {
		return nil
	}
	return &planCache{m: make(map[string]*template), max: max}
}

// pending marks a shape seen once.
var pending = &template{state: seenOnce}

// noTemplateEntry marks a shape the cache cannot answer.
var noTemplateEntry = &template{state: noTemplate}

// maxShapeLen bounds the statements the cache considers: single-shard
// statements are short, and a key holds a copy of the text (a bulk INSERT
// must not be kept thousands of times over).
const maxShapeLen = 4096

// lookup returns the template of key: nil on its first sighting (it is
// then remembered), built by build on the second.
func (c *planCache) lookup(key []byte, build func() *template) *template {
	c.mu.RLock()
	t := c.m[string(key)]
	c.mu.RUnlock()
	switch {
	case t == nil:
		c.put(key, pending)
	case t.state == seenOnce:
		t = build()
		c.put(key, t)
	}
	return t
}

// peek returns the template of key, if any, without counting or
// remembering the sighting.
func (c *planCache) peek(key []byte) *template {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.m[string(key)]
}

func (c *planCache) put(key []byte, t *template) {
	c.mu.Lock()
	if _, ok := c.m[string(key)]; !ok && len(c.m) >= c.max {
		maps.DeleteFunc(c.m, func(_ string, t *template) bool { return t.state == seenOnce })
		if len(c.m) > c.max/2 {
			clear(c.m)
		}
	}
	c.m[string(key)] = t
	c.mu.Unlock()
}

// render returns the template's statement on subtable sub with each
// literal written as lit returns it.
func (t *template) render(sub string, lit func(order int) string) string {
	return t.renderWith(sub, lit, "")
}

// renderWith is render followed by suffix, in one allocation.
func (t *template) renderWith(sub string, lit func(order int) string, suffix string) string {
	n := t.fixed + len(suffix)
	for i := range t.pieces {
		switch pc := &t.pieces[i]; pc.kind {
		case pieceTable:
			n += len(sub)
		case pieceLiteral:
			n += len(lit(pc.order))
		}
	}
	var b strings.Builder
	b.Grow(n)
	for i := range t.pieces {
		switch pc := &t.pieces[i]; pc.kind {
		case pieceText:
			b.WriteString(pc.text)
		case pieceTable:
			b.WriteString(sub)
		case pieceLiteral:
			b.WriteString(lit(pc.order))
		}
	}
	b.WriteString(suffix)
	return b.String()
}

// CacheStats returns how many statements the plan caches of all schemas
// answered and how many they left to the planner, and how many shapes
// they hold.
func (r *Router) CacheStats() (hits, misses uint64, shapes int) {
	for _, sc := range r.schemas {
		if c := sc.cache; c != nil {
			hits += c.hits.Load()
			misses += c.misses.Load()
			c.mu.RLock()
			shapes += len(c.m)
			c.mu.RUnlock()
		}
	}
	return hits, misses, shapes
}

// scratch is a key buffer and literal list for one lookup.
type scratch struct {
	key   []byte
	spans []span
}

var scratches = sync.Pool{New: func() any { return &scratch{key: make([]byte, 0, 256), spans: make([]span, 0, 16)} }}

// Key prefixes keep text shapes and prepared statements apart.
const (
	keyText     = 't'
	keyPrepared = 'p'
)

// cachedText routes statement text through the cache. ok is false when
// the statement must be planned normally.
func (sc *userRules) cachedText(sql string, s Session) (*Plan, bool) {
	if sc.cache == nil || len(sql) > maxShapeLen || s.Mode&^ModeNoAutoValueOnZero != 0 {
		return nil, false
	}
	sb := scratches.Get().(*scratch)
	defer scratches.Put(sb)
	key := append(append(append(sb.key[:0], keyText), s.DB...), 0)
	prefix := len(key)
	key, spans, ok := normalize(key, sql, sb.spans[:0])
	sb.key, sb.spans = key, spans
	if !ok {
		return nil, false
	}
	t := sc.cache.lookup(key, func() *template {
		shape := string(key[prefix : len(key)-len(spans)-1])
		return sc.buildTemplate(shape, sql, s, textBinder(sql, spans), false)
	})
	if t == nil || t.state != ready {
		return nil, false
	}
	if t.scatter != nil {
		return t.scatterPlan(func(order int) string { return sql[spans[order].off:spans[order].end] }), true
	}
	v, ok := literalValue(sql, spans[t.key])
	if !ok {
		return nil, false
	}
	if v, ok = cacheKeyValue(t.rule, v, s); !ok {
		return nil, false
	}
	idx, ok, err := t.rule.index(v)
	if err != nil || !ok {
		return nil, false
	}
	if _, alt := t.rule.numericAlt(v); alt {
		return nil, false // two subtables may hold it
	}
	sub := &t.rule.subs[idx]
	hp := &hitPlan{}
	hp.t[0] = Target{Node: sub.node, Subtable: sub.name, SQL: t.render(sub.name, func(order int) string {
		return sql[spans[order].off:spans[order].end]
	})}
	hp.p = Plan{Kind: Forward, Targets: hp.t[:], Tables: t.tables}
	return &hp.p, true
}

// hitPlan holds a cache hit's plan and its one target in one allocation.
type hitPlan struct {
	p Plan
	t [1]Target
}

// cachedArgs routes one execution of a binary prepared statement through
// the cache.
func (sc *userRules) cachedArgs(sql string, s Session, args []Arg) (*Plan, bool) {
	if sc.cache == nil || len(sql) > maxShapeLen || s.Mode&^ModeNoAutoValueOnZero != 0 {
		return nil, false
	}
	sb := scratches.Get().(*scratch)
	defer scratches.Put(sb)
	key := append(append(append(append(sb.key[:0], keyPrepared), s.DB...), 0), sql...)
	sb.key = key
	t := sc.cache.lookup(key, func() *template { return sc.buildTemplate(sql, sql, s, argsBinder(args), true) })
	if t == nil || t.state != ready {
		return nil, false
	}
	if t.scatter != nil {
		return t.plans[0], true
	}
	if t.key >= len(args) {
		return nil, false
	}
	v, ok := cacheKeyValue(t.rule, args[t.key].value(), s)
	if !ok || v.kind == valNone {
		return nil, false
	}
	idx, ok, err := t.rule.index(v)
	if err != nil || !ok {
		return nil, false
	}
	if _, alt := t.rule.numericAlt(v); alt {
		return nil, false // two subtables may hold it
	}
	return t.plans[idx], true
}

// literalValue converts a literal of the client's text as the parser
// would; only integers and strings without escapes are converted.
func literalValue(sql string, l span) (value, bool) {
	switch l.class {
	case litInt:
		u, err := strconv.ParseUint(sql[l.off:l.end], 10, 64)
		if err != nil {
			return value{}, false
		}
		if u <= math.MaxInt64 {
			return value{kind: valInt, i: int64(u)}, true
		}
		return value{kind: valUint, u: u}, true
	case litString:
		return value{kind: valString, s: sql[l.off+1 : l.end-1]}, true
	}
	return value{}, false
}

func textBinder(sql string, spans []span) binder {
	return func(order int) (value, bool) {
		if order < 0 || order >= len(spans) {
			return value{}, false
		}
		return literalValue(sql, spans[order])
	}
}

func argsBinder(args []Arg) binder {
	return func(order int) (value, bool) {
		if order < 0 || order >= len(args) {
			return value{}, false
		}
		v := args[order].value()
		return v, v.kind != valNone
	}
}

// buildTemplate plans shape (text whose literals are ? placeholders) with
// bind supplying the values of client's literals, and returns its
// template, or noTemplateEntry when its plan is not one the cache can
// reproduce.
func (sc *userRules) buildTemplate(shape, client string, s Session, bind binder, prepared bool) *template {
	if _, ok := explainShard(shape); ok || hintIn(shape, sc.hints) != nil {
		return noTemplateEntry
	}
	if client != shape {
		// The client's text must parse too: the template stands for
		// statements the planner accepts.
		stmts, release, err := parsePooled(client, s.Mode)
		release()
		if err != nil || len(stmts) != 1 {
			return noTemplateEntry
		}
	}
	stmts, release, err := parsePooled(shape, s.Mode)
	defer release()
	if err != nil || len(stmts) != 1 {
		return noTemplateEntry
	}
	n := stmts[0]
	if ins, ok := n.(*ast.InsertStmt); ok && sc.fillsSequence(ins, s) {
		// Each execution may take sequence values: planned every time.
		return noTemplateEntry
	}
	var sv shapeVisitor
	n.Accept(&sv)
	if sv.tables != 1 || sv.subquery {
		return noTemplateEntry
	}
	// Which orders the planner asks for: only the key's may decide.
	var asked []int
	rec := func(order int) (value, bool) {
		asked = append(asked, order)
		return bind(order)
	}
	plan, err := sc.planStmt(n, shape, s, rec)
	if numericStrings(asked, bind) || sc.unreadSpread(plan, asked, bind, s) {
		// This execution's plan has one more subtable than the shape's
		// usual one: built again from the next execution's values.
		return pending
	}
	if err == nil && plan.Kind == Concat {
		return scatterTemplate(n, shape, plan, asked, sv.markers, s, prepared)
	}
	if err != nil || plan.Kind != Forward || len(plan.Targets) != 1 || plan.Targets[0].Subtable == "" ||
		len(plan.Renames) > 0 || plan.Merge != nil || plan.Targets[0].SQL == "" {
		return noTemplateEntry
	}
	tg := plan.Targets[0]
	ru, idx := sc.ruleOfSubtable(tg.Subtable)
	if ru == nil || !ru.sharded() || ru.subs[idx].node != tg.Node {
		return noTemplateEntry
	}
	key, ok := keyMarker(n, ru.key)
	if !ok {
		return noTemplateEntry
	}
	for _, o := range asked {
		if o != key {
			return noTemplateEntry
		}
	}
	if v, ok := bind(key); !ok {
		return noTemplateEntry
	} else if i, ok, err := ru.index(v); err != nil || !ok || i != idx {
		return noTemplateEntry
	}
	// A column or alias spelled like a subtable would be taken for it.
	if strings.Contains(strings.ToLower(shape), strings.ToLower(tg.Subtable)) {
		return noTemplateEntry
	}
	nmarkers := sv.markers
	order, err := PlaceholderOrder(shape, s.Mode)
	if err != nil {
		return noTemplateEntry
	}
	t := &template{state: ready, rule: ru, key: key, tables: plan.Tables}
	if !t.split(tg.SQL, "`"+tg.Subtable+"`", order, nmarkers) {
		return noTemplateEntry
	}
	if prepared {
		t.plans = make([]*Plan, len(ru.subs))
		for i := range ru.subs {
			sub := &ru.subs[i]
			sql := t.render(sub.name, func(int) string { return "?" })
			t.plans[i] = &Plan{Kind: Forward, Tables: plan.Tables, Targets: []Target{{Node: sub.node, Subtable: sub.name, SQL: sql}}}
		}
	}
	return t
}

// unreadSpread reports whether plan went to several subtables because a
// value bound to one of orders is a string compared with the key of a
// table the catalog has not read (unreadKeys), which the next execution's
// value may not be.
func (sc *userRules) unreadSpread(plan *Plan, orders []int, bind binder, s Session) bool {
	if plan == nil || len(plan.Targets) < 2 {
		return false
	}
	r, _ := sc.ruleOfSubtable(plan.Targets[0].Subtable)
	if r == nil {
		return false
	}
	for _, o := range orders {
		if v, ok := bind(o); ok && unreadString(s.Catalog, r, v) {
			return true
		}
	}
	return false
}

// scatterTemplate caches a Concat plan (a merge over several subtables)
// when nothing in it depends on the literals: the planner asked for none
// (a hash rule never looks at range bounds) and every literal is in the
// WHERE, so the select list, grouping, HAVING, ORDER BY and LIMIT that the
// merge is built from hold none. Each target's statement is then the
// first target's with another subtable's name, which is checked here.
func scatterTemplate(n ast.StmtNode, shape string, plan *Plan, asked []int, markers int, s Session, prepared bool) *template {
	sel, ok := n.(*ast.SelectStmt)
	if !ok || len(asked) > 0 || len(plan.Targets) < 2 || len(plan.Renames) > 0 || plan.Sticky || len(plan.Gathers) > 0 {
		return noTemplateEntry
	}
	if sel.Where != nil {
		var wv shapeVisitor
		sel.Where.Accept(&wv)
		if wv.markers != markers {
			return noTemplateEntry
		}
	} else if markers > 0 {
		return noTemplateEntry
	}
	lower := strings.ToLower(shape)
	for _, tg := range plan.Targets {
		if tg.Subtable == "" || tg.SQL == "" || strings.Contains(lower, strings.ToLower(tg.Subtable)) {
			return noTemplateEntry
		}
	}
	order, err := PlaceholderOrder(shape, s.Mode)
	if err != nil {
		return noTemplateEntry
	}
	first := plan.Targets[0]
	t := &template{state: ready, tables: plan.Tables, scatter: &scatter{merge: plan.Merge}}
	if !t.split(first.SQL, "`"+first.Subtable+"`", order, markers) {
		return noTemplateEntry
	}
	for _, tg := range plan.Targets {
		if t.render(tg.Subtable, func(int) string { return "?" }) != tg.SQL {
			return noTemplateEntry
		}
		t.scatter.targets = append(t.scatter.targets, Target{Node: tg.Node, Subtable: tg.Subtable})
	}
	if prepared {
		// Nothing in it depends on the arguments: the plan is the answer.
		t.plans = []*Plan{plan}
	}
	return t
}

// scatterPlan is a scatter template's plan for the client's literals.
func (t *template) scatterPlan(lit func(order int) string) *Plan {
	sc := t.scatter
	p := &Plan{Kind: Concat, Tables: t.tables, Merge: sc.merge, Targets: make([]Target, len(sc.targets))}
	for i, tg := range sc.targets {
		tg.SQL = t.render(tg.Subtable, lit)
		p.Targets[i] = tg
	}
	return p
}

// split cuts a target statement the planner restored into pieces: the
// quoted subtable name (the backquotes stay in the text pieces) and the ?
// placeholders, whose orders are given by order (nil: text order). It
// reports false when the text does not have exactly nmarkers placeholders
// or does not name the subtable.
func (t *template) split(sql, quotedSub string, order []int, nmarkers int) bool {
	last, marks, tables := 0, 0, 0
	emit := func(end int) {
		if end > last {
			t.pieces = append(t.pieces, piece{text: sql[last:end], kind: pieceText})
			t.fixed += end - last
		}
	}
	for i := 0; i < len(sql); {
		switch c := sql[i]; {
		case c == '\'' || c == '"':
			end, _ := scanString(sql, i)
			if end < 0 {
				return false
			}
			i = end
		case c == '`':
			end := scanQuoted(sql, i, '`')
			if end < 0 {
				return false
			}
			if strings.IndexByte(sql[i:end], '?') >= 0 {
				// A column named after its expression's text (the
				// planner keeps MySQL's names that way): the name holds
				// the shape's ?, not the client's literal.
				return false
			}
			if strings.EqualFold(sql[i:end], quotedSub) {
				emit(i + 1)
				t.pieces = append(t.pieces, piece{kind: pieceTable})
				last = end - 1
				tables++
			}
			i = end
		case c == '/' && i+1 < len(sql) && sql[i+1] == '*':
			end := strings.Index(sql[i+2:], "*/")
			if end < 0 {
				return false
			}
			i += end + 4
		case c == '?':
			o := marks
			if order != nil {
				if marks >= len(order) {
					return false
				}
				o = order[marks]
			}
			emit(i)
			t.pieces = append(t.pieces, piece{kind: pieceLiteral, order: o})
			marks++
			i++
			last = i
		default:
			i++
		}
	}
	emit(len(sql))
	return marks == nmarkers && tables > 0
}

// ruleOfSubtable finds the rule that owns a subtable and the subtable's index.
func (sc *userRules) ruleOfSubtable(subtable string) (*rule, int) {
	for _, ru := range sc.rules {
		for i := range ru.subs {
			if ru.subs[i].name == subtable {
				return ru, i
			}
		}
	}
	return nil, 0
}

// shapeVisitor counts table references, subqueries and placeholders.
type shapeVisitor struct {
	tables   int
	markers  int
	subquery bool
}

func (v *shapeVisitor) Enter(n ast.Node) (ast.Node, bool) {
	switch n.(type) {
	case *ast.TableName:
		v.tables++
	case *ast.SubqueryExpr, *ast.ExistsSubqueryExpr:
		v.subquery = true
	case *test_driver.ParamMarkerExpr:
		v.markers++
	}
	return n, false
}

func (v *shapeVisitor) Leave(n ast.Node) (ast.Node, bool) { return n, true }

// keyMarker returns the order of the placeholder that fixes the shard key
// column key for every row the statement touches: "key = ?" (or <=>) as
// the only top-level AND term of the WHERE on the key, or the key's value
// in a one-row INSERT or REPLACE (INSERT ... SET is parsed into
// the same form).
func keyMarker(n ast.StmtNode, key string) (int, bool) {
	var where ast.ExprNode
	switch x := n.(type) {
	case *ast.SelectStmt:
		if !singleTable(x.From) {
			return 0, false
		}
		where = x.Where
	case *ast.UpdateStmt:
		if x.MultipleTable || !singleTable(x.TableRefs) {
			return 0, false
		}
		where = x.Where
	case *ast.DeleteStmt:
		if x.IsMultiTable || !singleTable(x.TableRefs) {
			return 0, false
		}
		where = x.Where
	case *ast.InsertStmt:
		if x.Select != nil {
			return 0, false
		}
		if len(x.Lists) != 1 {
			return 0, false
		}
		col := -1
		for i, c := range x.Columns {
			if c.Name.L == key {
				if col >= 0 {
					return 0, false
				}
				col = i
			}
		}
		if col < 0 || col >= len(x.Lists[0]) || len(x.Lists[0]) != len(x.Columns) {
			return 0, false
		}
		m, ok := x.Lists[0][col].(*test_driver.ParamMarkerExpr)
		if !ok {
			return 0, false
		}
		return m.Order, true
	default:
		return 0, false
	}
	found, order := 0, 0
	for _, c := range conjuncts(where, nil) {
		b, ok := unparen(c).(*ast.BinaryOperationExpr)
		if !ok {
			continue
		}
		l, r := unparen(b.L), unparen(b.R)
		if isKeyCol(r, key) {
			l, r = r, l
		}
		if !isKeyCol(l, key) {
			continue
		}
		m, ok := r.(*test_driver.ParamMarkerExpr)
		if (b.Op != opcode.EQ && b.Op != opcode.NullEQ) || !ok {
			continue
		}
		found, order = found+1, m.Order
	}
	return order, found == 1
}

func isKeyCol(e ast.ExprNode, key string) bool {
	c, ok := e.(*ast.ColumnNameExpr)
	return ok && c.Name.Name.L == key
}

// singleTable reports whether a FROM clause is one plain table.
func singleTable(refs *ast.TableRefsClause) bool {
	if refs == nil || refs.TableRefs == nil || refs.TableRefs.Right != nil {
		return false
	}
	ts, ok := refs.TableRefs.Left.(*ast.TableSource)
	if !ok {
		return false
	}
	_, ok = ts.Source.(*ast.TableName)
	return ok
}

// fillsSequence reports whether x inserts into a table whose rule has a
// global sequence.
func (sc *userRules) fillsSequence(x *ast.InsertStmt, s Session) bool {
	if x.Table == nil || x.Table.TableRefs == nil {
		return false
	}
	ts, ok := x.Table.TableRefs.Left.(*ast.TableSource)
	if !ok {
		return false
	}
	tn, ok := ts.Source.(*ast.TableName)
	if !ok {
		return false
	}
	db := tn.Schema.O
	if db == "" {
		db = s.DB
	}
	r := sc.rules[tableKey{db, tn.Name.O}]
	return r != nil && r.seq != ""
}
