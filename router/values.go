package router

import (
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/format"
	pmysql "github.com/pingcap/tidb/pkg/parser/mysql"
	"github.com/pingcap/tidb/pkg/parser/opcode"
	"github.com/pingcap/tidb/pkg/parser/test_driver"

	"github.com/shardgate/shardgate/mysql"
)

// binder supplies the value of the ? placeholder with the given order
// (0-based, in text order) when a prepared statement is executed. Route
// plans statement text, which has no placeholders, and passes nil.
type binder func(order int) (value, bool)

// valueOf evaluates e when it is a constant the router understands:
// literals, signed numeric literals, DATE/TIMESTAMP literals and bound
// placeholders. Anything else is valNone.
func valueOf(e ast.ExprNode, bind binder) value {
	switch x := e.(type) {
	case *test_driver.ParamMarkerExpr:
		if bind != nil {
			if v, ok := bind(x.Order); ok {
				return v
			}
		}
		return value{}
	case *test_driver.ValueExpr:
		return datumValue(x)
	case *ast.ParenthesesExpr:
		return valueOf(x.Expr, bind)
	case *ast.SetCollationExpr:
		// A collation does not change how a string compares with a
		// number (a user variable's string value comes with one).
		if v := valueOf(x.Expr, bind); v.kind == valString {
			return v
		}
	case *ast.UnaryOperationExpr:
		v := valueOf(x.V, bind)
		switch x.Op {
		case opcode.Plus:
			if v.kind == valInt || v.kind == valUint || v.kind == valNum {
				return v
			}
		case opcode.Minus:
			return negate(v)
		}
	case *ast.FuncCallExpr:
		if (x.FnName.L == ast.DateLiteral || x.FnName.L == ast.TimestampLiteral) && len(x.Args) == 1 {
			if a, ok := x.Args[0].(*test_driver.ValueExpr); ok && a.Kind() == test_driver.KindString {
				return value{kind: valDate, s: a.GetString()}
			}
		}
	}
	return value{}
}

func datumValue(x *test_driver.ValueExpr) value {
	switch x.Kind() {
	case test_driver.KindNull:
		return value{kind: valNull}
	case test_driver.KindInt64:
		return value{kind: valInt, i: x.GetInt64()}
	case test_driver.KindUint64:
		u := x.GetUint64()
		if u <= math.MaxInt64 {
			return value{kind: valInt, i: int64(u)}
		}
		return value{kind: valUint, u: u}
	case test_driver.KindString, test_driver.KindBytes:
		return value{kind: valString, s: x.GetString()}
	case test_driver.KindBinaryLiteral:
		// With an introducer a hex or bit literal is a string (a user
		// variable's value inlined by EXECUTE ... USING is one); without
		// one it is a number in numeric context.
		if x.Type.GetFlag()&pmysql.UnderScoreCharsetFlag != 0 {
			return value{kind: valString, s: string(x.GetBytes())}
		}
	case test_driver.KindFloat32, test_driver.KindFloat64:
		return value{kind: valNum, f: x.GetFloat64()}
	case test_driver.KindMysqlDecimal:
		s := x.GetMysqlDecimal().String()
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return value{}
		}
		return value{kind: valNum, f: f, s: s}
	}
	return value{}
}

func negate(v value) value {
	switch v.kind {
	case valInt:
		if v.i == math.MinInt64 {
			return value{}
		}
		return value{kind: valInt, i: -v.i}
	case valUint:
		if v.u == 1<<63 {
			return value{kind: valInt, i: math.MinInt64}
		}
	case valNum:
		s := ""
		if v.s != "" {
			s = "-" + v.s
		}
		return value{kind: valNum, f: -v.f, s: s}
	}
	return value{}
}

// stripDefaultCharset makes a plain string literal restore without the
// _utf8mb4 introducer the parser would add: an introducer changes how the
// server reads the bytes when the connection character set is not
// utf8mb4. Literals written with an explicit introducer keep it.
//
// A hex or bit literal with an introducer is a string of that character
// set, never a number, but the parser restores _utf8mb4 X'..' and
// _binary X'..' as a bare x'..' (a binary string, or a number in numeric
// context: id = _utf8mb4 X'35' would compare id with 53, and
// _utf8mb4 X'35' COLLATE utf8mb4_general_ci fails with 1253). Their
// character set is written in capitals, which the parser's Restore does
// not take for its default and writes out (_UTF8MB4 x'35').
func stripDefaultCharset(x *test_driver.ValueExpr) {
	switch x.Kind() {
	case test_driver.KindString:
		if x.Type.GetFlag()&pmysql.UnderScoreCharsetFlag == 0 {
			x.Type.SetCharset("")
		}
	case test_driver.KindBinaryLiteral:
		if x.Type.GetFlag()&pmysql.UnderScoreCharsetFlag != 0 {
			x.Type.SetCharset(strings.ToUpper(x.Type.GetCharset()))
		}
	}
}

// numericAlt returns, for a string compared with the key of a hash rule,
// the subtable of the number the server compares it as when the key
// column is numeric, if that is another subtable than the string's own
// (kingshard's hash: a string of decimal digits by its number, any other
// string by its CRC-32, which is where a string column's row lives). The
// router does not know the column's type, so such a string may be in
// either: ' 7', '6.0', '+5', '5e0 ' equal the INT 7, 6, 5, 5. A string
// that is more than a number ('7abc', 'abc': 7 and 0 with a truncation
// warning) keeps its one subtable. INSERT puts a row whose key is such a
// string in the integer's subtable (an INT column holds the integer; a
// string column's row is found there too, as lookups try both).
func (r *rule) numericAlt(v value) (int, bool) {
	if r.kind != ruleHash || v.kind != valString {
		return 0, false
	}
	if _, err := strconv.ParseUint(v.s, 10, 64); err == nil {
		return 0, false
	}
	n, ok := stringInteger(v.s)
	if !ok {
		return 0, false
	}
	j, ok, err := r.index(value{kind: valInt, i: n})
	if err != nil || !ok {
		return 0, false
	}
	if i, ok, err := r.index(v); err == nil && ok && i == j {
		return 0, false
	}
	return j, true
}

// numericStrings reports whether a value bound to one of orders is a
// string that numericAlt may send to a second subtable.
func numericStrings(orders []int, bind binder) bool {
	for _, o := range orders {
		v, ok := bind(o)
		if !ok || v.kind != valString {
			continue
		}
		if _, err := strconv.ParseUint(v.s, 10, 64); err != nil {
			if _, ok := stringInteger(v.s); ok {
				return true
			}
		}
	}
	return false
}

// stringInteger converts s to a number as the server does when it
// compares a string with a number, when s is a number between whitespace
// and an integer that a double holds exactly.
func stringInteger(s string) (int64, bool) {
	start, end, ok := numberPrefix(s)
	if !ok {
		return 0, false
	}
	if skipSpace(s, end) < len(s) {
		// More than a number: the server truncates it with a warning,
		// which a strict UPDATE makes an error; left to its own subtable.
		return 0, false
	}
	f, err := strconv.ParseFloat(s[start:end], 64)
	if err != nil || f != math.Trunc(f) || math.Abs(f) >= 1<<53 {
		return 0, false
	}
	return int64(f), true
}

// ArgKind says what a bound prepared-statement argument is.
type ArgKind uint8

// Argument kinds.
const (
	ArgUnknown ArgKind = iota // not usable for routing (long data, TIME, ...)
	ArgNull
	ArgInt    // Text is a signed or unsigned decimal integer
	ArgFloat  // Text is a decimal or float number
	ArgString // Text is a string (temporal values as 'YYYY-MM-DD[ HH:MM:SS]')
)

// Arg is the value bound to one ? of a prepared statement, as text.
type Arg struct {
	Kind ArgKind
	Text string
}

// value converts an argument to the router's constant form.
func (a Arg) value() value {
	switch a.Kind {
	case ArgNull:
		return value{kind: valNull}
	case ArgInt:
		if i, err := strconv.ParseInt(a.Text, 10, 64); err == nil {
			return value{kind: valInt, i: i}
		}
		if u, err := strconv.ParseUint(a.Text, 10, 64); err == nil {
			return value{kind: valUint, u: u}
		}
	case ArgFloat:
		if f, err := strconv.ParseFloat(a.Text, 64); err == nil {
			return value{kind: valNum, f: f, s: a.Text}
		}
	case ArgString:
		return value{kind: valString, s: a.Text}
	}
	return value{}
}

// RouteArgs plans a prepared statement's text for one execution, with args
// bound to its ? placeholders in text order. The targets' SQL keeps the
// placeholders that remain in it.
func (r *Router) RouteArgs(sql string, s Session, args []Arg) (*Plan, error) {
	return r.route(sql, s, args, true)
}

// Placeholders counts the ? placeholders of a statement the parser
// restored (outside quoted strings and names), to check that a target's
// SQL still has every parameter of the prepared statement.
func Placeholders(sql string, mode Mode) int {
	n := 0
	var quote byte
	for i := 0; i < len(sql); i++ {
		c := sql[i]
		switch {
		case quote != 0:
			if c == '\\' && quote != '`' && mode&ModeNoBackslashEscapes == 0 {
				i++
			} else if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"' || c == '`':
			quote = c
		case c == '?':
			n++
		}
	}
	return n
}

// Inline returns sql with each ? placeholder replaced by the literal of the
// same order, for running a prepared statement's execution through the
// text path (cross-shard executions are merged from text results). The
// literals must be valid SQL literals.
func Inline(sql string, literals []string, mode Mode) (string, error) {
	offs, err := MarkerOffsets(sql, mode)
	if err != nil {
		return "", err
	}
	return InlineAt(sql, offs, literals)
}

// MarkerOffsets returns the byte offset of each ? placeholder of sql, in
// text order, for InlineAt; a prepared statement computes them once.
func MarkerOffsets(sql string, mode Mode) ([]int, error) {
	if start, end, ok := intoSpan(sql, mode); ok {
		// The parser reads INTO only for files: the placeholders are those
		// of the statement without its INTO @variables clause.
		offs, err := MarkerOffsets(sql[:start]+sql[end:], mode)
		for i, o := range offs {
			if o >= start {
				offs[i] = o + end - start
			}
		}
		return offs, err
	}
	stmts, release, err := parsePooled(sql, mode)
	defer release()
	if err != nil {
		return nil, mysql.NewError(mysql.ErSyntax, "You have an error in your SQL syntax: %s", strings.TrimSpace(err.Error()))
	}
	if len(stmts) != 1 {
		return nil, notSupported("a prepared statement must be one statement")
	}
	f := &markerFinder{}
	stmts[0].Accept(f)
	offs := make([]int, len(f.markers))
	last := 0
	for i, m := range f.markers {
		off := m.Offset
		if off < last || off >= len(sql) || sql[off] != '?' {
			return nil, notSupported("cannot place the value of placeholder %d", i+1)
		}
		offs[i] = off
		last = off + 1
	}
	return offs, nil
}

// InlineAt writes literals in place of the placeholders at offs
// (MarkerOffsets of sql).
func InlineAt(sql string, offs []int, literals []string) (string, error) {
	if len(offs) != len(literals) {
		return "", mysql.NewError(mysql.ErWrongArguments, "the statement has %d placeholders, %d values were bound", len(offs), len(literals))
	}
	n := len(sql) - len(offs)
	for _, l := range literals {
		n += len(l)
	}
	var b strings.Builder
	b.Grow(n)
	last := 0
	for i, off := range offs {
		b.WriteString(sql[last:off])
		b.WriteString(literals[i])
		last = off + 1
	}
	b.WriteString(sql[last:])
	return b.String(), nil
}

// markerPrefix starts the stand-in literals PlaceholderOrder restores in
// place of the placeholders.
const markerPrefix = "\x00shardgate?"

var markerRe = regexp.MustCompile("\x00shardgate\\?([0-9]+);")

// PlaceholderOrder returns, for each ? placeholder of sql as the router
// restores it into the targets' statements (in their text order), the
// text-order index of the client's placeholder it stands for; nil when the
// order is the client's. Restoring may move placeholders: LIMIT ? OFFSET ?
// is written LIMIT ?,? with the offset first, so a client's parameter
// block must be reordered before it is passed on.
func PlaceholderOrder(sql string, mode Mode) ([]int, error) {
	if strings.Contains(sql, markerPrefix) {
		return nil, notSupported("a prepared statement that contains %q", markerPrefix)
	}
	stmts, release, err := parsePooled(sql, mode)
	defer release()
	if err != nil {
		return nil, mysql.NewError(mysql.ErSyntax, "You have an error in your SQL syntax: %s", strings.TrimSpace(err.Error()))
	}
	if len(stmts) != 1 {
		return nil, notSupported("a prepared statement must be one statement")
	}
	stmts[0].Accept(markerReplacer{})
	var b strings.Builder
	if err := stmts[0].Restore(format.NewRestoreCtx(mode.restoreFlags(), &b)); err != nil {
		return nil, notSupported("cannot restore the statement: %v", err)
	}
	var order []int
	moved := false
	seen := map[int]bool{}
	for _, m := range markerRe.FindAllStringSubmatch(b.String(), -1) {
		i, _ := strconv.Atoi(m[1])
		if seen[i] {
			return nil, notSupported("the restored statement repeats placeholder %d", i+1)
		}
		seen[i] = true
		moved = moved || i != len(order)
		order = append(order, i)
	}
	if n := CountPlaceholders(sql, mode); len(order) != n {
		return nil, notSupported("the restored statement has %d of the %d placeholders", len(order), n)
	}
	if !moved {
		return nil, nil
	}
	return order, nil
}

// markerReplacer replaces each placeholder by a string literal that names
// its Order.
type markerReplacer struct{}

func (markerReplacer) Enter(n ast.Node) (ast.Node, bool) { return n, false }

func (markerReplacer) Leave(n ast.Node) (ast.Node, bool) {
	if m, ok := n.(*test_driver.ParamMarkerExpr); ok {
		return ast.NewValueExpr(markerPrefix+strconv.Itoa(m.Order)+";", "", ""), true
	}
	return n, true
}

// CountPlaceholders returns the number of ? placeholders of a statement
// (0 when it does not parse).
func CountPlaceholders(sql string, mode Mode) int {
	if start, end, ok := intoSpan(sql, mode); ok {
		sql = sql[:start] + sql[end:] // INTO @variables, which the parser does not read
	}
	stmts, release, _ := parsePooled(sql, mode)
	defer release()
	n := 0
	for _, st := range stmts {
		f := &markerFinder{}
		st.Accept(f)
		n += len(f.markers)
	}
	return n
}

// markerFinder collects the placeholders of a statement in text order.
type markerFinder struct {
	markers []*test_driver.ParamMarkerExpr
}

func (f *markerFinder) Enter(n ast.Node) (ast.Node, bool) {
	if m, ok := n.(*test_driver.ParamMarkerExpr); ok {
		i, _ := slices.BinarySearchFunc(f.markers, m.Offset, func(x *test_driver.ParamMarkerExpr, off int) int { return x.Offset - off })
		f.markers = slices.Insert(f.markers, i, m)
	}
	return n, false
}

func (f *markerFinder) Leave(n ast.Node) (ast.Node, bool) { return n, true }
