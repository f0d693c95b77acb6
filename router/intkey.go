package router

import (
	"math"
	"strconv"
)

// IntegerTyper is what a Catalog may also answer: whether a column is
// known to be of an integer type (TINYINT to BIGINT, signed or not). A
// string compared with such a column is compared as the DOUBLE it converts
// to ('7abc', ' 7', '07', '7.0' and '7e0' equal 7; ”, 'abc' equal 0;
// '7.5' equals no integer), so the router routes it by that number. When
// the type is not known (no catalog, definition not read yet) a string
// routes as before: by its own hash, and by the integer it reads as when
// it is a number between whitespace (numericAlt).
type IntegerTyper interface {
	Integer(db, table, column string) bool
}

// intKey reports whether rule r's key column is known to be an integer.
func intKey(c Catalog, r *rule) bool {
	if c == nil || r.key == "" {
		return false
	}
	it, ok := c.(IntegerTyper)
	return ok && it.Integer(r.db, r.table, r.key)
}

// intOperand returns, for a string s compared with an integer key column,
// the value that decides the subtable: an integer (valInt) when exactly one
// integer equals s as a DOUBLE; none when no integer does (a fraction, or a
// magnitude beyond BIGINT UNSIGNED), so that any one subtable answers
// exactly; value{} (unmappable: every subtable) when the double is an
// integer too large for a double to tell its neighbours apart.
func intOperand(s string) (v value, none bool) {
	f := stringDouble(s)
	switch {
	case f != math.Trunc(f):
		return value{}, true
	case math.Abs(f) < 1<<53:
		return value{kind: valInt, i: int64(f)}, false
	case f > 1<<64 || f < -(1<<63):
		return value{}, true
	}
	return value{}, false
}

// rangeOperand returns the value a string compared with an integer key by
// <, <=, >, >= or BETWEEN is compared as (the DOUBLE it converts to).
func rangeOperand(s string) value {
	return value{kind: valNum, f: stringDouble(s)}
}

// stringDouble converts s to a double as MariaDB does when it compares a
// string with a number (my_strntod): leading whitespace skipped, the
// longest prefix that is a number taken (sign, digits, a fraction, an
// exponent), 0 when there is none; a value beyond the double range is the
// largest double of that sign.
func stringDouble(s string) float64 {
	start, end, ok := numberPrefix(s)
	if !ok {
		return 0
	}
	f, err := strconv.ParseFloat(s[start:end], 64)
	if err != nil && math.IsInf(f, 0) {
		return math.Copysign(math.MaxFloat64, f)
	}
	return f
}

// numberPrefix returns where the number s begins with is, after leading
// whitespace: s[start:end] is the longest prefix the server reads as a
// number (a sign, digits, a fraction, an exponent); ok is false when it
// has no digit.
func numberPrefix(s string) (start, end int, ok bool) {
	i := skipSpace(s, 0)
	start = i
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	digits := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i, digits = i+1, digits+1
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i, digits = i+1, digits+1
		}
	}
	if digits == 0 {
		return 0, 0, false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		j := i + 1
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			j++
		}
		if j < len(s) && s[j] >= '0' && s[j] <= '9' {
			for j < len(s) && s[j] >= '0' && s[j] <= '9' {
				j++
			}
			i = j
		}
	}
	return start, i, true
}

// rangeBound returns a bound of a range predicate on rule r's key as the
// server compares it with the key column.
func (st *stmt) rangeBound(r *rule, v value) value {
	if v.kind == valString && intKey(st.sess.Catalog, r) {
		return rangeOperand(v.s)
	}
	return v
}

// cacheKeyValue returns the value that picks a cached template's subtable:
// a string compared with an integer key is its number; ok is false when
// the planner must decide (no integer equals it, or too many do).
func cacheKeyValue(r *rule, v value, s Session) (value, bool) {
	if v.kind != valString || !intKey(s.Catalog, r) {
		return v, true
	}
	n, none := intOperand(v.s)
	return n, !none && n.kind != valNone
}

// keyIndex is r.index(v) for a value v compared with rule r's key. A string
// compared with a key column known to be an integer maps as the number
// MariaDB compares it as: to any one subtable when no integer equals it,
// to every subtable when that number is beyond the rule's range (as the
// string did before its type was known). alt is false for such a string
// (numericAlt must not add the subtable of another reading).
func (st *stmt) keyIndex(r *rule, v value) (i int, ok, alt bool, err error) {
	if v.kind != valString || !intKey(st.sess.Catalog, r) {
		i, ok, err = r.index(v)
		return i, ok, true, err
	}
	n, none := intOperand(v.s)
	if none {
		return 0, true, false, nil
	}
	i, ok, err = r.index(n)
	if err != nil {
		return 0, false, false, nil
	}
	return i, ok, false, nil
}

// storedKey returns the key value v written to rule r's key column: a
// string written to a column known to be an integer is the integer MariaDB
// stores ('7.5' is 8, '1.5e1' 15, '9abc' 9 where sql_mode lets it), so the
// row goes to that integer's subtable, where lookups find it.
func (st *stmt) storedKey(r *rule, v value) value {
	if v.kind != valString || !intKey(st.sess.Catalog, r) {
		return v
	}
	if n, ok := storedInteger(v.s); ok {
		return value{kind: valInt, i: n}
	}
	return v
}

// storedInteger returns the integer MariaDB stores for the string s in an
// integer column (my_strntoll10rnd): leading whitespace skipped, the
// numeric prefix taken with its exponent, rounded half away from zero on
// its first dropped digit, 0 when there is none. ok is false when the
// value has more than 18 digits before the point (near or beyond the
// column's limits, which the server clips or refuses).
func storedInteger(s string) (n int64, ok bool) {
	i := 0
	for i < len(s) && (s[i] == ' ' || s[i] >= '\t' && s[i] <= '\r') {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	var buf [32]byte
	d := buf[:0] // the mantissa's digits, without the point
	point := -1  // digits before the point
	for ; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			if len(d) == 0 && c == '0' && point < 0 {
				continue // a leading zero of the integer part
			}
			if len(d) < 40 {
				d = append(d, c)
			} else if point < 0 {
				return 0, false // more than 40 integer digits
			}
			continue
		case c == '.' && point < 0:
			point = len(d)
			continue
		}
		break
	}
	if point < 0 {
		point = len(d)
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		j := i + 1
		eneg := false
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			eneg = s[j] == '-'
			j++
		}
		e, k := 0, j
		for k < len(s) && s[k] >= '0' && s[k] <= '9' {
			if e < 1000 {
				e = e*10 + int(s[k]-'0')
			}
			k++
		}
		if k > j {
			if eneg {
				e = -e
			}
			point += e
		}
	}
	for len(d) > 0 && d[0] == '0' { // zeros after the point, before the first digit
		d = d[1:]
		point--
	}
	if point > 18 {
		return 0, false
	}
	for k := 0; k < point; k++ {
		n *= 10
		if k < len(d) {
			n += int64(d[k] - '0')
		}
	}
	if point >= 0 && point < len(d) && d[point] >= '5' {
		n++
	}
	if neg {
		n = -n
	}
	return n, true
}
