package mysql

import (
	"strings"
	"unicode/utf8"
)

// The proxy writes SQL of its own (information_schema lookups, the
// sidecar's rows, rows it copies, names it restores) on connections whose
// sql_mode it does not choose. A string literal spelled with backslash
// escapes reads differently under NO_BACKSLASH_ESCAPES ('a\\b' is a\b in
// one mode and a\\b in the other, and 'a\'' ends early in one of them), so
// the literals below use only what every mode reads alike: a doubled
// quote inside quotes, or hex digits.

// AppendQuoted appends s to dst as an SQL string literal that reads back
// as exactly the bytes of s under every sql_mode. Text that is valid UTF-8
// and holds no backslash and no NUL is written in quotes, with each quote
// in it written twice; anything else in hex (X'...').
//
// charset is the literal's character set, written as an introducer
// ("utf8mb4" gives _utf8mb4'...' or _utf8mb4 X'...'): "utf8mb4" for text,
// which then compares and converts as characters whatever the
// connection's character set (and a string that is not UTF-8 fails with
// 1300); "binary" for bytes stored as they are (values copied between
// tables). With charset "" the quoted form takes the connection's
// character set and the hex form is a binary string: only for callers
// whose text is in the connection's character set and that accept either.
func AppendQuoted(dst []byte, s, charset string) []byte {
	if charset != "" {
		dst = append(dst, '_')
		dst = append(dst, charset...)
		dst = append(dst, ' ')
	}
	if !plain(s) {
		const digits = "0123456789ABCDEF"
		dst = append(dst, "X'"...)
		for i := 0; i < len(s); i++ {
			dst = append(dst, digits[s[i]>>4], digits[s[i]&15])
		}
		return append(dst, '\'')
	}
	dst = append(dst, '\'')
	for {
		i := strings.IndexByte(s, '\'')
		if i < 0 {
			break
		}
		dst = append(dst, s[:i+1]...)
		dst = append(dst, '\'')
		s = s[i+1:]
	}
	dst = append(dst, s...)
	return append(dst, '\'')
}

// QuoteString returns s as a string literal of character set charset; see
// AppendQuoted.
func QuoteString(s, charset string) string {
	return string(AppendQuoted(make([]byte, 0, len(s)+len(charset)+4), s, charset))
}

// plain reports whether s can be written in quotes: no backslash, no NUL,
// and valid UTF-8 (a utf8mb4 connection refuses a quoted string that is
// not, and other character sets would read its bytes as their own).
func plain(s string) bool {
	return strings.IndexByte(s, '\\') < 0 && strings.IndexByte(s, 0) < 0 && utf8.ValidString(s)
}

// QuoteIdent returns name as a quoted identifier: in back quotes, a back
// quote in it doubled, which every sql_mode reads alike (ANSI_QUOTES adds
// double quotes; it does not take back quotes away). No identifier can
// hold NUL: the server refuses such a name.
func QuoteIdent(name string) string {
	return string(AppendIdent(make([]byte, 0, len(name)+2), name))
}

// AppendIdent appends name to dst as a quoted identifier (QuoteIdent).
func AppendIdent(dst []byte, name string) []byte {
	dst = append(dst, '`')
	for {
		i := strings.IndexByte(name, '`')
		if i < 0 {
			break
		}
		dst = append(dst, name[:i+1]...)
		dst = append(dst, '`')
		name = name[i+1:]
	}
	dst = append(dst, name...)
	return append(dst, '`')
}
