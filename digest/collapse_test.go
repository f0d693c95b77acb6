package digest_test

import (
	"strings"
	"testing"
	"time"

	"github.com/shardgate/shardgate/digest"
)

// TestCollapse: a VALUES list of any number of rows is one pattern, the
// row count is returned beside it, and the rest of the statement stays.
func TestCollapse(t *testing.T) {
	for _, c := range []struct {
		in, want string
		rows     int
	}{
		{"insert into t values(?,?)", "insert into t values(?,?)", 1},
		{"insert into t values(?,?),(?,?)", "insert into t values(?,?),...", 2},
		{"insert into t values(?,?),(?,?),(?,?),(?,?)", "insert into t values(?,?),...", 4},
		{"insert into t(a,b)value(?,now()),(?,concat(?,?))", "insert into t(a,b)value(?,now()),...", 2},
		{"insert into t values (?,?),(?,?) on duplicate key update b=values(b)", "insert into t values (?,?),... on duplicate key update b=values(b)", 2},
		{"replace into `values`(a)values(?),(?),(?)", "replace into `values`(a)values(?),...", 3},
		{"insert into t values(),()", "insert into t values(),...", 2},
		{"insert into t values(?,?),(?,?),(?,", "insert into t values(?,?),...", 3}, // cut short
		{"select * from t where a in(?,?,?)", "select * from t where a in(?,?,?)", 0},
		{"update t set a=values(a),b=?", "update t set a=values(a),b=?", 1},
		{"select myvalues(?),(?)", "select myvalues(?),(?)", 0},
	} {
		b := append([]byte("app\x00db\x00"), c.in...)
		from := len("app\x00db\x00")
		out, rows := digest.Collapse(b, from)
		if got := string(out[from:]); got != c.want || rows != c.rows || string(out[:from]) != "app\x00db\x00" {
			t.Errorf("Collapse(%q) = %q, %d rows; want %q, %d", c.in, got, rows, c.want, c.rows)
		}
	}
}

// TestMultiRowInsertIsOneShape: 1 to 100 rows per INSERT make one shape
// with the rows counted beside it.
func TestMultiRowInsertIsOneShape(t *testing.T) {
	d := digest.New(64)
	var total uint64
	for n := 1; n <= 100; n++ {
		fp := "insert into t(id,v)values" + strings.TrimSuffix(strings.Repeat("(?,?),", n), ",")
		k, rows := digest.Collapse(key("app", "db", fp), len("app\x00db\x00"))
		d.RecordValues(k, "single", time.Millisecond, 0, rows, false, time.Now())
		total += uint64(n)
	}
	rows := d.Snapshot()
	if len(rows) != 2 {
		// one row alone keeps its list: "values(?,?)" and "values(?,?),..."
		t.Fatalf("%d shapes, want 2: %+v", len(rows), rows)
	}
	var got, most uint64
	for _, r := range rows {
		got += r.ValueRows
		most = max(most, r.ValueRowsMax)
	}
	if got != total || most != 100 {
		t.Fatalf("value rows %d (most %d), want %d (100)", got, most, total)
	}
}

// TestPercentiles: p50, p95 and p99 fall in the buckets of their
// executions, in order, and the histogram holds every execution.
func TestPercentiles(t *testing.T) {
	d := digest.New(16)
	k := key("u", "s", "select ?")
	for i := 0; i < 100; i++ {
		took := 100 * time.Microsecond
		if i >= 90 {
			took = 10 * time.Millisecond
		}
		d.Record(k, "single", took, 0, false, time.Now())
	}
	r := d.Snapshot()[0]
	if r.P50 > 256*time.Microsecond || r.P95 < 10*time.Millisecond || r.P99 != r.Max {
		t.Fatalf("p50 %v p95 %v p99 %v max %v", r.P50, r.P95, r.P99, r.Max)
	}
	var n uint32
	for _, c := range r.Hist {
		n += c
	}
	if n != 100 {
		t.Fatalf("histogram holds %d executions, want 100", n)
	}
}
