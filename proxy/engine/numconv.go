package engine

import (
	"bytes"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// Reading text and literals as numbers, as MariaDB 10.11 does when it
// compares a string with a number or computes with one (checked against
// the server: numconv_test.go). The merge (expr.go) calls these; they hold
// no state.

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

// constValue is a numeric literal: an integer (unsigned past BIGINT), a
// DECIMAL (with a point, or an integer past BIGINT UNSIGNED) or a DOUBLE
// (with an exponent). A literal too long or too large for
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
	cls, scale, uns := numInt, 0, false
	switch {
	case bytes.IndexByte(v, '.') >= 0:
		cls, scale = numDecimal, len(v)-bytes.IndexByte(v, '.')-1
	case !intInRange(r, false):
		// Past BIGINT an integer literal is a BIGINT UNSIGNED, and past
		// that a DECIMAL (MariaDB's Item_uint, Item_decimal).
		uns = intInRange(r, true)
		if !uns {
			cls = numDecimal
		}
	}
	return exprValue{num: r, cls: cls, konst: true, scale: scale, uns: uns}
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
