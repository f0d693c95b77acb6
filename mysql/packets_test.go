package mysql

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

var okCases = []struct {
	name   string
	header byte
	ok     OK
	wire   []byte
}{
	{
		name:   "empty OK",
		header: OKHeader,
		ok:     OK{Status: StatusAutocommit},
		wire:   []byte{0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00},
	},
	{
		name:   "UPDATE with info and wide integers",
		header: OKHeader,
		ok: OK{
			AffectedRows: 300,
			LastInsertID: 1 << 24,
			Status:       StatusAutocommit | StatusInTrans,
			Warnings:     1,
			Info:         "Rows matched: 1  Changed: 1  Warnings: 1",
		},
		wire: cat(
			[]byte{0x00},
			[]byte{0xfc, 0x2c, 0x01},
			[]byte{0xfe, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00},
			[]byte{0x03, 0x00},
			[]byte{0x01, 0x00},
			// Length-encoded, as MariaDB sends it to a client without
			// CLIENT_SESSION_TRACK (seen in TestProtocolParity's traces).
			[]byte{40},
			[]byte("Rows matched: 1  Changed: 1  Warnings: 1"),
		),
	},
	{
		name:   "OK that ends a result set under CLIENT_DEPRECATE_EOF",
		header: EOFHeader,
		ok:     OK{Status: StatusAutocommit | StatusNoIndexUsed, Warnings: 2},
		wire:   []byte{0xfe, 0x00, 0x00, 0x22, 0x00, 0x02, 0x00},
	},
	{
		name:   "INSERT id at the 1-byte limit",
		header: OKHeader,
		ok:     OK{AffectedRows: 250, LastInsertID: 251, Status: 0xffff, Warnings: 0xffff, Info: "x"},
		wire:   []byte{0x00, 0xfa, 0xfc, 0xfb, 0x00, 0xff, 0xff, 0xff, 0xff, 1, 'x'},
	},
}

func TestOK(t *testing.T) {
	for _, tc := range okCases {
		t.Run(tc.name, func(t *testing.T) {
			if got := AppendOK(nil, tc.header, tc.ok); !bytes.Equal(got, tc.wire) {
				t.Errorf("AppendOK = % x\nwant       % x", got, tc.wire)
			}
			got, err := ParseOK(tc.wire)
			if err != nil {
				t.Fatalf("ParseOK: %v", err)
			}
			if got != tc.ok {
				t.Errorf("ParseOK = %+v, want %+v", got, tc.ok)
			}
		})
	}
}

func TestParseOKMalformed(t *testing.T) {
	full := okCases[1].wire
	fixed := len(full) - len(okCases[1].ok.Info) - 1 // header, two integers, status, warnings
	for i := 0; i < fixed; i++ {
		if ok, err := ParseOK(full[:i]); err != ErrBadPacket || ok != (OK{}) {
			t.Errorf("ParseOK(% x) = %+v, %v; want ErrBadPacket", full[:i], ok, err)
		}
	}
	if _, err := ParseOK(full[:fixed]); err != nil {
		t.Errorf("ParseOK without info: %v", err)
	}
	// An info string written the documented way (string<EOF>) is read as
	// such.
	if ok, err := ParseOK(append(full[:fixed:fixed], "Records: 1"...)); err != nil || ok.Info != "Records: 1" {
		t.Errorf("ParseOK with string<EOF> info: %+v, %v", ok, err)
	}
	for _, p := range [][]byte{
		{0xff, 0x15, 0x04, '#', '2', '8', '0', '0', '0'}, // ERR
		{0x01, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00},       // column count
		{0x00, 0xff, 0x00, 0x02, 0x00, 0x00, 0x00},       // 0xff is no integer
		{0x00, 0xfb, 0x00, 0x02, 0x00, 0x00},             // NULL marker, then short
	} {
		if _, err := ParseOK(p); err != ErrBadPacket {
			t.Errorf("ParseOK(% x) error = %v, want ErrBadPacket", p, err)
		}
	}
}

func TestErr(t *testing.T) {
	tests := []struct {
		name string
		err  *SQLError
		wire []byte
		want *SQLError // parsed back; nil means err itself
	}{
		{
			name: "with SQLSTATE",
			err:  &SQLError{Code: 1064, State: "42000", Message: "You have an error in your SQL syntax"},
			wire: cat([]byte{0xff, 0x28, 0x04, '#'}, []byte("42000"), []byte("You have an error in your SQL syntax")),
		},
		{
			name: "missing state becomes HY000",
			err:  &SQLError{Code: ErUnknownError, Message: "boom"},
			wire: cat([]byte{0xff, 0x51, 0x04, '#'}, []byte("HY000"), []byte("boom")),
			want: &SQLError{Code: ErUnknownError, State: "HY000", Message: "boom"},
		},
		{
			name: "empty message",
			err:  &SQLError{Code: 0xffff, State: "08S01"},
			wire: []byte{0xff, 0xff, 0xff, '#', '0', '8', 'S', '0', '1'},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := AppendErr(nil, tc.err); !bytes.Equal(got, tc.wire) {
				t.Errorf("AppendErr = % x\nwant        % x", got, tc.wire)
			}
			want := tc.want
			if want == nil {
				want = tc.err
			}
			if got := ParseErr(tc.wire); *got != *want {
				t.Errorf("ParseErr = %+v, want %+v", *got, *want)
			}
		})
	}
}

func TestParseErrWithoutSQLState(t *testing.T) {
	tests := []struct {
		wire []byte
		want SQLError
	}{
		// Pre-4.1 form, also what servers send before the handshake
		// completes (e.g. "Host is not allowed to connect").
		{cat([]byte{0xff, 0x6a, 0x04}, []byte("Host 'app-host' is not allowed")), SQLError{Code: 1130, State: "HY000", Message: "Host 'app-host' is not allowed"}},
		{[]byte{0xff, 0x15, 0x04}, SQLError{Code: 1045, State: "HY000"}},
		// Too short to hold a state: the '#' is message text.
		{[]byte{0xff, 0x15, 0x04, '#', '2', '8'}, SQLError{Code: 1045, State: "HY000", Message: "#28"}},
	}
	for _, tc := range tests {
		if got := ParseErr(tc.wire); *got != tc.want {
			t.Errorf("ParseErr(% x) = %+v, want %+v", tc.wire, *got, tc.want)
		}
	}
	for _, p := range [][]byte{nil, {0xff}, {0xff, 0x15}, {0x00, 0x15, 0x04}} {
		if got := ParseErr(p); got != ErrBadPacket {
			t.Errorf("ParseErr(% x) = %v, want ErrBadPacket", p, got)
		}
	}
}

func TestEOF(t *testing.T) {
	want := []byte{0xfe, 0x01, 0x00, 0x22, 0x00}
	if got := AppendEOF(nil, 1, StatusAutocommit|StatusNoIndexUsed); !bytes.Equal(got, want) {
		t.Errorf("AppendEOF = % x, want % x", got, want)
	}
}

// bigRow is a text row whose first column is longer than 16 MiB: its
// length-encoded length starts with 0xfe, like an EOF packet. Only the first
// physical packet (MaxPacketPayload bytes) is built.
func bigRow() []byte {
	p := make([]byte, MaxPacketPayload)
	copy(p, []byte{0xfe, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00}) // 16 MiB column
	return p
}

func TestResultInfo(t *testing.T) {
	tests := []struct {
		name     string
		p        []byte
		isEOF    bool
		status   uint16
		warnings uint16
		insertID uint64
		ok       bool
	}{
		{"classic EOF", []byte{0xfe, 0x03, 0x00, 0x22, 0x00}, true, 0x0022, 3, 0, true},
		{"classic EOF with more results", AppendEOF(nil, 0, StatusMoreResultsExists|StatusAutocommit), true, 0x000a, 0, 0, true},
		{"pre-4.1 EOF", []byte{0xfe}, true, 0, 0, 0, true},
		{"OK as EOF", []byte{0xfe, 0x00, 0x00, 0x02, 0x40, 0x04, 0x00}, true, 0x4002, 4, 0, true},
		{"OK as EOF with info", AppendOK(nil, EOFHeader, OK{Status: 2, Warnings: 1, Info: "some info"}), true, 2, 1, 0, true},
		{"OK", []byte{0x00, 0x01, 0xfc, 0x00, 0x01, 0x03, 0x00, 0x07, 0x00}, false, 3, 7, 256, true},
		{"OK with info", AppendOK(nil, OKHeader, OK{AffectedRows: 1, LastInsertID: 42, Status: 2, Info: "Records: 1"}), false, 2, 0, 42, true},
		{"truncated OK", []byte{0x00, 0x01, 0x00, 0x02}, false, 0, 0, 0, false},
		{"truncated OK as EOF", []byte{0xfe, 0x00, 0x00, 0x02, 0x00, 0x00}, true, 0, 0, 0, false},
		{"ERR", []byte{0xff, 0x15, 0x04, '#', '2', '8', '0', '0', '0'}, false, 0, 0, 0, false},
		{"row", []byte{0x01, '1'}, false, 0, 0, 0, false},
		{"empty", nil, false, 0, 0, 0, false},
		{"0xfe row of MaxPacketPayload bytes", bigRow(), false, 0, 0, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsEOF(tc.p); got != tc.isEOF {
				t.Errorf("IsEOF = %v, want %v", got, tc.isEOF)
			}
			status, warnings, insertID, ok := ResultInfo(tc.p)
			if ok != tc.ok {
				t.Fatalf("ResultInfo ok = %v, want %v", ok, tc.ok)
			}
			if ok && (status != tc.status || warnings != tc.warnings || insertID != tc.insertID) {
				t.Errorf("ResultInfo = status %#x, warnings %d, insert id %d; want %#x, %d, %d",
					status, warnings, insertID, tc.status, tc.warnings, tc.insertID)
			}
			st, ok := ResultStatus(tc.p)
			if ok != tc.ok || (ok && st != tc.status) {
				t.Errorf("ResultStatus = %#x, %v; want %#x, %v", st, ok, tc.status, tc.ok)
			}
		})
	}
}

func TestColumn(t *testing.T) {
	id := &Column{
		Catalog:  "def",
		Schema:   "shop",
		Table:    "o",
		OrgTable: "orders_0003",
		Name:     "id",
		OrgName:  "order_id",
		Charset:  63,
		Length:   20,
		Type:     TypeLongLong,
		Flags:    FlagNotNull | FlagPriKey | FlagUnsigned | FlagAutoIncrement | FlagNum,
		Decimals: 0,
	}
	idWire := cat(
		[]byte{0x03}, []byte("def"),
		[]byte{0x04}, []byte("shop"),
		[]byte{0x01}, []byte("o"),
		[]byte{0x0b}, []byte("orders_0003"),
		[]byte{0x02}, []byte("id"),
		[]byte{0x08}, []byte("order_id"),
		[]byte{0x0c},          // length of the fixed fields
		[]byte{0x3f, 0x00},    // charset 63 (binary)
		[]byte{0x14, 0, 0, 0}, // column length 20
		[]byte{0x08},          // MYSQL_TYPE_LONGLONG
		[]byte{0x23, 0x82},    // flags
		[]byte{0x00},          // decimals
		[]byte{0x00, 0x00},    // filler
	)
	withDefault := *id
	withDefault.Name, withDefault.OrgName = "price", "price"
	withDefault.Type, withDefault.Decimals, withDefault.Flags = TypeNewDecimal, 2, FlagNotNull
	withDefault.DefaultValue = []byte("0.00")
	emptyDefault := withDefault
	emptyDefault.DefaultValue = []byte{}

	tests := []struct {
		name string
		col  *Column
		wire []byte
		want *Column // parsed back; nil means col itself
	}{
		{"column", id, idWire, nil},
		{
			name: "COM_FIELD_LIST default value",
			col:  &withDefault,
			wire: cat(
				[]byte{0x03}, []byte("def"), []byte{0x04}, []byte("shop"), []byte{0x01}, []byte("o"),
				[]byte{0x0b}, []byte("orders_0003"), []byte{0x05}, []byte("price"), []byte{0x05}, []byte("price"),
				[]byte{0x0c, 0x3f, 0x00, 0x14, 0, 0, 0, 0xf6, 0x01, 0x00, 0x02, 0x00, 0x00},
				[]byte{0x04}, []byte("0.00"),
			),
		},
		{
			name: "empty default value",
			col:  &emptyDefault,
			wire: cat(
				[]byte{0x03}, []byte("def"), []byte{0x04}, []byte("shop"), []byte{0x01}, []byte("o"),
				[]byte{0x0b}, []byte("orders_0003"), []byte{0x05}, []byte("price"), []byte{0x05}, []byte("price"),
				[]byte{0x0c, 0x3f, 0x00, 0x14, 0, 0, 0, 0xf6, 0x01, 0x00, 0x02, 0x00, 0x00},
				[]byte{0x00},
			),
		},
		{
			name: "empty catalog is written as def",
			col:  &Column{Name: "1", Type: TypeLongLong, Charset: 63, Length: 1},
			wire: cat(
				[]byte{0x03}, []byte("def"), []byte{0, 0, 0, 0x01, '1', 0},
				[]byte{0x0c, 0x3f, 0x00, 0x01, 0, 0, 0, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00},
			),
			want: &Column{Catalog: "def", Name: "1", Type: TypeLongLong, Charset: 63, Length: 1},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := AppendColumn(nil, tc.col); !bytes.Equal(got, tc.wire) {
				t.Errorf("AppendColumn = % x\nwant           % x", got, tc.wire)
			}
			want := tc.want
			if want == nil {
				want = tc.col
			}
			got, err := ParseColumn(tc.wire)
			if err != nil {
				t.Fatalf("ParseColumn: %v", err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("ParseColumn = %+v\nwant          %+v", got, want)
			}
		})
	}
}

func TestParseColumnMalformed(t *testing.T) {
	wire := AppendColumn(nil, &Column{Schema: "s", Table: "t", Name: "c", Type: TypeVarString, Charset: 45, Length: 1020})
	for i := 0; i < len(wire); i++ {
		if c, err := ParseColumn(wire[:i]); err != ErrBadPacket || c != nil {
			t.Errorf("ParseColumn(%d of %d bytes) = %+v, %v; want ErrBadPacket", i, len(wire), c, err)
		}
	}
	short := bytes.Clone(wire)
	short[len(short)-13] = 0x0b // fixed-length field says 11
	if _, err := ParseColumn(short); err != ErrBadPacket {
		t.Errorf("ParseColumn with fixed length 0x0b: %v, want ErrBadPacket", err)
	}
	badDefault := append(bytes.Clone(wire), 0x05, 'a')
	if _, err := ParseColumn(badDefault); err != ErrBadPacket {
		t.Errorf("ParseColumn with truncated default: %v, want ErrBadPacket", err)
	}
}

func TestTextRow(t *testing.T) {
	long := bytes.Repeat([]byte("v"), 251)
	tests := []struct {
		name   string
		values [][]byte
		wire   []byte
	}{
		{"no columns", [][]byte{}, nil},
		{"values, NULL and empty", [][]byte{[]byte("1"), nil, {}, []byte("abc")}, []byte{0x01, '1', 0xfb, 0x00, 0x03, 'a', 'b', 'c'}},
		{"all NULL", [][]byte{nil, nil}, []byte{0xfb, 0xfb}},
		{"all empty", [][]byte{{}, {}}, []byte{0x00, 0x00}},
		{"value of 251 bytes", [][]byte{long, nil}, cat([]byte{0xfc, 0xfb, 0x00}, long, []byte{0xfb})},
		{"value that looks like NULL", [][]byte{{0xfb}}, []byte{0x01, 0xfb}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := AppendTextRow(nil, tc.values); !bytes.Equal(got, tc.wire) {
				t.Errorf("AppendTextRow = % x, want % x", got, tc.wire)
			}
			dst := make([][]byte, 0, 1)
			got, err := ParseTextRow(tc.wire, len(tc.values), dst)
			if err != nil {
				t.Fatalf("ParseTextRow: %v", err)
			}
			if len(got) != len(tc.values) {
				t.Fatalf("ParseTextRow returned %d values, want %d", len(got), len(tc.values))
			}
			for i, v := range got {
				if (v == nil) != (tc.values[i] == nil) || !bytes.Equal(v, tc.values[i]) {
					t.Errorf("value %d = %#v, want %#v", i, v, tc.values[i])
				}
			}
		})
	}
}

func TestParseTextRowMalformed(t *testing.T) {
	wire := []byte{0x01, '1', 0xfb, 0x03, 'a', 'b', 'c'}
	tests := []struct {
		name string
		p    []byte
		n    int
	}{
		{"too few columns in packet", wire, 4},
		{"trailing bytes", wire, 2},
		{"truncated value", wire[:len(wire)-1], 3},
		{"bad length byte", []byte{0xff, 0x00}, 1},
	}
	for _, tc := range tests {
		if got, err := ParseTextRow(tc.p, tc.n, nil); err != ErrBadPacket || got != nil {
			t.Errorf("%s: ParseTextRow = %q, %v; want ErrBadPacket", tc.name, got, err)
		}
	}
}

func BenchmarkParseOK(b *testing.B) {
	p := AppendOK(nil, OKHeader, OK{AffectedRows: 3, LastInsertID: 1000, Status: StatusAutocommit, Info: strings.Repeat("i", 20)})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseOK(p); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkResultInfo(b *testing.B) {
	for _, bc := range []struct {
		name string
		p    []byte
	}{
		{"EOF", AppendEOF(nil, 0, StatusAutocommit)},
		{"OK", AppendOK(nil, EOFHeader, OK{LastInsertID: 1 << 20, Status: StatusAutocommit})},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, _, ok := ResultInfo(bc.p); !ok {
					b.Fatal("not a result terminator")
				}
			}
		})
	}
}

func TestRenameColumnTables(t *testing.T) {
	col := &Column{Catalog: "def", Schema: "db", Table: "t_0001", OrgTable: "t_0001", Name: "id", OrgName: "id", Charset: 63, Length: 20, Type: TypeLongLong}
	p := AppendColumn(nil, col)
	rename := func(b []byte) (string, bool) {
		if string(b) == "t_0001" {
			return "t", true
		}
		return "", false
	}
	out, ok := RenameColumnTables(nil, p, rename)
	if !ok {
		t.Fatal("not renamed")
	}
	want := *col
	want.Table, want.OrgTable = "t", "t"
	if !bytes.Equal(out, AppendColumn(nil, &want)) {
		t.Errorf("renamed packet %x, want %x", out, AppendColumn(nil, &want))
	}
	// An alias keeps its name; only org_table changes.
	col.Table = "a"
	out, ok = RenameColumnTables(nil, AppendColumn(nil, col), rename)
	want.Table = "a"
	if !ok || !bytes.Equal(out, AppendColumn(nil, &want)) {
		t.Errorf("alias: %v %x", ok, out)
	}
	col.OrgTable = "other"
	if _, ok := RenameColumnTables(nil, AppendColumn(nil, col), rename); ok {
		t.Error("renamed a column of another table")
	}
	for i := range len(p) {
		RenameColumnTables(nil, p[:i], rename) // must not panic
	}
}
