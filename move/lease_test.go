package move_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/shardgate/shardgate/move"
)

// TestLeaseTerms: what keeps two runners of one workflow apart in the
// sidecar. Outside a fleet (term 0) a running lease keeps another proxy
// out. In a fleet a later term (a later leader's election revision) takes
// the lease at once, though the earlier leader's lease still runs; the
// earlier leader can then neither save the state nor claim the lease
// again, not even after the later one released it.
func TestLeaseTerms(t *testing.T) {
	if cluster == nil {
		t.Skip("integration test: needs MariaDB (skipped under -short)")
	}
	s := cluster.Servers[0]
	exec(t, open(t, s, ""), "DROP DATABASE IF EXISTS terms_sidecar")
	st := move.NewStore(move.Endpoint{Addr: s.Addr, User: s.User, Password: s.Password}, "terms_sidecar")
	defer st.Close()
	ctx := context.Background()
	w := &move.Workflow{Spec: move.Spec{Name: "w", Kind: move.KindReshard, DB: "d", Table: "t"}, State: move.State{Phase: move.PhaseCopying}}
	if err := st.Save(ctx, w); err != nil {
		t.Fatal(err)
	}
	claim := func(owner string, term int64, want bool) {
		t.Helper()
		ok, err := st.Claim(ctx, "w", owner, term, time.Minute)
		if err != nil || ok != want {
			t.Fatalf("Claim by %s in term %d: %v, %v; want %v", owner, term, ok, err, want)
		}
	}
	save := func(owner string, term int64, rows int64, want error) {
		t.Helper()
		w.State.RowsCopied = rows
		if err := st.SaveOwned(ctx, w, owner, term); !errors.Is(err, want) {
			t.Fatalf("SaveOwned by %s in term %d: %v, want %v", owner, term, err, want)
		}
	}
	claim("a", 0, true)
	claim("a", 0, true) // renewed
	claim("b", 0, false)
	save("a", 0, 1, nil)
	save("b", 0, 2, move.ErrNotOwner)

	claim("a", 5, true) // a leads, in term 5
	claim("b", 7, true) // b leads, in term 7: a is deposed, its lease not over
	save("a", 5, 3, move.ErrNotOwner)
	claim("a", 5, false)
	save("b", 7, 4, nil)
	if err := st.Release(ctx, "w", "b", 7); err != nil {
		t.Fatal(err)
	}
	claim("a", 5, false) // released, but in a later term
	claim("c", 8, true)
	ws, err := st.List(ctx)
	if err != nil || len(ws) != 1 || ws[0].State.RowsCopied != 4 {
		t.Fatalf("saved: %+v, %v; want b's state (4 rows)", ws, err)
	}
}
