package router

import "testing"

func TestExecuteImmediate(t *testing.T) {
	for _, tc := range []struct{ sql, expr, using string }{
		{"EXECUTE IMMEDIATE 'SELECT 1'", "'SELECT 1'", ""},
		{"execute immediate @s using 1, @a;", "@s", "using 1, @a"},
		{"EXECUTE IMMEDIATE CONCAT('SELECT ? ', 'USING') USING 5", "CONCAT('SELECT ? ', 'USING')", "USING 5"},
		{"EXECUTE IMMEDIATE SFORMAT('a {} b', (SELECT 1 AS using_x)) USING @u", "SFORMAT('a {} b', (SELECT 1 AS using_x))", "USING @u"},
		{"EXECUTE IMMEDIATE 'it''s USING' /* USING */ USING 'x'", "'it''s USING' /* USING */", "USING 'x'"},
		{"EXECUTE IMMEDIATE \"a\\\" USING\" USING 1", "\"a\\\" USING\"", "USING 1"},
	} {
		expr, using, ok := ExecuteImmediate(tc.sql)
		if !ok || expr != tc.expr || using != tc.using {
			t.Errorf("%q: %q, %q, %v; want %q, %q", tc.sql, expr, using, ok, tc.expr, tc.using)
		}
	}
	for _, sql := range []string{"EXECUTE s", "EXECUTE IMMEDIATE", "SELECT 1", "EXECUTE IMMEDIATE USING 1"} {
		if _, _, ok := ExecuteImmediate(sql); ok {
			t.Errorf("%q: ok, want not an EXECUTE IMMEDIATE", sql)
		}
	}
}
