package router

import "strings"

// ExecuteImmediate splits EXECUTE IMMEDIATE <expr> [USING <params>] into
// the expression that gives the statement's text and the USING clause
// ("" when there is none, else starting with USING). ok is false for text
// of another form.
func ExecuteImmediate(sql string) (expr, using string, ok bool) {
	kw, rest := firstKeyword(sql)
	if kw != "EXECUTE" {
		return "", "", false
	}
	if kw, rest = firstKeyword(rest); kw != "IMMEDIATE" {
		return "", "", false
	}
	rest = strings.TrimRight(rest, " \t\r\n;")
	end := topLevelWord(rest, "USING")
	expr = strings.TrimSpace(rest[:end])
	if expr == "" {
		return "", "", false
	}
	return expr, strings.TrimSpace(rest[end:]), true
}

// topLevelWord returns the offset of the first occurrence of word (upper
// case, matched without regard to case) in s outside quotes, comments and
// parentheses, or len(s).
func topLevelWord(s, word string) int {
	depth := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'' || c == '"' || c == '`':
			for i++; i < len(s); i++ {
				if s[i] == '\\' && c != '`' {
					i++
					continue
				}
				if s[i] == c {
					if i+1 < len(s) && s[i+1] == c {
						i++
						continue
					}
					break
				}
			}
		case c == '/' && i+1 < len(s) && s[i+1] == '*':
			end := strings.Index(s[i+2:], "*/")
			if end < 0 {
				return len(s)
			}
			i += end + 3
		case c == '#' || c == '-' && i+2 < len(s) && s[i+1] == '-' && (s[i+2] == ' ' || s[i+2] == '\t'):
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == '(':
			depth++
		case c == ')':
			depth--
		case depth == 0 && (c|0x20) == (word[0]|0x20) && (i == 0 || !identByte(s[i-1])) &&
			len(s)-i >= len(word) && strings.EqualFold(s[i:i+len(word)], word) &&
			(i+len(word) == len(s) || !identByte(s[i+len(word)])):
			return i
		}
	}
	return len(s)
}

func identByte(c byte) bool {
	return c == '_' || c == '$' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}
