package router

import (
	"slices"
	"testing"
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
