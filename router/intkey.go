package router

import (
	"math"
	"strconv"

	"github.com/shardgate/shardgate/mysql"
)

// IntegerTyper is what a Catalog may also answer: whether a column is
// known to be of an integer type (TINYINT to BIGINT, signed or not). A
// string compared with such a column is compared as the DOUBLE it converts
// to ('7abc', ' 7', '07', '7.0' and '7e0' equal 7; ”, 'abc' equal 0;
// '7.5' equals no integer), so the router routes it by that number. When
// the catalog has not read the table (created behind the proxy's back, or
// its read failed) a string that another reading could place elsewhere
// goes to the subtables of both readings (unreadKeys), and a row whose
// key is such a string waits for the definition (needDefinition).
type IntegerTyper interface {
	Integer(db, table, column string) bool
}

// TableKnower is what a Catalog may also answer, without the allocation
// of Columns: whether it has read the definition of logical table
// db.table.
type TableKnower interface {
	Knows(db, table string) bool
}

// keyType is what the router knows of the type of a rule's key column.
type keyType uint8

const (
	keyUnread  keyType = iota // no definition: a number or a string
	keyInteger                // TINYINT to BIGINT
	keyOther                  // any other type the definition gives
)

// keyTypeOf returns what catalog c tells of rule r's key column.
func keyTypeOf(c Catalog, r *rule) keyType {
	if c == nil {
		return keyOther // kingshard's routing: no schema to consult
	}
	if r.key == "" {
		return keyUnread
	}
	if it, ok := c.(IntegerTyper); ok && it.Integer(r.db, r.table, r.key) {
		return keyInteger
	}
	if k, ok := c.(TableKnower); ok {
		if k.Knows(r.db, r.table) {
			return keyOther
		}
		return keyUnread
	}
	if _, ok := c.Columns(r.db, r.table); ok {
		return keyOther
	}
	return keyUnread
}

// intKey reports whether rule r's key column is known to be an integer.
func intKey(c Catalog, r *rule) bool {
	return keyTypeOf(c, r) == keyInteger
}

// unreadString reports whether v, compared with (or written to) rule r's
// key when the catalog cannot tell its type, is a string whose reading as
// a string and as a number may place it apart: anything but a plain
// unsigned integer a double holds exactly ('5', '05'), which kingshard's
// hash and the range rule take by that number either way. Date rules
// read their keys as dates and are left alone.
func unreadString(c Catalog, r *rule, v value) bool {
	if v.kind != valString || r.kind != ruleHash && r.kind != ruleRange {
		return false
	}
	if u, err := strconv.ParseUint(v.s, 10, 64); err == nil && u < 1<<53 {
		return false
	}
	return keyTypeOf(c, r) == keyUnread
}

// unreadKeys returns the subtables of rule r that may hold a key equal to
// the string v when the key column's type is not known (unreadString): a
// string column's row is where the string maps, with numericAlt's second
// subtable; a numeric column's is where the number MariaDB compares it
// with maps (intOperand), every subtable when that number stands for
// several integers. A reading that maps beyond the rule's subtables
// holds no row; err is the string reading's out-of-range error, which a
// known type gives too.
func (r *rule) unreadKeys(v value) (keySet, error) {
	s := newKeySet(len(r.subs))
	i, ok, err := r.index(v)
	if err != nil {
		return s, err
	}
	if !ok {
		return allKeys(), nil
	}
	s.add(i)
	if j, ok := r.numericAlt(v); ok {
		s.add(j)
	}
	n, none := intOperand(v.s)
	switch {
	case none:
	case n.kind == valNone:
		return allKeys(), nil
	default:
		if j, ok, err := r.index(n); err == nil && ok {
			s.add(j)
		} else if err == nil {
			return allKeys(), nil
		}
	}
	return s, nil
}

// needDefinition returns the error of a statement that writes the string
// v to rule r's key whose type the catalog cannot tell, when an integer
// column and a string column would keep the row in different subtables
// ('9.5' is stored as 10 in an INT, as written in a VARCHAR): the caller
// reads the table's definition and plans again (NeedSchemaError), and
// when it cannot, the client gets 1235 rather than a row its lookups
// would not find. nil when both readings place the row alike.
func needDefinition(c Catalog, r *rule, v value) error {
	if !unreadString(c, r, v) {
		return nil
	}
	i, ok, err := r.index(v)
	if j, alt := r.numericAlt(v); alt {
		i = j // where INSERT puts it without a definition
	}
	if n, stored := storedInteger(v.s); ok && err == nil && stored {
		if j, ok, err := r.index(value{kind: valInt, i: n}); ok && err == nil && i == j {
			return nil
		}
	}
	return &NeedSchemaError{DB: r.db, Table: r.table, Err: mysql.NewError(mysql.ErNotSupported,
		"the shard key %s of table %s is the string %s, which an integer column and a string column would keep in different subtables, and shardgate could not read %s.%s's definition to tell which it is; write the key as a number, or retry when every subtable can be read",
		r.key, r.table, v, r.db, r.table)}
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
	if unreadString(s.Catalog, r, v) {
		return v, false // more than one subtable may hold it (unreadKeys)
	}
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
