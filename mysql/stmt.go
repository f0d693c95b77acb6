package mysql

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// StmtExecute is a decoded COM_STMT_EXECUTE payload.
type StmtExecute struct {
	ID         uint32
	Flags      byte   // cursor type
	Iterations uint32 // always 1
	// Types holds two bytes per parameter (type, flags with 0x80 for
	// unsigned): from the packet when it binds new types, otherwise the
	// types of the previous execution.
	Types []byte
	// NewTypes reports whether the packet carried the types.
	NewTypes bool
	// Null marks parameters that are NULL.
	Null []bool
	// Values are the parameters' raw binary encodings (nil for NULL, and
	// for parameters whose value came with COM_STMT_SEND_LONG_DATA, which
	// the packet then leaves out). They alias the packet.
	Values [][]byte
}

// StmtExecuteID returns the statement id of a COM_STMT_EXECUTE,
// COM_STMT_SEND_LONG_DATA, COM_STMT_RESET, COM_STMT_CLOSE or
// COM_STMT_FETCH payload.
func StmtExecuteID(p []byte) (uint32, bool) {
	if len(p) < 5 {
		return 0, false
	}
	return binary.LittleEndian.Uint32(p[1:5]), true
}

// ParseStmtExecute decodes a COM_STMT_EXECUTE payload for a statement with
// nparams parameters. prevTypes are the types bound by the previous
// execution (nil if none); longData marks parameters whose value was sent
// with COM_STMT_SEND_LONG_DATA.
func ParseStmtExecute(p []byte, nparams int, prevTypes []byte, longData []bool) (*StmtExecute, error) {
	e := &StmtExecute{}
	if err := e.Parse(p, nparams, prevTypes, longData); err != nil {
		return nil, err
	}
	return e, nil
}

// Parse is ParseStmtExecute into e, reusing e's slices: a session that
// parses every execution into the same StmtExecute allocates nothing.
func (e *StmtExecute) Parse(p []byte, nparams int, prevTypes []byte, longData []bool) error {
	if len(p) < 10 || p[0] != ComStmtExecute {
		return ErrBadPacket
	}
	null, values := e.Null[:0], e.Values[:0]
	*e = StmtExecute{
		ID:         binary.LittleEndian.Uint32(p[1:5]),
		Flags:      p[5],
		Iterations: binary.LittleEndian.Uint32(p[6:10]),
	}
	if nparams == 0 {
		return nil
	}
	r := p[10:]
	nb := (nparams + 7) / 8
	if len(r) < nb+1 {
		return ErrBadPacket
	}
	bitmap := r[:nb]
	e.NewTypes = r[nb] == 1
	r = r[nb+1:]
	if e.NewTypes {
		if len(r) < 2*nparams {
			return ErrBadPacket
		}
		e.Types = r[:2*nparams]
		r = r[2*nparams:]
	} else {
		if len(prevTypes) != 2*nparams {
			return NewError(ErMalformedPacket, "COM_STMT_EXECUTE without parameter types before any were bound")
		}
		e.Types = prevTypes
	}
	e.Null = append(null, make([]bool, nparams)...)
	e.Values = append(values, make([][]byte, nparams)...)
	for i := range nparams {
		if bitmap[i/8]&(1<<(i%8)) != 0 {
			e.Null[i] = true
			continue
		}
		if i < len(longData) && longData[i] {
			continue
		}
		n, err := paramLen(e.Types[2*i], r)
		if err != nil {
			return err
		}
		e.Values[i] = r[:n]
		r = r[n:]
	}
	return nil
}

// paramLen returns the length of the binary value of type typ at the start
// of r.
func paramLen(typ byte, r []byte) (int, error) {
	n := 0
	switch typ {
	case TypeNull:
		return 0, nil
	case TypeTiny:
		n = 1
	case TypeShort, TypeYear:
		n = 2
	case TypeLong, TypeInt24, TypeFloat:
		n = 4
	case TypeLongLong, TypeDouble:
		n = 8
	case TypeDate, TypeDatetime, TypeTimestamp, TypeTime:
		if len(r) < 1 {
			return 0, ErrBadPacket
		}
		n = 1 + int(r[0])
	default:
		l, isNull, k := ReadLenEncInt(r)
		if k == 0 || isNull || l > uint64(len(r)-k) {
			return 0, ErrBadPacket
		}
		n = k + int(l)
	}
	if n > len(r) {
		return 0, ErrBadPacket
	}
	return n, nil
}

// AppendStmtExecute encodes e as a COM_STMT_EXECUTE payload for statement
// id, always binding the types (a statement prepared anew on a backend
// connection has none bound yet).
func AppendStmtExecute(b []byte, id uint32, e *StmtExecute) []byte {
	b = append(b, ComStmtExecute)
	b = binary.LittleEndian.AppendUint32(b, id)
	b = append(b, e.Flags)
	b = binary.LittleEndian.AppendUint32(b, e.Iterations)
	n := len(e.Null)
	if n == 0 {
		return b
	}
	start := len(b)
	for range (n + 7) / 8 {
		b = append(b, 0)
	}
	for i, null := range e.Null {
		if null {
			b[start+i/8] |= 1 << (i % 8)
		}
	}
	b = append(b, 1)
	b = append(b, e.Types...)
	for _, v := range e.Values {
		b = append(b, v...)
	}
	return b
}

// ParamText renders a binary parameter value as MySQL text for the types
// a shard key can have: integers (signed or unsigned), floats, strings and
// temporal values. ok is false for NULL and for values it cannot render.
func ParamText(typ, flags byte, v []byte) (s string, isInt, ok bool) {
	unsigned := flags&0x80 != 0
	switch typ {
	case TypeTiny:
		if unsigned {
			return strconv.FormatUint(uint64(v[0]), 10), true, true
		}
		return strconv.FormatInt(int64(int8(v[0])), 10), true, true
	case TypeShort, TypeYear:
		u := binary.LittleEndian.Uint16(v)
		if unsigned || typ == TypeYear {
			return strconv.FormatUint(uint64(u), 10), true, true
		}
		return strconv.FormatInt(int64(int16(u)), 10), true, true
	case TypeLong, TypeInt24:
		u := binary.LittleEndian.Uint32(v)
		if unsigned {
			return strconv.FormatUint(uint64(u), 10), true, true
		}
		return strconv.FormatInt(int64(int32(u)), 10), true, true
	case TypeLongLong:
		u := binary.LittleEndian.Uint64(v)
		if unsigned {
			return strconv.FormatUint(u, 10), true, true
		}
		return strconv.FormatInt(int64(u), 10), true, true
	case TypeFloat:
		return strconv.FormatFloat(float64(math.Float32frombits(binary.LittleEndian.Uint32(v))), 'g', -1, 32), false, true
	case TypeDouble:
		return strconv.FormatFloat(math.Float64frombits(binary.LittleEndian.Uint64(v)), 'g', -1, 64), false, true
	case TypeDate, TypeDatetime, TypeTimestamp:
		d := v[1:]
		switch len(d) {
		case 0:
			return "0000-00-00", false, true
		case 4:
			return fmt.Sprintf("%04d-%02d-%02d", binary.LittleEndian.Uint16(d), d[2], d[3]), false, true
		case 7, 11:
			return fmt.Sprintf("%04d-%02d-%02d %02d:%02d:%02d", binary.LittleEndian.Uint16(d), d[2], d[3], d[4], d[5], d[6]), false, true
		}
		return "", false, false
	case TypeNull, TypeTime:
		return "", false, false
	}
	s2, isNull, n := ReadLenEncBytes(v)
	if n == 0 || isNull {
		return "", false, false
	}
	return string(s2), false, true
}

// ParamLiteral renders a binary parameter value as an SQL literal of the
// same type and value, for the router to parse (with MySQL's default
// sql_mode, backslash escapes included) and restore into the statements
// it sends: integers as text, FLOAT and DOUBLE with an exponent (a
// DOUBLE literal, not a DECIMAL one), DECIMAL as text, temporal values
// quoted, blobs as _binary strings and other strings as plain quoted
// literals, which take the connection's character set and collation as a
// string parameter does, whether or not their bytes are valid UTF-8. In
// character sets other than UTF-8 non-ASCII strings are written in hex
// with their introducer (the router restores a hex literal's introducer,
// whatever the character set). With noBackslashEscapes (the session's sql_mode has
// NO_BACKSLASH_ESCAPES, and the router parses in it) a backslash and a NUL
// are written as they are, since an escape would be read as two
// characters. A nil v is NULL.
func ParamLiteral(typ, flags byte, v []byte, charset string, noBackslashEscapes bool) (string, bool) {
	if v == nil || typ == TypeNull {
		return "NULL", true
	}
	switch typ {
	case TypeFloat, TypeDouble:
		s, _, ok := ParamText(typ, flags, v)
		if !ok || strings.ContainsAny(s, "IN") { // Inf, NaN
			return "", false
		}
		if !strings.Contains(s, "e") {
			s += "e0"
		}
		return s, true
	case TypeTiny, TypeShort, TypeYear, TypeLong, TypeInt24, TypeLongLong:
		s, _, ok := ParamText(typ, flags, v)
		return s, ok
	case TypeDate, TypeDatetime, TypeTimestamp:
		s, _, ok := ParamText(typ, flags, v)
		if ok && len(v) == 12 {
			s += fmt.Sprintf(".%06d", binary.LittleEndian.Uint32(v[8:12]))
		}
		return "'" + s + "'", ok
	case TypeTime:
		d := v[1:]
		if len(d) == 0 {
			return "'00:00:00'", true
		}
		if len(d) != 8 && len(d) != 12 {
			return "", false
		}
		sign := ""
		if d[0] == 1 {
			sign = "-"
		}
		h := binary.LittleEndian.Uint32(d[1:5])*24 + uint32(d[5])
		s := fmt.Sprintf("'%s%d:%02d:%02d", sign, h, d[6], d[7])
		if len(d) == 12 {
			s += fmt.Sprintf(".%06d", binary.LittleEndian.Uint32(d[8:12]))
		}
		return s + "'", true
	}
	raw, isNull, n := ReadLenEncBytes(v)
	if n == 0 || isNull {
		return "", false
	}
	switch typ {
	case TypeDecimal, TypeNewDecimal:
		for _, c := range raw {
			if (c < '0' || c > '9') && c != '.' && c != '-' && c != '+' && c != 'e' && c != 'E' {
				return "", false
			}
		}
		return string(raw), len(raw) > 0
	case TypeTinyBlob, TypeMediumBlob, TypeLongBlob, TypeBlob, TypeGeometry:
		return "_binary" + quoteString(raw, noBackslashEscapes), true
	}
	if strings.HasPrefix(charset, "utf8") {
		// Bytes that are not UTF-8 (a []byte a driver sends as a string)
		// are quoted as they are: the server reads a quoted string
		// without introducer as it reads a string parameter, in the
		// connection's character set with its bytes unchecked (stored as
		// they are in a binary column, compared with a text one without
		// error), where _utf8mb4 X'..' is refused (1300) and _binary
		// X'..' compared with a text column is converted, and refused.
		// No byte of a UTF-8 sequence is a quote or a backslash, so the
		// server's lexer cannot take one for part of a character.
		return quoteString(raw, noBackslashEscapes), true
	}
	for _, c := range raw {
		if c >= utf8.RuneSelf {
			// Multi-byte character sets may have a backslash as a
			// trailing byte: no escaping, the bytes in hex.
			return hexLiteral(charset, raw), true
		}
	}
	return quoteString(raw, noBackslashEscapes), true
}

// hexLiteral writes raw as _charset X'..'.
func hexLiteral(charset string, raw []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, len(charset)+5+2*len(raw))
	out = append(out, '_')
	out = append(out, charset...)
	out = append(out, " X'"...)
	for _, c := range raw {
		out = append(out, digits[c>>4], digits[c&15])
	}
	return string(append(out, '\''))
}

// quoteString quotes b as a string literal with a doubled quote for the
// quote and, unless noBackslashEscapes, backslash escapes for backslash
// and NUL. It is not QuoteString, whose hex form the router's parser
// would restore without its type (ParamLiteral): the literal is read in
// the session's own sql_mode, which the caller knows.
func quoteString(b []byte, noBackslashEscapes bool) string {
	out := make([]byte, 0, len(b)+2)
	out = append(out, '\'')
	for _, c := range b {
		switch {
		case c == '\'':
			out = append(out, '\'', '\'')
		case noBackslashEscapes:
			out = append(out, c)
		case c == '\\':
			out = append(out, '\\', '\\')
		case c == 0:
			out = append(out, '\\', '0')
		default:
			out = append(out, c)
		}
	}
	return string(append(out, '\''))
}

// LongDataValue wraps bytes sent with COM_STMT_SEND_LONG_DATA as the
// length-encoded value ParamLiteral reads.
func LongDataValue(data []byte) []byte {
	return AppendLenEncBytes(nil, data)
}
