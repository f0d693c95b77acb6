package kafkasink

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shardgate/shardgate/changestream"
	"github.com/shardgate/shardgate/config"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// goldenChanges are an insert, an update and a delete of one row, and a
// snapshot read of another, in the forms changestream delivers them.
func goldenChanges() []struct {
	name string
	ch   changestream.Change
	ord  txOrder
	snap string
} {
	types := map[string]string{"id": "bigint", "name": "varchar", "price": "decimal(10,2)", "photo": "blob", "at": "datetime(6)"}
	// The table's order, as the binary log's table map gives it.
	cols := []changestream.Column{{Name: "id", Type: "bigint"}, {Name: "name", Type: "varchar", Nullable: true},
		{Name: "price", Type: "decimal(10,2)", Nullable: true}, {Name: "photo", Type: "blob", Nullable: true},
		{Name: "at", Type: "datetime(6)", Nullable: true}}
	base := changestream.Change{Node: "node1", Table: "shop.orders", Subtable: "shop.orders_0001", Types: types, Columns: cols, Key: []string{"id"},
		GTID: "0-11-42", Time: 1764258000, Pos: "0-11-41"}
	row := map[string]any{"id": int64(7), "name": "Ada", "price": changestream.Decimal("12.50"), "photo": []byte{0, 1, 255}, "at": "2026-11-27 17:40:00.000000"}
	row2 := map[string]any{"id": int64(7), "name": "Ada L.", "price": changestream.Decimal("13.00"), "photo": nil, "at": "2026-11-27 17:41:00.000000"}
	ins, upd, del, read := base, base, base, base
	ins.Op, ins.After = "insert", row
	upd.Op, upd.Before, upd.After, upd.Seq = "update", row, row2, 1
	del.Op, del.Before, del.Seq, del.Last = "delete", row2, 2, true
	read.Op, read.After, read.GTID, read.Pos = OpRead, row, "", ""
	return []struct {
		name string
		ch   changestream.Change
		ord  txOrder
		snap string
	}{
		{"insert", ins, txOrder{1, 1}, "false"},
		{"update", upd, txOrder{2, 2}, "false"},
		{"delete", del, txOrder{3, 3}, "false"},
		{"snapshot", read, txOrder{}, "true"},
	}
}

// TestEncodeGolden: the key and value of each kind of change in each
// format (debezium, debezium with the schema wrapper, json) equal
// testdata/<format>-<op>.json, and a ddl change's schema-history record
// testdata/history-ddl.json (go test -update rewrites them).
func TestEncodeGolden(t *testing.T) {
	for _, f := range []struct {
		name    string
		format  string
		schemas bool
	}{{"debezium", config.FormatDebezium, false}, {"debezium-schema", config.FormatDebezium, true}, {"json", config.FormatJSON, false}} {
		e := &encoder{format: f.format, schemas: f.schemas, name: "shardgate", now: func() int64 { return 1764258000123 }}
		for _, c := range goldenChanges() {
			key, val, err := e.encode(&c.ch, c.ord, c.snap)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			for _, part := range [][]byte{key, val} {
				var ind bytes.Buffer
				if err := json.Indent(&ind, part, "", "  "); err != nil {
					t.Fatalf("%s %s: %v in %s", f.name, c.name, err, part)
				}
				out.Write(ind.Bytes())
				out.WriteByte('\n')
			}
			golden(t, filepath.Join("testdata", f.name+"-"+c.name+".json"), out.Bytes())
		}
	}
	e := &encoder{format: config.FormatDebezium, name: "shardgate", now: func() int64 { return 1764258000123 }}
	val, err := e.history(&changestream.Change{Node: "node1", Table: "shop.orders", Subtable: "shop.orders_0001", Op: "ddl",
		Query: "ALTER TABLE orders_0001 ADD COLUMN note TEXT", Schema: "shop", GTID: "0-11-43", Pos: "0-11-42", Time: 1764258001})
	if err != nil {
		t.Fatal(err)
	}
	var ind bytes.Buffer
	json.Indent(&ind, val, "", "  ")
	ind.WriteByte('\n')
	golden(t, filepath.Join("testdata", "history-ddl.json"), ind.Bytes())
}

// golden compares got with the file at path, or rewrites it under -update.
func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s: got\n%s\nwant\n%s", path, got, want)
	}
}

// TestDebeziumFields checks the envelope field by field against
// Debezium's MySQL connector documentation (the change event values of
// "create", "update", "delete" and snapshot "read" events).
func TestDebeziumFields(t *testing.T) {
	e := &encoder{format: config.FormatDebezium, name: "shardgate", now: func() int64 { return 5 }}
	want := map[string]struct{ op, snapshot string }{"insert": {"c", "false"}, "update": {"u", "false"}, "delete": {"d", "false"}, "snapshot": {"r", "true"}}
	for _, c := range goldenChanges() {
		key, val, err := e.encode(&c.ch, c.ord, c.snap)
		if err != nil {
			t.Fatal(err)
		}
		var k map[string]any
		var v struct {
			Before, After map[string]any
			Source        map[string]any
			Op            string
			TsMs          *int64 `json:"ts_ms"`
			Transaction   *struct {
				ID         string  `json:"id"`
				Total      float64 `json:"total_order"`
				Collection float64 `json:"data_collection_order"`
			}
		}
		if err := json.Unmarshal(key, &k); err != nil || k["id"] != float64(7) || len(k) != 1 {
			t.Errorf("%s: key %s (%v), want {\"id\":7}", c.name, key, err)
		}
		if err := json.Unmarshal(val, &v); err != nil {
			t.Fatal(err)
		}
		w := want[c.name]
		if v.Op != w.op || v.Source["snapshot"] != w.snapshot || v.TsMs == nil || *v.TsMs != 5 {
			t.Errorf("%s: op %q snapshot %v ts_ms %v, want %q %q 5", c.name, v.Op, v.Source["snapshot"], v.TsMs, w.op, w.snapshot)
		}
		// before: null for c and r; after: null for d.
		if (v.Before == nil) != (w.op == "c" || w.op == "r") || (v.After == nil) != (w.op == "d") {
			t.Errorf("%s: before %v after %v", c.name, v.Before, v.After)
		}
		for f, want := range map[string]any{"connector": "mysql", "name": "shardgate", "db": "shop", "table": "orders",
			"ts_ms": float64(1764258000000), "node": "node1", "subtable": "shop.orders_0001", "version": Version} {
			if v.Source[f] != want {
				t.Errorf("%s: source.%s = %v, want %v", c.name, f, v.Source[f], want)
			}
		}
		for _, f := range []string{"server_id", "gtid", "file", "pos", "row", "thread", "query", "sequence"} {
			if _, ok := v.Source[f]; !ok {
				t.Errorf("%s: source.%s missing", c.name, f)
			}
		}
		if c.name == "snapshot" {
			if v.Transaction != nil || v.Source["gtid"] != nil {
				t.Errorf("snapshot: transaction %v gtid %v, want null", v.Transaction, v.Source["gtid"])
			}
			continue
		}
		if v.Source["server_id"] != float64(11) || v.Source["gtid"] != "0-11-42" || v.Transaction == nil ||
			v.Transaction.ID != "0-11-42" || int(v.Transaction.Total) != c.ord.total || int(v.Transaction.Collection) != c.ord.table {
			t.Errorf("%s: server_id %v gtid %v transaction %+v", c.name, v.Source["server_id"], v.Source["gtid"], v.Transaction)
		}
	}
}

// everyType is a row with a column of each kind of type, in the Go forms
// changestream gives them (values.go), and the table's columns in order.
func everyType() changestream.Change {
	cols := []changestream.Column{
		{Name: "id", Type: "int"}, {Name: "ti", Type: "tinyint", Nullable: true}, {Name: "su", Type: "smallint unsigned", Nullable: true},
		{Name: "iu", Type: "int unsigned", Nullable: true}, {Name: "bu", Type: "bigint unsigned", Nullable: true},
		{Name: "b1", Type: "bit(1)", Nullable: true}, {Name: "b10", Type: "bit(10)", Nullable: true}, {Name: "y", Type: "year", Nullable: true},
		{Name: "f", Type: "float", Nullable: true}, {Name: "db", Type: "double", Nullable: true},
		{Name: "dc", Type: "decimal(12,4)", Nullable: true}, {Name: "vc", Type: "varchar", Nullable: true},
		{Name: "l1", Type: "varchar latin1", Nullable: true}, {Name: "bn", Type: "binary(4)", Nullable: true},
		{Name: "e", Type: "enum", Nullable: true, Members: []string{"a", "b"}}, {Name: "st", Type: "set", Nullable: true, Members: []string{"x", "y", "z"}},
		{Name: "dt", Type: "date", Nullable: true}, {Name: "tm", Type: "time(3)", Nullable: true},
		{Name: "dtm0", Type: "datetime", Nullable: true}, {Name: "dtm6", Type: "datetime(6)", Nullable: true},
		{Name: "ts0", Type: "timestamp"}, {Name: "ts2", Type: "timestamp(2)", Nullable: true},
		{Name: "g", Type: "geometry", Nullable: true}, {Name: "n", Type: "int", Nullable: true},
	}
	types := map[string]string{}
	for _, c := range cols {
		types[c.Name] = c.Type
	}
	point := []byte{0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 0, 0, 0, 0, 0, 0, 0, 0x40} // SRID 0, POINT(1 2)
	row := map[string]any{"id": int64(4), "ti": int64(-5), "su": uint64(65000), "iu": uint64(4000000000), "bu": uint64(18446744073709551615),
		"b1": uint64(1), "b10": uint64(0b1010000001), "y": int64(2024), "f": float32(1.5e-3), "db": -2.25e100,
		"dc": changestream.Decimal("-12.3400"), "vc": "héllo", "l1": "café", "bn": []byte{'a', 0, 0, 0},
		"e": changestream.Enum{Index: 2, Value: "b"}, "st": changestream.Set{Bits: 5, Value: "x,z"},
		"dt": "2024-02-29", "tm": "-12:34:56.789", "dtm0": "2024-02-29 23:59:59", "dtm6": "2024-02-29 23:59:59.123456",
		"ts0": "2024-03-01 01:02:03", "ts2": "2024-03-01 01:02:03.45", "g": point, "n": nil}
	return changestream.Change{Node: "node1", Table: "shop.t", Subtable: "shop.t_0000", Op: "insert", After: row,
		Types: types, Columns: cols, Key: []string{"id"}, GTID: "0-11-42", Time: 1764258000}
}

// TestDebeziumValues checks the value of every kind of column against
// Debezium's MySQL connector documentation (2.7, "How the MySQL connector
// maps data types") and its converters (BinlogValueConverters,
// JdbcValueConverters, RowDeserializers): the expected JSON is written
// out by hand, in the table's column order, for the default modes and
// for each other mode.
func TestDebeziumValues(t *testing.T) {
	after := func(m valueModes, ch changestream.Change) string {
		t.Helper()
		e := &encoder{format: config.FormatDebezium, name: "shardgate", modes: m, now: func() int64 { return 5 }}
		_, val, err := e.encode(&ch, txOrder{1, 1}, "false")
		if err != nil {
			t.Fatal(err)
		}
		var v struct{ After json.RawMessage }
		if err := json.Unmarshal(val, &v); err != nil {
			t.Fatal(err)
		}
		return string(v.After)
	}
	for _, tc := range []struct {
		name  string
		modes valueModes
		want  string
	}{
		// DATE 2024-02-29: 19782 days; TIME(3) -12:34:56.789: -45296789000 us;
		// DATETIME(0): epoch ms; DATETIME(6): epoch us; TIMESTAMP: ISO-8601 UTC
		// with the column's fraction digits; DECIMAL(12,4) -12.3400: unscaled
		// -123400 = FE 1D F8; BIGINT UNSIGNED 2^64-1 as a long: -1; BIT(1):
		// boolean; BIT(10) 0b1010000001 = 0x281, little-endian 81 02; GEOMETRY:
		// the WKB without MariaDB's SRID prefix, SRID 0 as null.
		{"defaults", valueModes{}, `{"id":4,"ti":-5,"su":65000,"iu":4000000000,"bu":-1,"b1":true,"b10":"gQI=","y":2024,` +
			`"f":0.0015,"db":-2.25e+100,"dc":"/h34","vc":"héllo","l1":"café","bn":"YQAAAA==","e":"b","st":"x,z",` +
			`"dt":19782,"tm":-45296789000,"dtm0":1709251199000,"dtm6":1709251199123456,` +
			`"ts0":"2024-03-01T01:02:03Z","ts2":"2024-03-01T01:02:03.45Z",` +
			`"g":{"wkb":"AQEAAAAAAAAAAADwPwAAAAAAAABA","srid":null},"n":null}`},
		{"decimal string, connect, bigint precise",
			valueModes{decimal: config.DecimalString, time: config.TimeConnect, bigint: config.BigintUnsignedPrecise},
			`{"id":4,"ti":-5,"su":65000,"iu":4000000000,"bu":"AP//////////","b1":true,"b10":"gQI=","y":2024,` +
				`"f":0.0015,"db":-2.25e+100,"dc":"-12.3400","vc":"héllo","l1":"café","bn":"YQAAAA==","e":"b","st":"x,z",` +
				`"dt":19782,"tm":-45296789,"dtm0":1709251199000,"dtm6":1709251199123,` +
				`"ts0":"2024-03-01T01:02:03Z","ts2":"2024-03-01T01:02:03.45Z",` +
				`"g":{"wkb":"AQEAAAAAAAAAAADwPwAAAAAAAABA","srid":null},"n":null}`},
		{"decimal double", valueModes{decimal: config.DecimalDouble}, `"dc":-12.34,`},
	} {
		got := after(tc.modes, everyType())
		if strings.HasPrefix(tc.want, "{") && got != tc.want || !strings.Contains(got, tc.want) {
			t.Errorf("%s:\ngot  %s\nwant %s", tc.name, got, tc.want)
		}
	}

	// Zero dates are null in a column that may be NULL and the epoch in a
	// NOT NULL one (Debezium's "Temporal types"); a SRID is kept.
	ch := everyType()
	ch.After = map[string]any{"id": int64(1), "dt": "0000-00-00", "dtm0": "0000-00-00 00:00:00", "dtm6": "2024-00-10 00:00:00.000000",
		"ts0": "0000-00-00 00:00:00", "ts2": "0000-00-00 00:00:00.00", "b10": uint64(0),
		"g": []byte{0xe6, 0x10, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 0, 0, 0, 0, 0, 0, 0, 0x40}}
	want := `{"id":1,"b10":"AAA=","dt":null,"dtm0":null,"dtm6":null,"ts0":"1970-01-01T00:00:00Z","ts2":null,` +
		`"g":{"wkb":"AQEAAAAAAAAAAADwPwAAAAAAAABA","srid":4326}}`
	if got := after(valueModes{}, ch); got != want {
		t.Errorf("zero dates:\ngot  %s\nwant %s", got, want)
	}
	cols := append([]changestream.Column(nil), ch.Columns...)
	for i := range cols {
		if cols[i].Name == "dt" || cols[i].Name == "dtm0" {
			cols[i].Nullable = false
		}
	}
	ch.Columns = cols
	want = `{"id":1,"b10":"AAA=","dt":0,"dtm0":0,"dtm6":null,"ts0":"1970-01-01T00:00:00Z","ts2":null,` +
		`"g":{"wkb":"AQEAAAAAAAAAAADwPwAAAAAAAABA","srid":4326}}`
	if got := after(valueModes{}, ch); got != want {
		t.Errorf("zero dates, NOT NULL:\ngot  %s\nwant %s", got, want)
	}

	// Dates before the epoch are negative; Java's BigInteger bytes for
	// the edges of a byte.
	ch = everyType()
	ch.After = map[string]any{"id": int64(1), "dt": "1900-01-01", "dtm6": "1969-12-31 23:59:59.500000", "tm": "01:02:03.456", "dc": changestream.Decimal("0.0000")}
	if got, want := after(valueModes{}, ch), `{"id":1,"dc":"AA==","dt":-25567,"tm":3723456000,"dtm6":-500000}`; got != want {
		t.Errorf("before the epoch:\ngot  %s\nwant %s", got, want)
	}
	for s, want := range map[string]string{"-0.0001": "/w==", "-0.0128": "gA==", "-0.0129": "/38=", "0.0128": "AIA=",
		"12345678901234567890123456.7890": "AY7pD/bDc+DuTj8K0g=="} {
		if got := base64.StdEncoding.EncodeToString(unscaledBytes(s, 4)); got != want {
			t.Errorf("unscaled %s: %s, want %s", s, got, want)
		}
	}
}

// TestDebeziumSchemaFields: with schemas: true, each column's field in
// the Connect schema has the type, name and parameters Debezium's schema
// builders give it (io.debezium.time.*, io.debezium.data.*, Connect's
// Decimal), optional by the column's nullability, in the table's order.
func TestDebeziumSchemaFields(t *testing.T) {
	ch := everyType()
	e := &encoder{format: config.FormatDebezium, schemas: true, name: "shardgate", now: func() int64 { return 5 }}
	_, val, err := e.encode(&ch, txOrder{1, 1}, "false")
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Schema struct{ Fields []json.RawMessage }
	}
	if err := json.Unmarshal(val, &v); err != nil {
		t.Fatal(err)
	}
	var after struct{ Fields []json.RawMessage }
	if err := json.Unmarshal(v.Schema.Fields[1], &after); err != nil {
		t.Fatal(err)
	}
	want := []string{
		`{"type":"int32","optional":false,"field":"id"}`,
		`{"type":"int16","optional":true,"field":"ti"}`,
		`{"type":"int32","optional":true,"field":"su"}`,
		`{"type":"int64","optional":true,"field":"iu"}`,
		`{"type":"int64","optional":true,"field":"bu"}`,
		`{"type":"boolean","optional":true,"field":"b1"}`,
		`{"type":"bytes","optional":true,"name":"io.debezium.data.Bits","version":1,"parameters":{"length":"10"},"field":"b10"}`,
		`{"type":"int32","optional":true,"name":"io.debezium.time.Year","version":1,"field":"y"}`,
		`{"type":"float32","optional":true,"field":"f"}`,
		`{"type":"float64","optional":true,"field":"db"}`,
		`{"type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{"scale":"4","connect.decimal.precision":"12"},"field":"dc"}`,
		`{"type":"string","optional":true,"field":"vc"}`,
		`{"type":"string","optional":true,"field":"l1"}`,
		`{"type":"bytes","optional":true,"field":"bn"}`,
		`{"type":"string","optional":true,"name":"io.debezium.data.Enum","version":1,"parameters":{"allowed":"a,b"},"field":"e"}`,
		`{"type":"string","optional":true,"name":"io.debezium.data.EnumSet","version":1,"parameters":{"allowed":"x,y,z"},"field":"st"}`,
		`{"type":"int32","optional":true,"name":"io.debezium.time.Date","version":1,"field":"dt"}`,
		`{"type":"int64","optional":true,"name":"io.debezium.time.MicroTime","version":1,"field":"tm"}`,
		`{"type":"int64","optional":true,"name":"io.debezium.time.Timestamp","version":1,"field":"dtm0"}`,
		`{"type":"int64","optional":true,"name":"io.debezium.time.MicroTimestamp","version":1,"field":"dtm6"}`,
		`{"type":"string","optional":false,"name":"io.debezium.time.ZonedTimestamp","version":1,"field":"ts0"}`,
		`{"type":"string","optional":true,"name":"io.debezium.time.ZonedTimestamp","version":1,"field":"ts2"}`,
		`{"type":"struct","fields":[{"type":"bytes","optional":false,"field":"wkb"},{"type":"int32","optional":true,"field":"srid"}],"optional":true,"name":"io.debezium.data.geometry.Geometry","version":1,"doc":"Geometry","field":"g"}`,
		`{"type":"int32","optional":true,"field":"n"}`,
	}
	if len(after.Fields) != len(want) {
		t.Fatalf("%d fields, want %d", len(after.Fields), len(want))
	}
	for i, f := range after.Fields {
		if string(f) != want[i] {
			t.Errorf("field %d:\ngot  %s\nwant %s", i, f, want[i])
		}
	}
	// Under time_precision: connect, bigint_unsigned_handling: precise and
	// decimal_handling: string.
	e = &encoder{format: config.FormatDebezium, schemas: true, name: "shardgate", now: func() int64 { return 5 },
		modes: valueModes{decimal: config.DecimalString, time: config.TimeConnect, bigint: config.BigintUnsignedPrecise}}
	_, val, _ = e.encode(&ch, txOrder{1, 1}, "false")
	for _, f := range []string{
		`{"type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{"scale":"0","connect.decimal.precision":"20"},"field":"bu"}`,
		`{"type":"string","optional":true,"field":"dc"}`,
		`{"type":"int32","optional":true,"name":"org.apache.kafka.connect.data.Date","version":1,"field":"dt"}`,
		`{"type":"int32","optional":true,"name":"org.apache.kafka.connect.data.Time","version":1,"field":"tm"}`,
		`{"type":"int64","optional":true,"name":"org.apache.kafka.connect.data.Timestamp","version":1,"field":"dtm6"}`,
	} {
		if !bytes.Contains(val, []byte(f)) {
			t.Errorf("connect/precise/string schema lacks %s", f)
		}
	}
}
