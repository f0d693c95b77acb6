package server

import (
	"math/big"

	"github.com/shardgate/shardgate/router"
)

// exprValue is the result of evaluating a HAVING expression: NULL, a
// number, or text compared with a column's rules.
type exprValue struct {
	null bool
	num  *big.Rat // set for numbers
	text []byte
	kind cmpKind
}

var exprTrue = exprValue{num: big.NewRat(1, 1)}
var exprFalse = exprValue{num: new(big.Rat)}
var exprNull = exprValue{null: true}

func truthy(v exprValue) bool {
	if v.null {
		return false
	}
	if v.num != nil {
		return v.num.Sign() != 0
	}
	r, ok := new(big.Rat).SetString(string(v.text))
	return ok && r.Sign() != 0
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
		r, ok := new(big.Rat).SetString(string(v.text))
		return r, ok
	}
	return nil, false
}

// eval evaluates e over a merged row with MySQL's three-valued logic.
func (mg *merger) eval(e *router.Expr, row [][]byte) exprValue {
	switch e.Op {
	case router.OpCol:
		v := row[e.Col]
		if v == nil {
			return exprNull
		}
		return exprValue{text: v, kind: mg.kinds[e.Col]}
	case router.OpConst:
		if e.Value == nil {
			return exprNull
		}
		if r, ok := new(big.Rat).SetString(string(e.Value)); ok {
			return exprValue{num: r}
		}
		return exprValue{text: e.Value, kind: cmpGeneralCI}
	case router.OpAnd:
		a, b := mg.eval(e.Args[0], row), mg.eval(e.Args[1], row)
		if (!a.null && !truthy(a)) || (!b.null && !truthy(b)) {
			return exprFalse
		}
		if a.null || b.null {
			return exprNull
		}
		return exprTrue
	case router.OpOr:
		a, b := mg.eval(e.Args[0], row), mg.eval(e.Args[1], row)
		if (!a.null && truthy(a)) || (!b.null && truthy(b)) {
			return exprTrue
		}
		if a.null || b.null {
			return exprNull
		}
		return exprFalse
	case router.OpNot:
		a := mg.eval(e.Args[0], row)
		if a.null {
			return exprNull
		}
		return boolValue(!truthy(a))
	case router.OpIsNull:
		return boolValue(mg.eval(e.Args[0], row).null)
	case router.OpIsNotNull:
		return boolValue(!mg.eval(e.Args[0], row).null)
	}
	a, b := mg.eval(e.Args[0], row), mg.eval(e.Args[1], row)
	switch e.Op {
	case router.OpAdd, router.OpSub, router.OpMul, router.OpDiv:
		x, ok1 := numeric(a)
		y, ok2 := numeric(b)
		if a.null || b.null || !ok1 || !ok2 {
			return exprNull
		}
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
	c := compareExpr(a, b)
	switch e.Op {
	case router.OpEQ:
		return boolValue(c == 0)
	case router.OpNE:
		return boolValue(c != 0)
	case router.OpLT:
		return boolValue(c < 0)
	case router.OpLE:
		return boolValue(c <= 0)
	case router.OpGT:
		return boolValue(c > 0)
	case router.OpGE:
		return boolValue(c >= 0)
	}
	return exprNull
}

// compareExpr compares two non-NULL values: as numbers when either is a
// number, else as text in the column's collation.
func compareExpr(a, b exprValue) int {
	x, ok1 := numeric(a)
	y, ok2 := numeric(b)
	if (a.num != nil || b.num != nil || ok1 && ok2) && ok1 && ok2 {
		return x.Cmp(y)
	}
	k := a.kind
	if a.num != nil || a.kind == cmpGeneralCI && b.kind != cmpGeneralCI {
		k = b.kind
	}
	return compareValues(k, a.text, b.text)
}
