package engine

import (
	"errors"
	"math"
	"testing"

	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/router"
)

// TestStringNumberCompare holds the merge's comparison of strings with
// numbers to MariaDB 10.11's answers (each row was run on the server): a
// string against an integer as DECIMALs, against a DOUBLE as DOUBLEs,
// against a DECIMAL as DOUBLEs unless the DECIMAL is a column and the
// string a constant; overflow to the largest value, not to infinity or 0.
func TestStringNumberCompare(t *testing.T) {
	col := func(k cmpKind, v string) exprValue { return exprValue{text: []byte(v), kind: k} }
	str := func(v string) exprValue { return exprValue{text: []byte(v), kind: cmpGeneralCI, lit: true} }
	scol := func(v string) exprValue { return col(cmpGeneralCI, v) }
	lit := func(v string) exprValue { return constValue([]byte(v)) }
	tests := []struct {
		a, b exprValue
		want int
	}{
		{scol("1e999999"), lit("0"), 1},
		{scol("-1e999999"), lit("0"), -1},
		{scol("1e999999"), lit("1.7976931348623157e308"), 0}, // the largest DOUBLE
		{scol("1e400"), lit("1.7976931348623157e308"), 0},
		{scol("1.8e308"), lit("1.7976931348623157e308"), 0},
		{scol("1e308"), lit("0"), 1},
		{scol("1e-999999"), lit("0"), 0},
		{scol("  12abc"), lit("12"), 0},
		{scol(" \t\n\r\v\f5"), lit("5"), 0},
		{scol("abc"), lit("0"), 0},
		{scol(""), lit("0"), 0},
		{scol("-"), lit("0"), 0},
		{scol("0x10"), lit("0"), 0},
		{scol("0x10"), lit("16"), -1},
		{scol("1.5e3"), lit("1500"), 0},
		{scol("-0"), lit("0"), 0},
		{scol("inf"), lit("0"), 0},
		{scol("nan"), lit("0"), 0},
		{scol("+7"), lit("7"), 0},
		{scol(".5"), lit("0.5"), 0},
		{scol("5."), lit("5"), 0},
		{scol("1e"), lit("1"), 0},
		{scol("1e+"), lit("1"), 0},
		{scol("1.e2"), lit("100"), 0},
		{scol(".e2"), lit("0"), 0},
		{scol("--5"), lit("0"), 0},
		{scol("- 5"), lit("0"), 0},
		// With an integer: as DECIMALs.
		{scol("9223372036854775808"), lit("9223372036854775807"), 1},
		{scol("9223372036854775808"), col(cmpSigned, "9223372036854775807"), 1},
		{scol("9007199254740993"), col(cmpSigned, "9007199254740992"), 1},
		{str("9007199254740993.5"), lit("9007199254740993"), 1},
		{str("1.0000000000000000000001"), lit("1"), 1},
		{str("1e999999"), lit("99999999999999999999999999999999999999999999999999999999999999999"), 1},
		{str("1e81"), lit("999999999999999999999999999999999999999999999999999999999999999999999999999999999"), 0},
		{str("-1e999999"), lit("-9223372036854775808"), -1},
		{str("1e-30"), lit("0"), 1},
		{str("1e-50"), lit("0"), 0},
		// With a DECIMAL: as DOUBLEs, but a DECIMAL column with a string
		// constant as DECIMALs.
		{str("9007199254740993"), lit("9007199254740992.0"), 0},
		{str("1.0000000000000000000001"), lit("1.0"), 0},
		{scol("1.0000000000000000000001"), col(cmpDecimal, "1.000"), 0},
		{col(cmpDecimal, "1.000"), str("1.0000000000000000000001"), -1},
		{col(cmpDecimal, "9007199254740992"), str("9007199254740993"), -1},
		{scol("9007199254740993"), col(cmpDecimal, "9007199254740992"), 0},
		// With a DOUBLE column.
		{scol("1e999999"), col(cmpFloat, "1.7976931348623157e308"), 0},
		{col(cmpFloat, "0"), scol("-1e999999"), 1},
	}
	for _, tt := range tests {
		if got := sign(compareExpr(tt.a, tt.b)); got != tt.want {
			t.Errorf("compareExpr(%q %v, %q %v) = %d, want %d", tt.a.text, tt.a.num, tt.b.text, tt.b.num, got, tt.want)
		}
		if got := -sign(compareExpr(tt.b, tt.a)); got != tt.want {
			t.Errorf("compareExpr reversed (%q, %q) = %d, want %d", tt.b.text, tt.a.text, got, tt.want)
		}
	}
}

// TestStringArithmeticAndTruth: a string in arithmetic is a DOUBLE
// (overflow included), and a string is true when its DOUBLE is not 0.
func TestStringArithmeticAndTruth(t *testing.T) {
	s := func(v string) exprValue { return exprValue{text: []byte(v), kind: cmpGeneralCI} }
	if got := toDouble(arith(router.OpAdd, s("1e999999"), constValue([]byte("0")), divPrecisionIncrement)); got != math.MaxFloat64 {
		t.Errorf("'1e999999' + 0 = %v, want the largest DOUBLE", got)
	}
	if got := toDouble(arith(router.OpSub, constValue([]byte("0")), s("9223372036854775808"), divPrecisionIncrement)); got != -9.223372036854776e18 {
		t.Errorf("0 - '9223372036854775808' = %v", got)
	}
	for v, want := range map[string]bool{"1e999999": true, "-1e999999": true, "1e-999999": false, "inf": false,
		"nan": false, "": false, "abc": false, "0x10": false, "  12abc": true, "-0": false, ".5": true} {
		if got := truthy(s(v)); got != want {
			t.Errorf("truthy(%q) = %v, want %v", v, got, want)
		}
	}
}

// TestBetweenAggregatesTypes: BETWEEN compares its three values under one
// type aggregated from all three, which is not always what the two
// comparisons it spells would use (MariaDB 10.11's answers).
func TestBetweenAggregatesTypes(t *testing.T) {
	str := func(v string) exprValue { return exprValue{text: []byte(v), kind: cmpGeneralCI, lit: true} }
	scol := func(v string) exprValue { return exprValue{text: []byte(v), kind: cmpGeneralCI} }
	lit := func(v string) exprValue { return constValue([]byte(v)) }
	intc := func(v string) exprValue { return exprValue{text: []byte(v), kind: cmpSigned} }
	decc := func(v string) exprValue { return exprValue{text: []byte(v), kind: cmpDecimal} }
	tests := []struct {
		v, lo, hi exprValue
		want      bool
	}{
		{intc("9007199254740992"), str("9007199254740992.5"), str("9007199254740993"), true},  // as DOUBLEs
		{intc("9007199254740992"), str("9007199254740992.5"), lit("9007199254740993"), false}, // as DECIMALs
		{intc("9007199254740992"), lit("9007199254740991.5"), str("9007199254740991.9"), true},
		{decc("9007199254740992"), str("9007199254740992.5"), str("9007199254740993"), true},
		{str("9007199254740993"), decc("9007199254740992"), decc("9007199254740992"), true},
		{str("9007199254740993"), lit("9007199254740992"), lit("9007199254740992"), false},
		{str("9007199254740993"), lit("9007199254740992"), lit("9007199254740992.0"), false},
		{str("1.0000000000000000000001"), lit("1"), lit("1"), false},
		{str("1.0000000000000000000001"), lit("1.0"), lit("1.0"), true},
		{str("1.0000000000000000000001"), lit("-1"), str("1"), true},
		{str("1.0000000000000000000001"), str("-1"), str("1"), false}, // as strings
		{scol(""), str("a"), lit("5"), true},                          // '' >= 'a' is false
		{scol("inf"), lit("-1"), lit("1"), true},
		{scol("1e999999"), lit("-1"), lit("1"), false},
		{scol("1e"), lit("1.0"), lit("2"), true},
	}
	for _, tt := range tests {
		got := between(tt.v, tt.lo, tt.hi)
		if got.null || truthy(got) != tt.want {
			t.Errorf("%q BETWEEN %q %v AND %q %v = %v, want %v", tt.v.text, tt.lo.text, tt.lo.num, tt.hi.text, tt.hi.num, truthy(got), tt.want)
		}
	}
	if got := between(str("1"), exprNull, lit("0")); got.null || truthy(got) {
		t.Errorf("'1' BETWEEN NULL AND 0 is not false")
	}
	if got := between(str("1"), exprNull, lit("2")); !got.null {
		t.Errorf("'1' BETWEEN NULL AND 2 is not NULL")
	}
}

// TestHavingDoubleOverflow: DOUBLE arithmetic past DOUBLE's range is
// MariaDB's error 1690 where it is evaluated, and nothing where AND or OR
// does not evaluate it.
func TestHavingDoubleOverflow(t *testing.T) {
	c := newColumns([]*mysql.Column{{Type: mysql.TypeVarString, Charset: 45}})
	col := &router.Expr{Op: router.OpCol, Col: 0}
	num := func(v string) *router.Expr { return &router.Expr{Op: router.OpConst, Value: []byte(v)} }
	str := func(v string) *router.Expr { return &router.Expr{Op: router.OpString, Value: []byte(v)} }
	op := func(o router.ExprOp, args ...*router.Expr) *router.Expr { return &router.Expr{Op: o, Args: args} }
	overflow := op(router.OpGT, op(router.OpMul, col, num("10")), num("0"))
	tests := []struct {
		e       *router.Expr
		v       string
		want    bool
		wantErr bool
	}{
		{overflow, "1e999999", false, true},
		{overflow, "1e308", false, true},
		{overflow, "1e307", true, false},
		{op(router.OpAnd, op(router.OpEQ, col, str("abc")), overflow), "1e999999", false, false},
		{op(router.OpOr, op(router.OpNE, col, str("abc")), overflow), "1e999999", true, false},
		{op(router.OpAnd, op(router.OpNE, col, str("abc")), overflow), "1e999999", false, true},
		{op(router.OpNot, overflow), "-1e999999", false, true},
		{op(router.OpIsNull, op(router.OpSub, col, num("1e308"))), "-1e999999", false, true},
		{op(router.OpBetween, col, num("0"), op(router.OpAdd, col, col)), "1e999999", false, true},
		{op(router.OpBetween, col, num("0"), op(router.OpAdd, col, col)), "1e10", true, false},
	}
	for i, tt := range tests {
		got, err := c.having(tt.e, [][]byte{[]byte(tt.v)})
		var se *mysql.SQLError
		switch {
		case tt.wantErr && (!errors.As(err, &se) || se.Code != 1690 || se.State != "22003"):
			t.Errorf("#%d over %q: got %v, %v; want error 1690", i, tt.v, got, err)
		case !tt.wantErr && (err != nil || got != tt.want):
			t.Errorf("#%d over %q: got %v, %v; want %v", i, tt.v, got, err, tt.want)
		}
	}
}

// TestHavingBigintOverflow: + - * of two integers is computed in 64 bits,
// unsigned when an operand is (a BIGINT UNSIGNED column, a literal past
// BIGINT), and fails past that range with 1690 as on MariaDB 10.11; a
// literal past BIGINT UNSIGNED is a DECIMAL, and / a DECIMAL operation.
func TestHavingBigintOverflow(t *testing.T) {
	c := newColumns([]*mysql.Column{{Type: mysql.TypeLongLong, Charset: 63}, {Type: mysql.TypeLongLong, Charset: 63, Flags: mysql.FlagUnsigned}})
	signed, uns := &router.Expr{Op: router.OpCol, Col: 0}, &router.Expr{Op: router.OpCol, Col: 1}
	num := func(v string) *router.Expr { return &router.Expr{Op: router.OpConst, Value: []byte(v)} }
	op := func(o router.ExprOp, args ...*router.Expr) *router.Expr { return &router.Expr{Op: o, Args: args} }
	gt0 := func(e *router.Expr) *router.Expr { return op(router.OpGT, e, num("0")) }
	tests := []struct {
		e       *router.Expr
		s, u    string
		want    bool
		wantErr bool
	}{
		{gt0(op(router.OpAdd, signed, num("9223372036854775807"))), "1", "0", false, true},
		{gt0(op(router.OpAdd, signed, num("9223372036854775807"))), "0", "0", true, false},
		{gt0(op(router.OpAdd, signed, num("9223372036854775807"))), "-5", "0", true, false},
		{gt0(op(router.OpSub, signed, num("9223372036854775807"))), "-2", "0", false, true},
		{gt0(op(router.OpSub, signed, num("9223372036854775807"))), "-1", "0", false, false},
		{gt0(op(router.OpMul, signed, num("4611686018427387904"))), "2", "0", false, true},
		{gt0(op(router.OpMul, signed, num("4611686018427387904"))), "-2", "0", false, false},
		{gt0(op(router.OpAdd, signed, num("18446744073709551615"))), "-1", "0", true, false},
		{gt0(op(router.OpAdd, signed, num("18446744073709551615"))), "1", "0", false, true},
		{gt0(op(router.OpSub, uns, num("1"))), "0", "0", false, true},
		{gt0(op(router.OpSub, uns, signed)), "-1", "18446744073709551614", true, false},
		{gt0(op(router.OpSub, uns, signed)), "-2", "18446744073709551614", false, true},
		{gt0(op(router.OpSub, op(router.OpAdd, signed, num("9223372036854775808")), num("1"))), "-9223372036854775807", "0", false, false},
		{gt0(op(router.OpSub, op(router.OpAdd, signed, num("9223372036854775808")), num("2"))), "-9223372036854775807", "0", false, true},
		{gt0(op(router.OpAdd, signed, num("99999999999999999999"))), "9223372036854775807", "0", true, false},
		{gt0(op(router.OpDiv, op(router.OpAdd, signed, signed), num("2"))), "9223372036854775807", "0", false, true},
		{gt0(op(router.OpMul, signed, num("9223372036854775807.0"))), "9", "0", true, false},
	}
	for i, tt := range tests {
		got, err := c.having(tt.e, [][]byte{[]byte(tt.s), []byte(tt.u)})
		var se *mysql.SQLError
		switch {
		case tt.wantErr && (!errors.As(err, &se) || se.Code != 1690 || se.State != "22003"):
			t.Errorf("#%d over %s, %s: got %v, %v; want error 1690", i, tt.s, tt.u, got, err)
		case !tt.wantErr && (err != nil || got != tt.want):
			t.Errorf("#%d over %s, %s: got %v, %v; want %v", i, tt.s, tt.u, got, err, tt.want)
		}
	}
}

// TestDecimalDivisionRounded: a DECIMAL quotient has its dividend's
// fraction digits plus div_precision_increment (4), and MariaDB rounds it
// to them when comparing (10.11: 1/3 = 0.3333, 2/3 = 0.6667, 2/3 > 0.66666,
// 1.5/7 = 0.21429), while arithmetic keeps the unrounded value
// ((2/3)*3 = 2).
func TestDecimalDivisionRounded(t *testing.T) {
	c := newColumns([]*mysql.Column{{Type: mysql.TypeNewDecimal, Decimals: 1}})
	num := func(v string) *router.Expr { return &router.Expr{Op: router.OpConst, Value: []byte(v)} }
	op := func(o router.ExprOp, args ...*router.Expr) *router.Expr { return &router.Expr{Op: o, Args: args} }
	col := &router.Expr{Op: router.OpCol, Col: 0}
	tests := []struct {
		e    *router.Expr
		v    string
		want bool
	}{
		{op(router.OpEQ, op(router.OpDiv, num("1"), num("3")), num("0.3333")), "0", true},
		{op(router.OpEQ, op(router.OpDiv, num("2"), num("3")), num("0.6667")), "0", true},
		{op(router.OpEQ, op(router.OpDiv, num("2"), num("3")), num("0.6666")), "0", false},
		{op(router.OpGT, op(router.OpDiv, num("2"), num("3")), num("0.66666")), "0", true},
		{op(router.OpEQ, op(router.OpDiv, num("1.5"), num("7")), num("0.21429")), "0", true},
		{op(router.OpEQ, op(router.OpMul, op(router.OpDiv, num("2"), num("3")), num("3")), num("2")), "0", true},
		{op(router.OpEQ, op(router.OpDiv, col, num("3")), num("1.83333")), "5.5", true},
		{op(router.OpEQ, op(router.OpDiv, num("-2"), num("3")), num("-0.6667")), "0", true},
		{op(router.OpEQ, op(router.OpDiv, col, num("3")), &router.Expr{Op: router.OpString, Value: []byte("-0.66667")}), "-2.0", true},
	}
	for i, tt := range tests {
		got, err := c.having(tt.e, [][]byte{[]byte(tt.v)})
		if err != nil || got != tt.want {
			t.Errorf("#%d: got %v, %v; want %v", i, got, err, tt.want)
		}
	}
	// As a DOUBLE the quotient is cut at whole words of 9 digits.
	for _, tt := range []struct {
		a, b string
		want float64
	}{{"2", "3", 0.666666666}, {"-2", "3", -0.666666666}, {"1.5", "7", 0.214285714}, {"6", "3", 2}} {
		if got := toDouble(arith(router.OpDiv, constValue([]byte(tt.a)), constValue([]byte(tt.b)), divPrecisionIncrement)); got != tt.want {
			t.Errorf("%s/%s as DOUBLE = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}
