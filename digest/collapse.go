package digest

// Collapse rewrites the fingerprint in b[from:] so that a multi-row value
// list is one pattern: "insert into t(a,b)values(?,?),(?,?),(?,?)" becomes
// "insert into t(a,b)values(?,?),...", whatever the number of rows, as
// ProxySQL and Vitess do; otherwise each row count would be a shape of its
// own and one bulk INSERT would fill the digest. It returns b (changed in
// place) and the rows of the statement's first VALUES (or
// VALUE) list, 0 when it has none: the row count travels beside the shape
// (RecordValues) instead of in it.
//
// A fingerprint cut short (it ends in "...") counts the rows up to the cut.
// Parentheses nest ("(?,now())"); a backquoted name is skipped whole.
func Collapse(b []byte, from int) ([]byte, int) {
	fp := b[from:]
	for i := 0; i+5 <= len(fp); i++ {
		n := 0
		switch {
		case hasWord(fp, i, "values"):
			n = 6
		case hasWord(fp, i, "value"):
			n = 5
		case fp[i] == '`':
			if j := skipQuoted(fp, i); j > i {
				i = j - 1
			}
			continue
		default:
			continue
		}
		j := i + n
		if j < len(fp) && fp[j] == ' ' {
			j++
		}
		if j >= len(fp) || fp[j] != '(' {
			i += n - 1
			continue
		}
		end, closed := group(fp, j)
		rows := 1
		if !closed {
			return b, rows
		}
		keep := end // the first row's group ends here
		for end+1 < len(fp) && fp[end] == ',' && fp[end+1] == '(' {
			e, ok := group(fp, end+1)
			rows++
			end = e
			if !ok {
				break
			}
		}
		if rows == 1 {
			return b, 1
		}
		if end >= keep+4 { // ",..." fits in the rows it replaces
			copy(fp[keep:], ",...")
			n := copy(fp[keep+4:], fp[end:])
			return b[:from+keep+4+n], rows
		}
		// "values(),()": the mark is longer than the second row.
		tail := append([]byte(nil), fp[end:]...)
		b = append(b[:from+keep], ",..."...)
		return append(b, tail...), rows
	}
	return b, 0
}

// hasWord reports whether fp[i:] starts with the lower-case keyword w as a
// whole word.
func hasWord(fp []byte, i int, w string) bool {
	if i+len(w) > len(fp) || string(fp[i:i+len(w)]) != w {
		return false
	}
	if i > 0 && identByte(fp[i-1]) {
		return false
	}
	return i+len(w) == len(fp) || !identByte(fp[i+len(w)])
}

func identByte(c byte) bool {
	return c == '_' || c == '$' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c >= 0x80
}

// group returns the end (one past the closing parenthesis) of the group
// opening at fp[i], and false when the fingerprint ends first.
func group(fp []byte, i int) (int, bool) {
	depth := 0
	for ; i < len(fp); i++ {
		switch fp[i] {
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return i + 1, true
			}
		case '`':
			if j := skipQuoted(fp, i); j > i {
				i = j - 1
			}
		}
	}
	return len(fp), false
}

// skipQuoted returns the end of the backquoted name at fp[i] (a doubled
// backquote is one inside the name), or len(fp).
func skipQuoted(fp []byte, i int) int {
	for j := i + 1; j < len(fp); j++ {
		if fp[j] == '`' {
			if j+1 < len(fp) && fp[j+1] == '`' {
				j++
				continue
			}
			return j + 1
		}
	}
	return len(fp)
}
