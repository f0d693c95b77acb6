package engine

import (
	"math/big"
	"strconv"
	"strings"

	"github.com/shardgate/shardgate/router"
)

// exprValue is the result of evaluating a HAVING expression: NULL, a
// number, or text compared with a column's rules (lit: a string literal,
// which takes the rules of what it is compared with).
type exprValue struct {
	null bool
	num  *big.Rat // set for numbers
	text []byte
	kind cmpKind
	lit  bool
}

var exprTrue = exprValue{num: big.NewRat(1, 1)}
var exprFalse = exprValue{num: new(big.Rat)}
var exprNull = exprValue{null: true}

func truthy(v exprValue) bool {
	if v.null {
		return false
	}
	return toNumber(v).Sign() != 0
}

func boolValue(b bool) exprValue {
	if b {
		return exprTrue
	}
	return exprFalse
}

// numeric returns v as a number when it is one (columns of numeric kinds,
// numeric literals).
func numeric(v exprValue) (*big.Rat, bool) {
	if v.num != nil {
		return v.num, true
	}
	switch v.kind {
	case cmpSigned, cmpUnsigned, cmpDecimal, cmpFloat:
		return parseRat(string(v.text))
	}
	return nil, false
}

// toNumber converts a non-NULL value to a number as MySQL does in numeric
// context: text by its longest numeric prefix ("12abc" is 12, "abc" 0).
func toNumber(v exprValue) *big.Rat {
	if r, ok := numeric(v); ok {
		return r
	}
	return textNumber(v.text)
}

func textNumber(s []byte) *big.Rat {
	i := 0
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n') {
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
		return new(big.Rat)
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
	r, ok := parseRat(strings.TrimSuffix(string(s[start:end]), "."))
	if !ok {
		return new(big.Rat)
	}
	return r
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

// eval evaluates e over a merged row with MySQL's three-valued logic.
func (c *columns) eval(e *router.Expr, row [][]byte) exprValue {
	switch e.Op {
	case router.OpCol:
		v := row[e.Col]
		if v == nil {
			return exprNull
		}
		return exprValue{text: v, kind: c.kinds[e.Col]}
	case router.OpConst:
		if e.Value == nil {
			return exprNull
		}
		if r, ok := parseRat(string(e.Value)); ok {
			return exprValue{num: r}
		}
		return exprValue{text: e.Value, kind: cmpGeneralCI, lit: true}
	case router.OpString:
		if e.Value == nil {
			return exprNull
		}
		return exprValue{text: e.Value, kind: cmpGeneralCI, lit: true}
	case router.OpAnd:
		a, b := c.eval(e.Args[0], row), c.eval(e.Args[1], row)
		if (!a.null && !truthy(a)) || (!b.null && !truthy(b)) {
			return exprFalse
		}
		if a.null || b.null {
			return exprNull
		}
		return exprTrue
	case router.OpOr:
		a, b := c.eval(e.Args[0], row), c.eval(e.Args[1], row)
		if (!a.null && truthy(a)) || (!b.null && truthy(b)) {
			return exprTrue
		}
		if a.null || b.null {
			return exprNull
		}
		return exprFalse
	case router.OpNot:
		a := c.eval(e.Args[0], row)
		if a.null {
			return exprNull
		}
		return boolValue(!truthy(a))
	case router.OpIsNull:
		return boolValue(c.eval(e.Args[0], row).null)
	case router.OpIsNotNull:
		return boolValue(!c.eval(e.Args[0], row).null)
	}
	a, b := c.eval(e.Args[0], row), c.eval(e.Args[1], row)
	switch e.Op {
	case router.OpAdd, router.OpSub, router.OpMul, router.OpDiv:
		if a.null || b.null {
			return exprNull
		}
		x, y := toNumber(a), toNumber(b)
		r := new(big.Rat)
		switch e.Op {
		case router.OpAdd:
			r.Add(x, y)
		case router.OpSub:
			r.Sub(x, y)
		case router.OpMul:
			r.Mul(x, y)
		case router.OpDiv:
			if y.Sign() == 0 {
				return exprNull
			}
			r.Quo(x, y)
		}
		return exprValue{num: r}
	case router.OpNullEQ:
		if a.null || b.null {
			return boolValue(a.null && b.null)
		}
		return boolValue(compareExpr(a, b) == 0)
	}
	if a.null || b.null {
		return exprNull
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

// compareExpr compares two non-NULL values as MySQL does: as numbers when
// either is a number (the other converted), else as text under the
// column's collation (a string literal takes the column's), dates and
// datetimes as points in time.
func compareExpr(a, b exprValue) int {
	x, aNum := numeric(a)
	y, bNum := numeric(b)
	switch {
	case aNum && bNum:
		return x.Cmp(y)
	case aNum:
		return x.Cmp(textNumber(b.text))
	case bNum:
		return textNumber(a.text).Cmp(y)
	}
	k := a.kind
	if a.lit && !b.lit {
		k = b.kind
	}
	at, bt := a.text, b.text
	if k == cmpTemporal {
		at, bt = padDate(at), padDate(bt)
	}
	return compareValues(k, at, bt)
}

// padDate makes a DATE ("2024-05-01") comparable with DATETIMEs: midnight.
func padDate(v []byte) []byte {
	if len(v) == 10 {
		return append(v[:10:10], " 00:00:00"...)
	}
	return v
}
