package router

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/test_driver"

	"github.com/shardgate/shardgate/mysql"
)

// TestIntroducedHexLiterals: a hex or bit literal with a character set
// introducer is a string (EXECUTE ... USING inlines a user variable's
// string as _cs X'..' COLLATE coll, a cross-shard binary execution its
// non-UTF-8 bytes as _binary X'..'). It routes by its bytes and is
// restored with its introducer: a bare x'35' is 53 in numeric context,
// and x'35' COLLATE utf8mb4_general_ci fails with 1253.
func TestIntroducedHexLiterals(t *testing.T) {
	r := testRouter(t)
	s := Session{User: "shard", DB: "sbtest"}
	tests := []struct {
		sql  string
		subs []string
		sql0 string
	}{
		{"UPDATE sbtest1 SET c='x' WHERE id=_utf8mb4 X'35' COLLATE utf8mb4_general_ci", []string{"sbtest1_0001"},
			"UPDATE `sbtest1_0001` SET `c`='x' WHERE `id`=_UTF8MB4 x'35' COLLATE utf8mb4_general_ci"},
		{"UPDATE sbtest1 SET c='x' WHERE id=_binary X'3035'", []string{"sbtest1_0001"},
			"UPDATE `sbtest1_0001` SET `c`='x' WHERE `id`=_BINARY x'3035'"},
		{"SELECT c FROM sbtest1 WHERE id=_latin1 X'36' COLLATE latin1_swedish_ci", []string{"sbtest1_0002"},
			"SELECT `c` FROM `sbtest1_0002` WHERE `id`=_LATIN1 x'36' COLLATE latin1_swedish_ci"},
		{"SELECT c FROM sbtest1 WHERE id=_binary b'00110111'", []string{"sbtest1_0003"},
			"SELECT `c` FROM `sbtest1_0003` WHERE `id`=_BINARY b'110111'"},
		{"UPDATE sbtest1 SET c=_binary X'00ff80' WHERE id IN (1, 4)", []string{"sbtest1_0000", "sbtest1_0001"},
			"UPDATE `sbtest1_0000` SET `c`=_BINARY x'00ff80' WHERE `id` IN (4)"},
		// Without an introducer a hex literal is a number in numeric
		// context: not a key the router maps.
		{"SELECT c FROM sbtest1 WHERE id=X'35'", []string{"sbtest1_0000", "sbtest1_0001", "sbtest1_0002", "sbtest1_0003"},
			"SELECT `c` FROM `sbtest1_0000` WHERE `id`=x'35'"},
	}
	for _, tc := range tests {
		p, err := r.Route(tc.sql, s)
		if err != nil {
			t.Errorf("%s: %v", tc.sql, err)
			continue
		}
		var subs []string
		for _, tg := range p.Targets {
			subs = append(subs, tg.Subtable)
		}
		if !slices.Equal(subs, tc.subs) {
			t.Errorf("%s: subtables %v, want %v", tc.sql, subs, tc.subs)
		}
		if p.Targets[0].SQL != tc.sql0 {
			t.Errorf("%s: SQL %q, want %q", tc.sql, p.Targets[0].SQL, tc.sql0)
		}
	}
}

// TestNumericStringKeys: a string compared with a hash rule's key is
// looked for where the server would find it whatever the key column's
// type: its own subtable (a string column's row) and, when the server
// reads it as another integer, that integer's subtable (an INT column's
// row), for every route (text, bound arguments, IN lists, the plan cache).
func TestNumericStringKeys(t *testing.T) {
	r := testCachedRouter(t)
	s := Session{User: "shard", DB: "sbtest"}
	subsOf := func(p *Plan) []string {
		var subs []string
		for _, tg := range p.Targets {
			subs = append(subs, tg.Subtable)
		}
		slices.Sort(subs)
		return subs
	}
	tests := []struct {
		lit  string
		want int // the integer's subtable, which must be among the targets
		one  bool
	}{
		{"'5'", 1, true}, {"'05'", 1, true}, {"'0005'", 1, true},
		{"'6.0'", 2, false}, {"' 7'", 3, false}, {"'\\t7'", 3, false}, {"'+5'", 1, false},
		{"'5e0 '", 1, false}, {"'-6'", 2, false}, {"'6.'", 2, false},
		{"_utf8mb4 X'2036' COLLATE utf8mb4_general_ci", 2, false},
	}
	for _, tc := range tests {
		for _, q := range []string{
			"UPDATE sbtest1 SET c='x' WHERE id=" + tc.lit,
			"SELECT c FROM sbtest1 WHERE id = " + tc.lit,
			"SELECT c FROM sbtest1 WHERE " + tc.lit + " = id",
			"DELETE FROM sbtest1 WHERE id IN (100, " + tc.lit + ")",
		} {
			for range 3 { // then through the plan cache
				p, err := r.Route(q, s)
				if err != nil {
					t.Fatalf("%s: %v", q, err)
				}
				subs := subsOf(p)
				if !slices.Contains(subs, "sbtest1_000"+string(rune('0'+tc.want))) {
					t.Errorf("%s: subtables %v miss the integer's", q, subs)
				}
				if tc.one && len(subs) != 1 && !slices.Contains(subs, "sbtest1_0000") {
					t.Errorf("%s: subtables %v, want one", q, subs)
				}
			}
		}
	}
	// Bound string arguments, as a binary execution binds them.
	for _, tc := range []struct {
		arg  string
		want string
	}{{"05", "sbtest1_0001"}, {"6.0", "sbtest1_0002"}, {" 7", "sbtest1_0003"}} {
		for range 2 {
			p, err := r.RouteArgs("UPDATE sbtest1 SET c = 'x' WHERE id = ?", s, []Arg{{ArgString, tc.arg}})
			if err != nil {
				t.Fatal(err)
			}
			if subs := subsOf(p); !slices.Contains(subs, tc.want) {
				t.Errorf("argument %q: subtables %v, want %s among them", tc.arg, subs, tc.want)
			}
		}
	}
	for _, c := range []struct {
		s  string
		n  int64
		ok bool
	}{{"5", 5, true}, {" \n-12.000e1\t", -120, true}, {"7abc", 0, false}, {"6.5", 0, false}, {"abc", 0, false}, {"", 0, false}, {".e1", 0, false}, {"1e", 0, false}, {"9007199254740993", 0, false}} {
		if n, ok := stringInteger(c.s); n != c.n || ok != c.ok {
			t.Errorf("stringInteger(%q) = %d, %v; want %d, %v", c.s, n, ok, c.n, c.ok)
		}
	}
}

// TestNumericStringKeepsCache: a shape first planned with a string key
// that may be in two subtables still gets its cache entry from the next
// execution.
func TestNumericStringKeepsCache(t *testing.T) {
	r := testCachedRouter(t)
	s := Session{User: "shard", DB: "sbtest"}
	sc := r.schemas[s.User]
	const q = "SELECT c FROM sbtest1 WHERE id = ?"
	for _, a := range []string{"6.0", "6.0", " 7", "5", "5", "9"} {
		if _, err := r.RouteArgs(q, s, []Arg{{ArgString, a}}); err != nil {
			t.Fatal(err)
		}
	}
	p, ok := sc.cachedArgs(q, s, []Arg{{ArgInt, "9"}})
	if !ok || len(p.Targets) != 1 || p.Targets[0].Subtable != "sbtest1_0001" {
		t.Fatalf("after executions with '6.0' and ' 7': cached plan %+v, %v", p, ok)
	}
	if _, ok := sc.cachedArgs(q, s, []Arg{{ArgString, "6.0"}}); ok {
		t.Error("'6.0' answered from the cache: it may be in two subtables")
	}
}

// TestRawBytesInStrings: a quoted string holding bytes that are not UTF-8
// (a binary execution's string parameter, inlined as the server reads
// such a parameter: a string of the connection's character set, bytes
// unchecked) reaches the targets' SQL byte for byte.
func TestRawBytesInStrings(t *testing.T) {
	r := testRouter(t)
	s := Session{User: "shard", DB: "sbtest"}
	rng := rand.New(rand.NewPCG(1, 2))
	cases := [][]byte{{0xff}, {0, 0xff, 0x80}, {0xe0, '\''}, {0xc3, '\\'}, {0xed, 0xb4, 0x91}, {0xf0, 0x9f, '\'', '\\', 0}}
	for range 2000 {
		b := make([]byte, rng.IntN(8))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		cases = append(cases, b)
	}
	for _, mode := range []Mode{0, ModeNoBackslashEscapes} {
		for _, raw := range cases {
			lit, ok := mysql.ParamLiteral(mysql.TypeString, 0, mysql.AppendLenEncBytes(nil, raw), "utf8mb4", mode != 0)
			if !ok {
				t.Fatalf("%x: no literal", raw)
			}
			q := "SELECT c FROM sbtest1 WHERE c = " + lit + " AND id = 1"
			p, err := r.Route(q, Session{User: s.User, DB: s.DB, Mode: mode})
			if err != nil {
				t.Fatalf("%q: %v", q, err)
			}
			// The target's SQL, parsed again, holds the same bytes.
			stmts, release, err := parsePooled(p.Targets[0].SQL, mode)
			if err != nil {
				release()
				t.Fatalf("%q restored as %q: %v", q, p.Targets[0].SQL, err)
			}
			var got []byte
			found := false
			stmts[0].Accept(valueFinder(func(v []byte) { got, found = v, true }))
			release()
			if !found || string(got) != string(raw) {
				t.Errorf("mode %d: %x restored as %q, reads %x", mode, raw, p.Targets[0].SQL, got)
			}
		}
	}
}

// valueFinder calls f with the bytes of the first string literal.
type valueFinder func([]byte)

func (f valueFinder) Enter(n ast.Node) (ast.Node, bool) {
	if v, ok := n.(*test_driver.ValueExpr); ok && v.Kind() == test_driver.KindString {
		f([]byte(v.GetString()))
		return n, true
	}
	return n, false
}

func (f valueFinder) Leave(n ast.Node) (ast.Node, bool) { return n, true }

// TestNumericStringInsert: a row whose key is a string the server reads as
// an integer goes where the integer's row goes.
func TestNumericStringInsert(t *testing.T) {
	r := testRouter(t)
	s := Session{User: "shard", DB: "sbtest"}
	for _, c := range []struct{ lit, sub string }{
		{"' 7'", "sbtest1_0003"}, {"'6.0'", "sbtest1_0002"}, {"'05'", "sbtest1_0001"}, {"'+4'", "sbtest1_0000"},
	} {
		q := "INSERT INTO sbtest1 (id, k, c, pad) VALUES (" + c.lit + ", 1, 'c', 'p')"
		p, err := r.Route(q, s)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if len(p.Targets) != 1 || p.Targets[0].Subtable != c.sub {
			t.Errorf("%s: targets %+v, want %s", q, p.Targets, c.sub)
		}
	}
}
