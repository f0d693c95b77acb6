package router

import (
	"math"
	"slices"
	"testing"
)

// intCatalog knows that the key columns of sbtest1 and ranged are INT.
type intCatalog struct{}

func (intCatalog) Columns(db, table string) ([]string, bool) { return nil, false }

func (intCatalog) Integer(db, table, column string) bool {
	return db == "sbtest" && (table == "sbtest1" || table == "ranged") && column == "id"
}

func targetSubs(p *Plan) []string {
	var subs []string
	for _, tg := range p.Targets {
		subs = append(subs, tg.Subtable)
	}
	slices.Sort(subs)
	return subs
}

// TestIntegerKeyStrings: a string compared with a shard key the catalog
// knows to be an integer routes by the number MariaDB compares it as (a
// DOUBLE): its numeric prefix after leading whitespace, 0 when there is
// none. A string no integer equals ('7.5', '1e30') goes to one subtable,
// which answers what MariaDB answers: no row. Text, bound arguments and
// the plan cache agree.
func TestIntegerKeyStrings(t *testing.T) {
	r := testCachedRouter(t)
	s := Session{User: "shard", DB: "sbtest", Catalog: intCatalog{}}
	tests := []struct {
		lit, text string // text: the literal as SQL, lit as a bound argument
		want      []string
	}{
		{"7abc", "'7abc'", []string{"sbtest1_0003"}},
		{" 7", "' 7'", []string{"sbtest1_0003"}},
		{"07", "'07'", []string{"sbtest1_0003"}},
		{"7.0", "'7.0'", []string{"sbtest1_0003"}},
		{"7e0", "'7e0'", []string{"sbtest1_0003"}},
		{"\t+0.7e1x", "'\\t+0.7e1x'", []string{"sbtest1_0003"}},
		{"-6", "'-6'", []string{"sbtest1_0002"}},
		{"", "''", []string{"sbtest1_0000"}},
		{"abc", "'abc'", []string{"sbtest1_0000"}},
		{"7.5", "'7.5'", []string{"sbtest1_0000"}},   // no row: any one subtable
		{"1e30", "'1e30'", []string{"sbtest1_0000"}}, // beyond BIGINT UNSIGNED
		{"1e999", "'1e999'", []string{"sbtest1_0000"}},
		// A double this large stands for several integers: all subtables.
		{"1e18", "'1e18'", []string{"sbtest1_0000", "sbtest1_0001", "sbtest1_0002", "sbtest1_0003"}},
	}
	for _, tc := range tests {
		for _, q := range []string{
			"UPDATE sbtest1 SET c='x' WHERE id=" + tc.text,
			"SELECT c FROM sbtest1 WHERE id = " + tc.text,
			"SELECT c FROM sbtest1 WHERE " + tc.text + " = id",
			"DELETE FROM sbtest1 WHERE id IN (" + tc.text + ")",
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
	// IN lists: '3x' is 3, 4 is 4.
	p, err := r.Route("SELECT c FROM sbtest1 WHERE id IN ('3x', 4)", s)
	if err != nil {
		t.Fatal(err)
	}
	if subs := targetSubs(p); !slices.Equal(subs, []string{"sbtest1_0000", "sbtest1_0003"}) {
		t.Errorf("IN ('3x', 4): subtables %v", subs)
	}
	// Without the type a string keeps today's routing: '7abc' by its CRC-32.
	p, err = r.Route("SELECT c FROM sbtest1 WHERE id = '7abc'", Session{User: "shard", DB: "sbtest"})
	if err != nil {
		t.Fatal(err)
	}
	if subs := targetSubs(p); len(subs) != 1 || subs[0] == "sbtest1_0003" {
		t.Errorf("'7abc' without a catalog: subtables %v", subs)
	}
}

// TestIntegerKeyRange: a range rule routes a string by the same number,
// in equalities and in comparisons.
func TestIntegerKeyRange(t *testing.T) {
	r := testCachedRouter(t)
	s := Session{User: "shard", DB: "sbtest", Catalog: intCatalog{}}
	for _, tc := range []struct {
		q    string
		want []string
	}{
		{"SELECT * FROM ranged WHERE id = '12345abc'", []string{"ranged_0001"}},
		{"SELECT * FROM ranged WHERE id = ' 2e4'", []string{"ranged_0002"}},
		{"SELECT * FROM ranged WHERE id = '9999.5'", []string{"ranged_0000"}},
		// Beyond the rule's range: every subtable, as before the type
		// was known (no error where MariaDB answers no row).
		{"SELECT * FROM ranged WHERE id = '-5x'", []string{"ranged_0000", "ranged_0001", "ranged_0002", "ranged_0003"}},
		{"SELECT * FROM ranged WHERE id IN ('1e6', 3)", []string{"ranged_0000", "ranged_0001", "ranged_0002", "ranged_0003"}},
		{"SELECT * FROM ranged WHERE id < '1e4x'", []string{"ranged_0000"}},
		{"SELECT * FROM ranged WHERE id >= '25000.5'", []string{"ranged_0002", "ranged_0003"}},
		{"SELECT * FROM ranged WHERE id BETWEEN ' 10000' AND '19999.9'", []string{"ranged_0001"}},
	} {
		p, err := r.Route(tc.q, s)
		if err != nil {
			t.Fatalf("%s: %v", tc.q, err)
		}
		if subs := targetSubs(p); !slices.Equal(subs, tc.want) {
			t.Errorf("%s: subtables %v, want %v", tc.q, subs, tc.want)
		}
	}
}

func TestStringDouble(t *testing.T) {
	for _, c := range []struct {
		s string
		f float64
	}{
		{"7abc", 7}, {" 7", 7}, {"\n\t07", 7}, {"6.0", 6}, {"7e0", 7}, {"7e", 7}, {"7e+", 7}, {"7.5x", 7.5},
		{".5", 0.5}, {"5.", 5}, {"-3", -3}, {"+3", 3}, {"", 0}, {"abc", 0}, {".", 0}, {"-", 0}, {"e5", 0},
		{"0x10", 0}, {"1e999", math.MaxFloat64}, {"-1e999", -math.MaxFloat64}, {"1e-999", 0},
	} {
		if f := stringDouble(c.s); f != c.f {
			t.Errorf("stringDouble(%q) = %v, want %v", c.s, f, c.f)
		}
	}
}

// TestIntegerKeyInsert: a string written to an integer key is placed by
// the integer MariaDB stores for it.
func TestIntegerKeyInsert(t *testing.T) {
	r := testCachedRouter(t)
	s := Session{User: "shard", DB: "sbtest", Catalog: intCatalog{}}
	for _, tc := range []struct {
		q    string
		want []string
	}{
		{"INSERT INTO sbtest1 (id, k, c, pad) VALUES ('6.5', 1, 'c', 'p')", []string{"sbtest1_0003"}},
		{"INSERT INTO sbtest1 (id, k, c, pad) VALUES ('7abc', 1, 'c', 'p')", []string{"sbtest1_0003"}},
		{"INSERT INTO sbtest1 (id, k, c, pad) VALUES (' 0.7e1', 1, 'c', 'p'), ('', 1, 'c', 'p')", []string{"sbtest1_0000", "sbtest1_0003"}},
		{"UPDATE sbtest1 SET id = '6.6' WHERE id = 7", []string{"sbtest1_0003"}},
	} {
		p, err := r.Route(tc.q, s)
		if err != nil {
			t.Fatalf("%s: %v", tc.q, err)
		}
		if subs := targetSubs(p); !slices.Equal(subs, tc.want) {
			t.Errorf("%s: subtables %v, want %v", tc.q, subs, tc.want)
		}
	}
	for _, c := range []struct {
		s  string
		n  int64
		ok bool
	}{
		{"7.5", 8, true}, {"-7.5", -8, true}, {"8.4", 8, true}, {"8.4999999999999999999", 8, true}, {"7e0", 7, true},
		{"9abc", 9, true}, {"", 0, true}, {"abc", 0, true}, {"1.5e1", 15, true}, {"2.5", 3, true}, {"0.5", 1, true},
		{"0.05", 0, true}, {" 007", 7, true}, {"0.07e2", 7, true}, {"1e-99999", 0, true}, {"123456789012345678", 123456789012345678, true},
		{"1234567890123456789", 0, false}, {"1e30", 0, false}, {"0x7", 0, true},
	} {
		if n, ok := storedInteger(c.s); n != c.n || ok != c.ok {
			t.Errorf("storedInteger(%q) = %d, %v; want %d, %v", c.s, n, ok, c.n, c.ok)
		}
	}
}
