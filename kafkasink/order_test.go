package kafkasink

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/shardgate/shardgate/changestream"
)

// TestOrderHoldsNewSubtables: read from history, node2's stream reaches a
// change of a new subtable (a row that moved from node1) before node1's
// stream has passed the cutover: that change, and everything node2's
// stream carries after it, waits until node1's mark passes the cutover's
// position; node1's changes go on meanwhile, and a node that is not an
// old one of the cutover, or a change of an old subtable, never waits.
func TestOrderHoldsNewSubtables(t *testing.T) {
	cut := Cutover{Table: "d.t", Subtables: []string{"d.t_g1_0000", "d.t_g1_0001"},
		Applied: map[string]string{"node1": "0-1-10", "node2": "0-2-20", "gone": "0-9-9"}}
	in := make(chan changestream.Change)
	asked := 0
	out := order(context.Background(), in, map[string]string{"node1": "0-1-8", "node2": "0-2-19"}, []string{"node1", "node2"},
		func() []Cutover { asked++; return []Cutover{cut} })
	ch := func(node, op, sub string) changestream.Change {
		c := changestream.Change{Node: node, Op: op, Subtable: sub}
		if op == "mark" {
			c.Pos, c.Subtable = sub, ""
		}
		return c
	}
	feed := []changestream.Change{
		ch("node2", "update", "d.t_0001"),    // before the cutover on node2: goes
		ch("node2", "mark", "0-2-20"),        // node2 at its cutover position
		ch("node2", "update", "d.t_g1_0000"), // after it, of a new subtable: node1 has not passed 0-1-10
		ch("node2", "mark", "0-2-21"),        // held behind it
		ch("node1", "update", "d.t_0000"),    // node1's old changes go on
		ch("node1", "mark", "0-1-9"),
		ch("node1", "delete", "d.t_0000"),
		ch("node1", "mark", "0-1-10"), // node1 passes the cutover: node2's held ones follow
		ch("node1", "insert", "d.t_g1_0001"),
		ch("node1", "mark", "0-1-11"),
	}
	var got []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for c := range out {
			got = append(got, c.Node+" "+c.Op+" "+c.Subtable+c.Pos)
		}
	}()
	for _, c := range feed {
		in <- c
	}
	close(in)
	<-done
	want := []string{
		"node2 update d.t_0001", "node2 mark 0-2-20",
		"node1 update d.t_0000", "node1 mark 0-1-9", "node1 delete d.t_0000", "node1 mark 0-1-10",
		"node2 update d.t_g1_0000", "node2 mark 0-2-21",
		"node1 insert d.t_g1_0001", "node1 mark 0-1-11",
	}
	if !slices.Equal(got, want) {
		t.Errorf("order:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if asked < 2 {
		t.Errorf("the cutovers were asked %d times: want at the start and at each new subtable", asked)
	}
}

// TestOrderDropsHeldAtEnd: changes still held when the readers stop are
// not produced (their node's position past them is not either).
func TestOrderDropsHeldAtEnd(t *testing.T) {
	cut := Cutover{Table: "d.t", Subtables: []string{"d.t_g1_0000"}, Applied: map[string]string{"node1": "0-1-10"}}
	in := make(chan changestream.Change, 4)
	in <- changestream.Change{Node: "node2", Op: "insert", Subtable: "d.t_g1_0000"}
	in <- changestream.Change{Node: "node2", Op: "mark", Pos: "0-2-5"}
	close(in)
	out := order(context.Background(), in, nil, []string{"node1", "node2"}, func() []Cutover { return []Cutover{cut} })
	for c := range out {
		t.Errorf("produced %+v", c)
	}
}

func TestCovers(t *testing.T) {
	for _, c := range []struct {
		have, want string
		ok         bool
	}{
		{"0-1-10", "0-1-10", true},
		{"0-1-9", "0-1-10", false},
		{"0-2-11", "0-1-10", true}, // sequence numbers grow within a domain
		{"0-1-10,1-1-3", "1-1-4", false},
		{"0-1-10,1-1-5", "0-1-10,1-1-4", true},
		{"", "0-1-1", false},
		{"0-1-1", "", true},
	} {
		if got := covers(c.have, c.want); got != c.ok {
			t.Errorf("covers(%q, %q) = %v", c.have, c.want, got)
		}
	}
}
