package mysql

import (
	"bytes"
	"reflect"
	"testing"
)

// execPacket is COM_STMT_EXECUTE for statement 7 with three parameters:
// BIGINT 42, NULL, VARCHAR "ab".
var execPacket = []byte{
	ComStmtExecute, 7, 0, 0, 0, // id
	0,          // flags
	1, 0, 0, 0, // iterations
	0x02, // NULL bitmap: parameter 1
	1,    // new params bound
	TypeLongLong, 0, TypeNull, 0, TypeVarString, 0,
	42, 0, 0, 0, 0, 0, 0, 0,
	2, 'a', 'b',
}

func TestParseStmtExecute(t *testing.T) {
	e, err := ParseStmtExecute(execPacket, 3, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if e.ID != 7 || !e.NewTypes || !reflect.DeepEqual(e.Null, []bool{false, true, false}) {
		t.Fatalf("%+v", e)
	}
	if !bytes.Equal(e.Values[0], []byte{42, 0, 0, 0, 0, 0, 0, 0}) || e.Values[1] != nil || !bytes.Equal(e.Values[2], []byte{2, 'a', 'b'}) {
		t.Fatalf("values %q", e.Values)
	}
	// Re-encoded for backend statement 7 it is byte for byte the same.
	if got := AppendStmtExecute(nil, 7, e); !bytes.Equal(got, execPacket) {
		t.Errorf("AppendStmtExecute:\n got %x\nwant %x", got, execPacket)
	}
	// Without types, the previous ones apply; the re-encoding binds them.
	noTypes := append(append([]byte{}, execPacket[:11]...), 0)
	noTypes = append(noTypes, execPacket[18:]...)
	e2, err := ParseStmtExecute(noTypes, 3, e.Types, nil)
	if err != nil || e2.NewTypes {
		t.Fatalf("%+v %v", e2, err)
	}
	if got := AppendStmtExecute(nil, 7, e2); !bytes.Equal(got, execPacket) {
		t.Errorf("re-encoded without types:\n got %x\nwant %x", got, execPacket)
	}
	if _, err := ParseStmtExecute(noTypes, 3, nil, nil); err == nil {
		t.Error("no types and none bound before: no error")
	}
	// A parameter sent as long data is not in the packet.
	e3, err := ParseStmtExecute(append(append([]byte{}, execPacket[:18]...), 2, 'a', 'b'), 3, nil, []bool{true, false, false})
	if err != nil || e3.Values[0] != nil || !bytes.Equal(e3.Values[2], []byte{2, 'a', 'b'}) {
		t.Errorf("long data: %+v %v", e3, err)
	}
	for n := range len(execPacket) - 1 {
		if _, err := ParseStmtExecute(execPacket[:n], 3, nil, nil); err == nil {
			t.Errorf("truncated to %d bytes: no error", n)
		}
	}
}

func TestParamText(t *testing.T) {
	tests := []struct {
		typ, flags byte
		v          []byte
		want       string
		isInt, ok  bool
	}{
		{TypeTiny, 0, []byte{0xff}, "-1", true, true},
		{TypeTiny, 0x80, []byte{0xff}, "255", true, true},
		{TypeShort, 0, []byte{0xfe, 0xff}, "-2", true, true},
		{TypeLong, 0, []byte{0xfd, 0xff, 0xff, 0xff}, "-3", true, true},
		{TypeLongLong, 0x80, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, "18446744073709551615", true, true},
		{TypeDouble, 0, []byte{0, 0, 0, 0, 0, 0, 0xf8, 0x3f}, "1.5", false, true},
		{TypeVarString, 0, []byte{3, '1', '2', '3'}, "123", false, true},
		{TypeDate, 0, []byte{4, 0xe0, 0x07, 3, 6}, "2016-03-06", false, true},
		{TypeDatetime, 0, []byte{7, 0xe0, 0x07, 3, 6, 13, 14, 15}, "2016-03-06 13:14:15", false, true},
		{TypeTime, 0, []byte{0}, "", false, false},
	}
	for _, tc := range tests {
		s, isInt, ok := ParamText(tc.typ, tc.flags, tc.v)
		if s != tc.want || isInt != tc.isInt || ok != tc.ok {
			t.Errorf("type %#x %x: got %q %v %v, want %q %v %v", tc.typ, tc.v, s, isInt, ok, tc.want, tc.isInt, tc.ok)
		}
	}
}

func FuzzParseStmtExecute(f *testing.F) {
	f.Add(execPacket, uint8(3), []byte(nil))
	f.Add(execPacket[:12], uint8(3), []byte{TypeLong, 0, TypeLong, 0, TypeLong, 0})
	f.Fuzz(func(t *testing.T, p []byte, n uint8, prev []byte) {
		e, err := ParseStmtExecute(p, int(n), prev, nil)
		if err != nil {
			return
		}
		for i, v := range e.Values {
			if v != nil {
				ParamText(e.Types[2*i], e.Types[2*i+1], v)
				ParamLiteral(e.Types[2*i], e.Types[2*i+1], v, "utf8mb4", false)
			}
		}
		e2, err := ParseStmtExecute(AppendStmtExecute(nil, e.ID, e), int(n), nil, nil)
		if err != nil || !reflect.DeepEqual(e2.Values, e.Values) || !reflect.DeepEqual(e2.Null, e.Null) {
			t.Fatalf("round trip of %+v = %+v, %v", e, e2, err)
		}
	})
}
