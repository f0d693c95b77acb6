package mysql

import (
	"reflect"
	"testing"
)

func TestParseOKTracked(t *testing.T) {
	// An UPDATE's OK: info length-encoded, no state change.
	ok, state, err := ParseOKTracked(append([]byte{0, 1, 0, 2, 0, 0, 0, 40}, "Rows matched: 1  Changed: 1  Warnings: 0"...))
	if err != nil || ok.Info != "Rows matched: 1  Changed: 1  Warnings: 0" || ok.AffectedRows != 1 || state != nil {
		t.Errorf("UPDATE OK: %+v %q %v", ok, state, err)
	}
	// Nothing after the warnings.
	if ok, state, err := ParseOKTracked([]byte{0, 0, 0, 2, 0, 0, 0}); err != nil || ok.Info != "" || state != nil {
		t.Errorf("bare OK: %+v %q %v", ok, state, err)
	}
	// SET SESSION sql_select_limit=1, @x=1: a system variable, the state
	// change flag, empty info.
	sysvar := []byte{TrackSystemVariables, 20, 16}
	sysvar = append(sysvar, "sql_select_limit"...)
	sysvar = append(sysvar, 1, '1')
	entries := append(sysvar, TrackStateChange, 2, 1, '1', TrackSchema, 3, 2, 'd', 'b')
	p := append([]byte{0, 0, 0, 2, 0x40, 0, 0, 0, byte(len(entries))}, entries...)
	ok, state, err = ParseOKTracked(p)
	if err != nil || ok.Status != 0x4002 {
		t.Fatalf("SET OK: %+v %v", ok, err)
	}
	changes, err := ParseStateChanges(state)
	if err != nil || len(changes) != 3 {
		t.Fatalf("changes: %+v %v", changes, err)
	}
	if n, v, ok := changes[0].SystemVariable(); !ok || n != "sql_select_limit" || v != "1" {
		t.Errorf("system variable: %q %q %v", n, v, ok)
	}
	if !reflect.DeepEqual(changes[1], StateChange{Type: TrackStateChange, Data: []byte("1")}) {
		t.Errorf("state change entry: %+v", changes[1])
	}
	if s, ok := changes[2].Schema(); !ok || s != "db" {
		t.Errorf("schema: %q %v", s, ok)
	}
	// Truncated entries are malformed.
	if _, err := ParseStateChanges([]byte{TrackSchema, 5, 1}); err == nil {
		t.Error("truncated entry parsed")
	}
	if _, _, err := ParseOKTracked([]byte{0, 0, 0, 2, 0x40, 0, 0, 0, 9, 1}); err == nil {
		t.Error("truncated state parsed")
	}
}
