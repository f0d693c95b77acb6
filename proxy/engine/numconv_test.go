package engine

import (
	"math"
	"testing"

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
	if got := toDouble(arith(router.OpAdd, s("1e999999"), constValue([]byte("0")))); got != math.MaxFloat64 {
		t.Errorf("'1e999999' + 0 = %v, want the largest DOUBLE", got)
	}
	if got := toDouble(arith(router.OpSub, constValue([]byte("0")), s("9223372036854775808"))); got != -9.223372036854776e18 {
		t.Errorf("0 - '9223372036854775808' = %v", got)
	}
	for v, want := range map[string]bool{"1e999999": true, "-1e999999": true, "1e-999999": false, "inf": false,
		"nan": false, "": false, "abc": false, "0x10": false, "  12abc": true, "-0": false, ".5": true} {
		if got := truthy(s(v)); got != want {
			t.Errorf("truthy(%q) = %v, want %v", v, got, want)
		}
	}
}
