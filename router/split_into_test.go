package router

import (
	"strings"
	"testing"
)

// TestSplitShardedIntoVars: a multi-statement text on sharded tables whose
// SELECT assigns variables (INTO @v, which the parser does not read) is
// split at its semicolons, each statement as written; a text the parser
// rejects for another reason (a stored program's body, an executable
// comment) or that names no sharded table is not.
func TestSplitShardedIntoVars(t *testing.T) {
	r := testRouter(t)
	s := Session{User: "shard", DB: "sbtest"}
	tests := []struct {
		sql  string
		want string // "" for not split
	}{
		{"SELECT k FROM sbtest1 WHERE id = 3 INTO @z; UPDATE sbtest1 SET k = @z WHERE id = 4",
			"[SELECT k FROM sbtest1 WHERE id = 3 INTO @z|UPDATE sbtest1 SET k = @z WHERE id = 4]"},
		{"SET @a = 1 ; SELECT k INTO @z, @y FROM sbtest1 WHERE id = @a;\nSELECT @z, ';';",
			"[SET @a = 1|SELECT k INTO @z, @y FROM sbtest1 WHERE id = @a|SELECT @z, ';']"},
		{"SELECT 1 INTO @z; SELECT 2", ""},
		{"SELECT k FROM sbtest1 WHERE id = 3 INTO @z;; SELECT 2", ""},
		{"CREATE TRIGGER tr BEFORE INSERT ON sbtest1 FOR EACH ROW BEGIN SELECT 1 INTO @z; SET NEW.k = @z; END", ""},
		{"/*!50001 SELECT k FROM sbtest1 WHERE id = 3 INTO @z; */ SELECT 2", ""},
	}
	for _, tt := range tests {
		texts, ok := r.SplitSharded(tt.sql, s)
		got := ""
		if ok {
			got = joinBar(texts)
		}
		if got != tt.want {
			t.Errorf("%q: split %s, want %s", tt.sql, got, tt.want)
		}
	}
}

func joinBar(texts []string) string { return "[" + strings.Join(texts, "|") + "]" }
