package mysql

import (
	"encoding/binary"
)

// OK is a decoded OK packet (or the OK that replaces EOF under
// CLIENT_DEPRECATE_EOF).
type OK struct {
	AffectedRows uint64
	LastInsertID uint64
	Status       uint16
	Warnings     uint16
	Info         string
}

// AppendOK appends an OK packet payload. header is OKHeader, or EOFHeader
// for the OK that ends a result set under CLIENT_DEPRECATE_EOF.
func AppendOK(b []byte, header byte, ok OK) []byte {
	b = append(b, header)
	b = AppendLenEncInt(b, ok.AffectedRows)
	b = AppendLenEncInt(b, ok.LastInsertID)
	b = binary.LittleEndian.AppendUint16(b, ok.Status)
	b = binary.LittleEndian.AppendUint16(b, ok.Warnings)
	if ok.Info != "" {
		// Length-encoded, as MariaDB and MySQL write it with or without
		// CLIENT_SESSION_TRACK (the protocol documentation's string<EOF>
		// is not what servers send, nor what libmysqlclient reads).
		b = AppendLenEncString(b, ok.Info)
	}
	return b
}

// ParseOK decodes an OK packet payload (header 0x00 or 0xfe) sent without
// CLIENT_SESSION_TRACK (CLIENT_PROTOCOL_41). The info string is read as
// servers write it, length-encoded; a packet whose rest is not one
// length-encoded string is read the documented way, as string<EOF>.
func ParseOK(p []byte) (OK, error) {
	ok, r, err := parseOKHead(p)
	if err != nil {
		return OK{}, err
	}
	rest := r.rest()
	if info := r.lenEncBytes(); r.ok() && !r.more() {
		ok.Info = string(info)
	} else {
		ok.Info = string(rest)
	}
	return ok, nil
}

// parseOKHead decodes an OK packet's header, integers, status and
// warnings, and returns a reader positioned at what follows (the info
// string, and the session state with CLIENT_SESSION_TRACK).
func parseOKHead(p []byte) (OK, reader, error) {
	r := reader{b: p}
	h := r.byte1()
	if h != OKHeader && h != EOFHeader {
		return OK{}, r, ErrBadPacket
	}
	var ok OK
	ok.AffectedRows = r.lenEncInt()
	ok.LastInsertID = r.lenEncInt()
	ok.Status = r.uint16()
	ok.Warnings = r.uint16()
	if !r.ok() {
		return OK{}, r, ErrBadPacket
	}
	return ok, r, nil
}

// AppendEOF appends a classic EOF packet payload.
func AppendEOF(b []byte, warnings, status uint16) []byte {
	b = append(b, EOFHeader)
	b = binary.LittleEndian.AppendUint16(b, warnings)
	return binary.LittleEndian.AppendUint16(b, status)
}

// IsEOF reports whether payload p is an EOF packet or the OK packet that
// ends a result set under CLIENT_DEPRECATE_EOF (header 0xfe and shorter
// than a maximal packet, which would be a row starting with an 8-byte
// length).
func IsEOF(p []byte) bool { return len(p) > 0 && p[0] == EOFHeader && len(p) < MaxPacketPayload }

// ResultStatus returns the server status flags of an EOF packet or of an
// OK packet (either header); ok is false when p is neither.
func ResultStatus(p []byte) (status uint16, ok bool) {
	status, _, _, ok = ResultInfo(p)
	return status, ok
}

// ResultInfo returns the status flags, warning count and last insert id of
// an EOF or OK packet (either header); ok is false when p is neither.
func ResultInfo(p []byte) (status, warnings uint16, insertID uint64, ok bool) {
	if len(p) == 0 {
		return 0, 0, 0, false
	}
	switch {
	case p[0] == EOFHeader && len(p) == 5: // classic EOF: warnings, status
		return binary.LittleEndian.Uint16(p[3:5]), binary.LittleEndian.Uint16(p[1:3]), 0, true
	case p[0] == EOFHeader && len(p) < 5:
		return 0, 0, 0, true // pre-4.1 EOF without status
	case p[0] == OKHeader || (p[0] == EOFHeader && len(p) < MaxPacketPayload):
		r := reader{b: p, pos: 1}
		r.lenEncInt()
		id := r.lenEncInt()
		s := r.uint16()
		w := r.uint16()
		return s, w, id, r.ok()
	}
	return 0, 0, 0, false
}

// AppendErr appends an ERR packet payload (CLIENT_PROTOCOL_41 form).
func AppendErr(b []byte, e *SQLError) []byte {
	b = append(b, ErrHeader)
	b = binary.LittleEndian.AppendUint16(b, e.Code)
	b = append(b, '#')
	st := e.State
	if len(st) != 5 {
		st = "HY000"
	}
	b = append(b, st...)
	return append(b, e.Message...)
}

// ParseErr decodes an ERR packet payload.
func ParseErr(p []byte) *SQLError {
	r := reader{b: p}
	if r.byte1() != ErrHeader {
		return ErrBadPacket
	}
	code := r.uint16()
	if !r.ok() {
		return ErrBadPacket
	}
	e := &SQLError{Code: code, State: "HY000"}
	rest := r.rest()
	if len(rest) >= 6 && rest[0] == '#' {
		e.State = string(rest[1:6])
		rest = rest[6:]
	}
	e.Message = string(rest)
	return e
}

// Column is a column definition (Protocol::ColumnDefinition41).
type Column struct {
	Catalog  string
	Schema   string
	Table    string
	OrgTable string
	Name     string
	OrgName  string
	// Ext is MariaDB's packed extended metadata (ExtendedMetadata): in the
	// packet, after OrgName, only on connections with
	// MariaDBClientExtendedMetadata; nil when the packet has no such field,
	// empty when the field is there and says nothing.
	Ext          []byte
	Charset      uint16
	Length       uint32
	Type         byte
	Flags        uint16
	Decimals     byte
	DefaultValue []byte // only in COM_FIELD_LIST replies
}

// AppendColumn appends a column definition payload, with the extended
// metadata field when c.Ext is not nil.
func AppendColumn(b []byte, c *Column) []byte {
	cat := c.Catalog
	if cat == "" {
		cat = "def"
	}
	b = AppendLenEncString(b, cat)
	b = AppendLenEncString(b, c.Schema)
	b = AppendLenEncString(b, c.Table)
	b = AppendLenEncString(b, c.OrgTable)
	b = AppendLenEncString(b, c.Name)
	b = AppendLenEncString(b, c.OrgName)
	if c.Ext != nil {
		b = AppendLenEncBytes(b, c.Ext)
	}
	b = append(b, 0x0c)
	b = binary.LittleEndian.AppendUint16(b, c.Charset)
	b = binary.LittleEndian.AppendUint32(b, c.Length)
	b = append(b, c.Type)
	b = binary.LittleEndian.AppendUint16(b, c.Flags)
	b = append(b, c.Decimals, 0, 0)
	if c.DefaultValue != nil {
		b = AppendLenEncBytes(b, c.DefaultValue)
	}
	return b
}

// ParseColumn decodes a column definition payload of a connection without
// MariaDBClientExtendedMetadata.
func ParseColumn(p []byte) (*Column, error) { return ParseColumnExt(p, false) }

// ParseColumnExt decodes a column definition payload; ext says the
// connection has MariaDBClientExtendedMetadata (the packet then has the
// extended metadata field, copied to Ext).
func ParseColumnExt(p []byte, ext bool) (*Column, error) {
	r := reader{b: p}
	c := &Column{}
	c.Catalog = string(r.lenEncBytes())
	c.Schema = string(r.lenEncBytes())
	c.Table = string(r.lenEncBytes())
	c.OrgTable = string(r.lenEncBytes())
	c.Name = string(r.lenEncBytes())
	c.OrgName = string(r.lenEncBytes())
	if ext {
		c.Ext = append([]byte{}, r.lenEncBytes()...)
	}
	if n := r.lenEncInt(); r.ok() && n < 0x0c {
		return nil, ErrBadPacket
	}
	c.Charset = r.uint16()
	c.Length = r.uint32()
	c.Type = r.byte1()
	c.Flags = r.uint16()
	c.Decimals = r.byte1()
	r.bytes(2)
	if !r.ok() {
		return nil, ErrBadPacket
	}
	if r.more() {
		c.DefaultValue = r.lenEncBytes()
		if !r.ok() {
			return nil, ErrBadPacket
		}
	}
	return c, nil
}

// ExtendedMetadata packs a column's extended metadata as MariaDB does: for
// each kind with a value, its kind byte (ColumnExtType, ColumnExtFormat),
// a length byte and the value. Values of 251 bytes or more are cut there
// (the server's are type and format names). Never nil.
func ExtendedMetadata(typeName, format string) []byte {
	b := []byte{}
	for _, kv := range [...]struct {
		kind byte
		v    string
	}{{ColumnExtType, typeName}, {ColumnExtFormat, format}} {
		if kv.v == "" {
			continue
		}
		v := kv.v[:min(len(kv.v), 250)]
		b = append(append(b, kv.kind, byte(len(v))), v...)
	}
	return b
}

// ExtValue returns the value of one kind of c's extended metadata, "" when
// it has none.
func (c *Column) ExtValue(kind byte) string {
	for b := c.Ext; len(b) >= 2; {
		n := int(b[1])
		if len(b) < 2+n {
			return ""
		}
		if b[0] == kind {
			return string(b[2 : 2+n])
		}
		b = b[2+n:]
	}
	return ""
}

// AppendTextRow appends a text-protocol row; a nil element is SQL NULL.
func AppendTextRow(b []byte, values [][]byte) []byte {
	for _, v := range values {
		if v == nil {
			b = append(b, 0xfb)
			continue
		}
		b = AppendLenEncBytes(b, v)
	}
	return b
}

// ParseTextRow splits a text-protocol row into n values (nil for NULL),
// aliasing p.
func ParseTextRow(p []byte, n int, dst [][]byte) ([][]byte, error) {
	dst = dst[:0]
	for i := 0; i < n; i++ {
		v, isNull, k := ReadLenEncBytes(p)
		if k == 0 {
			return nil, ErrBadPacket
		}
		if isNull {
			v = nil
		} else if v == nil {
			v = []byte{}
		}
		dst = append(dst, v)
		p = p[k:]
	}
	if len(p) != 0 {
		return nil, ErrBadPacket
	}
	return dst, nil
}

// RenameColumnTables rewrites the table and org_table fields of column
// definition packet p (Protocol::ColumnDefinition41) that rename maps to
// another name, appending the new packet to dst. ok is false when neither
// field changes or p is malformed: p is then to be sent as it is.
func RenameColumnTables(dst, p []byte, rename func(name []byte) (string, bool)) (out []byte, ok bool) {
	off := 0
	skip := func() (field []byte, good bool) {
		l, null, n := ReadLenEncInt(p[off:])
		if n == 0 || null || l > uint64(len(p)-off-n) {
			return nil, false
		}
		field = p[off+n : off+n+int(l)]
		off += n + int(l)
		return field, true
	}
	for range 2 { // catalog, schema
		if _, good := skip(); !good {
			return nil, false
		}
	}
	start := off
	table, good := skip()
	if !good {
		return nil, false
	}
	orgTable, good := skip()
	if !good {
		return nil, false
	}
	t, tOK := rename(table)
	o, oOK := rename(orgTable)
	if !tOK && !oOK {
		return nil, false
	}
	if !tOK {
		t = string(table)
	}
	if !oOK {
		o = string(orgTable)
	}
	dst = append(dst, p[:start]...)
	dst = AppendLenEncString(dst, t)
	dst = AppendLenEncString(dst, o)
	return append(dst, p[off:]...), true
}
