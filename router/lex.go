package router

// Lexical helpers that run before (or instead of) parsing. None of them
// allocates: they run on the unsharded fast path.

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

// skipSpace returns the index of the first non-blank byte at or after i.
func skipSpace(s string, i int) int {
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	return i
}

// lineComment reports whether a -- or # comment starts at i.
func lineComment(s string, i int) bool {
	if s[i] == '#' {
		return true
	}
	return s[i] == '-' && i+1 < len(s) && s[i+1] == '-' && (i+2 == len(s) || isSpace(s[i+2]))
}

// plainComment reports whether s[i:] starts a /* */ comment that is neither
// executable (/*! */, /*M! */) nor an optimizer hint (/*+ */), and returns
// its trimmed content and the index after it. end is -1 when the comment
// is unterminated.
func plainComment(s string, i int) (content string, end int, ok bool) {
	if i+1 >= len(s) || s[i] != '/' || s[i+1] != '*' {
		return "", 0, false
	}
	j := i + 2
	for k := j; k+1 < len(s); k++ {
		if s[k] == '*' && s[k+1] == '/' {
			c := s[j:k]
			exec := len(c) > 0 && (c[0] == '!' || c[0] == '+' || (c[0] == 'M' && len(c) > 1 && c[1] == '!'))
			for len(c) > 0 && isSpace(c[0]) {
				c = c[1:]
			}
			for len(c) > 0 && isSpace(c[len(c)-1]) {
				c = c[:len(c)-1]
			}
			return c, k + 2, !exec
		}
	}
	return "", -1, false
}

// hintIn looks for a kingshard node hint: a plain comment before the first
// keyword or right after it. It returns the first comment naming one of
// nodes (the schema's hint plans), or nil.
func hintIn(s string, nodes map[string]*Plan) *Plan {
	var p *Plan
	scanHints(s, func(c string) bool {
		p = nodes[c]
		return p != nil
	})
	return p
}

// equalFoldTrim reports whether c, without surrounding blanks, is w in
// any case (w is lower-case ASCII).
func equalFoldTrim(c, w string) bool {
	i, j := 0, len(c)
	for i < j && isSpace(c[i]) {
		i++
	}
	for j > i && isSpace(c[j-1]) {
		j--
	}
	if j-i != len(w) {
		return false
	}
	for k := 0; k < len(w); k++ {
		if b := c[i+k] | 0x20; b != w[k] {
			return false
		}
	}
	return true
}

// scanHints calls found with the text of each plain comment before the
// first keyword and right after it, until found returns true.
func scanHints(s string, found func(c string) bool) {
	i := 0
	for {
		i = skipSpace(s, i)
		if i >= len(s) {
			return
		}
		if lineComment(s, i) {
			for i < len(s) && s[i] != '\n' {
				i++
			}
			continue
		}
		c, end, ok := plainComment(s, i)
		if end < 0 {
			return
		}
		if end == 0 {
			break // not a comment: the first keyword
		}
		if ok && found(c) {
			return
		}
		i = end
	}
	// Skip the first keyword, then look at the comments right after it.
	for i < len(s) && isIdent(s[i]) {
		i++
	}
	for {
		i = skipSpace(s, i)
		c, end, ok := plainComment(s, i)
		if end <= 0 {
			return
		}
		if ok && found(c) {
			return
		}
		i = end
	}
}

// skipLeading returns the index of the first keyword, after blanks and
// comments (executable comments are not skipped).
func skipLeading(s string) int {
	i := 0
	for {
		i = skipSpace(s, i)
		if i >= len(s) {
			return i
		}
		if lineComment(s, i) {
			for i < len(s) && s[i] != '\n' {
				i++
			}
			continue
		}
		_, end, ok := plainComment(s, i)
		if !ok || end <= 0 {
			return i
		}
		i = end
	}
}

// hasWordFold reports whether s[i:] starts with word (ASCII, any case)
// followed by a non-identifier byte or the end.
func hasWordFold(s string, i int, word string) bool {
	if len(s)-i < len(word) || !equalFoldASCII(s[i:i+len(word)], word) {
		return false
	}
	return i+len(word) == len(s) || !isIdent(s[i+len(word)])
}

func equalFoldASCII(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// explainShard recognises EXPLAIN FORMAT='shard' (or "shard", or shard,
// any case) and returns the statement after it.
func explainShard(s string) (inner string, ok bool) {
	i := skipLeading(s)
	if !hasWordFold(s, i, "explain") {
		return "", false
	}
	i = skipSpace(s, i+len("explain"))
	if !hasWordFold(s, i, "format") {
		return "", false
	}
	i = skipSpace(s, i+len("format"))
	if i >= len(s) || s[i] != '=' {
		return "", false
	}
	i = skipSpace(s, i+1)
	if i < len(s) && (s[i] == '\'' || s[i] == '"') {
		q := s[i]
		i++
		if len(s)-i < len("shard")+1 || !equalFoldASCII(s[i:i+len("shard")], "shard") || s[i+len("shard")] != q {
			return "", false
		}
		i += len("shard") + 1
	} else {
		if !hasWordFold(s, i, "shard") {
			return "", false
		}
		i += len("shard")
	}
	return s[skipSpace(s, i):], true
}

// mentionsWord reports whether s contains word (ASCII case-insensitive)
// with no identifier byte on either side.
func mentionsWord(s, word string) bool {
	if word == "" {
		return false
	}
	for i := 0; i+len(word) <= len(s); i++ {
		if (i > 0 && isIdent(s[i-1])) || !equalFoldASCII(s[i:i+len(word)], word) {
			continue
		}
		if i+len(word) == len(s) || !isIdent(s[i+len(word)]) {
			return true
		}
	}
	return false
}

// likeMatch reports whether name matches a SQL LIKE pattern (% and _,
// escape byte esc), byte-wise and case-sensitively, as SHOW TABLES LIKE
// does on case-sensitive file systems.
func likeMatch(name, pattern string, esc byte) bool {
	for len(pattern) > 0 {
		c := pattern[0]
		switch {
		case c == esc && len(pattern) > 1:
			if len(name) == 0 || name[0] != pattern[1] {
				return false
			}
			name, pattern = name[1:], pattern[2:]
		case c == '%':
			pattern = pattern[1:]
			for len(pattern) > 0 && pattern[0] == '%' {
				pattern = pattern[1:]
			}
			if len(pattern) == 0 {
				return true
			}
			for i := 0; i <= len(name); i++ {
				if likeMatch(name[i:], pattern, esc) {
					return true
				}
			}
			return false
		case c == '_':
			if len(name) == 0 {
				return false
			}
			name, pattern = name[1:], pattern[1:]
		default:
			if len(name) == 0 || name[0] != c {
				return false
			}
			name, pattern = name[1:], pattern[1:]
		}
	}
	return len(name) == 0
}
