package fleet

import (
	"maps"
	"testing"

	"github.com/shardgate/shardgate/topo"
)

func TestDecide(t *testing.T) {
	const m0, r1, r2 = "10.0.0.1:3306", "10.0.0.2:3306", "10.0.0.3:3306"
	h := func(master string, up, ro bool, promoted ...string) map[string]topo.NodeHealth {
		return map[string]topo.NodeHealth{"node1": {Master: master, Up: up, ReadOnly: ro, Promoted: promoted}}
	}
	member := func(id string, health map[string]topo.NodeHealth) topo.Member {
		return topo.Member{ID: id, Health: health}
	}
	for _, c := range []struct {
		name     string
		members  []topo.Member
		recorded map[string]string
		want     map[string]string
	}{
		{"all up", []topo.Member{member("p1", h(m0, true, false)), member("p2", h(m0, true, false))}, nil, map[string]string{}},
		{"down for all, one promoted", []topo.Member{member("p1", h(m0, false, false, r1)), member("p2", h(m0, false, false, r1)), member("p3", h(m0, false, false))},
			nil, map[string]string{"node1": r1}},
		{"read-only master counts as down", []topo.Member{member("p1", h(m0, true, true, r1)), member("p2", h(m0, true, true, r1))},
			nil, map[string]string{"node1": r1}},
		{"down for one of three only", []topo.Member{member("p1", h(m0, false, false, r1)), member("p2", h(m0, true, false)), member("p3", h(m0, true, false))},
			nil, map[string]string{}},
		{"down for half: no majority", []topo.Member{member("p1", h(m0, false, false, r1)), member("p2", h(m0, true, false))},
			nil, map[string]string{}},
		{"two promoted: the servers do not say which", []topo.Member{member("p1", h(m0, false, false, r1)), member("p2", h(m0, false, false, r2))},
			nil, map[string]string{}},
		{"down, nothing promoted", []topo.Member{member("p1", h(m0, false, false)), member("p2", h(m0, false, false))}, nil, map[string]string{}},
		{"already recorded and followed", []topo.Member{member("p1", h(r1, true, false)), member("p2", h(r1, true, false))},
			map[string]string{"node1": r1}, map[string]string{}},
		{"recorded, reports of the old master do not count", []topo.Member{member("p1", h(m0, false, false, r2)), member("p2", h(r1, true, false))},
			map[string]string{"node1": r1}, map[string]string{}},
		{"no reports", []topo.Member{member("p1", nil)}, nil, map[string]string{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Decide(c.members, c.recorded); !maps.Equal(got, c.want) {
				t.Errorf("Decide = %v, want %v", got, c.want)
			}
		})
	}
}
