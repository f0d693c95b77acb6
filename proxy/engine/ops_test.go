package engine

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/router"
)

// rowsOf builds in-memory rows from "a,b|c,d" (the value NULL is nil).
func rowsOf(s string) [][][]byte {
	if s == "" {
		return nil
	}
	var rows [][][]byte
	for _, r := range strings.Split(s, "|") {
		var row [][]byte
		for _, v := range strings.Split(r, ",") {
			if v == "NULL" {
				row = append(row, nil)
			} else {
				row = append(row, []byte(v))
			}
		}
		rows = append(rows, row)
	}
	return rows
}

// inputs makes one in-memory stream per target.
func inputs(targets ...string) []rowIter {
	in := make([]rowIter, len(targets))
	for i, t := range targets {
		in[i] = &sliceRows{rows: rowsOf(t)}
	}
	return in
}

// drainAll reads a pipeline to its end and renders its rows as rowsOf's
// text.
func drainAll(t *testing.T, it rowIter) string {
	t.Helper()
	var out []string
	for {
		row, _, err := it.next()
		if err != nil {
			t.Fatal(err)
		}
		if row == nil {
			return strings.Join(out, "|")
		}
		vals := make([]string, len(row))
		for i, v := range row {
			if v == nil {
				vals[i] = "NULL"
			} else {
				vals[i] = string(v)
			}
		}
		out = append(out, strings.Join(vals, ","))
	}
}

func intCols(n int) *columns {
	defs := make([]*mysql.Column, n)
	for i := range defs {
		defs[i] = &mysql.Column{Type: mysql.TypeLongLong, Charset: 63}
	}
	return newColumns(defs)
}

func TestOrderedMergeAndLimit(t *testing.T) {
	cols := newColumns([]*mysql.Column{{Type: mysql.TypeLongLong, Charset: 63}, {Type: mysql.TypeVarString, Charset: 45}})
	asc := func(a, b [][]byte) int { return cols.compareRows([]router.SortKey{{Col: 0}}, a, b) }
	desc := func(a, b [][]byte) int { return cols.compareRows([]router.SortKey{{Col: 0, Desc: true}}, a, b) }
	tests := []struct {
		name    string
		targets []string
		cmp     func(a, b [][]byte) int
		limit   *limitRows
		want    string
	}{
		{"asc, numbers not text", []string{"1,a|10,b|30,c", "2,d|9,e", ""}, asc, nil, "1,a|2,d|9,e|10,b|30,c"},
		{"NULL first ascending", []string{"NULL,x|5,a", "1,b"}, asc, nil, "NULL,x|1,b|5,a"},
		{"desc", []string{"30,c|10,b", "20,d|5,e"}, desc, nil, "30,c|20,d|10,b|5,e"},
		{"ties keep target order", []string{"1,first|2,x", "1,second"}, asc, nil, "1,first|1,second|2,x"},
		{"offset and count", []string{"1,a|3,c|5,e", "2,b|4,d|6,f"}, asc, &limitRows{offset: 2, count: 3}, "3,c|4,d|5,e"},
		{"count zero", []string{"1,a"}, asc, &limitRows{count: 0}, ""},
		{"offset past the end", []string{"1,a", "2,b"}, asc, &limitRows{offset: 5, count: 5}, ""},
	}
	for _, tt := range tests {
		var it rowIter = newOrderedMerge(inputs(tt.targets...), tt.cmp)
		if tt.limit != nil {
			tt.limit.in = it
			it = tt.limit
		}
		if got := drainAll(t, it); got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
	}
}

// countingRows counts the rows read from it.
type countingRows struct {
	rowIter
	n int
}

func (c *countingRows) next() ([][]byte, []byte, error) {
	row, raw, err := c.rowIter.next()
	if row != nil {
		c.n++
	}
	return row, raw, err
}

// TestLimitStopsReading: a satisfied LIMIT reads no further (the rest of
// each target is bounded by the LIMIT pushed down to it).
func TestLimitStopsReading(t *testing.T) {
	a := &countingRows{rowIter: &sliceRows{rows: rowsOf("1|2|3|4|5")}}
	b := &countingRows{rowIter: &sliceRows{rows: rowsOf("6|7|8")}}
	got := drainAll(t, &limitRows{in: &concatRows{in: []rowIter{a, b}}, offset: 1, count: 2})
	if got != "2|3" || a.n != 3 || b.n != 0 {
		t.Errorf("got %q after reading %d and %d rows, want \"2|3\" after 3 and 0", got, a.n, b.n)
	}
}

// failingRows returns err after its rows.
type failingRows struct {
	sliceRows
	err error
}

func (f *failingRows) next() ([][]byte, []byte, error) {
	row, raw, _ := f.sliceRows.next()
	if row == nil {
		return nil, nil, f.err
	}
	return row, raw, nil
}

func TestOperatorsPassErrors(t *testing.T) {
	boom := errors.New("boom")
	cols := intCols(1)
	asc := func(a, b [][]byte) int { return cols.compareRows([]router.SortKey{{Col: 0}}, a, b) }
	mk := func() []rowIter {
		return []rowIter{&sliceRows{rows: rowsOf("1|2")}, &failingRows{sliceRows: sliceRows{rows: rowsOf("3")}, err: boom}}
	}
	for name, it := range map[string]rowIter{
		"ordered": newOrderedMerge(mk(), asc),
		"concat":  &concatRows{in: mk()},
		"limit":   &limitRows{in: &concatRows{in: mk()}, count: 10},
	} {
		var err error
		for {
			var row [][]byte
			if row, _, err = it.next(); err != nil || row == nil {
				break
			}
		}
		if !errors.Is(err, boom) {
			t.Errorf("%s: error %v, want boom", name, err)
		}
	}
	if _, err := collectRows(&concatRows{in: mk()}, &budget{limit: 1 << 20}); !errors.Is(err, boom) {
		t.Errorf("collectRows: error %v, want boom", err)
	}
}

func TestGrouper(t *testing.T) {
	// Columns: k (varchar, general_ci), COUNT(*), SUM(d) (decimal(10,2)),
	// MIN(v), MAX(v) (bigint), hidden SUM and COUNT for AVG(d).
	defs := []*mysql.Column{
		{Type: mysql.TypeVarString, Charset: 45},
		{Type: mysql.TypeLongLong, Charset: 63},
		{Type: mysql.TypeNewDecimal, Charset: 63, Decimals: 2},
		{Type: mysql.TypeLongLong, Charset: 63},
		{Type: mysql.TypeLongLong, Charset: 63},
		{Type: mysql.TypeNewDecimal, Charset: 63, Decimals: 2},
		{Type: mysql.TypeLongLong, Charset: 63},
	}
	m := &resolved{Merge: router.Merge{
		Grouped: true,
		GroupBy: []int{0},
		Aggs: []router.Agg{
			{Col: 1, Func: router.AggCount},
			{Col: 2, Func: router.AggSum},
			{Col: 3, Func: router.AggMin},
			{Col: 4, Func: router.AggMax},
			{Col: 5, Func: router.AggAvg, CountCol: 6},
		},
	}, Columns: 6}
	targets := inputs(
		"a,2,1.50,3,9,1.50,2|B,1,NULL,7,7,NULL,1",
		"A,3,2.25,1,4,2.25,3|c,1,0.10,NULL,NULL,0.10,1",
	)
	mem := &budget{limit: 1 << 20}
	rows, err := (&grouper{cols: newColumns(defs), m: m, mem: mem}).run(&concatRows{in: targets})
	if err != nil {
		t.Fatal(err)
	}
	for i := range rows {
		rows[i] = rows[i][:m.Columns] // the hidden COUNT for AVG is the merge's, not the client's
	}
	got := drainAll(t, &sliceRows{rows: rows})
	// 'a' and 'A' are one group in general_ci; AVG = 3.75 / 5 with four
	// more decimals; SUM of only NULLs is NULL.
	want := "a,5,3.75,1,9,0.750000|B,1,NULL,7,7,NULL|c,1,0.10,NULL,NULL,0.100000"
	if got != want {
		t.Errorf("groups:\n got %s\nwant %s", got, want)
	}

	// HAVING COUNT(*) > 1 keeps the first group only.
	m.Having = &router.Expr{Op: router.OpGT, Args: []*router.Expr{{Op: router.OpCol, Col: 1}, {Op: router.OpConst, Value: []byte("1")}}}
	rows, err = (&grouper{cols: newColumns(defs), m: m, mem: mem}).run(&concatRows{in: inputs(
		"a,2,1.50,3,9,1.50,2|B,1,NULL,7,7,NULL,1",
		"A,3,2.25,1,4,2.25,3|c,1,0.10,NULL,NULL,0.10,1",
	)})
	if err != nil {
		t.Fatal(err)
	}
	if got := drainAll(t, &sliceRows{rows: rows}); !strings.HasPrefix(got, "a,5,") || strings.Contains(got, "|") {
		t.Errorf("HAVING COUNT(*) > 1: got %s", got)
	}
}

func TestDistinctSortAndBudget(t *testing.T) {
	cols := newColumns([]*mysql.Column{{Type: mysql.TypeVarString, Charset: 45}, {Type: mysql.TypeNewDecimal, Charset: 63}})
	rows, err := collectRows(&concatRows{in: inputs("b,1.0|A,2", "a,2.00|B,1|NULL,0")}, &budget{limit: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	rows, err = distinctRows(rows, 2, cols, &budget{limit: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	sortRows(rows, cols, []router.SortKey{{Col: 1, Desc: true}, {Col: 0}})
	// Equal under general_ci and as decimals: the first of each is kept.
	if got, want := drainAll(t, &sliceRows{rows: rows}), "A,2|b,1.0|NULL,0"; got != want {
		t.Errorf("distinct, sorted: got %s, want %s", got, want)
	}
	// A budget too small for the rows fails with 1038.
	_, err = collectRows(&concatRows{in: inputs("aaaa,1|bbbb,2|cccc,3")}, &budget{limit: 100})
	var se *mysql.SQLError
	if !errors.As(err, &se) || se.Code != 1038 || se.State != "HY001" {
		t.Errorf("over budget: %v, want 1038 HY001", err)
	}
}

// TestBudgetGlobal: merges under way share merge_memory_total: a merge
// within its own limit is refused (1038) when all of them together would
// pass the total, and what a finished merge held is given back.
func TestBudgetGlobal(t *testing.T) {
	var total atomic.Int64
	a := budget{limit: 100, global: &total, globalLimit: 150}
	b := budget{limit: 100, global: &total, globalLimit: 150}
	if err := a.charge(90); err != nil {
		t.Fatal(err)
	}
	if err := b.charge(50); err != nil {
		t.Fatal(err)
	}
	err := b.charge(20)
	if se, ok := err.(*mysql.SQLError); !ok || se.Code != 1038 {
		t.Fatalf("over the total: %v, want 1038", err)
	}
	if err := a.charge(20); err == nil { // over its own limit: not charged to the total
		t.Fatal("over the statement's own limit")
	}
	a.release()
	b.release()
	if n := total.Load(); n != 0 {
		t.Fatalf("%d bytes left charged after release", n)
	}
	c := budget{limit: 100, global: &total, globalLimit: 150}
	if err := c.charge(99); err != nil {
		t.Fatalf("after the others finished: %v", err)
	}
}

func TestScaledSums(t *testing.T) {
	for _, tc := range []struct {
		v   string
		dec int
		m   int64
		ok  bool
	}{
		{"123.450", 3, 123450, true}, {"-0.005", 3, -5, true}, {"42", 0, 42, true}, {"1.5", 3, 0, false},
		{"1e5", 0, 0, false}, {"", 0, 0, false}, {"1234567890123456789", 0, 0, false},
	} {
		m, ok := parseScaled([]byte(tc.v), tc.dec)
		if m != tc.m || ok != tc.ok {
			t.Errorf("parseScaled(%q, %d) = %d, %v", tc.v, tc.dec, m, ok)
		}
	}
	for _, tc := range []struct {
		m    int64
		dec  int
		want string
	}{{123450, 3, "123.450"}, {-5, 3, "-0.005"}, {0, 2, "0.00"}, {7, 0, "7"}, {-9223372036854775808, 0, "-9223372036854775808"}} {
		if got := string(appendScaled(nil, tc.m, tc.dec)); got != tc.want {
			t.Errorf("appendScaled(%d, %d) = %s, want %s", tc.m, tc.dec, got, tc.want)
		}
	}
	if _, ok := addInt64(1<<62, 1<<62); ok {
		t.Error("overflow not seen")
	}
	for _, v := range []string{"0", "-0.50", "0.5", "10.10", "007", "1.", "-0"} {
		if canonicalDecimal([]byte(v)) {
			t.Errorf("%q is not canonical", v)
		}
	}
	for _, v := range []string{"12", "-3.25", "100"} {
		if !canonicalDecimal([]byte(v)) || string(normDecimal([]byte(v))) != v {
			t.Errorf("%q: canonical and unchanged", v)
		}
	}
}

// TestRowArenaKeepsEmptyStrings: an empty string stays an empty string,
// not NULL, also in a row of nothing but empty strings and NULLs (which
// needs no bytes).
func TestRowArenaKeepsEmptyStrings(t *testing.T) {
	var a rowArena
	for range 3 {
		r := a.copy([][]byte{{}, nil, []byte("x")})
		if r[0] == nil || len(r[0]) != 0 || r[1] != nil || string(r[2]) != "x" {
			t.Fatalf("copy = %q", r)
		}
		r = a.copy([][]byte{{}, nil})
		if r[0] == nil || r[1] != nil {
			t.Fatalf("copy of an empty row = %#v", r)
		}
	}
}

// reusing serves copies of its rows in one buffer that the next call
// overwrites, as a backend stream does with its packet buffer.
type reusing struct {
	in  rowIter
	buf []byte
	row [][]byte
}

func (r *reusing) next() ([][]byte, []byte, error) {
	for i := range r.buf {
		r.buf[i] = '#'
	}
	row, raw, err := r.in.next()
	if row == nil || err != nil {
		return row, raw, err
	}
	r.buf, r.row = r.buf[:0], r.row[:0]
	for _, v := range row {
		r.buf = append(r.buf, v...)
	}
	off := 0
	for _, v := range row {
		if v == nil {
			r.row = append(r.row, nil)
			continue
		}
		r.row = append(r.row, r.buf[off:off+len(v)])
		off += len(v)
	}
	return r.row, raw, nil
}

// TestDistinctSorted: DISTINCT over streams sorted by every visible column
// keeps the first of each run of equal rows (general_ci: 'a' = 'A'), keeps
// ” apart from NULL, and survives inputs that reuse their buffers.
func TestDistinctSorted(t *testing.T) {
	cols := newColumns([]*mysql.Column{{Type: mysql.TypeVarString, Charset: 45}, {Type: mysql.TypeLong, Charset: 63}})
	keys := []router.SortKey{{Col: 0}, {Col: 1}}
	in := inputs("NULL,1|a,1|a,1|b,2", "NULL,1|A,1|B,2|B,3")
	for i := range in {
		in[i] = &reusing{in: in[i]}
	}
	// The empty string sorts after NULL and before 'a'.
	in = append(in, &reusing{in: &sliceRows{rows: [][][]byte{{[]byte{}, []byte("1")}, {[]byte{}, []byte("1")}}}})
	om := newOrderedMerge(in, func(a, b [][]byte) int { return cols.compareRows(keys, a, b) })
	d := &distinctSorted{in: om, eq: func(a, b [][]byte) bool { return cols.compareRows(keys, a, b) == 0 }}
	var got []string
	for {
		row, _, err := d.next()
		if err != nil {
			t.Fatal(err)
		}
		if row == nil {
			break
		}
		s := "NULL"
		if row[0] != nil {
			s = "'" + string(row[0]) + "'"
		}
		got = append(got, s+","+string(row[1]))
	}
	if want := "NULL,1|'',1|'a',1|'b',2|'B',3"; strings.Join(got, "|") != want {
		t.Errorf("got %s, want %s", strings.Join(got, "|"), want)
	}
	if !orderCovers(keys, 2) || orderCovers(keys[:1], 2) || orderCovers([]router.SortKey{{Col: 0}, {Col: 2}}, 1) {
		t.Error("orderCovers: wrong answer")
	}
}
