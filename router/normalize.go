package router

// Literal stripping for the plan cache. normalize turns statement text
// into its shape: the same text with every plain literal replaced by ?,
// so that statements differing only in their constants share one cached
// plan template. It is deliberately conservative: anything it is not sure
// is a value literal (hex and bit literals, strings with a charset
// introducer or after @, numbers glued to names) stays in the shape as
// written, and text it cannot scan with certainty is not cached at all.

// litClass says what kind of literal a ? of a shape stands for. The
// classes are part of the cache key, so a cached template only ever sees
// literals of the kind it was built from.
const (
	litInt     = 'i' // decimal digits of an unsigned 64-bit value
	litNumber  = 'n' // a decimal: 1.5, 2., or digits past 64 bits
	litString  = 's' // quoted string without escapes
	litEscaped = 'e' // quoted string with \ escapes or doubled quotes
)

// span is one literal of a statement: its bytes in the client's text.
type span struct {
	off, end int
	class    byte
}

func isIdentByte(c byte) bool {
	return c == '_' || c == '$' || c >= 0x80 || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9')
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// normalize appends the shape of sql to dst, followed by a 0 byte and the
// class of each literal, and appends the literals' spans to spans. ok is
// false when the text is not cacheable: it contains ? or NUL outside
// quotes, or an unterminated quote or comment.
func normalize(dst []byte, sql string, spans []span) (_ []byte, _ []span, ok bool) {
	n := len(sql)
	for i := 0; i < n; {
		c := sql[i]
		switch {
		case c == '\'' || c == '"':
			end, escaped := scanString(sql, i)
			if end < 0 {
				return dst, spans, false
			}
			if i > 0 && (isIdentByte(sql[i-1]) || sql[i-1] == '@') {
				// _utf8mb4'x', N'x', X'0A', B'01', @'var': not a plain value.
				dst = append(dst, sql[i:end]...)
			} else {
				class := byte(litString)
				if escaped {
					class = litEscaped
				}
				spans = append(spans, span{i, end, class})
				dst = append(dst, '?')
			}
			i = end
		case c == '`':
			end := scanQuoted(sql, i, '`')
			if end < 0 {
				return dst, spans, false
			}
			dst = append(dst, sql[i:end]...)
			i = end
		case c == '/' && i+1 < n && sql[i+1] == '*':
			end := -1
			for k := i + 2; k+1 < n; k++ {
				if sql[k] == '*' && sql[k+1] == '/' {
					end = k + 2
					break
				}
			}
			if end < 0 {
				return dst, spans, false
			}
			dst = append(dst, sql[i:end]...)
			i = end
		case lineComment(sql, i):
			end := i
			for end < n && sql[end] != '\n' {
				end++
			}
			dst = append(dst, sql[i:end]...)
			i = end
		case isDigit(c) && (i == 0 || (!isIdentByte(sql[i-1]) && sql[i-1] != '.')):
			end, class := scanNumber(sql, i)
			if class == 0 || end-i > maxNumberLen {
				// Floats, and numbers the parser might take apart
				// differently by their value (overflow, precision).
				return dst, spans, false
			}
			if end < n && isIdentByte(sql[end]) {
				// 0x1F, 0b01, 1abc: a hex or bit literal or a name.
				for end < n && isIdentByte(sql[end]) {
					end++
				}
				dst = append(dst, sql[i:end]...)
			} else {
				spans = append(spans, span{i, end, class})
				dst = append(dst, '?')
			}
			i = end
		case isIdentByte(c):
			end := i + 1
			for end < n && isIdentByte(sql[end]) {
				end++
			}
			dst = append(dst, sql[i:end]...)
			i = end
		case c == '?' || c == 0:
			return dst, spans, false
		default:
			dst = append(dst, c)
			i++
		}
	}
	dst = append(dst, 0)
	for _, s := range spans {
		dst = append(dst, s.class)
	}
	return dst, spans, true
}

// scanString returns the index after the string literal that starts at i
// (quote '\” or '"'), or -1 when it is unterminated; escaped reports a
// backslash escape or a doubled quote inside.
func scanString(s string, i int) (end int, escaped bool) {
	q := s[i]
	for k := i + 1; k < len(s); k++ {
		switch s[k] {
		case '\\':
			escaped = true
			k++
		case q:
			if k+1 < len(s) && s[k+1] == q {
				escaped = true
				k++
				continue
			}
			return k + 1, escaped
		}
	}
	return -1, escaped
}

// scanQuoted returns the index after a quoted name starting at i (doubled
// quotes stand for one), or -1 when it is unterminated.
func scanQuoted(s string, i int, q byte) int {
	for k := i + 1; k < len(s); k++ {
		if s[k] == q {
			if k+1 < len(s) && s[k+1] == q {
				k++
				continue
			}
			return k + 1
		}
	}
	return -1
}

// maxNumberLen bounds the numeric literals normalize strips.
const maxNumberLen = 60

// scanNumber returns the end of the numeric literal at i: digits, an
// optional fraction and an optional exponent. class is litInt, litNumber,
// or 0 for a float with an exponent.
func scanNumber(s string, i int) (end int, class byte) {
	n := len(s)
	end = i
	for end < n && isDigit(s[end]) {
		end++
	}
	class = litInt
	if end < n && s[end] == '.' {
		class = litNumber
		end++
		for end < n && isDigit(s[end]) {
			end++
		}
	}
	if end < n && (s[end] == 'e' || s[end] == 'E') {
		k := end + 1
		if k < n && (s[k] == '+' || s[k] == '-') {
			k++
		}
		if k < n && isDigit(s[k]) {
			for k < n && isDigit(s[k]) {
				k++
			}
			return k, 0
		}
	}
	if class == litInt && (end-i > 20 || (end-i == 20 && s[i:end] > "18446744073709551615")) {
		class = litNumber
	}
	return end, class
}
