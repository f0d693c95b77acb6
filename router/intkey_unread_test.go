package router

import (
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"testing"
)

// unreadCatalog has read no table: every key's type is unknown.
type unreadCatalog struct{}

func (unreadCatalog) Columns(db, table string) ([]string, bool) { return nil, false }
func (unreadCatalog) Integer(db, table, column string) bool     { return false }

// TestUnreadKeyStrings: a string compared with the key of a table the
// catalog has not read goes to every subtable an INT column's row or a
// string column's row could be in (a string that is a plain unsigned
// integer to its one subtable, as before); a row written with such a key
// waits for the definition (NeedSchemaError). Text, bound arguments and
// the plan cache agree, and a cached shape does not keep a spread plan.
func TestUnreadKeyStrings(t *testing.T) {
	r := testCachedRouter(t)
	s := Session{User: "shard", DB: "sbtest", Catalog: unreadCatalog{}}
	sub := func(i uint64) string { return fmt.Sprintf("sbtest1_%04d", i%4) }
	both := func(str string, n uint64) []string {
		subs := []string{sub(uint64(crc32.ChecksumIEEE([]byte(str)))), sub(n)}
		slices.Sort(subs)
		return slices.Compact(subs)
	}
	all := []string{"sbtest1_0000", "sbtest1_0001", "sbtest1_0002", "sbtest1_0003"}
	tests := []struct {
		lit  string
		want []string
	}{
		{"5", []string{sub(5)}},
		{"05", []string{sub(5)}},
		{" 5", both(" 5", 5)},
		{"5.0", both("5.0", 5)},
		{"5e0", both("5e0", 5)},
		{"5abc", both("5abc", 5)},
		{"", both("", 0)},
		{"abc", both("abc", 0)},
		{"5.5", []string{sub(uint64(crc32.ChecksumIEEE([]byte("5.5"))))}}, // no integer equals it
		{"1e18", all}, // a double that stands for several integers
	}
	for _, tc := range tests {
		text := "'" + tc.lit + "'"
		for _, q := range []string{
			"SELECT c FROM sbtest1 WHERE id = " + text,
			"UPDATE sbtest1 SET c = 'x' WHERE " + text + " = id",
			"DELETE FROM sbtest1 WHERE id IN (" + text + ")",
		} {
			for range 3 { // then through the plan cache
				p, err := r.Route(q, s)
				if err != nil {
					t.Fatalf("%s: %v", q, err)
				}
				if subs := targetSubs(p); !slices.Equal(subs, tc.want) {
					t.Errorf("%s: subtables %v, want %v", q, subs, tc.want)
				}
			}
		}
		for _, q := range []string{"UPDATE sbtest1 SET c = 'x' WHERE id = ?", "SELECT c FROM sbtest1 WHERE id = ?"} {
			for range 3 {
				p, err := r.RouteArgs(q, s, []Arg{{ArgString, tc.lit}})
				if err != nil {
					t.Fatal(err)
				}
				if subs := targetSubs(p); !slices.Equal(subs, tc.want) {
					t.Errorf("%s with %q: subtables %v, want %v", q, tc.lit, subs, tc.want)
				}
			}
		}
	}
	// A shape first seen with a spread value still routes '7' to one
	// subtable afterwards, and '7abc' to both again.
	for _, lit := range []string{"7abc", "7abc", "7", "7", "7", "7abc"} {
		p, err := r.RouteArgs("SELECT c FROM sbtest1 WHERE id = ? AND k = 1", s, []Arg{{ArgString, lit}})
		if err != nil {
			t.Fatal(err)
		}
		want := []string{sub(7)}
		if lit != "7" {
			want = both(lit, 7)
		}
		if subs := targetSubs(p); !slices.Equal(subs, want) {
			t.Errorf("cached shape with %q: subtables %v, want %v", lit, subs, want)
		}
	}
	// Writing a key: where both readings agree the row goes there ('9.0'
	// and '9e0' go where 9 goes in both; '8.5', stored as 9, happens to
	// hash where 9 goes); else the definition is asked for.
	for _, tc := range []struct {
		lit  string
		need bool
	}{{"9", false}, {"09", false}, {" 9", false}, {"9.0", false}, {"9e0", false}, {"8.5", false}, {"8.6", true}, {"9abc", true}, {"abc", true}} {
		for _, q := range []string{
			"INSERT INTO sbtest1 (id, c) VALUES ('" + tc.lit + "', 'x')",
			"INSERT INTO sbtest1 (id, c) SELECT '" + tc.lit + "', 'x'",
			"UPDATE sbtest1 SET id = '" + tc.lit + "' WHERE id = 9",
		} {
			p, err := r.Route(q, s)
			var ne *NeedSchemaError
			switch {
			case tc.need && !errors.As(err, &ne):
				t.Errorf("%s: %v, want NeedSchemaError", q, err)
			case tc.need && (ne.Table != "sbtest1" || ne.Err.Code != 1235):
				t.Errorf("%s: asks for %s.%s with %v", q, ne.DB, ne.Table, ne.Err)
			case !tc.need && err != nil:
				t.Errorf("%s: %v", q, err)
			case !tc.need && !slices.Equal(targetSubs(p), []string{sub(9)}):
				t.Errorf("%s: subtables %v, want %s", q, targetSubs(p), sub(9))
			}
		}
		p, err := r.RouteArgs("INSERT INTO sbtest1 (id, c) VALUES (?, 'x')", s, []Arg{{ArgString, tc.lit}})
		var ne *NeedSchemaError
		if got := errors.As(err, &ne); got != tc.need || !got && err != nil {
			t.Errorf("prepared INSERT of %q: %v %v", tc.lit, p, err)
		}
	}
	// With the definition read, INSERT places by the integer stored.
	p, err := r.Route("INSERT INTO sbtest1 (id, c) VALUES ('8.6', 'x')", Session{User: "shard", DB: "sbtest", Catalog: intCatalog{}})
	if err != nil || !slices.Equal(targetSubs(p), []string{sub(9)}) {
		t.Errorf("INSERT '8.6' with an INT key: %v %v", p, err)
	}
}
