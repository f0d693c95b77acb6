package engine

import (
	"strings"
	"testing"

	"github.com/shardgate/shardgate/router"
)

// split runs the splitter over file, fed in pieces of n bytes, and returns
// each line's key field as it was read ("NULL" for null), in order.
func splitKeys(t *testing.T, l *router.Load, file string, n int) []string {
	t.Helper()
	var keys []string
	s := newLoadSplitter(l, 1, true, 0)
	var lines []string
	for len(file) > 0 {
		k := min(n, len(file))
		s.feed([]byte(file[:k]), func(line, _ []byte) { lines = append(lines, string(line)) })
		file = file[k:]
	}
	if len(s.buf) > 0 {
		lines = append(lines, string(s.buf))
	}
	for _, line := range lines {
		v, null, ok := s.field([]byte(line), l.KeyField)
		switch {
		case !ok:
			keys = append(keys, "<none>")
		case null:
			keys = append(keys, "<null>")
		default:
			keys = append(keys, v)
		}
	}
	return keys
}

func TestLoadSplitterLines(t *testing.T) {
	csv := &router.Load{FieldTerm: ",", LineTerm: "\r\n", Enclosed: '"', Escaped: '\\', KeyField: 1}
	tsv := &router.Load{FieldTerm: "\t", LineTerm: "\n", Escaped: '\\', KeyField: 0}
	for _, tc := range []struct {
		l    *router.Load
		file string
		want string
	}{
		{tsv, "1\ta\n2\tb\n3\tc", "1|2|3"},
		{tsv, "1\ta\\\nstill a\n\\N\tb\n", "1|<null>"},           // an escaped newline is data
		{tsv, "x\\ty\tz\n", "x\ty"},                              // an escaped tab is data
		{csv, "a,\"4\",b\r\n\"x,y\",\"5\"\r\n", "4|5"},           // enclosed fields, a comma inside
		{csv, "\"line\r\nbreak\",6\r\nq,\"7\"\"\"\r\n", "6|7\""}, // a terminator inside quotes, a doubled quote
		{csv, "a,NULL\r\nb,\"NULL\"\r\n", "<null>|NULL"},         // NULL unenclosed is NULL, enclosed "NULL" the word
		{csv, "only\r\n", "<none>"},
	} {
		for _, n := range []int{1, 2, 3, 1000} {
			got := strings.Join(splitKeys(t, tc.l, tc.file, n), "|")
			if got != tc.want {
				t.Errorf("%q in pieces of %d: keys %q, want %q", tc.file, n, got, tc.want)
			}
		}
	}
}
