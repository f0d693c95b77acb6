package kafkasink

import (
	"testing"

	"github.com/shardgate/shardgate/changestream"
)

// TestReuseHeld: the rows of a produced source transaction are not kept
// alive by the node's held slice, and a huge transaction's array is let go.
func TestReuseHeld(t *testing.T) {
	small := make([]changestream.Change, 3, 8)
	for i := range small {
		small[i] = changestream.Change{Node: "node1", Table: "db.t", Op: "insert"}
	}
	got := reuseHeld(small)
	if len(got) != 0 || cap(got) != 8 {
		t.Fatalf("small: len %d cap %d, want 0 and 8", len(got), cap(got))
	}
	for i, ch := range small[:3] {
		if ch.Table != "" || ch.Node != "" {
			t.Fatalf("small[%d] still holds %+v", i, ch)
		}
	}
	huge := make([]changestream.Change, maxReusedHeld+1)
	if got := reuseHeld(huge); got != nil {
		t.Fatalf("huge: kept cap %d, want nil", cap(got))
	}
}
