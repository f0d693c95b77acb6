package deadlock

import (
	"slices"
	"testing"
)

func nodeName(a string) string { return map[string]string{"a": "node1", "b": "node2", "c": "node3"}[a] }

func TestCycles(t *testing.T) {
	// Sessions 0 and 1 hold threads on servers a and b.
	two := []Member{
		{Session: 10, Seq: 1, Holds: []Thread{{"a", 100}, {"b", 200}}},
		{Session: 11, Seq: 1, Holds: []Thread{{"a", 101}, {"b", 201}}},
	}
	for _, tc := range []struct {
		name    string
		members []Member
		trx     map[string][]Trx
		want    []Cycle
	}{
		{"two nodes, opposite orders", two, map[string][]Trx{
			"a": {{ID: "1", Thread: 100, Weight: 3, Blocker: "2"}, {ID: "2", Thread: 101, Weight: 2}},
			"b": {{ID: "7", Thread: 201, Weight: 2, Blocker: "8"}, {ID: "8", Thread: 200, Weight: 3}},
		}, []Cycle{{Members: []int{0, 1}, Victim: 1, Nodes: []string{"node1", "node2"}}}},
		{"a plain wait", two, map[string][]Trx{
			"a": {{ID: "1", Thread: 100, Weight: 3, Blocker: "2"}, {ID: "2", Thread: 101, Weight: 2}},
			"b": {{ID: "8", Thread: 200, Weight: 3}, {ID: "7", Thread: 201, Weight: 2}},
		}, nil},
		{"one server's own cycle is its own", two, map[string][]Trx{
			"a": {{ID: "1", Thread: 100, Weight: 3, Blocker: "2"}, {ID: "2", Thread: 101, Weight: 2, Blocker: "1"}},
		}, nil},
		{"through another client's transaction", two, map[string][]Trx{
			"a": {{ID: "1", Thread: 100, Weight: 1, Blocker: "5"}, {ID: "5", Thread: 555, Weight: 1, Blocker: "2"}, {ID: "2", Thread: 101, Weight: 9}},
			"b": {{ID: "7", Thread: 201, Weight: 9, Blocker: "8"}, {ID: "8", Thread: 200, Weight: 1}},
		}, []Cycle{{Members: []int{0, 1}, Victim: 0, Nodes: []string{"node1", "node2"}}}},
		{"three sessions on three nodes", []Member{
			{Session: 1, Seq: 1, Holds: []Thread{{"a", 1}, {"b", 1}}},
			{Session: 2, Seq: 1, Holds: []Thread{{"b", 2}, {"c", 2}}},
			{Session: 3, Seq: 1, Holds: []Thread{{"c", 3}, {"a", 3}}},
		}, map[string][]Trx{
			"a": {{ID: "a1", Thread: 1, Weight: 5}, {ID: "a3", Thread: 3, Weight: 5, Blocker: "a1"}},
			"b": {{ID: "b1", Thread: 1, Weight: 5, Blocker: "b2"}, {ID: "b2", Thread: 2, Weight: 1}},
			"c": {{ID: "c2", Thread: 2, Weight: 1, Blocker: "c3"}, {ID: "c3", Thread: 3, Weight: 5}},
		}, []Cycle{{Members: []int{0, 1, 2}, Victim: 1, Nodes: []string{"node1", "node2", "node3"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := build(tc.members, tc.trx, nodeName).cycles()
			if !slices.EqualFunc(got, tc.want, func(a, b Cycle) bool {
				return slices.Equal(a.Members, b.Members) && a.Victim == b.Victim && slices.Equal(a.Nodes, b.Nodes)
			}) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
