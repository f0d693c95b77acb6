package mysql

import (
	"bytes"
	"testing"
)

func TestAppendBinaryRow(t *testing.T) {
	col := func(typ byte, flags uint16) *Column { return &Column{Name: "c", Type: typ, Flags: flags} }
	tests := []struct {
		name string
		col  *Column
		val  []byte
		want []byte // the value's encoding after the 0x00 header and a one-byte NULL bitmap
	}{
		{"tiny", col(TypeTiny, 0), []byte("-1"), []byte{0xff}},
		{"tiny unsigned", col(TypeTiny, FlagUnsigned), []byte("255"), []byte{0xff}},
		{"short", col(TypeShort, 0), []byte("-2"), []byte{0xfe, 0xff}},
		{"year", col(TypeYear, FlagUnsigned), []byte("2016"), []byte{0xe0, 0x07}},
		{"long", col(TypeLong, 0), []byte("70000"), []byte{0x70, 0x11, 0x01, 0x00}},
		{"longlong unsigned", col(TypeLongLong, FlagUnsigned), []byte("18446744073709551615"), bytes.Repeat([]byte{0xff}, 8)},
		{"double", col(TypeDouble, 0), []byte("1.5"), []byte{0, 0, 0, 0, 0, 0, 0xf8, 0x3f}},
		{"float", col(TypeFloat, 0), []byte("1.5"), []byte{0, 0, 0xc0, 0x3f}},
		{"decimal", col(TypeNewDecimal, 0), []byte("-1.50"), []byte{5, '-', '1', '.', '5', '0'}},
		{"varchar", col(TypeVarString, 0), []byte("ab"), []byte{2, 'a', 'b'}},
		{"date", col(TypeDate, 0), []byte("2016-03-06"), []byte{4, 0xe0, 0x07, 3, 6}},
		{"zero date", col(TypeDate, 0), []byte("0000-00-00"), []byte{0}},
		{"datetime", col(TypeDatetime, 0), []byte("2016-03-06 13:14:15"), []byte{7, 0xe0, 0x07, 3, 6, 13, 14, 15}},
		{"datetime midnight", col(TypeDatetime, 0), []byte("2016-03-06 00:00:00"), []byte{4, 0xe0, 0x07, 3, 6}},
		{"datetime(6)", col(TypeDatetime, 0), []byte("2016-03-06 13:14:15.5"), []byte{11, 0xe0, 0x07, 3, 6, 13, 14, 15, 0x20, 0xa1, 0x07, 0x00}},
		{"time", col(TypeTime, 0), []byte("-25:01:02"), []byte{8, 1, 1, 0, 0, 0, 1, 1, 2}},
		{"time(1)", col(TypeTime, 0), []byte("01:02:03.1"), []byte{12, 0, 0, 0, 0, 0, 1, 2, 3, 0xa0, 0x86, 0x01, 0x00}},
		{"zero time", col(TypeTime, 0), []byte("00:00:00"), []byte{0}},
	}
	for _, tc := range tests {
		got, err := AppendBinaryRow(nil, []*Column{tc.col}, [][]byte{tc.val})
		want := append([]byte{0x00, 0x00}, tc.want...)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: got %x, %v; want %x", tc.name, got, err, want)
		}
	}
	// NULLs set bits from offset 2: the third of ten columns is bit 4 of
	// the first byte; the tenth is bit 3 of the second.
	cols := make([]*Column, 10)
	vals := make([][]byte, 10)
	for i := range cols {
		cols[i], vals[i] = col(TypeVarString, 0), []byte("x")
	}
	vals[2], vals[9] = nil, nil
	got, err := AppendBinaryRow(nil, cols, vals)
	if err != nil || got[0] != 0 || got[1] != 1<<4 || got[2] != 1<<3 || len(got) != 3+8*2 {
		t.Errorf("NULL bitmap: %x, %v", got, err)
	}
	if _, err := AppendBinaryRow(nil, []*Column{col(TypeLong, 0)}, [][]byte{[]byte("x")}); err == nil {
		t.Error("a non-number in an INT column: no error")
	}
}

func TestParamLiteral(t *testing.T) {
	tests := []struct {
		typ, flags byte
		v          []byte
		want       string
	}{
		{TypeLongLong, 0, []byte{0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, "-2"},
		{TypeVarString, 0, []byte{3, 'a', '\'', '\\'}, `'a''\\'`},
		{TypeString, 0, []byte{4, 0, 'x', 0xc3, 0xa4}, `'\0xä'`},
		{TypeString, 0, []byte{1, 0xff}, "'\xff'"}, // not UTF-8: as the server reads the parameter
		{TypeVarString, 0, []byte{3, 0, 0xff, 0x80}, "'\\0\xff\x80'"},
		{TypeBlob, 0, []byte{4, 0, 0xff, '\'', '\\'}, "_binary'\\0\xff''\\\\'"},
		{TypeDouble, 0, []byte{0, 0, 0, 0, 0, 0, 0x29, 0x40}, "12.5e0"},
		{TypeDouble, 0, []byte{0, 0, 0, 0, 0, 0, 0xf0, 0x7f}, ""}, // +Inf
		{TypeFloat, 0, []byte{0, 0, 0x80, 0x3f}, "1e0"},
		{TypeNewDecimal, 0, []byte{4, '1', '.', '2', '5'}, "1.25"},
		{TypeNewDecimal, 0, []byte{3, '1', ';', '2'}, ""},
		{TypeDatetime, 0, []byte{11, 0xe0, 0x07, 3, 6, 13, 14, 15, 0x20, 0xa1, 0x07, 0x00}, "'2016-03-06 13:14:15.500000'"},
		{TypeTime, 0, []byte{8, 1, 1, 0, 0, 0, 1, 1, 2}, "'-25:01:02'"},
		{TypeNull, 0, nil, "NULL"},
	}
	for _, tc := range tests {
		got, ok := ParamLiteral(tc.typ, tc.flags, tc.v, "utf8mb4", false)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("type %#x %x: got %q %v, want %q", tc.typ, tc.v, got, ok, tc.want)
		}
	}
}

// TestParamLiteralNoBackslashEscapes: under NO_BACKSLASH_ESCAPES a
// backslash escape would be read as two characters: only the quote is
// doubled.
func TestParamLiteralNoBackslashEscapes(t *testing.T) {
	v := AppendLenEncBytes(nil, []byte("a\\'\x00b"))
	for _, tc := range []struct {
		nbe  bool
		want string
	}{{false, `'a\\''\0b'`}, {true, "'a\\''\x00b'"}} {
		if got, ok := ParamLiteral(TypeVarString, 0, v, "utf8mb4", tc.nbe); !ok || got != tc.want {
			t.Errorf("noBackslashEscapes=%v: %q, %v; want %q", tc.nbe, got, ok, tc.want)
		}
		if got, _ := ParamLiteral(TypeBlob, 0, v, "utf8mb4", tc.nbe); got != "_binary"+tc.want {
			t.Errorf("blob, noBackslashEscapes=%v: %q", tc.nbe, got)
		}
	}
}
