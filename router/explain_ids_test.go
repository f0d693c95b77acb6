package router

import (
	"errors"
	"strings"
	"testing"
)

// peekingIDs is counterIDs that can also tell its next values without
// taking them (IDPeeker), as the proxy's sequences do.
type peekingIDs struct{ counterIDs }

func (c *peekingIDs) PeekIDs(db, table string, ids []uint64) error {
	for i := range ids {
		ids[i] = c.next + uint64(i)
	}
	return nil
}

// TestExplainTakesNoIDs (issue 37): EXPLAIN of an INSERT that a sequence
// fills, in every form the router plans (FORMAT='shard', the server's
// EXPLAIN, as text and prepared, cached router or not), takes no values:
// FORMAT='shard' shows the values the sequence would hand out next, the
// server's EXPLAIN of it is refused, and the INSERT after them gets those
// values. EXPLAIN ANALYZE runs the statement, so it takes them.
func TestExplainTakesNoIDs(t *testing.T) {
	for _, cached := range []bool{false, true} {
		r := testRouter(t)
		if cached {
			r = testCachedRouter(t)
		}
		ids := &peekingIDs{counterIDs{next: 9}}
		s := Session{User: "shard", DB: "sbtest", IDs: ids}
		for _, sql := range []string{
			"EXPLAIN FORMAT='shard' INSERT INTO seqd (note) VALUES ('a')",
			"explain format = shard insert into seqd (note) values ('a')",
			"EXPLAIN INSERT INTO seqd (note) VALUES ('a')",
			"EXPLAIN FORMAT=JSON INSERT INTO seqd SET note = 'a'",
			"EXPLAIN INSERT INTO seqd (note) VALUES ('a')",
			"EXPLAIN FORMAT='shard' INSERT INTO tickets (user_id, subject) VALUES (1, 'a')",
		} {
			for _, prepared := range []bool{false, true} {
				var err error
				var p *Plan
				if prepared {
					p, err = r.RouteArgs(sql, s, nil)
				} else {
					p, err = r.Route(sql, s)
				}
				if !strings.Contains(strings.ToLower(sql), "shard") {
					// The server's EXPLAIN of an INSERT with sequence values
					// is refused (not a single forwarded statement); it
					// still takes nothing.
					continue
				}
				if err != nil {
					t.Fatalf("%s: %v", sql, err)
				}
				if len(p.Targets) != 1 || !strings.Contains(p.Targets[0].SQL, ",9)") && !strings.Contains(p.Targets[0].SQL, "=9") {
					t.Errorf("%s (cached %v, prepared %v): targets %+v, want the next id 9 shown", sql, cached, prepared, p.Targets)
				}
			}
		}
		if len(ids.asked) != 0 || ids.next != 9 {
			t.Fatalf("cached %v: EXPLAIN took ids: asked %v, next %d", cached, ids.asked, ids.next)
		}
		p, err := r.Route("INSERT INTO seqd (note) VALUES ('a')", s)
		if err != nil || p.Generated != 1 || p.FirstID != 9 {
			t.Fatalf("cached %v: INSERT after EXPLAIN: %+v, %v; want id 9", cached, p, err)
		}
		// EXPLAIN ANALYZE would run the INSERT: it takes its value (and is
		// then refused as the server's EXPLAIN is).
		r.Route("EXPLAIN ANALYZE INSERT INTO seqd (note) VALUES ('b')", s)
		if ids.next != 11 {
			t.Errorf("cached %v: EXPLAIN ANALYZE takes values as its INSERT does: next %d, want 11", cached, ids.next)
		}
	}
}

// TestExplainNeedsPeek: without a source, EXPLAIN of such an INSERT asks
// for values to look at (NeedIDsError.Peek), an INSERT for values to take.
func TestExplainNeedsPeek(t *testing.T) {
	r := testRouter(t)
	s := Session{User: "shard", DB: "sbtest"}
	for sql, peek := range map[string]bool{
		"EXPLAIN FORMAT='shard' INSERT INTO seqd (note) VALUES ('a'), ('b')": true,
		"EXPLAIN INSERT INTO seqd (note) VALUES ('a'), ('b')":                true,
		"EXPLAIN ANALYZE INSERT INTO seqd (note) VALUES ('a'), ('b')":        false,
		"INSERT INTO seqd (note) VALUES ('a'), ('b')":                        false,
	} {
		_, err := r.Route(sql, s)
		var ni *NeedIDsError
		if !errors.As(err, &ni) || ni.N != 2 || ni.Peek != peek || ni.Table != "seqd" {
			t.Errorf("%s: %#v, want NeedIDsError N 2 Peek %v", sql, err, peek)
		}
		// Reserved values (peeked or taken by the caller) plan it.
		if !strings.Contains(sql, "shard") {
			continue
		}
		if p, err := r.Route(sql, Session{User: "shard", DB: "sbtest", IDs: Reserved{9, 10}}); err != nil || !strings.Contains(p.Targets[0].SQL, "9") {
			t.Errorf("%s with reserved values: %+v, %v", sql, p, err)
		}
	}
}
