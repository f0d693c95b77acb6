package kafkasink

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
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
