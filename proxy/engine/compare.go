package engine

import (
	"bytes"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/collate"
	"golang.org/x/text/language"
	"golang.org/x/text/unicode/norm"

	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/router"
)

// cmpKind is how values of one result column compare, decided once per
// column from its definition.
type cmpKind uint8

const (
	cmpBinary    cmpKind = iota // byte order (binary strings, *_bin without padding)
	cmpBinPad                   // byte order ignoring trailing spaces (*_bin PAD SPACE)
	cmpSigned                   // integers
	cmpUnsigned                 // unsigned integers
	cmpDecimal                  // exact decimal text
	cmpFloat                    // FLOAT, DOUBLE
	cmpTemporal                 // DATE, DATETIME, TIMESTAMP, YEAR: fixed-width text
	cmpTime                     // TIME: may be negative or exceed 99 hours
	cmpGeneralCI                // *_general_ci: case- and accent-insensitive, one weight per character
	cmpUnicodeCI                // *_unicode_ci, *_0900_ai_ci, *_uca1400_ai_ci: UCA primary strength
)

// columnCmp returns how to compare values of column c.
func columnCmp(c *mysql.Column) cmpKind {
	switch c.Type {
	case mysql.TypeTiny, mysql.TypeShort, mysql.TypeInt24, mysql.TypeLong, mysql.TypeLongLong, mysql.TypeYear:
		if c.Flags&mysql.FlagUnsigned != 0 || c.Type == mysql.TypeYear {
			return cmpUnsigned
		}
		return cmpSigned
	case mysql.TypeDecimal, mysql.TypeNewDecimal:
		return cmpDecimal
	case mysql.TypeFloat, mysql.TypeDouble:
		return cmpFloat
	case mysql.TypeDate, mysql.TypeDatetime, mysql.TypeTimestamp:
		return cmpTemporal
	case mysql.TypeTime:
		return cmpTime
	case mysql.TypeBit:
		return cmpBinary
	}
	if c.Charset != 63 && c.Flags&mysql.FlagBinary != 0 {
		// A column definition carries the connection's collation (the
		// server converts values to character_set_results), not the
		// column's; BINARY_FLAG is what tells a *_bin column apart.
		return cmpBinPad
	}
	return collationCmp(c.Charset)
}

// collationCmp maps a collation id to its comparison. Unknown collations
// compare case-insensitively, which is what most defaults are.
func collationCmp(id uint16) cmpKind {
	if id == 63 {
		return cmpBinary
	}
	name := collationName(id)
	switch {
	case strings.HasSuffix(name, "_bin"):
		return cmpBinPad
	case strings.Contains(name, "unicode") || strings.Contains(name, "0900") || strings.Contains(name, "uca1400"):
		return cmpUnicodeCI
	}
	return cmpGeneralCI
}

// collationName knows the ids MariaDB sends in column definitions; ids
// above 255 do not fit the handshake table.
func collationName(id uint16) string {
	if id < 256 {
		if c, ok := mysql.CollationByID(byte(id)); ok {
			return c.Name
		}
	}
	switch {
	case id >= 192 && id <= 215, id >= 224 && id <= 247:
		return "unicode_ci"
	case id == 2048+46 || id == 2048+83:
		return "_bin"
	}
	return ""
}

// compareValues compares two non-NULL values of a column.
func compareValues(k cmpKind, a, b []byte) int {
	switch k {
	case cmpBinary, cmpTemporal:
		return bytes.Compare(a, b)
	case cmpBinPad:
		return bytes.Compare(bytes.TrimRight(a, " "), bytes.TrimRight(b, " "))
	case cmpSigned:
		x, err1 := strconv.ParseInt(string(a), 10, 64)
		y, err2 := strconv.ParseInt(string(b), 10, 64)
		if err1 != nil || err2 != nil {
			return compareDecimal(a, b)
		}
		return cmp3(x < y, x > y)
	case cmpUnsigned:
		x, err1 := strconv.ParseUint(string(a), 10, 64)
		y, err2 := strconv.ParseUint(string(b), 10, 64)
		if err1 != nil || err2 != nil {
			return compareDecimal(a, b)
		}
		return cmp3(x < y, x > y)
	case cmpDecimal:
		return compareDecimal(a, b)
	case cmpFloat:
		x, _ := strconv.ParseFloat(string(a), 64)
		y, _ := strconv.ParseFloat(string(b), 64)
		return cmp3(x < y, x > y)
	case cmpTime:
		return compareTime(a, b)
	case cmpGeneralCI:
		return generalCompare(a, b)
	case cmpUnicodeCI:
		return unicodeCompare(a, b)
	}
	return bytes.Compare(a, b)
}

// generalCompare orders two values under *_general_ci without building
// keys: weight by weight, ASCII without decoding, and PAD SPACE at the end
// (the longer value's rest compares against spaces, as MariaDB's
// my_strnncollsp does). Sorting calls it n log n times per merge.
func generalCompare(a, b []byte) int {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		var wa, wb rune
		if ca, cb := a[i], b[j]; ca < utf8.RuneSelf && cb < utf8.RuneSelf {
			if ca == cb {
				i++
				j++
				continue
			}
			wa, wb = asciiWeight(ca), asciiWeight(cb)
			i++
			j++
		} else {
			var n int
			wa, n = generalWeightAt(a[i:])
			i += n
			wb, n = generalWeightAt(b[j:])
			j += n
		}
		if wa != wb {
			return cmp3(wa < wb, wa > wb)
		}
	}
	for ; i < len(a); i++ {
		if a[i] != ' ' {
			w, _ := generalWeightAt(a[i:])
			return cmp3(w < ' ', w > ' ')
		}
	}
	for ; j < len(b); j++ {
		if b[j] != ' ' {
			w, _ := generalWeightAt(b[j:])
			return cmp3(' ' < w, ' ' > w)
		}
	}
	return 0
}

func asciiWeight(c byte) rune {
	if c >= 'a' && c <= 'z' {
		return rune(c - 'a' + 'A')
	}
	return rune(c)
}

// generalWeightAt returns the weight of the character s starts with and its
// length in bytes.
func generalWeightAt(s []byte) (rune, int) {
	if s[0] < utf8.RuneSelf {
		return asciiWeight(s[0]), 1
	}
	r, n := utf8.DecodeRune(s)
	if r > 0xFFFF {
		return 0xFFFD, n
	}
	return rune(generalWeights()[r]), n
}

// generalWeights holds generalWeight for the whole BMP, computed on first
// use (about 130 KiB): the per-character normalization is too slow for
// the sort loop.
var generalWeights = sync.OnceValue(func() *[0x10000]uint16 {
	t := new([0x10000]uint16)
	for r := range rune(0x10000) {
		t[r] = uint16(generalWeight(r))
	}
	return t
})

func cmp3(less, greater bool) int {
	switch {
	case less:
		return -1
	case greater:
		return 1
	}
	return 0
}

// compareDecimal compares decimal numbers written as text ("-12.50",
// "3", "0.001") exactly, without converting to binary floating point.
func compareDecimal(a, b []byte) int {
	na, nb := len(a) > 0 && a[0] == '-', len(b) > 0 && b[0] == '-'
	if na {
		a = a[1:]
	}
	if nb {
		b = b[1:]
	}
	if isZeroDecimal(a) && isZeroDecimal(b) {
		return 0
	}
	if na != nb {
		if na {
			return -1
		}
		return 1
	}
	c := compareAbsDecimal(a, b)
	if na {
		return -c
	}
	return c
}

func isZeroDecimal(a []byte) bool {
	for _, c := range a {
		if c != '0' && c != '.' {
			return false
		}
	}
	return true
}

func compareAbsDecimal(a, b []byte) int {
	ai, af := splitDecimal(a)
	bi, bf := splitDecimal(b)
	if len(ai) != len(bi) {
		return cmp3(len(ai) < len(bi), len(ai) > len(bi))
	}
	if c := bytes.Compare(ai, bi); c != 0 {
		return c
	}
	// Fractions: compare digit by digit, padding the shorter with zeros.
	for i := 0; i < max(len(af), len(bf)); i++ {
		x, y := byte('0'), byte('0')
		if i < len(af) {
			x = af[i]
		}
		if i < len(bf) {
			y = bf[i]
		}
		if x != y {
			return cmp3(x < y, x > y)
		}
	}
	return 0
}

// splitDecimal returns the integer digits without leading zeros and the
// fraction digits.
func splitDecimal(a []byte) (ip, fp []byte) {
	if i := bytes.IndexByte(a, '.'); i >= 0 {
		ip, fp = a[:i], a[i+1:]
	} else {
		ip = a
	}
	for len(ip) > 0 && ip[0] == '0' {
		ip = ip[1:]
	}
	return ip, fp
}

// compareTime compares TIME values "[-]HHH:MM:SS[.ffffff]".
func compareTime(a, b []byte) int {
	return compareDecimal(timeKey(a), timeKey(b))
}

// timeKey turns a TIME value into a decimal number of seconds-like order:
// hours, minutes and seconds concatenated with fixed widths.
func timeKey(t []byte) []byte {
	neg := len(t) > 0 && t[0] == '-'
	if neg {
		t = t[1:]
	}
	parts := bytes.SplitN(t, []byte(":"), 3)
	if len(parts) != 3 {
		return t
	}
	sec, frac := parts[2], []byte(nil)
	if i := bytes.IndexByte(sec, '.'); i >= 0 {
		sec, frac = sec[:i], sec[i+1:]
	}
	k := make([]byte, 0, 24)
	if neg {
		k = append(k, '-')
	}
	k = append(k, parts[0]...)
	k = append(k, parts[1]...)
	k = append(k, sec...)
	if len(frac) > 0 {
		k = append(k, '.')
		k = append(k, frac...)
	}
	return k
}

// generalCIKey maps a string to its *_general_ci sort key: each character
// to one weight, its base letter upper-cased (accents dropped, as
// general_ci does for Latin letters), trailing spaces ignored.
func generalCIKey(s []byte) []byte {
	s = bytes.TrimRight(s, " ")
	key := make([]byte, 0, len(s))
	for len(s) > 0 {
		w, n := generalWeightAt(s)
		s = s[n:]
		if w < utf8.RuneSelf {
			key = append(key, byte(w))
		} else {
			key = utf8.AppendRune(key, w)
		}
	}
	return key
}

func generalWeight(r rune) rune {
	if r > 0xFFFF {
		// general_ci has weights for the BMP only; every other
		// character weighs as U+FFFD, so all of them are equal.
		return 0xFFFD
	}
	if r < 0x80 {
		if r >= 'a' && r <= 'z' {
			return r - 'a' + 'A'
		}
		return r
	}
	switch r {
	case 'ß':
		return 'S'
	case 'æ', 'Æ':
		return 'Æ'
	case 'ø', 'Ø':
		return 'Ø'
	case 'ð', 'Ð':
		return 'Ð'
	case 'þ', 'Þ':
		return 'Þ'
	}
	d := norm.NFD.String(string(r))
	base, _ := utf8.DecodeRuneInString(d)
	return unicode.ToUpper(base)
}

// unicodeCollators pools UCA collators at primary strength (case- and
// accent-insensitive), which is how *_unicode_ci and *_0900_ai_ci order
// Latin text. A collate.Collator is not safe for concurrent use.
var unicodeCollators = sync.Pool{New: func() any {
	return collate.New(language.Und, collate.IgnoreCase, collate.IgnoreDiacritics, collate.IgnoreWidth)
}}

func unicodeCompare(a, b []byte) int {
	a, b = bytes.TrimRight(a, " "), bytes.TrimRight(b, " ")
	c := unicodeCollators.Get().(*collate.Collator)
	r := c.Compare(a, b)
	unicodeCollators.Put(c)
	return r
}

// unicodeKey returns v's UCA primary-strength sort key.
func unicodeKey(v []byte) []byte {
	c := unicodeCollators.Get().(*collate.Collator)
	var buf collate.Buffer
	k := append([]byte(nil), c.Key(&buf, bytes.TrimRight(v, " "))...)
	unicodeCollators.Put(c)
	return k
}

// columns is what a merge knows of the targets' result: each column's
// definition and how its values compare.
type columns struct {
	defs  []*mysql.Column
	kinds []cmpKind
	// divPrec is the session's div_precision_increment: the decimals a
	// division (and AVG) adds to its dividend's.
	divPrec int
	// members are the members of the ENUM and SET columns, by column, as
	// the tables' definitions give them (nil: not known).
	members [][]string
}

func newColumns(defs []*mysql.Column) *columns {
	c := &columns{defs: defs, kinds: make([]cmpKind, len(defs)), divPrec: divPrecisionIncrement}
	for i, d := range defs {
		c.kinds[i] = columnCmp(d)
	}
	return c
}

// compareRows orders two rows by keys, NULLs first ascending as in MySQL.
func (c *columns) compareRows(keys []router.SortKey, a, b [][]byte) int {
	for _, k := range keys {
		x, y := a[k.Col], b[k.Col]
		var r int
		switch {
		case x == nil && y == nil:
			r = 0
		case x == nil:
			r = -1
		case y == nil:
			r = 1
		default:
			r = compareValues(c.kinds[k.Col], x, y)
		}
		if k.Desc {
			r = -r
		}
		if r != 0 {
			return r
		}
	}
	return 0
}

// sortKey appends a key for v under which values equal in the column's
// collation are identical bytes.
func sortKey(dst []byte, k cmpKind, v []byte) []byte {
	if v == nil {
		return append(dst, 0)
	}
	dst = append(dst, 1)
	var body []byte
	switch k {
	case cmpGeneralCI:
		body = generalCIKey(v)
	case cmpUnicodeCI:
		body = unicodeKey(v)
	case cmpBinPad:
		body = trimSpaces(v)
	case cmpDecimal, cmpSigned, cmpUnsigned:
		body = normDecimal(v)
	default:
		body = v
	}
	dst = strconv.AppendInt(dst, int64(len(body)), 10)
	dst = append(dst, ':')
	return append(dst, body...)
}

func trimSpaces(v []byte) []byte {
	for len(v) > 0 && v[len(v)-1] == ' ' {
		v = v[:len(v)-1]
	}
	return v
}

// normDecimal writes a decimal number in one canonical form ("-0.50" and
// "-.5" both become "-.5").
func normDecimal(v []byte) []byte {
	if canonicalDecimal(v) {
		return v // what the server writes, almost always: no copy
	}
	neg := len(v) > 0 && v[0] == '-'
	if neg {
		v = v[1:]
	}
	ip, fp := splitDecimal(v)
	for len(fp) > 0 && fp[len(fp)-1] == '0' {
		fp = fp[:len(fp)-1]
	}
	out := make([]byte, 0, len(v)+2)
	if neg && (len(ip) > 0 || len(fp) > 0) {
		out = append(out, '-')
	}
	out = append(out, ip...)
	if len(fp) > 0 {
		out = append(out, '.')
		out = append(out, fp...)
	}
	return out
}

// canonicalDecimal reports whether normDecimal would return v unchanged:
// no leading zero, and a fraction (if any) that does not end in zero.
func canonicalDecimal(v []byte) bool {
	body := v
	if len(body) > 0 && body[0] == '-' {
		body = body[1:]
	}
	if len(body) == 0 || body[0] == '0' || body[0] == '.' {
		return false
	}
	if bytes.IndexByte(body, '.') >= 0 {
		last := body[len(body)-1]
		return last != '0' && last != '.'
	}
	return true
}
