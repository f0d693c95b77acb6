package session

import "github.com/shardgate/shardgate/backend"

// SetNodeSource gives the session where to find nodes added after it
// began (a reload of the configuration may add nodes, and an existing
// schema's new rule may place tables on them): when a node's name is not
// in the session's map, the session takes the map source returns. The
// maps are never changed once given: a reload publishes a new one.
func (s *State) SetNodeSource(source func() map[string]*backend.Node) { s.nodeSource = source }

// node returns the node named name (nil when there is none).
func (s *State) node(name string) *backend.Node {
	n := s.nodes[name]
	if n == nil && s.nodeSource != nil {
		s.nodes = s.nodeSource()
		n = s.nodes[name]
	}
	return n
}

// nodeCount returns how many nodes are in force (the source's, when the
// session has one: a reload may have added some).
func (s *State) nodeCount() int {
	if s.nodeSource != nil {
		s.nodes = s.nodeSource()
	}
	return len(s.nodes)
}
