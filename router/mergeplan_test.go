package router

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"

	"github.com/shardgate/shardgate/mysql"
)

func TestPlanMerge(t *testing.T) {
	tests := []struct {
		sql, pushed, merge string
		code               uint16
	}{
		{sql: "SELECT id, c FROM t ORDER BY c DESC LIMIT 5, 10",
			pushed: "SELECT `id`,`c` FROM `t` ORDER BY `c` DESC LIMIT 15",
			merge:  `{"Hidden":0,"Grouped":false,"GroupBy":null,"Aggs":null,"Having":null,"Distinct":false,"OrderBy":[{"Col":1,"Desc":true}],"HasLimit":true,"Offset":5,"Count":10}`},
		{sql: "SELECT id FROM t ORDER BY k",
			pushed: "SELECT `id`,`k` AS `_sg_1` FROM `t` ORDER BY `k`",
			merge:  `{"Hidden":1,"Grouped":false,"GroupBy":null,"Aggs":null,"Having":null,"Distinct":false,"OrderBy":[{"Col":1,"Desc":false}],"HasLimit":false,"Offset":0,"Count":0}`},
		{sql: "SELECT * FROM t ORDER BY k LIMIT 3",
			pushed: "SELECT *,`k` AS `_sg_1` FROM `t` ORDER BY `k` LIMIT 3",
			merge:  `{"Hidden":1,"Grouped":false,"GroupBy":null,"Aggs":null,"Having":null,"Distinct":false,"OrderBy":[{"Col":-1,"Desc":false}],"HasLimit":true,"Offset":0,"Count":3}`},
		{sql: "SELECT k, COUNT(*), AVG(v) FROM t GROUP BY k HAVING COUNT(*) > 1 ORDER BY 3 DESC LIMIT 2",
			pushed: "SELECT `k`,COUNT(1) AS `COUNT(*)`,SUM(`v`) AS `AVG(v)`,COUNT(`v`) AS `_sg_3` FROM `t` GROUP BY `k` ORDER BY 3 DESC",
			merge:  `{"Hidden":1,"Grouped":true,"GroupBy":[0],"Aggs":[{"Col":1,"Func":1,"CountCol":0},{"Col":2,"Func":5,"CountCol":3}],"Having":{"Op":7,"Col":0,"Value":null,"Args":[{"Op":1,"Col":1,"Value":null,"Args":null},{"Op":2,"Col":0,"Value":"MQ==","Args":null}]},"Distinct":false,"OrderBy":[{"Col":2,"Desc":true}],"HasLimit":true,"Offset":0,"Count":2}`},
		{sql: "SELECT DISTINCT c FROM t LIMIT 4",
			pushed: "SELECT DISTINCT `c` FROM `t`",
			merge:  `{"Hidden":0,"Grouped":false,"GroupBy":null,"Aggs":null,"Having":null,"Distinct":true,"OrderBy":null,"HasLimit":true,"Offset":0,"Count":4}`},
		// Unaliased expressions keep the names the client wrote; columns
		// and literals are named by the targets already.
		{sql: "SELECT a + b, c, 'x', count( * ) FROM t ORDER BY c",
			pushed: "SELECT `a`+`b` AS `a + b`,`c`,_UTF8MB4'x',COUNT(1) AS `count( * )` FROM `t` ORDER BY `c`",
			merge:  `{"Hidden":0,"Grouped":true,"GroupBy":null,"Aggs":[{"Col":3,"Func":1,"CountCol":0}],"Having":null,"Distinct":false,"OrderBy":[{"Col":1,"Desc":false}],"HasLimit":false,"Offset":0,"Count":0}`},
		// ORDER BY SUM(v) is the SUM column, not AVG(v) (which the targets
		// compute as SUM(v)); ORDER BY AVG(v) is the AVG column.
		{sql: "SELECT AVG(v), SUM(v) FROM t GROUP BY k ORDER BY SUM(v), AVG(v)",
			pushed: "SELECT SUM(`v`) AS `AVG(v)`,SUM(`v`) AS `SUM(v)`,COUNT(`v`) AS `_sg_2`,`k` AS `_sg_3` FROM `t` GROUP BY `k` ORDER BY SUM(`v`),AVG(`v`)",
			merge:  `{"Hidden":2,"Grouped":true,"GroupBy":[3],"Aggs":[{"Col":0,"Func":5,"CountCol":2},{"Col":1,"Func":2,"CountCol":0}],"Having":null,"Distinct":false,"OrderBy":[{"Col":1,"Desc":false},{"Col":0,"Desc":false}],"HasLimit":false,"Offset":0,"Count":0}`},
		// HAVING: negative numbers, and string literals that look like
		// numbers (compared as text with a string column).
		{sql: "SELECT k FROM t GROUP BY k HAVING SUM(v) < -5 AND MAX(c) = '-1' OR -MIN(v) > 2",
			pushed: "SELECT `k`,SUM(`v`) AS `_sg_1`,MAX(`c`) AS `_sg_2`,MIN(`v`) AS `_sg_3` FROM `t` GROUP BY `k`",
			merge:  `{"Hidden":3,"Grouped":true,"GroupBy":[0],"Aggs":[{"Col":1,"Func":2,"CountCol":0},{"Col":2,"Func":4,"CountCol":0},{"Col":3,"Func":3,"CountCol":0}],"Having":{"Op":11,"Col":0,"Value":null,"Args":[{"Op":10,"Col":0,"Value":null,"Args":[{"Op":5,"Col":0,"Value":null,"Args":[{"Op":1,"Col":1,"Value":null,"Args":null},{"Op":2,"Col":0,"Value":"LTU=","Args":null}]},{"Op":3,"Col":0,"Value":null,"Args":[{"Op":1,"Col":2,"Value":null,"Args":null},{"Op":19,"Col":0,"Value":"LTE=","Args":null}]}]},{"Op":7,"Col":0,"Value":null,"Args":[{"Op":16,"Col":0,"Value":null,"Args":[{"Op":2,"Col":0,"Value":"MA==","Args":null},{"Op":1,"Col":3,"Value":null,"Args":null}]},{"Op":2,"Col":0,"Value":"Mg==","Args":null}]}]},"Distinct":false,"OrderBy":null,"HasLimit":false,"Offset":0,"Count":0}`},
		// An alias next to a wildcard: the targets compute it again.
		{sql: "SELECT *, a + b AS ab FROM t ORDER BY ab DESC",
			pushed: "SELECT *,`a`+`b` AS `ab`,`a`+`b` AS `_sg_2` FROM `t` ORDER BY `ab` DESC",
			merge:  `{"Hidden":1,"Grouped":false,"GroupBy":null,"Aggs":null,"Having":null,"Distinct":false,"OrderBy":[{"Col":-1,"Desc":true}],"HasLimit":false,"Offset":0,"Count":0}`},
		// Comments around a field are not part of its name.
		{sql: "SELECT /* a */ COUNT(*) /* b */, MAX(v)/**/ FROM t",
			pushed: "SELECT COUNT(1) AS `COUNT(*)`,MAX(`v`) AS `MAX(v)` FROM `t`",
			merge:  `{"Hidden":0,"Grouped":true,"GroupBy":null,"Aggs":[{"Col":0,"Func":1,"CountCol":0},{"Col":1,"Func":4,"CountCol":0}],"Having":null,"Distinct":false,"OrderBy":null,"HasLimit":false,"Offset":0,"Count":0}`},
		{sql: "SELECT SUM(v) + 1 FROM t", code: 1235},
		{sql: "SELECT COUNT(DISTINCT v) FROM t", code: 1235},
		{sql: "SELECT k, COUNT(*) FROM t GROUP BY k WITH ROLLUP", code: 1235},
	}
	p := parser.New()
	for _, tt := range tests {
		stmt, err := p.ParseOneStmt(tt.sql, "", "")
		if err != nil {
			t.Fatalf("%s: %v", tt.sql, err)
		}
		sel := stmt.(*ast.SelectStmt)
		m, err := planMerge(sel)
		if tt.code != 0 {
			if se := asSQLError(err); se == nil || se.Code != tt.code {
				t.Errorf("%s: error %v, want code %d", tt.sql, err, tt.code)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tt.sql, err)
			continue
		}
		if got := restoreExpr(sel); got != tt.pushed {
			t.Errorf("%s:\n pushed %s\n want   %s", tt.sql, got, tt.pushed)
		}
		b, _ := json.Marshal(m)
		if string(b) != tt.merge {
			t.Errorf("%s:\n merge %s\n want  %s", tt.sql, b, tt.merge)
		}
	}
}

func asSQLError(err error) *mysql.SQLError {
	var se *mysql.SQLError
	if errors.As(err, &se) {
		return se
	}
	return nil
}
