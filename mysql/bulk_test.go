package mysql

import (
	"bytes"
	"reflect"
	"testing"
)

// bulkPacket is COM_STMT_BULK_EXECUTE for statement 7 with two
// parameters (BIGINT, VARCHAR) and three rows: (42, "ab"), (NULL, "c"),
// (1, DEFAULT).
var bulkPacket = []byte{
	ComStmtBulkExecute, 7, 0, 0, 0, // id
	128, 0, // flags: types follow
	TypeLongLong, 0, TypeVarString, 0,
	IndicatorNone, 42, 0, 0, 0, 0, 0, 0, 0, IndicatorNone, 2, 'a', 'b',
	IndicatorNull, IndicatorNone, 1, 'c',
	IndicatorNone, 1, 0, 0, 0, 0, 0, 0, 0, IndicatorDefault,
}

func TestParseStmtBulkExecute(t *testing.T) {
	b, err := ParseStmtBulkExecute(bulkPacket, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b.ID != 7 || b.Flags != BulkSendTypes || len(b.Rows) != 3 || !b.Special {
		t.Fatalf("%+v", b)
	}
	if !bytes.Equal(b.Rows[0].Values[0], []byte{42, 0, 0, 0, 0, 0, 0, 0}) || !bytes.Equal(b.Rows[0].Values[1], []byte{2, 'a', 'b'}) {
		t.Errorf("row 1: %+v", b.Rows[0])
	}
	if !reflect.DeepEqual(b.Rows[1].Null, []bool{true, false}) || !bytes.Equal(b.Rows[1].Values[1], []byte{1, 'c'}) {
		t.Errorf("row 2: %+v", b.Rows[1])
	}
	if !reflect.DeepEqual(b.Rows[2].Null, []bool{false, true}) {
		t.Errorf("row 3: %+v", b.Rows[2])
	}
	// Each row encodes as the COM_STMT_EXECUTE of its values.
	want := []byte{ComStmtExecute, 7, 0, 0, 0, 0, 1, 0, 0, 0, 0x01, 1, TypeLongLong, 0, TypeVarString, 0, 1, 'c'}
	if got := AppendStmtExecute(nil, 7, &b.Rows[1]); !bytes.Equal(got, want) {
		t.Errorf("row 2 as COM_STMT_EXECUTE: % x, want % x", got, want)
	}
	// Without DEFAULT, the rows encode back to the packet.
	plain := bulkPacket[:len(bulkPacket)-10]
	b, err = ParseStmtBulkExecute(plain, 2, nil)
	if err != nil || b.Special {
		t.Fatalf("%+v %v", b, err)
	}
	if got := AppendStmtBulkExecute(nil, 7, b.Rows); !bytes.Equal(got, plain) {
		t.Errorf("round trip: % x, want % x", got, plain)
	}
}

func TestParseStmtBulkExecuteErrors(t *testing.T) {
	noTypes := []byte{ComStmtBulkExecute, 7, 0, 0, 0, 0, 0, IndicatorNull}
	if _, err := ParseStmtBulkExecute(noTypes, 1, nil); err == nil {
		t.Error("no types bound: no error")
	}
	if b, err := ParseStmtBulkExecute(noTypes, 1, []byte{TypeLong, 0}); err != nil || len(b.Rows) != 1 || !b.Rows[0].Null[0] {
		t.Errorf("previous types: %+v %v", b, err)
	}
	for i := 1; i < len(bulkPacket); i++ {
		if i == 24 || i == 28 {
			continue // ends at a row boundary
		}
		if _, err := ParseStmtBulkExecute(bulkPacket[:i], 2, nil); err == nil {
			t.Errorf("truncated at %d: no error", i)
		}
	}
	bad := append([]byte(nil), bulkPacket...)
	bad[11] = 9 // an indicator that does not exist
	if _, err := ParseStmtBulkExecute(bad, 2, nil); err == nil {
		t.Error("unknown indicator: no error")
	}
}

func FuzzParseStmtBulkExecute(f *testing.F) {
	f.Add(bulkPacket, 2)
	f.Add([]byte{ComStmtBulkExecute, 1, 0, 0, 0, 128, 0, TypeDate, 0, 0, 4, 1, 2, 3, 4}, 1)
	f.Fuzz(func(t *testing.T, p []byte, n int) {
		if n < 0 || n > 64 {
			return
		}
		b, err := ParseStmtBulkExecute(p, n, nil)
		if err != nil {
			return
		}
		for _, row := range b.Rows {
			if len(row.Values) != n || len(row.Null) != n {
				t.Fatalf("row of %d values for %d parameters", len(row.Values), n)
			}
		}
	})
}
