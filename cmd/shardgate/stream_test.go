package main

import (
	"context"
	"fmt"
	"testing"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/move"
)

// TestStreamFlows: the standalone runner's sinks read the workflows in the
// sidecar ks.yaml names. A reshard saved after the runner read them is
// found when its new subtable first appears (names), and its cutover once
// switched (cutovers), as the proxy's sinks find them (move.ForStreams).
func TestStreamFlows(t *testing.T) {
	if cluster == nil {
		t.Skip("integration test: needs MariaDB (skipped under -short)")
	}
	s := cluster.Servers[0]
	from := config.ShardRule{DB: "sf", Table: "t", Key: "id", Type: "hash", Nodes: []string{"node1"}, Locations: []int{2}}
	to := from
	to.Locations, to.Generation = []int{4}, 1
	cfg := &config.Config{Nodes: []config.Node{{Name: "node1", Master: s.Addr, User: s.User, Password: s.Password}},
		Schemas: []config.Schema{{Nodes: []string{"node1"}, Default: "node1", Shard: []config.ShardRule{from}}},
		Sidecar: config.Sidecar{Node: "node1", DB: "stream_flows_sidecar"}}
	var said []string
	f := newStreamFlows(context.Background(), cfg, func(format string, a ...any) { said = append(said, fmt.Sprintf(format, a...)) })
	defer f.close()
	if cs := f.cutovers(); len(cs) != 0 {
		t.Fatalf("cutovers %+v before any workflow", cs)
	}
	if got := f.names("sf", "t_0001"); got != "sf.t" {
		t.Fatalf("t_0001 named %q", got)
	}

	store := move.NewStore(move.Endpoint{Addr: s.Addr, User: s.User, Password: s.Password}, "stream_flows_sidecar")
	defer store.Close()
	w := &move.Workflow{Spec: move.Spec{Name: "sf_t", Kind: move.KindReshard, DB: "sf", Table: "t", From: from, To: to},
		State: move.State{Phase: move.PhaseCopying}}
	if err := store.Save(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	if got := f.names("sf", "t_g1_0003"); got != "sf.t" {
		t.Fatalf("the new rule's subtable t_g1_0003 named %q (said %q)", got, said)
	}
	if cs := f.cutovers(); len(cs) != 0 {
		t.Fatalf("cutovers %+v while copying", cs)
	}
	w.State.Phase, w.State.Applied = move.PhaseSwitched, map[string]string{"node1": "0-1-42"}
	if err := store.Save(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	cs := f.cutovers()
	if len(cs) != 1 || cs[0].Table != "sf.t" || len(cs[0].Subtables) != 4 || cs[0].Subtables[3] != "sf.t_g1_0003" || cs[0].Applied["node1"] != "0-1-42" {
		t.Fatalf("cutovers %+v after the switch", cs)
	}
}
