package router

import (
	"slices"
	"testing"
)

// TestModeRouting: the router reads text as the server does in the
// session's sql_mode, and writes the rewritten statement so that the
// server reads it back the same in that mode. Parsed in the default mode,
// the NO_BACKSLASH_ESCAPES statement below is a condition on every
// subtable; read as the server reads it, it is a point statement with a
// string holding a backslash.
func TestModeRouting(t *testing.T) {
	r := testRouter(t)
	tests := []struct {
		mode Mode
		sql  string
		subs []string // subtables, in order
		sql0 string   // the first target's statement
	}{
		{ModeNoBackslashEscapes, `DELETE FROM sbtest1 WHERE c='\'' OR 1=1 -- ' AND id=5`,
			[]string{"sbtest1_0001"}, "DELETE FROM `sbtest1_0001` WHERE `c`='\\'' OR 1=1 -- ' AND `id`=5"},
		// The same text in the default mode is what MariaDB would run there.
		{0, `DELETE FROM sbtest1 WHERE c='\'' OR 1=1 -- ' AND id=5`,
			[]string{"sbtest1_0000", "sbtest1_0001", "sbtest1_0002", "sbtest1_0003"}, "DELETE FROM `sbtest1_0000` WHERE `c`='''' OR 1=1"},
		{ModeNoBackslashEscapes, `SELECT c FROM sbtest1 WHERE id = 5 OR c = '\' OR 1=1 -- '`,
			[]string{"sbtest1_0000", "sbtest1_0001", "sbtest1_0002", "sbtest1_0003"}, "SELECT `c` FROM `sbtest1_0000` WHERE `id`=5 OR `c`='\\' OR 1=1"},
		{0, `SELECT c FROM sbtest1 WHERE id = 5 OR c = '\' OR 1=1 -- '`,
			[]string{"sbtest1_0000", "sbtest1_0001", "sbtest1_0002", "sbtest1_0003"}, "SELECT `c` FROM `sbtest1_0000` WHERE `id`=5 OR `c`=''' OR 1=1 -- '"},
		{0, `SELECT c FROM sbtest1 WHERE id = 5 AND c = 'a\\b'`,
			[]string{"sbtest1_0001"}, "SELECT `c` FROM `sbtest1_0001` WHERE `id`=5 AND `c`='a\\\\b'"},
		{ModeNoBackslashEscapes, `SELECT c FROM sbtest1 WHERE id = 5 AND c = 'a\\b'`,
			[]string{"sbtest1_0001"}, "SELECT `c` FROM `sbtest1_0001` WHERE `id`=5 AND `c`='a\\\\b'"},
		// ANSI_QUOTES: "id" is the column.
		{ModeANSIQuotes, `SELECT "c" FROM sbtest1 WHERE "id" = 5`,
			[]string{"sbtest1_0001"}, "SELECT `c` FROM `sbtest1_0001` WHERE `id`=5"},
		{0, `SELECT "c" FROM sbtest1 WHERE "id" = 5`,
			[]string{"sbtest1_0000", "sbtest1_0001", "sbtest1_0002", "sbtest1_0003"}, "SELECT 'c' FROM `sbtest1_0000` WHERE 'id'=5"},
		// PIPES_AS_CONCAT: || is CONCAT, not OR.
		{ModePipesAsConcat, `SELECT c FROM sbtest1 WHERE id = 5 || 0`,
			[]string{"sbtest1_0000", "sbtest1_0001", "sbtest1_0002", "sbtest1_0003"}, ""},
	}
	for _, tc := range tests {
		p, err := r.Route(tc.sql, Session{User: "shard", DB: "sbtest", Mode: tc.mode})
		if err != nil {
			t.Errorf("mode %b %s: %v", tc.mode, tc.sql, err)
			continue
		}
		var subs []string
		for _, tg := range p.Targets {
			subs = append(subs, tg.Subtable)
		}
		if !slices.Equal(subs, tc.subs) {
			t.Errorf("mode %b %s: subtables %v, want %v", tc.mode, tc.sql, subs, tc.subs)
		}
		if tc.sql0 != "" && len(p.Targets) > 0 && p.Targets[0].SQL != tc.sql0 {
			t.Errorf("mode %b %s:\n got %s\nwant %s", tc.mode, tc.sql, p.Targets[0].SQL, tc.sql0)
		}
	}
}

// TestModeRoundTrip: every string the router restores reads back, in the
// same mode, as the string it parsed.
func TestModeRoundTrip(t *testing.T) {
	values := []string{`a'b`, `a\b`, `a\'b`, `\`, `'`, `''`, `"`, `\"`, "a\x00b", `%_\%`}
	for _, mode := range []Mode{0, ModeNoBackslashEscapes, ModeANSIQuotes, ModeNoBackslashEscapes | ModeANSIQuotes} {
		for _, v := range values {
			sql := "SELECT x FROM t WHERE c = " + quoteFor(v, mode)
			stmts, release, err := parsePooled(sql, mode)
			if err != nil {
				release()
				t.Fatalf("mode %b: %s: %v", mode, sql, err)
			}
			out, err := restore(stmts[0], nil, mode)
			release()
			if err != nil {
				t.Fatal(err)
			}
			stmts2, release2, err := parsePooled(out, mode)
			if err != nil {
				release2()
				t.Fatalf("mode %b: restored %s: %v", mode, out, err)
			}
			again, _ := restore(stmts2[0], nil, mode)
			release2()
			if again != out {
				t.Errorf("mode %b value %q: restored %s, reparsed and restored %s", mode, v, out, again)
			}
		}
	}
}

// quoteFor writes v as a string literal the server reads as v in mode.
func quoteFor(v string, mode Mode) string {
	out := []byte{'\''}
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '\'':
			out = append(out, '\'', '\'')
		case c == '\\' && mode&ModeNoBackslashEscapes == 0:
			out = append(out, '\\', '\\')
		default:
			out = append(out, c)
		}
	}
	return string(append(out, '\''))
}

func TestParseMode(t *testing.T) {
	for in, want := range map[string]Mode{
		"": 0,
		"STRICT_TRANS_TABLES,NO_ENGINE_SUBSTITUTION":                  0,
		"no_backslash_escapes":                                        ModeNoBackslashEscapes,
		"REAL_AS_FLOAT,PIPES_AS_CONCAT,ANSI_QUOTES,IGNORE_SPACE,ANSI": ModeANSIQuotes | ModePipesAsConcat | ModeIgnoreSpace,
		"HIGH_NOT_PRECEDENCE":                                         ModeHighNotPrecedence,
		"ORACLE":                                                      ModeANSIQuotes | ModePipesAsConcat | ModeIgnoreSpace | ModeForeign,
	} {
		if got := ParseMode(in); got != want {
			t.Errorf("ParseMode(%q) = %b, want %b", in, got, want)
		}
	}
}
