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
			pushed: "SELECT `k`,COUNT(1),SUM(`v`) AS `AVG(v)`,COUNT(`v`) AS `_sg_3` FROM `t` GROUP BY `k` ORDER BY 3 DESC",
			merge:  `{"Hidden":1,"Grouped":true,"GroupBy":[0],"Aggs":[{"Col":1,"Func":1,"CountCol":0},{"Col":2,"Func":5,"CountCol":3}],"Having":{"Op":7,"Col":0,"Value":null,"Args":[{"Op":1,"Col":1,"Value":null,"Args":null},{"Op":2,"Col":0,"Value":"MQ==","Args":null}]},"Distinct":false,"OrderBy":[{"Col":2,"Desc":true}],"HasLimit":true,"Offset":0,"Count":2}`},
		{sql: "SELECT DISTINCT c FROM t LIMIT 4",
			pushed: "SELECT DISTINCT `c` FROM `t`",
			merge:  `{"Hidden":0,"Grouped":false,"GroupBy":null,"Aggs":null,"Having":null,"Distinct":true,"OrderBy":null,"HasLimit":true,"Offset":0,"Count":4}`},
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
