package router

import (
	"strconv"
	"strings"
)

// UnwrapExecutable returns the statement inside a text that is one
// executable comment, /*!NNNNN stmt */ or /*M!NNNNNN stmt */ (the way
// mysqldump and mariadb-tzinfo-to-sql write statements), when the server,
// whose version is version (major*10000+minor*100+patch), runs it: its
// version is not above the server's. ok is false for any other text, and
// for a comment the server would skip (which then goes to it unchanged).
func UnwrapExecutable(sql string, version int) (inner string, ok bool) {
	s := strings.TrimRight(strings.TrimSpace(sql), "; \t\r\n")
	var digits int
	switch {
	case strings.HasPrefix(s, "/*M!"), strings.HasPrefix(s, "/*m!"):
		s, digits = s[4:], 6
	case strings.HasPrefix(s, "/*!"):
		s, digits = s[3:], 5
	default:
		return "", false
	}
	if !strings.HasSuffix(s, "*/") {
		return "", false
	}
	s = s[:len(s)-2]
	if strings.Contains(s, "*/") || strings.Contains(s, "/*") {
		return "", false // several comments, or one nested: not one statement
	}
	n := 0
	for n < len(s) && n < digits && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	if n != 0 {
		if n != digits {
			return "", false
		}
		v, err := strconv.Atoi(s[:n])
		if err != nil || v > version {
			return "", false
		}
	}
	inner = strings.TrimSpace(s[n:])
	return inner, inner != ""
}

// VersionID reads a server version string ("10.11.19-MariaDB", or with the
// 5.5.5- prefix MariaDB sends old clients) as major*10000+minor*100+patch;
// 0 when it cannot.
func VersionID(v string) int {
	v = strings.TrimPrefix(v, "5.5.5-")
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 3 {
		return 0
	}
	id := 0
	for i, p := range parts {
		end := 0
		for end < len(p) && p[end] >= '0' && p[end] <= '9' {
			end++
		}
		n, err := strconv.Atoi(p[:end])
		if err != nil {
			return 0
		}
		id += n * []int{10000, 100, 1}[i]
	}
	return id
}
