package engine

import (
	"bytes"
	"math"
	"math/big"
	"strconv"
	"strings"

	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/router"
)

// exprValue is the result of evaluating a HAVING expression: NULL, a
// number, or text compared with a column's rules (lit: a string literal,
// which takes the rules of what it is compared with).
type exprValue struct {
	null bool
	num  *big.Rat // set for exact numbers (class numInt or numDecimal)
	flt  float64  // the value of a DOUBLE result (class numDouble, num nil)
	cls  numClass // for num and flt; columns take theirs from kind
	text []byte
	kind cmpKind
	lit  bool // a string literal
	// konst marks a value computed from literals only: MariaDB compares a
	// DECIMAL with a constant string as decimals, with any other string
	// as doubles.
	konst bool
	// err is what MariaDB answers instead of a value (DOUBLE arithmetic
	// past DOUBLE's range: 1690), or what the merge cannot evaluate (an
	// ENUM or SET in numeric context, where MariaDB uses the member's
	// number, which a result set does not carry: 1235). It propagates
	// to the whole expression, except past what AND and OR do not
	// evaluate.
	err error
	// enum marks an ENUM or SET column's value.
	enum bool
	// scale is a DECIMAL's number of fraction digits (its column's, its
	// literal's, or what MariaDB gives an arithmetic result): a computed
	// DECIMAL is rounded to it when compared (Arg_comparator rounds each
	// side to its decimals, so 2/3 = 0.6667 holds).
	scale int
}

// divPrecisionIncrement is MariaDB's default div_precision_increment:
// the fraction digits a DECIMAL division adds to its dividend's.
const divPrecisionIncrement = 4

// ErDataOutOfRange is ER_DATA_OUT_OF_RANGE (1690, SQLSTATE 22003), what
// MariaDB answers to DOUBLE arithmetic past DOUBLE's range.
const erDataOutOfRange = 1690

// errEnumNumber is the statement's error when HAVING uses an ENUM or SET
// value as a number.
func errEnumNumber() error {
	return mysql.NewError(mysql.ErNotSupported, "cross-shard HAVING that uses an ENUM or SET value as a number is not supported yet (MariaDB uses the member's index, which the merged rows do not carry); compare it with a string, or add a condition on the shard key")
}

// errOutOfRange is the statement's error when HAVING overflows a DOUBLE.
func errOutOfRange() error {
	return &mysql.SQLError{Code: erDataOutOfRange, State: "22003", Message: "DOUBLE value is out of range in the HAVING clause"}
}

// numClass is MariaDB's result type of a number: it decides how two
// values compare (Arg_comparator) and what arithmetic returns.
type numClass uint8

const (
	numNone    numClass = iota // text: a string, a date, a time
	numInt                     // INT_RESULT
	numDecimal                 // DECIMAL_RESULT
	numDouble                  // REAL_RESULT
)

var exprTrue = exprValue{num: big.NewRat(1, 1), cls: numInt, konst: true}
var exprFalse = exprValue{num: new(big.Rat), cls: numInt, konst: true}
var exprNull = exprValue{null: true}

// truthy is MariaDB's Item::val_bool: numbers are true when not zero,
// strings when their DOUBLE value is not zero ('1e999999' is true, 'inf'
// and 'abc' false).
func truthy(v exprValue) bool {
	if v.null {
		return false
	}
	switch class(v) {
	case numInt, numDecimal:
		r, _ := exact(v)
		return r.Sign() != 0
	}
	return toDouble(v) != 0
}

func boolValue(b bool) exprValue {
	if b {
		return exprTrue
	}
	return exprFalse
}

// class returns v's numeric class: a computed or literal number's own,
// a column's from its kind, numNone for text.
func class(v exprValue) numClass {
	if v.cls != numNone {
		return v.cls
	}
	if v.num != nil {
		return numDecimal
	}
	switch v.kind {
	case cmpSigned, cmpUnsigned:
		return numInt
	case cmpDecimal:
		return numDecimal
	case cmpFloat:
		return numDouble
	}
	return numNone
}

// exact returns an exact number (class numInt or numDecimal) as a
// big.Rat; ok is false for a column value that is not a number.
func exact(v exprValue) (*big.Rat, bool) {
	if v.num != nil {
		return v.num, true
	}
	return parseRat(string(v.text))
}

// toDecimal converts a non-NULL value to an exact number as MariaDB
// converts a string to DECIMAL: text by its numeric prefix, clamped to
// DECIMAL's range.
func toDecimal(v exprValue) *big.Rat {
	switch class(v) {
	case numInt, numDecimal:
		if r, ok := exact(v); ok {
			return r
		}
	case numDouble:
		if r := new(big.Rat).SetFloat64(toDouble(v)); r != nil {
			return r
		}
		return new(big.Rat)
	}
	return textNumber(v.text)
}

// toDouble converts a non-NULL value to DOUBLE as MariaDB does.
func toDouble(v exprValue) float64 {
	switch class(v) {
	case numDouble:
		if v.cls == numDouble { // computed; a FLOAT column is text
			return v.flt
		}
	case numInt, numDecimal:
		if r, ok := exact(v); ok {
			f, _ := r.Float64()
			return f
		}
	}
	return textDouble(v.text)
}

// numberPrefix returns the longest prefix of s (after leading white
// space) that MariaDB's string-to-number conversions read: a sign, digits
// with at most one point, and an exponent when digits follow its 'e'.
// ok is false when there are no digits: "abc", the empty string, "-";
// "0x10" reads as its "0".
func numberPrefix(s []byte) (num []byte, ok bool) {
	i := 0
	for i < len(s) && (s[i] == ' ' || (s[i] >= '\t' && s[i] <= '\r')) {
		i++
	}
	start := i
	if i < len(s) && (s[i] == '-' || s[i] == '+') {
		i++
	}
	digits := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
		digits++
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
			digits++
		}
	}
	if digits == 0 {
		return nil, false
	}
	end := i
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		j := i + 1
		if j < len(s) && (s[j] == '-' || s[j] == '+') {
			j++
		}
		if j < len(s) && s[j] >= '0' && s[j] <= '9' {
			for j < len(s) && s[j] >= '0' && s[j] <= '9' {
				j++
			}
			end = j
		}
	}
	return s[start:end], true
}

// textDouble converts text to DOUBLE as MariaDB's my_strtod does: the
// numeric prefix, 0 without one ('inf', 'nan' and '0x10' are not read as
// such), and a value past DOUBLE's range becomes the largest DOUBLE of
// its sign (with a warning on the server), not infinity.
func textDouble(s []byte) float64 {
	p, ok := numberPrefix(s)
	if !ok {
		return 0
	}
	f, err := strconv.ParseFloat(string(p), 64)
	if err != nil && !math.IsInf(f, 0) {
		return 0
	}
	switch {
	case math.IsInf(f, 1):
		return math.MaxFloat64
	case math.IsInf(f, -1):
		return -math.MaxFloat64
	}
	return f
}

// maxDecimalDigits and maxDecimalScale are the digits MariaDB's
// string-to-DECIMAL conversion keeps (my_decimal's buffer, 81 digits)
// and the fraction digits it keeps (DECIMAL_MAX_SCALE): '1e999999'
// compares with an integer as 81 nines, '1e-50' as 0.
const (
	maxDecimalDigits = 81
	maxDecimalScale  = 38
)

// textNumber converts text to DECIMAL as MariaDB does when it compares a
// string with an integer (or a DECIMAL column with a string constant):
// the numeric prefix, exactly, clamped to maxDecimalDigits and cut to
// maxDecimalScale fraction digits.
func textNumber(s []byte) *big.Rat {
	p, ok := numberPrefix(s)
	if !ok {
		return new(big.Rat)
	}
	neg := p[0] == '-'
	if p[0] == '-' || p[0] == '+' {
		p = p[1:]
	}
	mant, exp, expErr := p, 0, error(nil)
	if i := bytes.IndexAny(p, "eE"); i >= 0 {
		mant = p[:i]
		exp, expErr = strconv.Atoi(string(p[i+1:]))
		if expErr != nil || exp > 10*maxRatExp || exp < -10*maxRatExp {
			exp = 10 * maxRatExp // past any bound below, of the exponent's sign
			if p[i+1] == '-' {
				exp = -exp
			}
		}
	}
	// The digits without the point, and how many stand before it.
	ip, fp := mant, []byte(nil)
	if i := bytes.IndexByte(mant, '.'); i >= 0 {
		ip, fp = mant[:i], mant[i+1:]
	}
	digits := append(append([]byte(nil), ip...), fp...)
	point := len(ip) + exp
	for len(digits) > 0 && digits[0] == '0' {
		digits = digits[1:]
		point--
	}
	if len(digits) == 0 {
		return new(big.Rat)
	}
	if point > maxDecimalDigits {
		return clampDecimal(neg)
	}
	// Cut the fraction to maxDecimalScale digits.
	if keep := point + maxDecimalScale; keep < len(digits) {
		if keep <= 0 {
			return new(big.Rat)
		}
		digits = digits[:keep]
	}
	n, _ := new(big.Int).SetString(string(digits), 10)
	r := new(big.Rat).SetInt(n)
	if scale := len(digits) - point; scale > 0 {
		r.Quo(r, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil)))
	} else if scale < 0 {
		r.Mul(r, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(-scale)), nil)))
	}
	if neg {
		r.Neg(r)
	}
	return r
}

// clampDecimal returns the DECIMAL a string past its range converts to:
// maxDecimalDigits nines with the string's sign.
func clampDecimal(neg bool) *big.Rat {
	n, _ := new(big.Int).SetString(strings.Repeat("9", maxDecimalDigits), 10)
	if neg {
		n.Neg(n)
	}
	return new(big.Rat).SetInt(n)
}

// maxRatExp and maxRatLen bound the numbers parseRat accepts: beyond
// DOUBLE's range (1e308) and DECIMAL's 65 digits with room to spare, so
// that a constant such as 1e999999999 in a HAVING clause cannot make the
// proxy compute a billion-digit number.
const (
	maxRatExp = 400
	maxRatLen = 1000
)

// parseRat is big.Rat's SetString for decimal numbers within maxRatExp
// and maxRatLen; ok is false for others.
func parseRat(s string) (*big.Rat, bool) {
	if len(s) > maxRatLen {
		return nil, false
	}
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		exp, err := strconv.Atoi(s[i+1:])
		if err != nil || exp > maxRatExp || exp < -maxRatExp {
			return nil, false
		}
	}
	return new(big.Rat).SetString(s)
}

// asBool is v in boolean context: an ENUM or SET value there is its
// number, which the merge does not know.
func asBool(v exprValue) exprValue {
	if v.enum && !v.null {
		return exprValue{err: errEnumNumber()}
	}
	return v
}

// enumAsNumber reports whether comparing a with b compares an ENUM or
// SET value as a number (with a number; with a string it is its text).
func enumAsNumber(a, b exprValue) bool {
	return (a.enum && class(b) != numNone) || (b.enum && class(a) != numNone)
}

// exprFalseOr returns a when it is an error, else false.
func exprFalseOr(a exprValue) exprValue {
	if a.err != nil {
		return a
	}
	return exprFalse
}

// having reports whether a merged row passes the HAVING expression e, or
// the error MariaDB would answer instead.
func (c *columns) having(e *router.Expr, row [][]byte) (bool, error) {
	v := c.eval(e, row)
	if v.err != nil {
		return false, v.err
	}
	if v.enum {
		return false, errEnumNumber()
	}
	return truthy(v), nil
}

// eval evaluates e over a merged row with MySQL's three-valued logic.
func (c *columns) eval(e *router.Expr, row [][]byte) exprValue {
	switch e.Op {
	case router.OpCol:
		v := row[e.Col]
		if v == nil {
			return exprNull
		}
		d := c.defs[e.Col]
		return exprValue{text: v, kind: c.kinds[e.Col], enum: d.Flags&(mysql.FlagEnum|mysql.FlagSet) != 0,
			scale: min(int(d.Decimals), maxDecimalScale)}
	case router.OpConst:
		if e.Value == nil {
			return exprNull
		}
		return constValue(e.Value)
	case router.OpString:
		if e.Value == nil {
			return exprNull
		}
		return exprValue{text: e.Value, kind: cmpGeneralCI, lit: true}
	case router.OpAnd:
		// MariaDB evaluates the right side only when the left is not
		// false, which decides whether an overflow there is an error.
		a := asBool(c.eval(e.Args[0], row))
		if a.err != nil || (!a.null && !truthy(a)) {
			return exprFalseOr(a)
		}
		b := asBool(c.eval(e.Args[1], row))
		if b.err != nil {
			return b
		}
		if !b.null && !truthy(b) {
			return exprFalse
		}
		if a.null || b.null {
			return exprNull
		}
		return exprTrue
	case router.OpOr:
		a := asBool(c.eval(e.Args[0], row))
		if a.err != nil {
			return a
		}
		if !a.null && truthy(a) {
			return exprTrue
		}
		b := asBool(c.eval(e.Args[1], row))
		if b.err != nil {
			return b
		}
		if !b.null && truthy(b) {
			return exprTrue
		}
		if a.null || b.null {
			return exprNull
		}
		return exprFalse
	case router.OpNot:
		a := asBool(c.eval(e.Args[0], row))
		if a.null || a.err != nil {
			return a
		}
		return boolValue(!truthy(a))
	case router.OpBetween:
		v, lo, hi := c.eval(e.Args[0], row), c.eval(e.Args[1], row), c.eval(e.Args[2], row)
		for _, x := range []exprValue{v, lo, hi} {
			if x.err != nil {
				return x
			}
		}
		return between(v, lo, hi)
	case router.OpIsNull, router.OpIsNotNull:
		a := c.eval(e.Args[0], row)
		if a.err != nil {
			return a
		}
		return boolValue(a.null == (e.Op == router.OpIsNull))
	}
	a, b := c.eval(e.Args[0], row), c.eval(e.Args[1], row)
	if a.err != nil {
		return a
	}
	if b.err != nil {
		return b
	}
	switch e.Op {
	case router.OpAdd, router.OpSub, router.OpMul, router.OpDiv:
		if a.null || b.null {
			return exprNull
		}
		if a.enum || b.enum {
			return exprValue{err: errEnumNumber()}
		}
		return arith(e.Op, a, b)
	case router.OpNullEQ:
		if a.null || b.null {
			return boolValue(a.null && b.null)
		}
		if enumAsNumber(a, b) {
			return exprValue{err: errEnumNumber()}
		}
		return boolValue(compareExpr(a, b) == 0)
	}
	if a.null || b.null {
		return exprNull
	}
	if enumAsNumber(a, b) {
		return exprValue{err: errEnumNumber()}
	}
	r := compareExpr(a, b)
	switch e.Op {
	case router.OpEQ:
		return boolValue(r == 0)
	case router.OpNE:
		return boolValue(r != 0)
	case router.OpLT:
		return boolValue(r < 0)
	case router.OpLE:
		return boolValue(r <= 0)
	case router.OpGT:
		return boolValue(r > 0)
	case router.OpGE:
		return boolValue(r >= 0)
	}
	return exprNull
}

// constValue is a numeric literal: an integer, a DECIMAL (with a point)
// or a DOUBLE (with an exponent). A literal too long or too large for
// parseRat is kept as text, compared as the strings it would be compared
// with.
func constValue(v []byte) exprValue {
	if bytes.ContainsAny(v, "eE") {
		if f, err := strconv.ParseFloat(string(v), 64); err == nil {
			return exprValue{flt: f, cls: numDouble, konst: true}
		}
	}
	r, ok := parseRat(string(v))
	if !ok {
		return exprValue{text: v, kind: cmpGeneralCI, lit: true}
	}
	cls, scale := numInt, 0
	if i := bytes.IndexByte(v, '.'); i >= 0 {
		cls, scale = numDecimal, len(v)-i-1
	}
	return exprValue{num: r, cls: cls, konst: true, scale: scale}
}

// arith is + - * / over non-NULL values with MariaDB's result types: a
// string or a DOUBLE operand makes the result a DOUBLE (the string read as
// a DOUBLE), integers stay integers except under /, and the rest is
// DECIMAL. Division by zero is NULL.
func arith(op router.ExprOp, a, b exprValue) exprValue {
	ca, cb := class(a), class(b)
	konst := a.konst && b.konst
	if ca == numNone || cb == numNone || ca == numDouble || cb == numDouble {
		x, y := toDouble(a), toDouble(b)
		var f float64
		switch op {
		case router.OpAdd:
			f = x + y
		case router.OpSub:
			f = x - y
		case router.OpMul:
			f = x * y
		case router.OpDiv:
			if y == 0 {
				return exprNull
			}
			f = x / y
		}
		if math.IsInf(f, 0) {
			return exprValue{err: errOutOfRange()}
		}
		return exprValue{flt: f, cls: numDouble, konst: konst}
	}
	x, y := toDecimal(a), toDecimal(b)
	r := new(big.Rat)
	cls := numDecimal
	if ca == numInt && cb == numInt {
		cls = numInt
	}
	sa, sb := decimalScale(a), decimalScale(b)
	scale := max(sa, sb)
	switch op {
	case router.OpAdd:
		r.Add(x, y)
	case router.OpSub:
		r.Sub(x, y)
	case router.OpMul:
		r.Mul(x, y)
		scale = min(sa+sb, maxDecimalScale)
	case router.OpDiv:
		if y.Sign() == 0 {
			return exprNull
		}
		r.Quo(x, y)
		cls = numDecimal
		scale = min(sa+divPrecisionIncrement, maxDecimalScale)
		// MariaDB computes the quotient in whole words of 9 digits and
		// cuts it there (2/3 is 0.666666666 as a DOUBLE); a comparison
		// rounds it to scale (roundedDecimal).
		r = truncDecimal(r, (scale+8)/9*9)
	}
	return exprValue{num: r, cls: cls, konst: konst, scale: scale}
}

// compareExpr compares two non-NULL values as MariaDB's Arg_comparator
// does (checked against 10.11):
//   - two strings as text under the column's collation (a string literal
//     takes the column's), dates and datetimes as points in time;
//   - two exact numbers exactly; a DOUBLE with any number as DOUBLEs;
//   - a string with an integer as DECIMALs ('9007199254740993' is not
//     9007199254740992; '1e999999' is 81 nines);
//   - a string with a DECIMAL as DOUBLEs, except a DECIMAL that is not a
//     constant with a string constant (SUM(d) = '1.5'), as DECIMALs;
//   - a string with a DOUBLE as DOUBLEs ('1e999999' is the largest DOUBLE).
func compareExpr(a, b exprValue) int {
	ca, cb := class(a), class(b)
	switch {
	case ca == numNone && cb == numNone:
		k := a.kind
		if a.lit && !b.lit {
			k = b.kind
		}
		at, bt := a.text, b.text
		if k == cmpTemporal {
			at, bt = padDate(at), padDate(bt)
		}
		return compareValues(k, at, bt)
	case ca == numDouble || cb == numDouble:
		return compareDouble(toDouble(a), toDouble(b))
	case ca != numNone && cb != numNone:
		return roundedDecimal(a).Cmp(roundedDecimal(b))
	}
	// One string (or date, or time), one exact number.
	n, s := a, b
	if ca == numNone {
		n, s = b, a
	}
	sign := 1
	if ca == numNone {
		sign = -1
	}
	if class(n) == numInt || (!n.konst && s.lit) {
		return sign * roundedDecimal(n).Cmp(textNumber(s.text))
	}
	return sign * compareDouble(toDouble(n), textDouble(s.text))
}

// aggClass is the type MariaDB compares values of two classes under when
// it aggregates them for one comparison (BETWEEN's three values; checked
// against 10.11): a string with an integer as DECIMALs, a string with a
// DECIMAL as DOUBLEs, an integer with a DECIMAL as DECIMALs, anything
// with a DOUBLE as DOUBLEs.
func aggClass(a, b numClass) numClass {
	switch {
	case a == b:
		return a
	case a == numDouble || b == numDouble:
		return numDouble
	case a == numDecimal && b == numNone, a == numNone && b == numDecimal:
		return numDouble
	}
	return numDecimal // int with decimal, int with string
}

// between is v BETWEEN lo AND hi: the three values compared under their
// aggregated type (” BETWEEN 'a' AND 5 compares as numbers, although ”
// >= 'a' compares as strings), NULL as in lo <= v AND v <= hi.
func between(v, lo, hi exprValue) exprValue {
	if v.null {
		return exprNull
	}
	cls := numNone
	if !lo.null && !hi.null {
		cls = aggClass(aggClass(class(v), class(lo)), class(hi))
	} else if !lo.null {
		cls = aggClass(class(v), class(lo))
	} else if !hi.null {
		cls = aggClass(class(v), class(hi))
	}
	if cls != numNone && (v.enum || lo.enum || hi.enum) {
		return exprValue{err: errEnumNumber()}
	}
	cmp := func(x, y exprValue) int {
		switch cls {
		case numNone:
			return compareExpr(x, y)
		case numDouble:
			return compareDouble(toDouble(x), toDouble(y))
		}
		return toDecimal(x).Cmp(toDecimal(y))
	}
	ge, le := exprNull, exprNull
	if !lo.null {
		ge = boolValue(cmp(v, lo) >= 0)
	}
	if !hi.null {
		le = boolValue(cmp(v, hi) <= 0)
	}
	if (!ge.null && !truthy(ge)) || (!le.null && !truthy(le)) {
		return exprFalse
	}
	if ge.null || le.null {
		return exprNull
	}
	return exprTrue
}

// decimalScale is v's fraction digits as a DECIMAL (0 for an integer).
func decimalScale(v exprValue) int {
	if class(v) == numDecimal {
		return v.scale
	}
	return 0
}

// truncDecimal cuts r to digits fraction digits, toward zero.
func truncDecimal(r *big.Rat, digits int) *big.Rat {
	if r.IsInt() {
		return r
	}
	p := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(digits)), nil)
	q := new(big.Int).Quo(new(big.Int).Mul(r.Num(), p), r.Denom())
	return new(big.Rat).SetFrac(q, p)
}

// roundedDecimal is an exact number as MariaDB compares it: a computed
// DECIMAL rounded half away from zero to its scale (columns and literals
// are written at theirs already).
func roundedDecimal(v exprValue) *big.Rat {
	r := toDecimal(v)
	if v.num == nil || v.cls != numDecimal || r.IsInt() {
		return r
	}
	p := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(v.scale)), nil)
	n := new(big.Int).Mul(r.Num(), p)
	q, m := new(big.Int).QuoRem(n, r.Denom(), new(big.Int))
	// Half away from zero: |2m| >= denominator.
	if new(big.Int).Abs(new(big.Int).Lsh(m, 1)).Cmp(r.Denom()) >= 0 {
		if r.Sign() < 0 {
			q.Sub(q, big.NewInt(1))
		} else {
			q.Add(q, big.NewInt(1))
		}
	}
	return new(big.Rat).SetFrac(q, p)
}

func compareDouble(x, y float64) int {
	return cmp3(x < y, x > y)
}

// padDate makes a DATE ("2024-05-01") comparable with DATETIMEs: midnight.
func padDate(v []byte) []byte {
	if len(v) == 10 {
		return append(v[:10:10], " 00:00:00"...)
	}
	return v
}
