package engine

import (
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
	// enum marks an ENUM or SET column's value; enumNum is its number
	// (the member's index, the members' bit mask) when the table's
	// definition gave the members, nil otherwise.
	enum    bool
	enumNum []byte
	// uns marks an unsigned integer that is not a column's (a literal
	// past BIGINT, arithmetic on an unsigned operand).
	uns bool
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

// errIntOutOfRange is the statement's error when integer arithmetic in
// HAVING leaves BIGINT's range (BIGINT UNSIGNED's when an operand is
// unsigned).
func errIntOutOfRange(uns bool) error {
	what := "BIGINT"
	if uns {
		what = "BIGINT UNSIGNED"
	}
	return &mysql.SQLError{Code: erDataOutOfRange, State: "22003", Message: what + " value is out of range in the HAVING clause"}
}

// Integer arithmetic's ranges: MariaDB computes + - * of two integers in
// 64 bits, unsigned when either operand is, and fails past them (1690).
var (
	minBigint   = new(big.Rat).SetInt64(math.MinInt64)
	maxBigint   = new(big.Rat).SetInt64(math.MaxInt64)
	maxUnsigned = new(big.Rat).SetUint64(math.MaxUint64)
)

// unsigned reports whether v, an integer, is unsigned.
func unsigned(v exprValue) bool {
	return v.uns || v.num == nil && v.kind == cmpUnsigned
}

// intInRange reports whether r, the result of integer arithmetic, is in
// BIGINT's range, or BIGINT UNSIGNED's when uns.
func intInRange(r *big.Rat, uns bool) bool {
	if uns {
		return r.Sign() >= 0 && r.Cmp(maxUnsigned) <= 0
	}
	return r.Cmp(minBigint) >= 0 && r.Cmp(maxBigint) <= 0
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

// asBool is v in boolean context: an ENUM or SET value there is its
// number.
func asBool(v exprValue) exprValue {
	if v.enum && !v.null {
		return v.number()
	}
	return v
}

// number is an ENUM or SET value in numeric context: its number, or the
// statement's error when the members are not known.
func (v exprValue) number() exprValue {
	if !v.enum {
		return v
	}
	if v.enumNum == nil {
		return exprValue{err: errEnumNumber()}
	}
	return exprValue{text: v.enumNum, kind: cmpUnsigned}
}

// numbers is a and b compared or computed as numbers: ENUM and SET values
// as their numbers (err set when one is not known).
func numbers(a, b exprValue) (exprValue, exprValue, error) {
	a, b = a.number(), b.number()
	if a.err != nil {
		return a, b, a.err
	}
	return a, b, b.err
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
	if v = asBool(v); v.err != nil {
		return false, v.err
	}
	return truthy(v), nil
}

// eval evaluates e over a merged row with MySQL's three-valued logic.
func (c *columns) eval(e *router.Expr, row [][]byte) exprValue {
	switch e.Op {
	case router.OpCol:
		return c.column(e.Col, row)
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
		return c.evalAnd(e, row)
	case router.OpOr:
		return c.evalOr(e, row)
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
	return c.evalBinary(e, row)
}

// column owns reading a merged row's column as a value: its text, its
// comparison kind, whether it is an ENUM or SET, and its DECIMAL scale.
func (c *columns) column(i int, row [][]byte) exprValue {
	v := row[i]
	if v == nil {
		return exprNull
	}
	d := c.defs[i]
	ev := exprValue{text: v, kind: c.kinds[i], enum: d.Flags&(mysql.FlagEnum|mysql.FlagSet) != 0,
		scale: min(int(d.Decimals), maxDecimalScale)}
	if ev.enum && i < len(c.members) && c.members[i] != nil {
		ev.enumNum = memberNumber(c.members[i], v, d.Flags&mysql.FlagSet != 0)
	}
	return ev
}

// memberNumber is the number MariaDB gives an ENUM value (its member's
// index from 1; 0 for the empty error value) or a SET value (the bits of
// its members), from the column's members.
func memberNumber(members []string, v []byte, set bool) []byte {
	if !set {
		for k, m := range members {
			if m == string(v) {
				return strconv.AppendInt(nil, int64(k+1), 10)
			}
		}
		return []byte("0")
	}
	var bits uint64
	for part := range strings.SplitSeq(string(v), ",") {
		for k, m := range members {
			if m == part && k < 64 {
				bits |= 1 << k
			}
		}
	}
	return strconv.AppendUint(nil, bits, 10)
}

// evalAnd owns AND's three-valued logic and its short circuit.
func (c *columns) evalAnd(e *router.Expr, row [][]byte) exprValue {
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
}

// evalOr owns OR's three-valued logic and its short circuit.
func (c *columns) evalOr(e *router.Expr, row [][]byte) exprValue {
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
}

// evalBinary owns the operators of two operands that are both always
// evaluated: arithmetic, <=> and the comparisons.
func (c *columns) evalBinary(e *router.Expr, row [][]byte) exprValue {
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
		a, b, err := numbers(a, b)
		if err != nil {
			return exprValue{err: err}
		}
		return arith(e.Op, a, b, c.divPrec)
	case router.OpNullEQ:
		if a.null || b.null {
			return boolValue(a.null && b.null)
		}
		if enumAsNumber(a, b) {
			var err error
			if a, b, err = numbers(a, b); err != nil {
				return exprValue{err: err}
			}
		}
		return boolValue(compareExpr(a, b) == 0)
	}
	if a.null || b.null {
		return exprNull
	}
	if enumAsNumber(a, b) {
		var err error
		if a, b, err = numbers(a, b); err != nil {
			return exprValue{err: err}
		}
	}
	return compareResult(e.Op, compareExpr(a, b))
}

// compareResult owns turning a three-way comparison into the truth of a
// comparison operator (=, <>, <, <=, >, >=); NULL for any other operator.
func compareResult(op router.ExprOp, r int) exprValue {
	switch op {
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

// arith is + - * / over non-NULL values with MariaDB's result types: a
// string or a DOUBLE operand makes the result a DOUBLE (the string read as
// a DOUBLE), integers stay integers except under /, and the rest is
// DECIMAL (a quotient with divPrec more decimals than its dividend).
// Division by zero is NULL.
func arith(op router.ExprOp, a, b exprValue, divPrec int) exprValue {
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
		scale = min(sa+divPrec, maxDecimalScale)
		// MariaDB computes the quotient in whole words of 9 digits and
		// cuts it there (2/3 is 0.666666666 as a DOUBLE); a comparison
		// rounds it to scale (roundedDecimal).
		r = truncDecimal(r, (scale+8)/9*9)
	}
	uns := false
	if cls == numInt {
		if uns = unsigned(a) || unsigned(b); !intInRange(r, uns) {
			return exprValue{err: errIntOutOfRange(uns)}
		}
	}
	return exprValue{num: r, cls: cls, konst: konst, scale: scale, uns: uns}
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
		if v, lo, hi = v.number(), lo.number(), hi.number(); v.err != nil || lo.err != nil || hi.err != nil {
			return exprValue{err: errEnumNumber()}
		}
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

// padDate makes a DATE ("2024-05-01") comparable with DATETIMEs: midnight.
func padDate(v []byte) []byte {
	if len(v) == 10 {
		return append(v[:10:10], " 00:00:00"...)
	}
	return v
}
