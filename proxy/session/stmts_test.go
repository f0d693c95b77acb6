package session

import (
	"strings"
	"testing"
)

// TestStmtsBytesBounded: a session's prepared statements may hold at most
// MaxStmtBytes of text, counted over binary and SQL-level statements and
// given back when they are closed or replaced.
func TestStmtsBytesBounded(t *testing.T) {
	var s Stmts
	big := strings.Repeat("x", 16<<20)
	var ids []uint32
	for i := 0; i < 4; i++ {
		ps, err := s.Add(big, 0)
		if err != nil {
			t.Fatalf("statement %d of 16 MiB: %v", i+1, err)
		}
		ids = append(ids, ps.ID)
	}
	if _, err := s.Add("SELECT 1", 0); err == nil {
		t.Fatal("a statement past 64 MiB of text was added")
	}
	if err := s.SetNamed("n", "SELECT 1"); err == nil {
		t.Fatal("a named statement past 64 MiB of text was added")
	}
	s.Close(ids[0])
	if err := s.SetNamed("n", big[:8<<20]); err != nil {
		t.Fatalf("after a close: %v", err)
	}
	if err := s.SetNamed("n", big); err != nil {
		t.Fatalf("replacing a named statement: %v", err)
	}
	if _, err := s.Add("SELECT 1", 0); err == nil {
		t.Fatal("the replaced text was not counted")
	}
	s.DropNamed("n")
	if _, err := s.Add("SELECT 1", 0); err != nil {
		t.Fatalf("after a drop: %v", err)
	}
}
