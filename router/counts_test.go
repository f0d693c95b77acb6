package router

import "testing"

func TestBindCounts(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"SELECT ROW_COUNT()", "SELECT 4 AS `ROW_COUNT()`"},
		{"select row_count() ;", "select 4 AS `row_count()` ;"},
		{"SELECT FOUND_ROWS() AS n", "SELECT 7 AS n"},
		{"SELECT FOUND_ROWS() n, ROW_COUNT()+1", "SELECT 7 n, 4+1 AS `ROW_COUNT()+1`"},
		{"SELECT SQL_NO_CACHE ROW_COUNT() FROM dual", "SELECT SQL_NO_CACHE 4 AS `ROW_COUNT()` FROM dual"},
		{"SELECT 'ROW_COUNT()', `ROW_COUNT`()", "SELECT 'ROW_COUNT()', `ROW_COUNT`()"},
		{"INSERT INTO t VALUES (ROW_COUNT(), FOUND_ROWS())", "INSERT INTO t VALUES (4, 7)"},
		{"SELECT ROW_COUNT /* c */ ( ) INTO @a", "SELECT 4 AS `ROW_COUNT /* c */ ( )` INTO @a"},
		{"SELECT IF(ROW_COUNT() > 0, 'y', 'n') AS r", "SELECT IF(4 > 0, 'y', 'n') AS r"},
		{"SELECT x.ROW_COUNT() FROM t", "SELECT x.ROW_COUNT() FROM t"},
		{"DO ROW_COUNT()", "DO 4"},
	} {
		got, ok := BindCounts(c.in, 0, 4, 7)
		if !ok || got != c.want {
			t.Errorf("BindCounts(%q) = %q, %v; want %q", c.in, got, ok, c.want)
		}
	}
	if _, ok := BindCounts("SELECT /*!ROW_COUNT()*/", 0, 1, 1); ok {
		t.Errorf("an executable comment must not be bound")
	}
}
