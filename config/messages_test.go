package config

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// TestMessages: configuration errors say what to do (issue 37): the cause
// before its knock-on problems, a YAML syntax error on the line of the
// mistake (not on the comment or blank line after it), the key path in
// each problem, and the closest known key for an unknown one.
func TestMessages(t *testing.T) {
	for _, tc := range []struct {
		name string
		yaml string
		want []Problem
	}{
		// Unknown keys: the nearest key of the same block.
		{"top-level key misspelt", base + "proxy_charst: utf8mb4\n",
			[]Problem{{"proxy_charst", 14, `unknown key "proxy_charst" (did you mean "proxy_charset"?)`}}},
		{"swapped letters", edit("  password: p\n", "  passwrod: p\n"),
			[]Problem{{"user_list[0].passwrod", 4, `unknown key "passwrod" (did you mean "password"?)`}}},
		{"rule key misspelt", shard("  - {db: d, table: t, key: id, tpye: hash, nodes: [node1], locations: [2]}\n"), []Problem{
			{"schema_list[0].shard[0].tpye", 15, `unknown key "tpye" (did you mean "type"?)`},
			{"schema_list[0].shard[0].type", 15, "required: one of hash, range, date_year, date_month, date_day, global"},
		}},
		{"inlined keys are known", base + "backend:\n  nodelay: true\n  read_bufer: 4096\n",
			[]Problem{{"backend.read_bufer", 16, `unknown key "read_bufer" (did you mean "read_buffer"?)`}}},
		{"nothing near", base + "colour: blue\n", []Problem{{"colour", 14, `unknown key "colour"`}}},

		// The cause first, and no knock-on problems after it.
		{"type misspelt", shard("  - {db: d, table: t, key: id, type: hashh, nodes: [node1], locations: [2], generation: 1}\n"), []Problem{
			{"schema_list[0].shard[0].type", 15, `unknown type "hashh" (did you mean "hash"?); use hash, range, date_year, date_month, date_day, global`},
		}},
		{"global misspelt without key", shard("  - {db: d, table: t, type: globl, nodes: [node1], sequence: id}\n"), []Problem{
			{"schema_list[0].shard[0].type", 15, `unknown type "globl" (did you mean "global"?); use hash, range, date_year, date_month, date_day, global`},
		}},
		{"type missing: no key problem before it", shard("  - {db: d, table: t, nodes: [node1]}\n"), []Problem{
			{"schema_list[0].shard[0].type", 15, "required: one of hash, range, date_year, date_month, date_day, global"},
		}},

		// Each problem on its own key.
		{"move keys", base + "move:\n  copy_workers: 300\n  buffer_window: -1s\n", []Problem{
			{"move.buffer_window", 16, "-1s is negative; use a positive duration, or 0 for the default"},
			{"move.copy_workers", 15, "300 is out of range 1..256 (0 or absent: the default)"},
		}},
		{"xa keys", base + "xa:\n  lease: -1s\n", []Problem{{"xa.lease", 15, "-1s is negative"}}},

		// YAML syntax errors on the line of the mistake.
		{"key without colon before a comment", strings.Replace(base, "  default: node1\n", "  default node1\n\n# a comment\n# another\n", 1) + "  shard: []\n",
			[]Problem{{"", 13, "invalid YAML: could not find expected ':' (write a key as key: value, with a space after the colon)"}}},
		{"indented too far after a comment", strings.Replace(base, "nodes:\n", "# the nodes\n nodes:\n", 1),
			[]Problem{{"", 6, "invalid YAML: did not find expected key (check this line's indentation: it must line up with the keys of its block)"}}},
		{"bracket never closed", strings.Replace(base, "nodes: [node1, node2]", "nodes: [node1, node2", 1),
			[]Problem{{"", 12, "invalid YAML: did not find expected ',' or ']'"}}},
		{"tab", strings.Replace(base, "  default: node1", "\tdefault: node1", 1),
			[]Problem{{"", 13, "invalid YAML: found character that cannot start any token (indent with spaces, not tabs; quote values that start with @ or `)"}}},
	} {
		t.Run(tc.name, func(t *testing.T) { checkProblems(t, tc.yaml, tc.want) })
	}
}

// TestMessagesEtcLine31: the case of issue 37 on the shipped file: a key
// without its colon on line 31, followed by a blank line and a comment,
// was reported at line 33 (the comment).
func TestMessagesEtcLine31(t *testing.T) {
	data, err := os.ReadFile("../etc/ks.yaml")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	if lines[30] != "proxy_charset: utf8mb4" || !strings.HasPrefix(lines[32], "#") {
		t.Skipf("etc/ks.yaml changed: line 31 is %q, line 33 %q", lines[30], lines[32])
	}
	for _, l := range []string{"proxy_charset utf8mb4", " proxy_charset: utf8mb4", "proxy_charset: [utf8mb4", "\tproxy_charset: utf8mb4"} {
		lines[30] = l
		_, err := Parse([]byte(strings.Join(lines, "\n")))
		var ce *Error
		if !errors.As(err, &ce) || len(ce.Problems) != 1 || ce.Problems[0].Line != 31 {
			t.Errorf("line 31 %q: %v, want one problem on line 31", l, err)
		}
	}
}

func TestClosest(t *testing.T) {
	known := []string{"type", "key", "table", "sequence", "sequence_block", "locations"}
	for _, c := range []struct{ in, want string }{
		{"tpye", "type"}, {"typ", "type"}, {"kye", "key"}, {"sequnce", "sequence"}, {"location", "locations"},
		{"sequence_blok", "sequence_block"}, {"x", ""}, {"tables_x", ""}, {"type", ""},
	} {
		if got := closest(c.in, known); got != c.want {
			t.Errorf("closest(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
