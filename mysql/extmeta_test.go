package mysql

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"testing"
)

// TestColumnExtendedMetadata: with MARIADB_CLIENT_EXTENDED_METADATA the
// column definition has one more length-encoded field after org_name,
// the packed type and format names, as MariaDB 10.5+ sends them.
func TestColumnExtendedMetadata(t *testing.T) {
	head := cat(
		[]byte{0x03}, []byte("def"), []byte{0x04}, []byte("test"), []byte{0x01}, []byte("t"),
		[]byte{0x01}, []byte("t"), []byte{0x01}, []byte("g"), []byte{0x01}, []byte("g"),
	)
	fixed := []byte{0x0c, 0x3f, 0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0x90, 0x00, 0x00, 0x00, 0x00}
	point := &Column{Catalog: "def", Schema: "test", Table: "t", OrgTable: "t", Name: "g", OrgName: "g",
		Ext: []byte("\x00\x05point"), Charset: 63, Length: 0xffffffff, Type: TypeGeometry, Flags: FlagBlob | FlagBinary}
	json := *point
	json.Ext, json.Charset, json.Type, json.Flags = []byte("\x01\x04json"), 45, TypeBlob, FlagBlob
	jsonFixed := []byte{0x0c, 0x2d, 0x00, 0xff, 0xff, 0xff, 0xff, 0xfc, 0x10, 0x00, 0x00, 0x00, 0x00}
	none := *point
	none.Ext = []byte{}
	tests := []struct {
		name string
		col  *Column
		wire []byte
		typ  string
		fmt  string
	}{
		{"data type name", point, cat(head, []byte{0x07, 0x00, 0x05}, []byte("point"), fixed), "point", ""},
		{"format name", &json, cat(head, []byte{0x06, 0x01, 0x04}, []byte("json"), jsonFixed), "", "json"},
		{"empty field", &none, cat(head, []byte{0x00}, fixed), "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := AppendColumn(nil, tc.col); !bytes.Equal(got, tc.wire) {
				t.Errorf("AppendColumn = % x\nwant           % x", got, tc.wire)
			}
			got, err := ParseColumnExt(tc.wire, true)
			if err != nil {
				t.Fatalf("ParseColumnExt: %v", err)
			}
			if !reflect.DeepEqual(got, tc.col) {
				t.Errorf("ParseColumnExt = %+v\nwant             %+v", got, tc.col)
			}
			if v := got.ExtValue(ColumnExtType); v != tc.typ {
				t.Errorf("type name %q, want %q", v, tc.typ)
			}
			if v := got.ExtValue(ColumnExtFormat); v != tc.fmt {
				t.Errorf("format name %q, want %q", v, tc.fmt)
			}
			// Read as a packet without the field, it is malformed (the
			// extended field is taken for the fixed-length one).
			if c, err := ParseColumn(tc.wire); err == nil && reflect.DeepEqual(c, tc.col) {
				t.Errorf("ParseColumn read the extended field as a plain definition")
			}
			for i := range tc.wire {
				if _, err := ParseColumnExt(tc.wire[:i], true); err != ErrBadPacket {
					t.Fatalf("ParseColumnExt(%d of %d bytes): %v, want ErrBadPacket", i, len(tc.wire), err)
				}
			}
		})
	}
	plain := *point
	plain.Ext = nil
	if got, err := ParseColumnExt(AppendColumn(nil, &plain), false); err != nil || !reflect.DeepEqual(got, &plain) {
		t.Errorf("without the capability: %+v, %v", got, err)
	}
}

func TestExtendedMetadata(t *testing.T) {
	for _, tc := range []struct {
		typ, format string
		want        []byte
	}{
		{"", "", []byte{}},
		{"point", "", []byte("\x00\x05point")},
		{"", "json", []byte("\x01\x04json")},
		{"inet6", "json", []byte("\x00\x05inet6\x01\x04json")},
	} {
		got := ExtendedMetadata(tc.typ, tc.format)
		if got == nil || !bytes.Equal(got, tc.want) {
			t.Errorf("ExtendedMetadata(%q, %q) = %q, want %q", tc.typ, tc.format, got, tc.want)
		}
		c := &Column{Ext: got}
		if c.ExtValue(ColumnExtType) != tc.typ || c.ExtValue(ColumnExtFormat) != tc.format {
			t.Errorf("ExtValue of %q: %q, %q", got, c.ExtValue(ColumnExtType), c.ExtValue(ColumnExtFormat))
		}
	}
	long := string(bytes.Repeat([]byte("x"), 300))
	if got := ExtendedMetadata(long, ""); len(got) != 252 || got[1] != 250 {
		t.Errorf("a 300-byte name packs to %d bytes, length byte %d; want 252, 250", len(got), got[1])
	}
	if v := (&Column{Ext: []byte("\x00\x09poi")}).ExtValue(ColumnExtType); v != "" {
		t.Errorf("truncated metadata gives %q", v)
	}
}

// TestHandshakeExtCapabilities: MariaDB's extended capabilities travel in
// the last 4 reserved bytes of the greeting and of the response (and of an
// SSLRequest), only without CLIENT_MYSQL (ClientLongPassword).
func TestHandshakeExtCapabilities(t *testing.T) {
	caps := ClientProtocol41 | ClientSecureConnection | ClientPluginAuth
	h := &Handshake{ServerVersion: "5.5.5-10.11.19-MariaDB", Salt: testSalt, Capabilities: caps,
		ExtCapabilities: MariaDBClientExtendedMetadata | 1<<2, Charset: 8, AuthPlugin: AuthNativePassword}
	p := AppendHandshake(nil, h)
	got, err := ParseHandshake(p)
	if err != nil || !reflect.DeepEqual(got, h) {
		t.Fatalf("greeting round trip: %+v, %v", got, err)
	}
	mysqlClient := *h
	mysqlClient.Capabilities |= ClientLongPassword
	if got, err := ParseHandshake(AppendHandshake(nil, &mysqlClient)); err != nil || got.ExtCapabilities != 0 {
		t.Errorf("with CLIENT_MYSQL the greeting carries extended capabilities %#x, %v", got.ExtCapabilities, err)
	}
	// A greeting's reserved bytes from a MySQL server that sets CLIENT_MYSQL
	// are not read as extended capabilities, whatever they hold.
	withJunk := AppendHandshake(nil, &mysqlClient)
	off := len(withJunk) - len("ijklmnopqrst\x00mysql_native_password\x00") - 4
	binary.LittleEndian.PutUint32(withJunk[off:], 0xffffffff)
	if got, err := ParseHandshake(withJunk); err != nil || got.ExtCapabilities != 0 {
		t.Errorf("a MySQL greeting's reserved bytes read as %#x, %v", got.ExtCapabilities, err)
	}

	hr := &HandshakeResponse{Capabilities: caps, ExtCapabilities: MariaDBClientExtendedMetadata, MaxPacket: 1 << 24,
		Charset: 45, User: "u", AuthResponse: []byte{}, AuthPlugin: ""}
	resp := AppendHandshakeResponse(nil, hr)
	if e := binary.LittleEndian.Uint32(resp[28:]); e != MariaDBClientExtendedMetadata {
		t.Errorf("response bytes 28..31 = %#x, want %#x", e, MariaDBClientExtendedMetadata)
	}
	gotR, err := ParseHandshakeResponse(resp)
	if err != nil || gotR.ExtCapabilities != MariaDBClientExtendedMetadata {
		t.Errorf("response round trip: %+v, %v", gotR, err)
	}
	hr.Capabilities |= ClientLongPassword
	if gotR, err := ParseHandshakeResponse(AppendHandshakeResponse(nil, hr)); err != nil || gotR.ExtCapabilities != 0 {
		t.Errorf("with CLIENT_MYSQL the response carries %#x, %v", gotR.ExtCapabilities, err)
	}
	ssl := AppendSSLRequest(nil, caps, MariaDBClientExtendedMetadata, 45)
	if len(ssl) != SSLRequestLen || !IsSSLRequest(ssl) || binary.LittleEndian.Uint32(ssl[28:]) != MariaDBClientExtendedMetadata {
		t.Errorf("SSLRequest % x", ssl)
	}
}
