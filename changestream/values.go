package changestream

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	gmysql "github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	"github.com/shopspring/decimal"
)

// The values of a row image (Change.Before, Change.After) have one Go type
// per kind of column, and one JSON form each (docs/change-streams.md has
// the table):
//
//	NULL                                  nil             null
//	TINYINT ... BIGINT (signed)           int64           number
//	TINYINT ... BIGINT UNSIGNED, BIT(n)   uint64          number
//	YEAR                                  int64           number
//	FLOAT                                 float32         number, shortest form (±FLT_MAX: float64, see kindFloat)
//	DOUBLE                                float64         number, shortest form that reads back the same
//	DECIMAL(p,s)                          Decimal         string with exactly s decimals
//	CHAR, VARCHAR, TEXT (any charset)     string          string, UTF-8, decoded from the column's charset
//	BINARY, VARBINARY, BLOB, GEOMETRY     []byte          string, base64 (standard, padded)
//	ENUM                                  Enum            string: the member (Options.EnumNumbers: its index)
//	SET                                   Set             string: the members, comma-separated (EnumNumbers: the bit mask)
//	DATE, TIME, DATETIME, TIMESTAMP       string          string as MariaDB prints it, TIMESTAMP in UTC
//
// Change.Types names each column's type, so a consumer knows which strings
// are base64.

// Decimal is a DECIMAL value as MariaDB prints it: its digits with the
// column's scale ("-12.3400" for DECIMAL(10,4)). Its JSON form is a string,
// so no JSON reader rounds it to a double.
type Decimal string

// Enum is an ENUM value: the member's text and its index (from 1; 0 is the
// empty error value that non-strict modes store).
type Enum struct {
	Index int64
	Value string
}

// MarshalJSON writes the member's text.
func (e Enum) MarshalJSON() ([]byte, error) { return json.Marshal(e.Value) }

// String is the member's text.
func (e Enum) String() string { return e.Value }

// Set is a SET value: its members as MariaDB prints them (in the column's
// order, comma-separated) and its bit mask (bit i is member i+1).
type Set struct {
	Bits  uint64
	Value string
}

// MarshalJSON writes the members' text.
func (s Set) MarshalJSON() ([]byte, error) { return json.Marshal(s.Value) }

// String is the members' text.
func (s Set) String() string { return s.Value }

// Binary strings (BINARY, VARBINARY, the BLOBs) and GEOMETRY (MariaDB's
// stored form: a 4-byte SRID, then WKB) are []byte; the JSON encoder
// writes them as base64.

// kind is how a column's binary log value becomes an image value.
type kind uint8

const (
	kindAsIs     kind = iota // floats, temporal strings, NULL
	kindInt                  // signed integer: int64
	kindUint                 // unsigned integer: uint64
	kindBit                  // BIT(n): uint64
	kindYear                 // int64
	kindDecimal              // Decimal with the column's scale
	kindText                 // string in the column's charset: decoded to UTF-8
	kindBinary               // []byte (a copy), BINARY(n) padded back to n bytes
	kindEnum                 // Enum
	kindSet                  // Set
	kindGeometry             // []byte (a copy)
	kindFloat                // float32, but float64 at ±FLT_MAX
)

// column is how one column of a table map decodes.
type column struct {
	name    string
	kind    kind
	int24   bool     // MEDIUMINT UNSIGNED: 24 bits
	scale   int32    // DECIMAL
	pad     int      // BINARY(n): n (the binary log drops trailing zero bytes)
	text    *decoder // kindText: the column's charset; nil when UTF-8 already
	members []string // ENUM and SET, in UTF-8
}

// tableCols is a table map's columns, decoded once per table map event.
type tableCols struct {
	tm        *replication.TableMapEvent
	cols      []column
	types     map[string]string // Change.Types, shared by the table's changes
	typesJSON json.RawMessage   // types encoded
	key       []string          // Change.Key: the primary key's columns; nil without one
	list      []Column          // Change.Columns (columns.go), built on first use
}

// columns describes the columns of tm, or says why the binary log cannot
// be read exactly.
func (r *reader) columns(tm *replication.TableMapEvent) (*tableCols, error) {
	if tc := r.tables[tm.TableID]; tc != nil && tc.tm == tm {
		return tc, nil
	}
	names := tm.ColumnNameString()
	if len(names) == 0 {
		return nil, fmt.Errorf("the binary log has no column names for %s.%s: set binlog_row_metadata=FULL", tm.Schema, tm.Table)
	}
	unsigned := tm.UnsignedMap()
	collations := tm.CollationMap()
	setCollations := tm.EnumSetCollationMap()
	enums, sets := tm.EnumStrValueMap(), tm.SetStrValueMap()
	tc := &tableCols{tm: tm, cols: make([]column, len(tm.ColumnType)), types: make(map[string]string, len(names))}
	for i, t := range tm.ColumnType {
		c := column{}
		if i < len(names) {
			c.name = names[i]
		}
		meta := tm.ColumnMeta[i]
		typ := ""
		switch t {
		case gmysql.MYSQL_TYPE_TINY, gmysql.MYSQL_TYPE_SHORT, gmysql.MYSQL_TYPE_INT24, gmysql.MYSQL_TYPE_LONG, gmysql.MYSQL_TYPE_LONGLONG:
			typ = map[byte]string{gmysql.MYSQL_TYPE_TINY: "tinyint", gmysql.MYSQL_TYPE_SHORT: "smallint", gmysql.MYSQL_TYPE_INT24: "mediumint",
				gmysql.MYSQL_TYPE_LONG: "int", gmysql.MYSQL_TYPE_LONGLONG: "bigint"}[t]
			c.kind = kindInt
			if unsigned[i] {
				c.kind, c.int24, typ = kindUint, t == gmysql.MYSQL_TYPE_INT24, typ+" unsigned"
			}
		case gmysql.MYSQL_TYPE_FLOAT:
			c.kind, typ = kindFloat, "float"
		case gmysql.MYSQL_TYPE_DOUBLE:
			typ = "double"
		case gmysql.MYSQL_TYPE_NEWDECIMAL:
			c.kind, c.scale = kindDecimal, int32(meta&0xFF)
			typ = fmt.Sprintf("decimal(%d,%d)", meta>>8, meta&0xFF)
		case gmysql.MYSQL_TYPE_BIT:
			c.kind = kindBit
			typ = fmt.Sprintf("bit(%d)", (meta>>8)*8+meta&0xFF)
		case gmysql.MYSQL_TYPE_YEAR:
			c.kind, typ = kindYear, "year"
		case gmysql.MYSQL_TYPE_DATE, gmysql.MYSQL_TYPE_NEWDATE:
			typ = "date"
		case gmysql.MYSQL_TYPE_TIME, gmysql.MYSQL_TYPE_TIME2:
			typ = fsp("time", t == gmysql.MYSQL_TYPE_TIME2, meta)
		case gmysql.MYSQL_TYPE_DATETIME, gmysql.MYSQL_TYPE_DATETIME2:
			typ = fsp("datetime", t == gmysql.MYSQL_TYPE_DATETIME2, meta)
		case gmysql.MYSQL_TYPE_TIMESTAMP, gmysql.MYSQL_TYPE_TIMESTAMP2:
			typ = fsp("timestamp", t == gmysql.MYSQL_TYPE_TIMESTAMP2, meta)
		case gmysql.MYSQL_TYPE_GEOMETRY:
			c.kind, typ = kindGeometry, "geometry"
		case gmysql.MYSQL_TYPE_STRING, gmysql.MYSQL_TYPE_VARCHAR, gmysql.MYSQL_TYPE_VAR_STRING, gmysql.MYSQL_TYPE_BLOB:
			var err error
			if typ, err = r.stringColumn(&c, tm, i, collations, setCollations, enums, sets); err != nil {
				return nil, fmt.Errorf("%s.%s column %s: %w", tm.Schema, tm.Table, c.name, err)
			}
		default:
			typ = fmt.Sprintf("type %d", t)
		}
		tc.cols[i] = c
		if c.name != "" {
			tc.types[c.name] = typ
		}
	}
	// The primary key's columns by index (a prefix key, PRIMARY KEY
	// (c(10)), names its whole column: the key's prefix length is the
	// table's business, not the row's).
	for _, i := range tm.PrimaryKey {
		if i >= uint64(len(names)) {
			return nil, fmt.Errorf("%s.%s: the table map's primary key names column %d of %d", tm.Schema, tm.Table, i, len(names))
		}
		tc.key = append(tc.key, names[i])
	}
	var err error
	if tc.typesJSON, err = json.Marshal(tc.types); err != nil {
		return nil, err
	}
	if r.tables == nil {
		r.tables = map[uint64]*tableCols{}
	}
	r.tables[tm.TableID] = tc
	return tc, nil
}

// fsp names a temporal type with its fractional digits.
func fsp(name string, v2 bool, meta uint16) string {
	if !v2 || meta == 0 {
		return name
	}
	return name + "(" + strconv.Itoa(int(meta)) + ")"
}

// stringColumn fills c for a column the binary log stores as a string
// (CHAR, VARCHAR, the TEXTs and BLOBs, BINARY, VARBINARY, ENUM, SET) and
// returns its type name.
func (r *reader) stringColumn(c *column, tm *replication.TableMapEvent, i int, collations, setCollations map[int]uint64, enums, sets map[int][]string) (string, error) {
	t, meta := tm.ColumnType[i], tm.ColumnMeta[i]
	if t == gmysql.MYSQL_TYPE_STRING && meta >= 256 {
		switch real := byte(meta >> 8); real {
		case gmysql.MYSQL_TYPE_ENUM, gmysql.MYSQL_TYPE_SET:
			c.kind, c.members = kindEnum, enums[i]
			name := "enum"
			if real == gmysql.MYSQL_TYPE_SET {
				c.kind, c.members, name = kindSet, sets[i], "set"
			}
			if c.members == nil {
				return "", fmt.Errorf("the binary log has no %s members: set binlog_row_metadata=FULL", name)
			}
			if coll, ok := setCollations[i]; ok {
				d, err := r.decoderFor(coll)
				if err != nil {
					return "", err
				}
				if d != nil {
					m := make([]string, len(c.members))
					for j, s := range c.members {
						m[j] = d.decode([]byte(s))
					}
					c.members = m
				}
			}
			return name, nil
		}
	}
	coll, ok := collations[i]
	if !ok {
		return "", fmt.Errorf("the binary log has no character set: set binlog_row_metadata=FULL")
	}
	cs, err := r.charsetOf(coll)
	if err != nil {
		return "", err
	}
	binary := cs == "binary"
	var name string
	switch t {
	case gmysql.MYSQL_TYPE_BLOB:
		size := map[uint16]string{1: "tiny", 2: "", 3: "medium", 4: "long"}[meta]
		name = size + "text"
		if binary {
			name = size + "blob"
		}
	case gmysql.MYSQL_TYPE_STRING:
		name = "char"
		if binary {
			// The length in bytes, as the value decoder reads it.
			n := int(meta & 0xFF)
			if meta >= 256 {
				if b0 := byte(meta >> 8); b0&0x30 != 0x30 {
					n = int(uint16(meta&0xFF) | uint16((b0&0x30)^0x30)<<4)
				}
			}
			c.pad = n
			name = "binary(" + strconv.Itoa(n) + ")"
		}
	default:
		name = "varchar"
		if binary {
			name = "varbinary"
		}
	}
	if binary {
		c.kind = kindBinary
		return name, nil
	}
	c.kind = kindText
	if !r.raw {
		if c.text, err = r.decoder(cs); err != nil {
			return "", err
		}
	}
	if cs != "utf8mb4" && cs != "utf8mb3" {
		name += " " + cs
	}
	return name, nil
}

// value turns a binary log value of column c into its image value.
func (c *column) value(v any) any {
	if v == nil {
		return nil
	}
	switch c.kind {
	case kindInt:
		switch x := v.(type) {
		case int8:
			return int64(x)
		case int16:
			return int64(x)
		case int32:
			return int64(x)
		case int64:
			return x
		}
	case kindUint:
		switch x := v.(type) {
		case int8:
			return uint64(uint8(x))
		case int16:
			return uint64(uint16(x))
		case int32:
			if c.int24 {
				return uint64(uint32(x) & 0xFFFFFF)
			}
			return uint64(uint32(x))
		case int64:
			return uint64(x)
		}
	case kindFloat:
		// The shortest form of ±FLT_MAX (3.4028235e+38) is above it as a
		// double, which MariaDB refuses as out of range: it goes as the
		// float64 of the same value.
		if x, ok := v.(float32); ok && (x == math.MaxFloat32 || x == -math.MaxFloat32) {
			return float64(x)
		}
	case kindBit:
		if x, ok := v.(int64); ok {
			return uint64(x)
		}
	case kindYear:
		if x, ok := v.(int); ok {
			return int64(x)
		}
	case kindDecimal:
		switch x := v.(type) {
		case decimal.Decimal:
			return Decimal(x.StringFixed(c.scale))
		case string:
			return Decimal(x)
		}
	case kindText:
		b := bytesOf(v)
		if c.text != nil {
			return c.text.decode(b)
		}
		return string(b)
	case kindBinary:
		b := bytesOf(v)
		out := make([]byte, max(len(b), c.pad))
		copy(out, b)
		return out
	case kindGeometry:
		return append([]byte{}, bytesOf(v)...)
	case kindEnum:
		if x, ok := v.(int64); ok {
			e := Enum{Index: x}
			if x > 0 && int(x) <= len(c.members) {
				e.Value = c.members[x-1]
			}
			return e
		}
	case kindSet:
		if x, ok := v.(int64); ok {
			s := Set{Bits: uint64(x)}
			var b strings.Builder
			for j, m := range c.members {
				if j < 64 && s.Bits&(1<<j) != 0 {
					if b.Len() > 0 {
						b.WriteByte(',')
					}
					b.WriteString(m)
				}
			}
			s.Value = b.String()
			return s
		}
	}
	return v
}

// bytesOf is a string value's bytes; go-mysql gives strings for CHAR and
// VARCHAR, []byte for the BLOB types.
func bytesOf(v any) []byte {
	switch x := v.(type) {
	case []byte:
		return x
	case string:
		return []byte(x)
	}
	return []byte(fmt.Sprint(v))
}

// numeric replaces the Enum and Set values of img by their index and bit
// mask (Options.EnumNumbers); img is shared, so a changed copy is returned.
func numeric(img map[string]any) map[string]any {
	var out map[string]any
	for k, v := range img {
		var n any
		switch x := v.(type) {
		case Enum:
			n = x.Index
		case Set:
			n = x.Bits
		default:
			continue
		}
		if out == nil {
			out = make(map[string]any, len(img))
			for k2, v2 := range img {
				out[k2] = v2
			}
		}
		out[k] = n
	}
	if out == nil {
		return img
	}
	return out
}
