package server_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestExplainTakesNoSequenceValue (issue 37: EXPLAIN runs nothing and
// consumes nothing): EXPLAIN FORMAT='shard' of an INSERT a sequence fills
// shows the ids the sequence gives next, in the text and the binary
// protocol, within the block in hand and past its end, and the INSERT after
// it gets exactly those ids (id 9 was skipped after an EXPLAIN).
func TestExplainTakesNoSequenceValue(t *testing.T) {
	e := seqEnv(t, "seq_explain", 3)
	mustExec(t, e.app, "CREATE TABLE items (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, name VARCHAR(20))")
	c := conn(t, e.app)
	bin := openDB(t, e.p.dsn(e.db, "interpolateParams=false"))
	next := int64(1)
	for round := range 4 { // block of 3: the second and fourth EXPLAINs cross its end
		for _, db := range []querier{c, bin} {
			for range 2 {
				rows := queryStrings(t, db, "EXPLAIN FORMAT='shard' INSERT INTO items (name) VALUES ('a'), ('b')")
				text := ""
				for _, r := range rows {
					text += r[len(r)-1] + "\n"
				}
				for _, id := range []int64{next, next + 1} {
					if !strings.Contains(text, "'a',"+strconv.FormatInt(id, 10)+")") && !strings.Contains(text, "'b',"+strconv.FormatInt(id, 10)+")") {
						t.Fatalf("round %d: EXPLAIN shows\n%s want ids %d and %d", round, text, next, next+1)
					}
				}
			}
		}
		res, err := c.ExecContext(t.Context(), "INSERT INTO items (name) VALUES ('a'), ('b')")
		if err != nil {
			t.Fatal(err)
		}
		if id, _ := res.LastInsertId(); id != next {
			t.Fatalf("round %d: INSERT after 4 EXPLAINs got id %d, want %d (an EXPLAIN took values)", round, id, next)
		}
		next += 2
	}
	if got, want := e.ids("items"), seq(1, 8); !slices.Equal(got, want) {
		t.Errorf("ids %v, want %v", got, want)
	}
}
