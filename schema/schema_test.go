package schema

import (
	"errors"
	"strings"
	"testing"
)

func table(name string, cols ...string) *Table {
	t := &Table{DB: "d", Name: name}
	for _, c := range cols {
		t.Columns = append(t.Columns, Column{Name: c, Type: "int(11)"})
	}
	return t
}

func TestCatalogVersions(t *testing.T) {
	c := NewCatalog()
	if c.Table("d", "t") != nil || c.Version() != 0 {
		t.Fatal("a new catalog knows a table")
	}
	v1 := c.Put(table("t", "a"))
	if v := c.Put(table("t", "a")); v != v1 {
		t.Errorf("an unchanged definition moved the version to %d", v)
	}
	v2 := c.Put(table("T", "a", "b")) // names are case-insensitive
	v3 := c.Drop("D", "t")
	v4 := c.Put(table("t", "x"))
	if got := []uint64{v1, v2, v3, v4}; got[0] != 1 || got[1] != 2 || got[2] != 3 || got[3] != 4 {
		t.Fatalf("versions %v, want 1 2 3 4", got)
	}
	for _, tc := range []struct {
		v    uint64
		want string // column names, "-" for no table
	}{{0, "-"}, {1, "a"}, {2, "a,b"}, {3, "-"}, {4, "x"}, {99, "x"}} {
		got, exact := c.AsOf("d", "t", tc.v)
		s := "-"
		if got != nil {
			s = strings.Join(got.Names(), ",")
		}
		if s != tc.want || !exact {
			t.Errorf("AsOf(%d) = %s (exact %v), want %s", tc.v, s, exact, tc.want)
		}
	}
	if got := c.Table("d", "t"); got == nil || got.Names()[0] != "x" || got.Version != 4 {
		t.Errorf("current = %+v", got)
	}
	if c.Drop("d", "nothing") != 4 {
		t.Error("dropping an unknown table moved the version")
	}
}

func TestCatalogHistoryBound(t *testing.T) {
	c := NewCatalog()
	for i := range historyLimit + 10 {
		c.Put(table("t", strings.Repeat("c", i+1)))
	}
	got, exact := c.AsOf("d", "t", 1)
	if exact || got == nil || got.Version != 11 {
		t.Errorf("AsOf(1) after %d changes = version %v exact %v, want the oldest kept (11), not exact", historyLimit+10, got, exact)
	}
	got, exact = c.AsOf("d", "t", 30)
	if !exact || got.Version != 30 {
		t.Errorf("AsOf(30) = %v %v", got.Version, exact)
	}
}

func TestDiff(t *testing.T) {
	a := table("t", "a", "b")
	b := table("t", "a", "b")
	if !Equal(a, b) {
		t.Fatal("equal tables differ")
	}
	b.Columns[1].Type = "bigint(20)"
	b.Columns = append(b.Columns, Column{Name: "c"})
	d := Diff(a, b)
	if len(d) != 2 || !strings.Contains(d[0], "column b: int(11) NOT NULL in the first, bigint(20) NOT NULL in the second") ||
		!strings.Contains(d[1], "(c): only in the second") {
		t.Errorf("Diff = %q", d)
	}
}

type fakeQuerier struct {
	sql  string
	rows [][][]byte
	err  error
}

func (f *fakeQuerier) Query(sql string) ([][][]byte, error) { f.sql = sql; return f.rows, f.err }

func TestRead(t *testing.T) {
	q := &fakeQuerier{rows: [][][]byte{
		{[]byte("id"), []byte("bigint(20) unsigned"), []byte("NO"), nil, []byte("PRI"), []byte("auto_increment")},
		{[]byte("k"), []byte("int(11)"), []byte("YES"), []byte("0"), []byte("MUL"), []byte("")},
	}}
	tb, err := Read(q, "db", "t_0001", "t")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(q.sql, "TABLE_SCHEMA = _utf8mb4 'db' AND TABLE_NAME = _utf8mb4 't_0001'") {
		t.Errorf("query %s", q.sql)
	}
	if tb.Name != "t" || tb.AutoIncrement != "id" || len(tb.Columns) != 2 || tb.Columns[0].HasDefault ||
		!tb.Columns[1].HasDefault || tb.Columns[1].Default != "0" || !tb.Columns[1].Nullable || tb.Columns[0].Nullable {
		t.Errorf("Read = %+v", tb)
	}
	if i, ok := tb.Column("K"); !ok || i != 1 {
		t.Errorf("Column(K) = %d %v", i, ok)
	}
	q.rows = nil
	if tb, err := Read(q, "db", `it's\`, "t"); tb != nil || err != nil || !strings.Contains(q.sql, "_utf8mb4 X'697427735C'") {
		t.Errorf("missing table: %v %v (%s)", tb, err, q.sql)
	}
	q.err = errors.New("boom")
	if _, err := Read(q, "db", "t", "t"); err == nil {
		t.Error("no error")
	}
}

func TestColumnFacts(t *testing.T) {
	for _, tc := range []struct {
		typ, extra, dataType string
		generated            bool
	}{
		{"bigint(20) unsigned", "auto_increment", "bigint", false},
		{"INT", "", "int", false},
		{"varchar(10)", "VIRTUAL GENERATED", "varchar", true},
		{"decimal(10,2) unsigned zerofill", "STORED GENERATED", "decimal", true},
	} {
		c := Column{Type: tc.typ, Extra: tc.extra}
		if c.DataType() != tc.dataType || c.Generated() != tc.generated {
			t.Errorf("%s %s: DataType %q Generated %v", tc.typ, tc.extra, c.DataType(), c.Generated())
		}
	}
}

func TestReadKeyCreateCounter(t *testing.T) {
	q := &fakeQuerier{rows: [][][]byte{{[]byte("b")}, {[]byte("a")}}}
	if pk, err := ReadPrimaryKey(q, "db", "t"); err != nil || strings.Join(pk, ",") != "b,a" ||
		!strings.Contains(q.sql, "KEY_COLUMN_USAGE WHERE TABLE_SCHEMA = _utf8mb4 'db' AND TABLE_NAME = _utf8mb4 't' AND CONSTRAINT_NAME = 'PRIMARY'") {
		t.Errorf("ReadPrimaryKey = %v %v (%s)", pk, err, q.sql)
	}
	q.rows = [][][]byte{{[]byte("a`b"), []byte("CREATE TABLE `a``b` (x int)")}}
	if c, err := ReadCreate(q, "d", "a`b"); err != nil || c != "CREATE TABLE `a``b` (x int)" || q.sql != "SHOW CREATE TABLE `d`.`a``b`" {
		t.Errorf("ReadCreate = %q %v (%s)", c, err, q.sql)
	}
	q.rows = [][][]byte{{[]byte("1000")}}
	if v, ok, err := ReadAutoIncrement(q, "d", "t"); v != 1000 || !ok || err != nil || !strings.Contains(q.sql, "information_schema.TABLES") {
		t.Errorf("ReadAutoIncrement = %d %v %v", v, ok, err)
	}
	q.rows = [][][]byte{{nil}}
	if _, ok, err := ReadAutoIncrement(q, "d", "t"); ok || err != nil {
		t.Errorf("no counter: %v %v", ok, err)
	}
}
