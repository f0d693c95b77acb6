package kafkasink

import (
	"encoding/json"
	"math/big"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/shardgate/shardgate/changestream"
	"github.com/shardgate/shardgate/config"
)

// This file converts a change's values to the forms Debezium's MySQL
// connector (2.7) writes, column by column from the column's type
// (docs/kafka.md, "Values", has the table): dates and times as epoch
// numbers, TIMESTAMP as an ISO-8601 string in UTC, DECIMAL as Kafka
// Connect's Decimal (or a string or a double), BIT(1) as a boolean, BIT(n)
// as little-endian bytes, GEOMETRY as a {wkb, srid} struct, and the
// columns in the table's order.

// valueModes are a stream's debezium value settings: Debezium's
// decimal.handling.mode, time.precision.mode and
// bigint.unsigned.handling.mode. An empty field is Debezium's default.
type valueModes struct {
	decimal, time, bigint string
}

// modesOf is the value settings of stream cfg.
func modesOf(cfg config.Stream) valueModes {
	return valueModes{decimal: cfg.DecimalHandling, time: cfg.TimePrecision, bigint: cfg.BigintUnsignedHandling}
}

// conv is how one column's value is converted.
type conv uint8

const (
	convAsIs           conv = iota // numbers, text, binary strings, ENUM, SET: the change stream's form
	convBool                       // BIT(1): true or false
	convBits                       // BIT(n): little-endian bytes, ceil(n/8) of them
	convUnsignedLong               // BIGINT UNSIGNED as a long: above 2^63-1 wraps
	convDecimal                    // Connect Decimal: base64 of the unscaled two's-complement big-endian bytes
	convDecimalString              // the digits with the column's scale
	convDecimalDouble              // a double
	convDate                       // days since the epoch (int32)
	convTimeMicros                 // TIME as microseconds (io.debezium.time.MicroTime)
	convTimeMillis                 // TIME as milliseconds past midnight (Connect Time)
	convDateTimeMillis             // DATETIME as epoch milliseconds
	convDateTimeMicros             // DATETIME as epoch microseconds
	convTimestamp                  // TIMESTAMP: ISO-8601 in UTC with the column's fraction digits
	convGeometry                   // {"wkb": base64, "srid": int or null}
)

// column is how one column of a table is written: its converted value and
// its field in the Connect schema.
type column struct {
	name     string
	quoted   []byte // "name":
	conv     conv
	scale    int  // convDecimal, convDecimalString: the column's scale
	size     int  // convBits: bytes; convTimestamp: fraction digits
	nullable bool // a zero date is null (else the epoch), as Debezium does
	schema   connectField
}

// tablePlan is one table's columns in its order, for the table map (or
// snapshot result set) whose Types it was built from.
type tablePlan struct {
	types    map[string]string // identity of the Change.Types it was built for (kept alive so it stays unique)
	cols     []changestream.Column
	keyNames []string
	columns  []column
	byName   map[string]int
	// key and vals are the Connect schemas of the key and the envelope,
	// built on first use (schemas: true).
	key, vals json.RawMessage
}

// plan returns ch's table plan: the cached one when ch has the same
// Types, or the same columns, as the table's last change.
func (e *encoder) plan(ch *changestream.Change) *tablePlan {
	id := ch.Table + "\x00" + ch.Node + "\x00" + ch.Subtable
	p := e.cache[id]
	if p != nil && sameTypes(p.types, ch.Types) {
		return p
	}
	cols := ch.Columns
	if cols == nil {
		cols = columnsOf(ch)
	}
	if p != nil && sameColumns(p.cols, cols) && strings.Join(p.keyNames, "\x00") == strings.Join(ch.Key, "\x00") {
		p.types = ch.Types
		return p
	}
	if e.cache == nil {
		e.cache = map[string]*tablePlan{}
	}
	p = newPlan(ch.Types, cols, ch.Key, e.modes)
	e.cache[id] = p
	return p
}

// sameTypes says whether a and b are the same map (not merely equal):
// a table map's changes share one Types.
func sameTypes(a, b map[string]string) bool {
	return a != nil && b != nil && reflect.ValueOf(a).Pointer() == reflect.ValueOf(b).Pointer()
}

func sameColumns(a, b []changestream.Column) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || a[i].Type != b[i].Type || a[i].Nullable != b[i].Nullable ||
			strings.Join(a[i].Members, "\x00") != strings.Join(b[i].Members, "\x00") {
			return false
		}
	}
	return true
}

// columnsOf is ch's columns when the change carries no Columns (a change
// built by hand): name order, nullable unless in the primary key.
func columnsOf(ch *changestream.Change) []changestream.Column {
	names := make([]string, 0, len(ch.Types))
	for c := range ch.Types {
		names = append(names, c)
	}
	sort.Strings(names)
	cols := make([]changestream.Column, len(names))
	for i, c := range names {
		cols[i] = changestream.Column{Name: c, Type: ch.Types[c], Nullable: !contains(ch.Key, c)}
	}
	return cols
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func newPlan(types map[string]string, cols []changestream.Column, key []string, m valueModes) *tablePlan {
	p := &tablePlan{types: types, cols: cols, keyNames: key, byName: make(map[string]int, len(cols))}
	for _, c := range cols {
		col := planColumn(c, m)
		q, _ := json.Marshal(c.Name)
		col.quoted = append(q, ':')
		p.byName[c.Name] = len(p.columns)
		p.columns = append(p.columns, col)
	}
	return p
}

// typeParts splits a type as Change.Types names it: "decimal(10,2)" is
// decimal with arguments "10,2"; "int unsigned" is int, unsigned.
func typeParts(t string) (base, args string, unsigned bool) {
	unsigned = strings.HasSuffix(t, " unsigned")
	base, _, _ = strings.Cut(t, " ")
	if b, a, ok := strings.Cut(base, "("); ok {
		base, args = b, strings.TrimSuffix(a, ")")
	}
	return base, args, unsigned
}

// planColumn decides column c's conversion and Connect field, as
// Debezium's MySqlValueConverters (BinlogValueConverters,
// JdbcValueConverters) and the schema builders of io.debezium.time and
// io.debezium.data do for the column's type under modes m.
func planColumn(c changestream.Column, m valueModes) column {
	base, args, unsigned := typeParts(c.Type)
	col := column{name: c.Name, nullable: c.Nullable}
	f := connectField{Type: "string", Optional: c.Nullable, Field: c.Name}
	named := func(typ, name string) {
		f.Type, f.Name, f.Version = typ, name, 1
	}
	fsp, _ := strconv.Atoi(args)
	switch base {
	case "tinyint":
		f.Type = "int16"
	case "smallint":
		f.Type = "int16"
		if unsigned {
			f.Type = "int32"
		}
	case "mediumint":
		f.Type = "int32"
	case "int":
		f.Type = "int32"
		if unsigned {
			f.Type = "int64"
		}
	case "bigint":
		f.Type = "int64"
		if unsigned {
			col.conv = convUnsignedLong
			if m.bigint == config.BigintUnsignedPrecise {
				col.conv, col.scale = convDecimal, 0
				named("bytes", "org.apache.kafka.connect.data.Decimal")
				f.Parameters = params{{"scale", "0"}, {"connect.decimal.precision", "20"}}
			}
		}
	case "bit":
		n, _ := strconv.Atoi(args)
		if n <= 1 {
			col.conv, f.Type = convBool, "boolean"
		} else {
			col.conv, col.size = convBits, (n+7)/8
			named("bytes", "io.debezium.data.Bits")
			f.Parameters = params{{"length", strconv.Itoa(n)}}
		}
	case "year":
		named("int32", "io.debezium.time.Year")
	case "float":
		f.Type = "float32"
	case "double":
		f.Type = "float64"
	case "decimal":
		prec, scale, _ := strings.Cut(args, ",")
		col.scale, _ = strconv.Atoi(scale)
		switch m.decimal {
		case config.DecimalString:
			col.conv = convDecimalString
		case config.DecimalDouble:
			col.conv, f.Type = convDecimalDouble, "float64"
		default:
			col.conv = convDecimal
			named("bytes", "org.apache.kafka.connect.data.Decimal")
			f.Parameters = params{{"scale", strconv.Itoa(col.scale)}, {"connect.decimal.precision", prec}}
		}
	case "binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob":
		f.Type = "bytes"
	case "enum", "set":
		name := "io.debezium.data.Enum"
		if base == "set" {
			name = "io.debezium.data.EnumSet"
		}
		named("string", name)
		if c.Members != nil {
			f.Parameters = params{{"allowed", strings.Join(c.Members, ",")}}
		}
	case "json":
		named("string", "io.debezium.data.Json")
	case "date":
		col.conv = convDate
		named("int32", "io.debezium.time.Date")
		if m.time == config.TimeConnect {
			f.Name = "org.apache.kafka.connect.data.Date"
		}
	case "time":
		col.conv = convTimeMicros
		named("int64", "io.debezium.time.MicroTime")
		if m.time == config.TimeConnect {
			col.conv = convTimeMillis
			named("int32", "org.apache.kafka.connect.data.Time")
		}
	case "datetime":
		switch {
		case m.time == config.TimeConnect:
			col.conv = convDateTimeMillis
			named("int64", "org.apache.kafka.connect.data.Timestamp")
		case fsp <= 3:
			col.conv = convDateTimeMillis
			named("int64", "io.debezium.time.Timestamp")
		default:
			col.conv = convDateTimeMicros
			named("int64", "io.debezium.time.MicroTimestamp")
		}
	case "timestamp":
		col.conv, col.size = convTimestamp, fsp
		named("string", "io.debezium.time.ZonedTimestamp")
	case "geometry":
		col.conv = convGeometry
		named("struct", "io.debezium.data.geometry.Geometry")
		f.Optional, f.Doc = true, "Geometry"
		f.Fields = []connectField{{Type: "bytes", Optional: false, Field: "wkb"}, {Type: "int32", Optional: true, Field: "srid"}}
	}
	col.schema = f
	return col
}

// value converts v, a value of col as the change stream gives it
// (changestream/values.go), to its Debezium form.
func (col *column) value(v any) any {
	if v == nil {
		return nil
	}
	switch col.conv {
	case convBool:
		return unsigned(v) != 0
	case convBits:
		x := unsigned(v)
		b := make([]byte, col.size)
		for i := range b {
			b[i] = byte(x >> (8 * i))
		}
		return b
	case convUnsignedLong:
		return int64(unsigned(v))
	case convDecimal:
		s := decimalText(v)
		if s == "" {
			return v
		}
		return unscaledBytes(s, col.scale)
	case convDecimalString:
		return decimalText(v)
	case convDecimalDouble:
		f, err := strconv.ParseFloat(decimalText(v), 64)
		if err != nil {
			return v
		}
		return f
	case convDate:
		s, _ := v.(string)
		days, ok := epochDays(s)
		if !ok {
			return col.zero(int32(0))
		}
		return int32(days)
	case convTimeMicros, convTimeMillis:
		s, _ := v.(string)
		us, ok := timeMicros(s)
		if !ok {
			return col.zero(int64(0))
		}
		if col.conv == convTimeMillis {
			return int32(floorDiv(us, 1000))
		}
		return us
	case convDateTimeMillis, convDateTimeMicros:
		s, _ := v.(string)
		us, ok := epochMicros(s)
		if !ok {
			return col.zero(int64(0))
		}
		if col.conv == convDateTimeMillis {
			return floorDiv(us, 1000)
		}
		return us
	case convTimestamp:
		s, _ := v.(string)
		iso, ok := isoTimestamp(s, col.size)
		if !ok {
			return col.zero("1970-01-01T00:00:00Z")
		}
		return iso
	case convGeometry:
		b, _ := v.([]byte)
		if len(b) < 4 {
			return v
		}
		g := geometry{WKB: b[4:]}
		if srid := int32(uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24); srid != 0 {
			g.SRID = &srid
		}
		return g
	}
	return v
}

// zero is the value of a zero (or invalid) date: null when the column
// may be NULL, else the epoch (Debezium's fallback), as Debezium does.
func (col *column) zero(epoch any) any {
	if col.nullable {
		return nil
	}
	return epoch
}

// geometry is Debezium's io.debezium.data.geometry.Geometry value: the WKB
// and the SRID, null when 0 (MariaDB's stored form is the SRID in 4
// little-endian bytes, then the WKB).
type geometry struct {
	WKB  []byte `json:"wkb"`
	SRID *int32 `json:"srid"`
}

func unsigned(v any) uint64 {
	switch x := v.(type) {
	case uint64:
		return x
	case int64:
		return uint64(x)
	}
	return 0
}

func decimalText(v any) string {
	switch x := v.(type) {
	case changestream.Decimal:
		return string(x)
	case string:
		return x
	case uint64:
		return strconv.FormatUint(x, 10)
	case int64:
		return strconv.FormatInt(x, 10)
	}
	return ""
}

// unscaledBytes is s (a decimal number) times 10^scale as Java's
// BigInteger.toByteArray writes it: two's complement, big-endian, the
// fewest bytes that keep the sign. Kafka Connect's Decimal is these bytes.
func unscaledBytes(s string, scale int) []byte {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimLeft(s, "+-")
	whole, frac, _ := strings.Cut(s, ".")
	for len(frac) < scale {
		frac += "0"
	}
	frac = frac[:scale]
	var n big.Int
	if _, ok := n.SetString(whole+frac, 10); !ok {
		n.SetInt64(0)
	}
	if neg {
		n.Neg(&n)
	}
	return twosComplement(&n)
}

func twosComplement(n *big.Int) []byte {
	if n.Sign() >= 0 {
		b := n.Bytes()
		if len(b) == 0 || b[0]&0x80 != 0 {
			b = append([]byte{0}, b...)
		}
		return b
	}
	// -n-1 is not negative; its bytes complemented are n's.
	var m big.Int
	m.Neg(n)
	m.Sub(&m, big.NewInt(1))
	b := m.Bytes()
	for i := range b {
		b[i] = ^b[i]
	}
	if len(b) == 0 || b[0]&0x80 == 0 {
		b = append([]byte{0xff}, b...)
	}
	return b
}

// civil parses the date at the start of s (YYYY-MM-DD); ok is false for
// a zero or invalid date ('0000-00-00', '2024-02-30', '2024-00-10').
func civil(s string) (t time.Time, ok bool) {
	if len(s) < 10 || s[4] != '-' || s[7] != '-' {
		return t, false
	}
	y, err1 := strconv.Atoi(s[:4])
	mo, err2 := strconv.Atoi(s[5:7])
	d, err3 := strconv.Atoi(s[8:10])
	if err1 != nil || err2 != nil || err3 != nil || y == 0 || mo == 0 || d == 0 {
		return t, false
	}
	t = time.Date(y, time.Month(mo), d, 0, 0, 0, 0, time.UTC)
	if t.Year() != y || int(t.Month()) != mo || t.Day() != d {
		return t, false
	}
	return t, true
}

func epochDays(s string) (int64, bool) {
	t, ok := civil(s)
	if !ok {
		return 0, false
	}
	return floorDiv(t.Unix(), 86400), true
}

// clock parses HH:MM:SS[.ffffff] (hours may have more digits and a sign
// for TIME) as microseconds.
func clock(s string) (int64, bool) {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	hms, frac, _ := strings.Cut(s, ".")
	parts := strings.Split(hms, ":")
	if len(parts) != 3 {
		return 0, false
	}
	var us int64
	for i, p := range parts {
		n, err := strconv.ParseInt(p, 10, 64)
		if err != nil {
			return 0, false
		}
		us += n * [3]int64{3600e6, 60e6, 1e6}[i]
	}
	if frac != "" {
		for len(frac) < 6 {
			frac += "0"
		}
		n, err := strconv.ParseInt(frac[:6], 10, 64)
		if err != nil {
			return 0, false
		}
		us += n
	}
	if neg {
		us = -us
	}
	return us, true
}

func timeMicros(s string) (int64, bool) { return clock(s) }

// epochMicros is a DATETIME's microseconds since the epoch, read as UTC.
func epochMicros(s string) (int64, bool) {
	t, ok := civil(s)
	if !ok || len(s) < 19 || s[10] != ' ' {
		return 0, false
	}
	us, ok := clock(s[11:])
	if !ok {
		return 0, false
	}
	return t.Unix()*1e6 + us, true
}

// isoTimestamp writes a TIMESTAMP value (in UTC, as the change stream
// gives it) as Debezium's ZonedTimestamp: ISO-8601 with a Z, and exactly
// fsp fraction digits when the column has them (none for TIMESTAMP(0)).
func isoTimestamp(s string, fsp int) (string, bool) {
	if _, ok := civil(s); !ok || len(s) < 19 || s[10] != ' ' {
		return "", false
	}
	hms, frac, _ := strings.Cut(s[11:], ".")
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteString(s[:10])
	b.WriteByte('T')
	b.WriteString(hms)
	if fsp > 0 {
		for len(frac) < fsp {
			frac += "0"
		}
		b.WriteByte('.')
		b.WriteString(frac[:fsp])
	}
	b.WriteByte('Z')
	return b.String(), true
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// appendRow appends row as a JSON object with the plan's columns in the
// table's order, each value in its Debezium form; null for a nil row.
func (p *tablePlan) appendRow(b []byte, row map[string]any) ([]byte, error) {
	if row == nil {
		return append(b, "null"...), nil
	}
	b = append(b, '{')
	first := true
	for i := range p.columns {
		c := &p.columns[i]
		v, ok := row[c.name]
		if !ok {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, c.quoted...)
		var err error
		if b, err = appendJSON(b, c.value(v)); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

// appendKey appends the primary key's columns of row in the key's order.
func (p *tablePlan) appendKey(b []byte, row map[string]any) ([]byte, error) {
	b = append(b, '{')
	for i, name := range p.keyNames {
		if i > 0 {
			b = append(b, ',')
		}
		var v any
		if j, ok := p.byName[name]; ok {
			c := &p.columns[j]
			b = append(b, c.quoted...)
			v = c.value(row[name])
		} else {
			q, _ := json.Marshal(name)
			b = append(append(b, q...), ':')
			v = row[name]
		}
		var err error
		if b, err = appendJSON(b, v); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

func appendJSON(b []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case int64:
		return strconv.AppendInt(b, x, 10), nil
	case uint64:
		return strconv.AppendUint(b, x, 10), nil
	case int32:
		return strconv.AppendInt(b, int64(x), 10), nil
	case bool:
		return strconv.AppendBool(b, x), nil
	}
	j, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, j...), nil
}

// connectField is a field of a Kafka Connect schema, its keys in the order
// Kafka's JsonConverter writes them.
type connectField struct {
	Type       string         `json:"type"`
	Fields     []connectField `json:"fields,omitempty"`
	Optional   bool           `json:"optional"`
	Name       string         `json:"name,omitempty"`
	Version    int            `json:"version,omitempty"`
	Doc        string         `json:"doc,omitempty"`
	Parameters params         `json:"parameters,omitempty"`
	Default    any            `json:"default,omitempty"`
	Field      string         `json:"field,omitempty"`
}

// params are a schema's parameters in the order they were set (Connect
// keeps them in a LinkedHashMap).
type params [][2]string

// MarshalJSON writes the parameters as an object in their order.
func (ps params) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for i, p := range ps {
		if i > 0 {
			b = append(b, ',')
		}
		k, _ := json.Marshal(p[0])
		v, _ := json.Marshal(p[1])
		b = append(append(append(b, k...), ':'), v...)
	}
	return append(b, '}'), nil
}
