package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// TestDivPrecisionIncrement: AVG and divisions the proxy computes over
// several shards take the session's div_precision_increment, as MariaDB
// does (scale and digits), set by SET, SET SESSION, @@ and in a
// multi-variable SET, and back to the default after SET ... = DEFAULT.
func TestDivPrecisionIncrement(t *testing.T) {
	e, direct := carryEnv(t, "carry_divprec")
	mustExec(t, direct, "INSERT INTO t VALUES (6, 'e'), (7, 'e')")
	e.exec("INSERT INTO t VALUES (6, 'e'), (7, 'e')")
	px, dx := conn(t, e.app), conn(t, direct)
	queries := []string{
		"SELECT AVG(id) FROM t",
		"SELECT note, AVG(id) FROM t GROUP BY note ORDER BY note",
		"SELECT AVG(id) / 7, SUM(id) / 3 FROM t",
		"SELECT COUNT(*) FROM t GROUP BY note HAVING AVG(id) > 5.55 ORDER BY 1",
	}
	for _, set := range []string{
		"SET div_precision_increment = 0",
		"SET SESSION div_precision_increment = 9",
		"SET @@div_precision_increment = 2, @x = 1",
		"SET @@session.div_precision_increment = 30",
		"SET div_precision_increment = DEFAULT",
	} {
		mustExec(t, px, set)
		mustExec(t, dx, set)
		for _, q := range queries {
			want := joinRows(queryStrings(t, dx, q))
			if got := joinRows(queryStrings(t, px, q)); got != want {
				t.Errorf("after %s, %s: %s through the proxy, %s directly", set, q, got, want)
			}
			wantTypes := columnScales(t, dx, q)
			if got := columnScales(t, px, q); got != wantTypes {
				t.Errorf("after %s, %s: column scales %s through the proxy, %s directly", set, q, got, wantTypes)
			}
		}
	}
}

// columnScales lists the decimal sizes the driver reports for q's columns.
func columnScales(t *testing.T, db querier, q string) string {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	types, err := rows.ColumnTypes()
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	var out []string
	for _, ct := range types {
		p, s, _ := ct.DecimalSize()
		out = append(out, fmt.Sprintf("%s(%d,%d)", ct.DatabaseTypeName(), p, s))
	}
	return strings.Join(out, " ")
}
