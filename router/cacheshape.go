package router

import (
	"slices"
	"strconv"
)

// The result cache asks CacheFacts about every statement that missed it,
// and parsing one costs more than the rest of a miss. A text statement
// whose shape the plan cache holds as a template (cache.go) does not
// need it once the shape is known: the template's "key = literal" is a
// top-level AND term, so such a statement reads only rows whose key is
// that literal, and everything else CacheFacts checks (one table, no
// function, variable, locking read or INTO) is a property of the shape,
// not of its literals. The first statement of a shape CacheFacts sees is
// parsed; when its facts are a point lookup on the template's key, on
// the table's integer primary key, with the fill the template renders,
// the shape's later statements are answered from the literal alone. A
// prepared statement's executions are answered the same way from its
// template (cachedArgs), with the key's argument for the literal.

// shapeFacts is what CacheFacts learned of a template's shape from the
// first of its statements it parsed.
type shapeFacts struct {
	ok     bool   // the shape's statements are point lookups on the key literal
	table  string // Cacheable.Table
	column string // the key column (the rule's key)
}

// shapeFacts answers CacheFacts for text statement sql from its shape's
// template; parse gives the facts from the parsed statement, for the
// first statement of a shape. ok is false when the shape has no ready
// template, or its statements need a parse: the caller parses.
func (sc *userRules) shapeFacts(sql string, s Session, parse func() Cacheable) (Cacheable, bool) {
	if sc.cache == nil || len(sql) > maxShapeLen || s.Mode&^ModeNoAutoValueOnZero != 0 {
		return Cacheable{}, false
	}
	sb := scratches.Get().(*scratch)
	defer scratches.Put(sb)
	key := append(append(append(sb.key[:0], keyText), s.DB...), 0)
	key, spans, ok := normalize(key, sql, sb.spans[:0])
	sb.key, sb.spans = key, spans
	if !ok {
		return Cacheable{}, false
	}
	t := sc.cache.peek(key)
	if t == nil || t.state != ready || t.scatter != nil || t.rule == nil || t.key < 0 || t.key >= len(spans) || spans[t.key].class != litInt {
		return Cacheable{}, false
	}
	v, err := strconv.ParseInt(sql[spans[t.key].off:spans[t.key].end], 10, 64)
	if err != nil {
		return Cacheable{}, false
	}
	return sc.factsOf(t, v, s, parse, func(sub *subtable, _ int) Target {
		return Target{Node: sub.node, Subtable: sub.name, SQL: t.renderWith(sub.name, func(order int) string {
			return sql[spans[order].off:spans[order].end]
		}, fillLock)}
	})
}

// argsShapeFacts is shapeFacts for an execution of prepared statement
// sql with args: its template is the prepared statement's (cachedArgs),
// its key value the argument the template's key takes, and a fill runs
// the subtable's target with its placeholders.
func (sc *userRules) argsShapeFacts(sql string, s Session, args []Arg, parse func() Cacheable) (Cacheable, bool) {
	if sc.cache == nil || len(sql) > maxShapeLen || s.Mode&^ModeNoAutoValueOnZero != 0 {
		return Cacheable{}, false
	}
	sb := scratches.Get().(*scratch)
	defer scratches.Put(sb)
	key := append(append(append(append(sb.key[:0], keyPrepared), s.DB...), 0), sql...)
	sb.key = key
	t := sc.cache.peek(key)
	if t == nil || t.state != ready || t.scatter != nil || t.rule == nil || t.key < 0 || t.key >= len(args) || args[t.key].Kind != ArgInt {
		return Cacheable{}, false
	}
	v, err := strconv.ParseInt(args[t.key].Text, 10, 64)
	if err != nil {
		return Cacheable{}, false
	}
	return sc.factsOf(t, v, s, parse, func(_ *subtable, idx int) Target {
		if idx >= len(t.plans) || len(t.plans[idx].Targets) != 1 {
			return Target{}
		}
		tg := t.plans[idx].Targets[0]
		tg.SQL += fillLock
		return tg
	})
}

// factsOf is the facts of the statement of template t whose key value is
// v: from the shape when its first statement showed they may be (parsed
// with parse, then), with target giving the fill's target on the
// subtable v routes to.
func (sc *userRules) factsOf(t *template, v int64, s Session, parse func() Cacheable, target func(sub *subtable, idx int) Target) (Cacheable, bool) {
	f := t.facts.Load()
	if f == nil {
		c := parse()
		f = &shapeFacts{table: c.Table, column: c.Column}
		fast, ok := sc.fromShape(t, f, v, s, target)
		f.ok = ok && c.Why == "" && sameFacts(fast, c)
		t.facts.Store(f)
		return c, true
	}
	if !f.ok {
		return Cacheable{}, false
	}
	return sc.fromShape(t, f, v, s, target)
}

// fromShape builds the facts of the statement of template t whose key
// value is v, as f says the shape's statements read; ok is false when
// the catalog no longer has f's column as the integer primary key or the
// value does not route to one subtable.
func (sc *userRules) fromShape(t *template, f *shapeFacts, v int64, s Session, target func(sub *subtable, idx int) Target) (Cacheable, bool) {
	if f.column != t.rule.key {
		return Cacheable{}, false
	}
	kt, _ := s.Catalog.(KeyTyper)
	if kt == nil {
		return Cacheable{}, false
	}
	if primary, known := kt.IntegerKey(t.rule.db, t.rule.table, f.column); !known || !primary {
		return Cacheable{}, false
	}
	val, ok := cacheKeyValue(t.rule, value{kind: valInt, i: v}, s)
	if !ok {
		return Cacheable{}, false
	}
	idx, ok, err := t.rule.index(val)
	if err != nil || !ok {
		return Cacheable{}, false
	}
	if _, alt := t.rule.numericAlt(val); alt {
		return Cacheable{}, false
	}
	tg := target(&t.rule.subs[idx], idx)
	if tg.SQL == "" {
		return Cacheable{}, false
	}
	hp := &hitPlan{}
	hp.t[0] = tg
	hp.p = Plan{Kind: Forward, Targets: hp.t[:], Tables: t.tables}
	return Cacheable{Table: f.table, Column: f.column, Primary: true, Points: []int64{v}, Fill: &hp.p}, true
}

// sameFacts reports whether a shape's facts equal the parsed statement's.
func sameFacts(a, b Cacheable) bool {
	switch {
	case a.Why != b.Why || a.Table != b.Table || a.Column != b.Column || a.Primary != b.Primary || !slices.Equal(a.Points, b.Points):
		return false
	case a.Range != nil || b.Range != nil || a.Fill == nil || b.Fill == nil:
		return false
	}
	p, q := a.Fill, b.Fill
	return p.Kind == q.Kind && slices.Equal(p.Targets, q.Targets) && slices.Equal(p.Tables, q.Tables) && q.Merge == nil &&
		len(q.Renames) == 0 && len(q.Gathers) == 0 && q.Into == ""
}
