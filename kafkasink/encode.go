package kafkasink

import (
	"bytes"
	"encoding/json"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/shardgate/shardgate/changestream"
	"github.com/shardgate/shardgate/config"
)

// Version is source.version in Debezium records: the envelope's layout
// follows Debezium's MySQL connector of this version.
const Version = "2.7.0.Final-shardgate"

// OpRead is the Op of a snapshot row (Debezium's op "r").
const OpRead = "read"

// encoder turns changes into record keys and values in one stream's
// format. It is owned by the sink's goroutine (its schema cache is not
// safe for concurrent use).
type encoder struct {
	format  string // config.FormatDebezium or config.FormatJSON
	schemas bool   // wrap key and value in {"schema","payload"}
	name    string // source.name: the stream's topic prefix
	// now is the processing time in ms (top-level ts_ms); a test fixes it.
	now func() int64

	// cache holds each table's key and value schemas, computed once per
	// table map (Change.Types is shared by the changes of one table map).
	cache map[string]*tableSchema
}

// tableSchema is the Connect schema of one table's key and value, for the
// table map whose Types it was built from.
type tableSchema struct {
	types     uintptr // Change.Types' identity
	key, vals json.RawMessage
}

// txOrder is a change's place in its transaction, for the envelope's
// transaction block: total_order counts the transaction's streamed rows,
// data_collection_order those of the change's table (both from 1).
type txOrder struct {
	total, table int
}

// encode returns ch's record key and value. The key is the row's
// primary-key columns as a JSON object ({"id":1}), null for a table
// without a primary key.
func (e *encoder) encode(ch *changestream.Change, ord txOrder, snapshot string) (key, value []byte, err error) {
	key, err = e.key(ch)
	if err != nil {
		return nil, nil, err
	}
	if e.format == config.FormatJSON {
		if ch.JSON != nil {
			return key, bytes.TrimSuffix(ch.JSON, []byte("\n")), nil
		}
		value, err = json.Marshal(ch)
		return key, value, err
	}
	value, err = e.envelope(ch, ord, snapshot)
	if err != nil {
		return nil, nil, err
	}
	if e.schemas {
		ts := e.schemaOf(ch)
		if key != nil {
			key = wrap(ts.key, key)
		}
		value = wrap(ts.vals, value)
	}
	return key, value, nil
}

// rowKey is the primary key's values of ch's row (its after image, or
// before for a delete), nil without a primary key.
func rowKey(ch *changestream.Change) map[string]any {
	if len(ch.Key) == 0 {
		return nil
	}
	row := ch.After
	if row == nil {
		row = ch.Before
	}
	k := make(map[string]any, len(ch.Key))
	for _, c := range ch.Key {
		k[c] = row[c]
	}
	return k
}

func (e *encoder) key(ch *changestream.Change) ([]byte, error) {
	k := rowKey(ch)
	if k == nil {
		return nil, nil
	}
	return json.Marshal(k)
}

// source is the envelope's source block: Debezium's MySQL fields, plus
// shardgate's node and subtable.
type source struct {
	Version   string  `json:"version"`
	Connector string  `json:"connector"`
	Name      string  `json:"name"`
	TsMs      int64   `json:"ts_ms"`
	Snapshot  string  `json:"snapshot"`
	DB        string  `json:"db"`
	Sequence  *string `json:"sequence"`
	Table     string  `json:"table"`
	ServerID  uint64  `json:"server_id"`
	GTID      *string `json:"gtid"`
	File      string  `json:"file"`
	Pos       int64   `json:"pos"`
	Row       int     `json:"row"`
	Thread    *int64  `json:"thread"`
	Query     *string `json:"query"`
	Node      string  `json:"node"`
	Subtable  string  `json:"subtable"`
}

type transaction struct {
	ID                  string `json:"id"`
	TotalOrder          int    `json:"total_order"`
	DataCollectionOrder int    `json:"data_collection_order"`
}

type envelope struct {
	Before      map[string]any `json:"before"`
	After       map[string]any `json:"after"`
	Source      source         `json:"source"`
	Op          string         `json:"op"`
	TsMs        int64          `json:"ts_ms"`
	Transaction *transaction   `json:"transaction"`
}

// ops maps Change.Op to Debezium's op.
var ops = map[string]string{"insert": "c", "update": "u", "delete": "d", OpRead: "r"}

func (e *encoder) envelope(ch *changestream.Change, ord txOrder, snapshot string) ([]byte, error) {
	db, table, _ := strings.Cut(ch.Table, ".")
	env := envelope{
		Before: ch.Before, After: ch.After, Op: ops[ch.Op], TsMs: e.now(),
		Source: source{
			Version: Version, Connector: "mysql", Name: e.name, TsMs: ch.Time * 1000, Snapshot: snapshot,
			DB: db, Table: table, ServerID: gtidServer(ch.GTID), Row: ch.Seq, Node: ch.Node, Subtable: ch.Subtable,
		},
	}
	if ch.GTID != "" {
		g := ch.GTID
		env.Source.GTID = &g
		env.Transaction = &transaction{ID: ch.GTID, TotalOrder: ord.total, DataCollectionOrder: ord.table}
	}
	return json.Marshal(env)
}

// gtidServer is the server id of a MariaDB GTID domain-server-seq.
func gtidServer(gtid string) uint64 {
	parts := strings.Split(gtid, "-")
	if len(parts) != 3 {
		return 0
	}
	n, _ := strconv.ParseUint(parts[1], 10, 32)
	return n
}

// wrap is Kafka Connect's JSON converter form with schemas.enable=true.
func wrap(schema, payload json.RawMessage) []byte {
	b := make([]byte, 0, len(schema)+len(payload)+24)
	b = append(b, `{"schema":`...)
	b = append(b, schema...)
	b = append(b, `,"payload":`...)
	b = append(b, payload...)
	return append(b, '}')
}

// schemaOf returns the Connect schemas of ch's table as of ch's table map.
func (e *encoder) schemaOf(ch *changestream.Change) *tableSchema {
	id := reflect.ValueOf(ch.Types).Pointer()
	if ts := e.cache[ch.Table]; ts != nil && ts.types == id {
		return ts
	}
	if e.cache == nil {
		e.cache = map[string]*tableSchema{}
	}
	ts := &tableSchema{types: id}
	prefix := e.name + "." + ch.Table
	cols := make([]string, 0, len(ch.Types))
	for c := range ch.Types {
		cols = append(cols, c)
	}
	sort.Strings(cols)
	field := func(c string, optional bool) map[string]any {
		t, name := connectType(ch.Types[c])
		f := map[string]any{"type": t, "optional": optional, "field": c}
		if name != "" {
			f["name"] = name
		}
		return f
	}
	var keyFields, valFields []map[string]any
	for _, c := range ch.Key {
		keyFields = append(keyFields, field(c, false))
	}
	inKey := map[string]bool{}
	for _, c := range ch.Key {
		inKey[c] = true
	}
	for _, c := range cols {
		valFields = append(valFields, field(c, !inKey[c]))
	}
	row := func(f string) map[string]any {
		return map[string]any{"type": "struct", "fields": valFields, "optional": true, "name": prefix + ".Value", "field": f}
	}
	str := func(f string, optional bool) map[string]any {
		return map[string]any{"type": "string", "optional": optional, "field": f}
	}
	i64 := func(f string, optional bool) map[string]any {
		return map[string]any{"type": "int64", "optional": optional, "field": f}
	}
	i32 := func(f string) map[string]any { return map[string]any{"type": "int32", "optional": false, "field": f} }
	src := map[string]any{"type": "struct", "optional": false, "name": "io.debezium.connector.mysql.Source", "field": "source",
		"fields": []map[string]any{
			str("version", false), str("connector", false), str("name", false), i64("ts_ms", false),
			{"type": "string", "optional": true, "name": "io.debezium.data.Enum", "version": 1,
				"parameters": map[string]string{"allowed": "true,last,false,incremental"}, "default": "false", "field": "snapshot"},
			str("db", false), str("sequence", true), str("table", true), i64("server_id", false), str("gtid", true),
			str("file", false), i64("pos", false), i32("row"), i64("thread", true), str("query", true),
			str("node", false), str("subtable", false),
		}}
	tx := map[string]any{"type": "struct", "optional": true, "name": "event.block", "version": 1, "field": "transaction",
		"fields": []map[string]any{str("id", false), i64("total_order", false), i64("data_collection_order", false)}}
	val := map[string]any{"type": "struct", "optional": false, "name": prefix + ".Envelope", "version": 1,
		"fields": []map[string]any{row("before"), row("after"), src, str("op", false), i64("ts_ms", true), tx}}
	ts.vals, _ = json.Marshal(val)
	if len(keyFields) > 0 {
		ts.key, _ = json.Marshal(map[string]any{"type": "struct", "optional": false, "name": prefix + ".Key", "fields": keyFields})
	}
	e.cache[ch.Table] = ts
	return ts
}

// connectType maps a column's type as Change.Types names it to a Kafka
// Connect schema type (and a logical name) matching the JSON form of its
// values (docs/change-streams.md): exact numbers stay numbers, DECIMAL is
// a string (Debezium's decimal.handling.mode=string), binary strings are
// bytes (base64 in JSON, as Connect's JSON converter writes them), dates
// and times are strings.
func connectType(t string) (typ, name string) {
	base, _, _ := strings.Cut(t, "(")
	base, _, _ = strings.Cut(base, " ")
	unsigned := strings.HasSuffix(t, " unsigned")
	switch base {
	case "tinyint", "smallint":
		if unsigned && base == "smallint" {
			return "int32", ""
		}
		return "int16", ""
	case "mediumint":
		return "int32", ""
	case "int":
		if unsigned {
			return "int64", ""
		}
		return "int32", ""
	case "bigint", "bit":
		return "int64", ""
	case "year":
		return "int32", "io.debezium.time.Year"
	case "float":
		return "float32", ""
	case "double":
		return "float64", ""
	case "binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob", "geometry":
		return "bytes", ""
	case "date":
		return "string", "shardgate.Date"
	case "datetime":
		return "string", "shardgate.DateTime"
	case "timestamp":
		return "string", "io.debezium.time.ZonedTimestamp"
	case "time":
		return "string", "shardgate.Time"
	case "decimal":
		return "string", ""
	case "enum":
		return "string", "io.debezium.data.Enum"
	case "set":
		return "string", "io.debezium.data.EnumSet"
	}
	return "string", ""
}

// historyRecord is a schema-history record, as Debezium's MySQL connector
// writes to its schema.history.internal.kafka.topic, plus shardgate's
// node, logical table and subtable.
type historyRecord struct {
	Source struct {
		Server string `json:"server"`
		Node   string `json:"node"`
	} `json:"source"`
	Position struct {
		TsSec    int64  `json:"ts_sec"`
		GTID     string `json:"gtid"`
		Gtids    string `json:"gtids"`
		ServerID uint64 `json:"server_id"`
	} `json:"position"`
	TsMs         int64    `json:"ts_ms"`
	DatabaseName string   `json:"databaseName"`
	DDL          string   `json:"ddl"`
	Table        string   `json:"table"`
	Subtable     string   `json:"subtable"`
	TableChanges []string `json:"tableChanges"`
}

// history encodes a ddl change as a schema-history record value.
func (e *encoder) history(ch *changestream.Change) ([]byte, error) {
	var h historyRecord
	h.Source.Server, h.Source.Node = e.name, ch.Node
	h.Position.TsSec, h.Position.GTID, h.Position.Gtids, h.Position.ServerID = ch.Time, ch.GTID, ch.Pos, gtidServer(ch.GTID)
	h.TsMs, h.DatabaseName, h.DDL, h.Table, h.Subtable, h.TableChanges = e.now(), ch.Schema, ch.Query, ch.Table, ch.Subtable, []string{}
	return json.Marshal(h)
}
