package router

import (
	"errors"
	"testing"
)

// TestSequenceInsertsNotCached: an INSERT into a table with a sequence is
// planned every time, so a shape first seen with an explicit id never
// routes a later 0 or NULL (which must take a sequence value) by template.
func TestSequenceInsertsNotCached(t *testing.T) {
	r := testCachedRouter(t)
	ids := &counterIDs{next: 500}
	s := Session{User: "shard", DB: "sbtest", IDs: ids}
	for range 4 {
		p, err := r.Route("INSERT INTO seqd (id, note) VALUES (5, 'a')", s)
		if err != nil || p.Generated != 0 || p.Targets[0].Subtable != "seqd_0001" {
			t.Fatalf("explicit id: %+v, %v", p, err)
		}
	}
	p, err := r.Route("INSERT INTO seqd (id, note) VALUES (0, 'a')", s)
	if err != nil || p.Generated != 1 || p.FirstID != 500 || p.Targets[0].Subtable != "seqd_0000" {
		t.Fatalf("0 after a cached shape: %+v, %v", p, err)
	}
	// Prepared: the same with bound values.
	for _, a := range []Arg{{Kind: ArgInt, Text: "9"}, {Kind: ArgInt, Text: "9"}, {Kind: ArgNull}} {
		p, err = r.RouteArgs("INSERT INTO seqd (id, note) VALUES (?, 'a')", s, []Arg{a})
		if err != nil {
			t.Fatal(err)
		}
	}
	if p.Generated != 1 || p.FirstID != 501 {
		t.Fatalf("NULL bound after cached shapes: %+v", p)
	}
	// Without NO_AUTO_VALUE_ON_ZERO, 0 takes a value; with it, 0 is kept.
	s.Mode = ModeNoAutoValueOnZero
	p, err = r.Route("INSERT INTO seqd (id, note) VALUES (0, 'a')", s)
	if err != nil || p.Generated != 0 {
		t.Fatalf("0 under NO_AUTO_VALUE_ON_ZERO: %+v, %v", p, err)
	}
	if len(ids.asked) != 2 || ids.asked[0] != "sbtest.seqd" {
		t.Errorf("sequences asked: %v", ids.asked)
	}
}

// TestSequenceWithoutSource: a plan that needs sequence values and has no
// IDSource is refused, and a failing source fails the statement.
func TestSequenceWithoutSource(t *testing.T) {
	r := testRouter(t)
	if _, err := r.Route("INSERT INTO seqd (note) VALUES ('a')", Session{User: "shard", DB: "sbtest"}); err == nil {
		t.Error("no IDSource: planned")
	}
	boom := errors.New("sidecar down")
	_, err := r.Route("INSERT INTO seqd (note) VALUES ('a')", Session{User: "shard", DB: "sbtest", IDs: failingIDs{boom}})
	if !errors.Is(err, boom) {
		t.Errorf("failing source: %v", err)
	}
}

type failingIDs struct{ err error }

func (f failingIDs) NextIDs(string, string, []uint64) error { return f.err }

func TestTablesInfo(t *testing.T) {
	r := testRouter(t)
	found := false
	for _, ti := range r.Tables() {
		if ti.DB == "sbtest" && ti.Table == "seqd" {
			found = true
			if ti.Sequence != "id" || ti.SequenceBlock != 10 || len(ti.Subtables) != 4 || ti.Subtables[2].Node != "node2" || ti.Subtables[2].Subtable != "seqd_0002" {
				t.Errorf("seqd: %+v", ti)
			}
		}
	}
	if !found {
		t.Error("seqd not listed")
	}
}
