package session

import "github.com/shardgate/shardgate/backend"

// SetNodeSource gives the session the nodes in force: a reload of the
// configuration may add nodes (and an existing schema's new rule may place
// tables on them) or remove unused ones, so the session looks each node up
// in the map source returns (never changed once returned) rather than in
// the map it was created with.
func (s *State) SetNodeSource(source func() map[string]*backend.Node) { s.nodeSource = source }

// node returns the node named name (nil when there is none).
func (s *State) node(name string) *backend.Node {
	if s.nodeSource != nil {
		return s.nodeSource()[name]
	}
	return s.nodes[name]
}

// nodeCount returns how many nodes are in force.
func (s *State) nodeCount() int {
	if s.nodeSource != nil {
		return len(s.nodeSource())
	}
	return len(s.nodes)
}
