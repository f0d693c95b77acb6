package move_test

import (
	"reflect"
	"testing"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/move"
)

// A switched reshard gives its cutover (the new rule's subtables and the
// applied positions); one still copying gives only its rules, as does a
// rolled-back one; every rule is added to the known ones once.
func TestForStreams(t *testing.T) {
	from := config.ShardRule{DB: "d", Table: "t", Key: "id", Type: "hash", Nodes: []string{"n1", "n2"}, Locations: []int{1, 1}}
	to := config.ShardRule{DB: "d", Table: "t", Key: "id", Type: "hash", Nodes: []string{"n1", "n2"}, Locations: []int{2, 2}, Generation: 1}
	applied := map[string]string{"n1": "0-1-10", "n2": "0-2-7"}
	ws := []*move.Workflow{
		{Spec: move.Spec{Name: "a", Kind: move.KindReshard, DB: "d", Table: "t", From: from, To: to},
			State: move.State{Phase: move.PhaseSwitched, Applied: applied}},
		{Spec: move.Spec{Name: "b", Kind: move.KindReshard, DB: "d", Table: "u", From: config.ShardRule{DB: "d", Table: "u"}},
			State: move.State{Phase: move.PhaseCopying}},
		{Spec: move.Spec{Name: "c", Kind: move.KindReshard, DB: "d", Table: "t", From: from, To: to},
			State: move.State{Phase: move.PhaseRolledBack, Applied: applied}},
	}
	rules, cs := move.ForStreams(ws)
	want := []move.StreamCutover{{Table: "d.t", Subtables: []string{"d.t_g1_0000", "d.t_g1_0001", "d.t_g1_0002", "d.t_g1_0003"}, Applied: applied}}
	if !reflect.DeepEqual(cs, want) {
		t.Fatalf("cutovers %+v, want %+v", cs, want)
	}
	if len(rules) != 6 {
		t.Fatalf("%d rules, want 6 (old and new of each workflow)", len(rules))
	}
	known, added := move.AddRules(nil, rules)
	if !added || len(known) != 3 { // from, to, u's; the empty To left out
		t.Fatalf("AddRules: %d rules (added %v), want 3", len(known), added)
	}
	if _, added := move.AddRules(known, rules); added {
		t.Fatal("AddRules added rules it knew")
	}
}
