package kafkasink

import (
	"bytes"
	"encoding/json"
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
// format. It is owned by the sink's goroutine (its plan cache is not safe
// for concurrent use).
type encoder struct {
	format  string // config.FormatDebezium or config.FormatJSON
	schemas bool   // wrap key and value in {"schema","payload"}
	name    string // source.name: the stream's topic prefix
	// modes are the debezium value settings (zero: Debezium's defaults).
	modes valueModes
	// now is the processing time in ms (top-level ts_ms); a test fixes it.
	now func() int64

	// cache holds each subtable's plan (its columns in order, their
	// conversions and Connect schemas), rebuilt when a change's columns
	// differ from the last one's (debezium_values.go).
	cache map[string]*tablePlan
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
	if e.format == config.FormatJSON {
		if key, err = e.key(ch); err != nil {
			return nil, nil, err
		}
		if ch.JSON != nil {
			return key, bytes.TrimSuffix(ch.JSON, []byte("\n")), nil
		}
		value, err = json.Marshal(ch)
		return key, value, err
	}
	p := e.plan(ch)
	if len(ch.Key) > 0 {
		row := ch.After
		if row == nil {
			row = ch.Before
		}
		if key, err = p.appendKey(nil, row); err != nil {
			return nil, nil, err
		}
	}
	value, err = e.envelope(ch, p, ord, snapshot)
	if err != nil {
		return nil, nil, err
	}
	if e.schemas {
		e.schemaOf(ch, p)
		if key != nil {
			key = wrap(p.key, key)
		}
		value = wrap(p.vals, value)
	}
	return key, value, nil
}

// rowKey is the primary key's values of ch's row (its after image, or
// before for a delete) as the change stream gives them, nil without a
// primary key: the json format's key (the debezium format converts them).
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
	Before      json.RawMessage `json:"before"`
	After       json.RawMessage `json:"after"`
	Source      source          `json:"source"`
	Op          string          `json:"op"`
	TsMs        int64           `json:"ts_ms"`
	Transaction *transaction    `json:"transaction"`
}

// ops maps Change.Op to Debezium's op.
var ops = map[string]string{"insert": "c", "update": "u", "delete": "d", OpRead: "r"}

func (e *encoder) envelope(ch *changestream.Change, p *tablePlan, ord txOrder, snapshot string) ([]byte, error) {
	db, table, _ := strings.Cut(ch.Table, ".")
	before, err := p.appendRow(nil, ch.Before)
	if err != nil {
		return nil, err
	}
	after, err := p.appendRow(nil, ch.After)
	if err != nil {
		return nil, err
	}
	env := envelope{
		Before: before, After: after, Op: ops[ch.Op], TsMs: e.now(),
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

// schemaOf fills p's Connect schemas of ch's table key and envelope,
// once per plan.
func (e *encoder) schemaOf(ch *changestream.Change, p *tablePlan) {
	if p.vals != nil {
		return
	}
	prefix := e.name + "." + ch.Table
	var keyFields []connectField
	for _, c := range p.keyNames {
		f := connectField{Type: "string", Field: c}
		if j, ok := p.byName[c]; ok {
			f = p.columns[j].schema
		}
		f.Optional = false
		keyFields = append(keyFields, f)
	}
	valFields := make([]connectField, len(p.columns))
	for i := range p.columns {
		valFields[i] = p.columns[i].schema
	}
	row := func(f string) connectField {
		return connectField{Type: "struct", Fields: valFields, Optional: true, Name: prefix + ".Value", Field: f}
	}
	str := func(f string, optional bool) connectField {
		return connectField{Type: "string", Optional: optional, Field: f}
	}
	i64 := func(f string, optional bool) connectField {
		return connectField{Type: "int64", Optional: optional, Field: f}
	}
	src := connectField{Type: "struct", Optional: false, Name: "io.debezium.connector.mysql.Source", Field: "source",
		Fields: []connectField{
			str("version", false), str("connector", false), str("name", false), i64("ts_ms", false),
			{Type: "string", Optional: true, Name: "io.debezium.data.Enum", Version: 1,
				Parameters: params{{"allowed", "true,last,false,incremental"}}, Default: "false", Field: "snapshot"},
			str("db", false), str("sequence", true), str("table", true), i64("server_id", false), str("gtid", true),
			str("file", false), i64("pos", false), {Type: "int32", Field: "row"}, i64("thread", true), str("query", true),
			str("node", false), str("subtable", false),
		}}
	tx := connectField{Type: "struct", Optional: true, Name: "event.block", Version: 1, Field: "transaction",
		Fields: []connectField{str("id", false), i64("total_order", false), i64("data_collection_order", false)}}
	val := connectField{Type: "struct", Optional: false, Name: prefix + ".Envelope", Version: 1,
		Fields: []connectField{row("before"), row("after"), src, str("op", false), i64("ts_ms", true), tx}}
	p.vals, _ = json.Marshal(val)
	if len(keyFields) > 0 {
		p.key, _ = json.Marshal(connectField{Type: "struct", Fields: keyFields, Optional: false, Name: prefix + ".Key"})
	}
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
