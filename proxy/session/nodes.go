package session

import "github.com/shardgate/shardgate/backend"

// nodeSet is where a session finds its nodes: the nodes in force. A
// reload of the configuration may add nodes (and an existing schema's new
// rule may place tables on them) or remove unused ones, so the session
// looks each node up in the map source returns (never changed once
// returned) rather than in the map it was created with. It is part of
// State (embedded).
type nodeSet struct {
	nodes  map[string]*backend.Node
	source func() map[string]*backend.Node
}

// SetNodeSource gives the session the nodes in force (see nodeSet).
func (ns *nodeSet) SetNodeSource(source func() map[string]*backend.Node) { ns.source = source }

// node returns the node named name (nil when there is none).
func (ns *nodeSet) node(name string) *backend.Node {
	if ns.source != nil {
		return ns.source()[name]
	}
	return ns.nodes[name]
}

// nodeCount returns how many nodes are in force.
func (ns *nodeSet) nodeCount() int {
	if ns.source != nil {
		return len(ns.source())
	}
	return len(ns.nodes)
}
