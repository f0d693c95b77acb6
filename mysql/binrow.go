package mysql

import (
	"encoding/binary"
	"math"
	"strconv"
	"strings"
)

// AppendBinaryRow encodes a text result row (values as MySQL's text
// protocol sends them, nil for NULL) as a binary protocol row for columns
// cols, as COM_STMT_EXECUTE answers: a 0x00 header, the NULL bitmap (offset
// 2), then each non-NULL value in its type's binary form.
func AppendBinaryRow(b []byte, cols []*Column, vals [][]byte) ([]byte, error) {
	b = append(b, OKHeader)
	start := len(b)
	for range (len(cols) + 7 + 2) / 8 {
		b = append(b, 0)
	}
	for i, v := range vals {
		if v == nil {
			pos := i + 2
			b[start+pos/8] |= 1 << (pos % 8)
			continue
		}
		var err error
		if b, err = appendBinaryValue(b, cols[i], v); err != nil {
			return nil, err
		}
	}
	return b, nil
}

func appendBinaryValue(b []byte, c *Column, v []byte) ([]byte, error) {
	unsigned := c.Flags&FlagUnsigned != 0
	switch c.Type {
	case TypeTiny, TypeShort, TypeYear, TypeLong, TypeInt24, TypeLongLong:
		var u uint64
		if unsigned || c.Type == TypeYear {
			x, err := strconv.ParseUint(string(v), 10, 64)
			if err != nil {
				return nil, NewError(ErMalformedPacket, "integer column %s: %q", c.Name, v)
			}
			u = x
		} else {
			x, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil {
				return nil, NewError(ErMalformedPacket, "integer column %s: %q", c.Name, v)
			}
			u = uint64(x)
		}
		switch c.Type {
		case TypeTiny:
			return append(b, byte(u)), nil
		case TypeShort, TypeYear:
			return binary.LittleEndian.AppendUint16(b, uint16(u)), nil
		case TypeLong, TypeInt24:
			return binary.LittleEndian.AppendUint32(b, uint32(u)), nil
		}
		return binary.LittleEndian.AppendUint64(b, u), nil
	case TypeFloat:
		f, err := strconv.ParseFloat(string(v), 32)
		if err != nil {
			return nil, NewError(ErMalformedPacket, "FLOAT column %s: %q", c.Name, v)
		}
		return binary.LittleEndian.AppendUint32(b, math.Float32bits(float32(f))), nil
	case TypeDouble:
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil {
			return nil, NewError(ErMalformedPacket, "DOUBLE column %s: %q", c.Name, v)
		}
		return binary.LittleEndian.AppendUint64(b, math.Float64bits(f)), nil
	case TypeDate, TypeDatetime, TypeTimestamp:
		return appendBinaryDatetime(b, c, string(v))
	case TypeTime:
		return appendBinaryTime(b, c, string(v))
	}
	return AppendLenEncBytes(b, v), nil
}

// appendBinaryDatetime encodes 'YYYY-MM-DD[ HH:MM:SS[.ffffff]]' in the
// shortest binary form (length 0, 4, 7 or 11).
func appendBinaryDatetime(b []byte, c *Column, s string) ([]byte, error) {
	bad := func() ([]byte, error) {
		return nil, NewError(ErMalformedPacket, "temporal column %s: %q", c.Name, s)
	}
	if len(s) < 10 || s[4] != '-' || s[7] != '-' {
		return bad()
	}
	year, e1 := strconv.Atoi(s[:4])
	month, e2 := strconv.Atoi(s[5:7])
	day, e3 := strconv.Atoi(s[8:10])
	if e1 != nil || e2 != nil || e3 != nil {
		return bad()
	}
	var hour, minute, sec, micro int
	if len(s) > 10 {
		if len(s) < 19 || s[10] != ' ' || s[13] != ':' || s[16] != ':' {
			return bad()
		}
		var e4, e5, e6 error
		hour, e4 = strconv.Atoi(s[11:13])
		minute, e5 = strconv.Atoi(s[14:16])
		sec, e6 = strconv.Atoi(s[17:19])
		if e4 != nil || e5 != nil || e6 != nil {
			return bad()
		}
		if len(s) > 19 {
			m, ok := parseMicros(s[19:])
			if !ok {
				return bad()
			}
			micro = m
		}
	}
	switch {
	case micro != 0:
		b = append(b, 11)
	case hour != 0 || minute != 0 || sec != 0:
		b = append(b, 7)
	case year != 0 || month != 0 || day != 0:
		b = append(b, 4)
	default:
		return append(b, 0), nil
	}
	b = binary.LittleEndian.AppendUint16(b, uint16(year))
	b = append(b, byte(month), byte(day))
	if b[len(b)-5] == 4 {
		return b, nil
	}
	b = append(b, byte(hour), byte(minute), byte(sec))
	if micro != 0 {
		b = binary.LittleEndian.AppendUint32(b, uint32(micro))
	}
	return b, nil
}

// parseMicros reads ".ffffff" (1 to 6 digits) as microseconds.
func parseMicros(s string) (int, bool) {
	if len(s) < 2 || len(s) > 7 || s[0] != '.' {
		return 0, false
	}
	digits := s[1:] + strings.Repeat("0", 7-len(s))
	m, err := strconv.Atoi(digits)
	return m, err == nil
}

// appendBinaryTime encodes '[-]H+:MM:SS[.ffffff]' (length 0, 8 or 12).
func appendBinaryTime(b []byte, c *Column, s string) ([]byte, error) {
	bad := func() ([]byte, error) {
		return nil, NewError(ErMalformedPacket, "TIME column %s: %q", c.Name, s)
	}
	neg := strings.HasPrefix(s, "-")
	t := strings.TrimPrefix(s, "-")
	micro := 0
	if i := strings.IndexByte(t, '.'); i >= 0 {
		m, ok := parseMicros(t[i:])
		if !ok {
			return bad()
		}
		micro, t = m, t[:i]
	}
	parts := strings.Split(t, ":")
	if len(parts) != 3 {
		return bad()
	}
	h, e1 := strconv.Atoi(parts[0])
	m, e2 := strconv.Atoi(parts[1])
	sec, e3 := strconv.Atoi(parts[2])
	if e1 != nil || e2 != nil || e3 != nil {
		return bad()
	}
	if h == 0 && m == 0 && sec == 0 && micro == 0 {
		return append(b, 0), nil
	}
	if micro != 0 {
		b = append(b, 12)
	} else {
		b = append(b, 8)
	}
	if neg {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(h/24))
	b = append(b, byte(h%24), byte(m), byte(sec))
	if micro != 0 {
		b = binary.LittleEndian.AppendUint32(b, uint32(micro))
	}
	return b, nil
}
