package router

import (
	"strings"
	"testing"
)

func TestBindCounts(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"SELECT ROW_COUNT()", "SELECT CAST(CAST(4 AS DECIMAL(20)) AS SIGNED) AS `ROW_COUNT()`"},
		{"select row_count() ;", "select CAST(CAST(4 AS DECIMAL(20)) AS SIGNED) AS `row_count()` ;"},
		{"SELECT FOUND_ROWS() AS n", "SELECT CAST(CAST(7 AS DECIMAL(20)) AS SIGNED) AS n"},
		{"SELECT FOUND_ROWS() n, ROW_COUNT()+1", "SELECT CAST(CAST(7 AS DECIMAL(20)) AS SIGNED) n, CAST(CAST(4 AS DECIMAL(20)) AS SIGNED)+1 AS `ROW_COUNT()+1`"},
		{"SELECT SQL_NO_CACHE ROW_COUNT() FROM dual", "SELECT SQL_NO_CACHE CAST(CAST(4 AS DECIMAL(20)) AS SIGNED) AS `ROW_COUNT()` FROM dual"},
		{"SELECT 'ROW_COUNT()', `ROW_COUNT`()", "SELECT 'ROW_COUNT()', `ROW_COUNT`()"},
		{"INSERT INTO t VALUES (ROW_COUNT(), FOUND_ROWS())", "INSERT INTO t VALUES (CAST(CAST(4 AS DECIMAL(20)) AS SIGNED), CAST(CAST(7 AS DECIMAL(20)) AS SIGNED))"},
		{"SELECT ROW_COUNT /* c */ ( ) INTO @a", "SELECT CAST(CAST(4 AS DECIMAL(20)) AS SIGNED) AS `ROW_COUNT /* c */ ( )` INTO @a"},
		{"SELECT IF(ROW_COUNT() > 0, 'y', 'n') AS r", "SELECT IF(CAST(CAST(4 AS DECIMAL(20)) AS SIGNED) > 0, 'y', 'n') AS r"},
		{"SELECT x.ROW_COUNT() FROM t", "SELECT x.ROW_COUNT() FROM t"},
		{"DO ROW_COUNT()", "DO CAST(CAST(4 AS DECIMAL(20)) AS SIGNED)"},
	} {
		got, ok := BindCounts(c.in, 0, 4, 7)
		if !ok || got != c.want {
			t.Errorf("BindCounts(%q) = %q, %v; want %q", c.in, got, ok, c.want)
		}
	}
	if got, _ := BindCounts("SELECT /*!ROW_COUNT()*/", 0, 1, 1); got != "SELECT /*!CAST(CAST(1 AS DECIMAL(20)) AS SIGNED) AS `ROW_COUNT()`*/" {
		t.Errorf("in an executable comment: %q", got)
	}
	for _, c := range []struct{ in, rest, into string }{
		{"SELECT COUNT(*) FROM t WHERE id < 1000 INTO/*!*/@a3", "SELECT COUNT(*) FROM t WHERE id < 1000 ", "INTO/*!*/@a3"},
		{"SELECT a INTO /*!50000 @x, */ @y FROM t", "SELECT a  FROM t", "INTO /*!50000 @x, */ @y "},
		{"SELECT a FROM t INTO @`x y`, @'z'", "SELECT a FROM t ", "INTO @`x y`, @'z'"},
	} {
		if got := putInto(c.rest, c.into); !strings.Contains(got, strings.TrimSpace(c.into)) {
			t.Errorf("putInto(%q, %q) = %q", c.rest, c.into, got)
		}
		rest, into, ok := splitIntoVars(c.in, 0)
		if !ok || rest != c.rest || into != c.into {
			t.Errorf("splitIntoVars(%q) = %q, %q, %v; want %q, %q", c.in, rest, into, ok, c.rest, c.into)
		}
	}
}

// TestStatementEffects: what a statement can do to its connection, read
// from its tokens (Classify), in several spellings each.
func TestStatementEffects(t *testing.T) {
	type facts struct{ calls, assigns, counts, held, effects, carried bool }
	for _, c := range []struct {
		sql  string
		want facts
	}{
		{"SELECT c FROM t WHERE id = 1", facts{}},
		{"INSERT INTO t (id, c) VALUES (1, CONCAT('a', 'b'))", facts{}},
		{"INSERT IGNORE INTO db.t (id) VALUES (1) ON DUPLICATE KEY UPDATE c = VALUES(c)", facts{}},
		{"WITH cte (a) AS (SELECT 1) SELECT * FROM cte JOIN t USING (a)", facts{}},
		{"SELECT CAST(c AS CHAR(10)), COUNT(*) FROM t WHERE a IN (SELECT 1) GROUP BY c", facts{}},
		{"SELECT f(1)", facts{calls: true, effects: true}},
		{"SELECT `my func` (1) FROM t", facts{calls: true, effects: true}},
		{"DO db.f()", facts{calls: true, effects: true}},
		{"UPDATE t SET c = f(c) WHERE id = 1", facts{calls: true, effects: true}},
		{"CALL p()", facts{calls: true, effects: true}},
		{"SELECT 'f(1)', `t`.c FROM t /* f(1) */", facts{}},
		{"SELECT 1 INTO @a", facts{assigns: true, carried: true}},
		{"SELECT c INTO /* x */ @`a` FROM t WHERE id = 1", facts{assigns: true, carried: true}},
		{"SELECT @a := 1", facts{assigns: true, carried: true}},
		{"LOAD DATA LOCAL INFILE 'x' INTO TABLE t (c, @v) SET d = @v", facts{assigns: true, carried: true}},
		{"SELECT ROW_COUNT()", facts{counts: true, carried: true}},
		{"select found_rows() AS n, 1 INTO @n", facts{counts: true, assigns: true, carried: true}},
		{"SELECT GET_LOCK('x', 0)", facts{effects: true}},
		{"SELECT RELEASE_LOCK('x')", facts{effects: true, held: true}},
		{"SELECT IS_USED_LOCK('x'), CONNECTION_ID()", facts{held: true}},
		{"SELECT NEXT VALUE FOR s", facts{effects: true}},
		{"SELECT PREVIOUS VALUE FOR s", facts{held: true}},
		{"SELECT LASTVAL(s)", facts{held: true}},
		{"CREATE FUNCTION f() RETURNS INT RETURN GET_LOCK('x', 0)", facts{}},
	} {
		st := Classify(c.sql, 0)
		got := facts{st.CallsRoutine, st.AssignsVars, st.ReadsCounts, st.ReadsHeld, st.Effects, st.Carried}
		if got != c.want {
			t.Errorf("%s: %+v, want %+v", c.sql, got, c.want)
		}
		if (got.calls || got.effects || got.held || got.assigns || got.counts) != st.Sticky && !st.Program {
			t.Errorf("%s: Sticky %v with facts %+v", c.sql, st.Sticky, got)
		}
	}
}
