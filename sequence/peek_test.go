package sequence_test

import (
	"slices"
	"testing"

	"github.com/shardgate/shardgate/sequence"
)

// TestPeekTakesNothing (issue 37, EXPLAIN consumes nothing): PeekIDs gives
// the values NextIDs gives next, before the sequence exists, within the
// block in hand and across its end, and takes none of them.
func TestPeekTakesNothing(t *testing.T) {
	const sidecarDB = "seq_t_peek"
	db(t).Exec("DROP DATABASE IF EXISTS " + sidecarDB)
	sc := sequence.NewSidecar(node(t), sidecarDB)
	defer sc.Close()
	set := sequence.NewSet(sc)
	set.Add("d", "t", 3, func() (uint64, error) { return 100, nil })
	peek := func(n int) []uint64 {
		ids := make([]uint64, n)
		if err := set.PeekIDs("d", "t", ids); err != nil {
			t.Fatal(err)
		}
		return ids
	}
	next := func(n int) []uint64 {
		ids := make([]uint64, n)
		if err := set.NextIDs("d", "t", ids); err != nil {
			t.Fatal(err)
		}
		return ids
	}
	for _, step := range []struct {
		peek, next int
		want       []uint64
	}{
		{2, 1, []uint64{100, 101}},           // no row yet: the start
		{1, 1, []uint64{101}},                // in the block [100, 103)
		{4, 4, []uint64{102, 103, 104, 105}}, // its last value, then the sidecar's next
		{2, 2, []uint64{106, 107}},
	} {
		for range 2 {
			if got := peek(step.peek); !slices.Equal(got, step.want) {
				t.Fatalf("peek %d: %v, want %v", step.peek, got, step.want)
			}
		}
		if got := next(step.next); !slices.Equal(got, step.want[:step.next]) {
			t.Fatalf("next %d after peeking: %v, want %v", step.next, got, step.want[:step.next])
		}
	}
	if err := set.PeekIDs("d", "nope", make([]uint64, 1)); err == nil {
		t.Error("peek of no sequence: no error")
	}
}
