package server

import (
	"github.com/shardgate/shardgate/backend"
)

// nodeSet is the backend nodes in force: built at start, replaced whole
// by a reload that adds or removes nodes (reload.go), never changed once
// published, so readers need no lock. A node keeps its *backend.Node for
// its life: a reload that adds one leaves the others' pools, health
// checks and sessions' connections as they are.
type nodeSet struct {
	byName map[string]*backend.Node
	order  []*backend.Node // configuration order
}

func newNodeSet(order []*backend.Node) *nodeSet {
	ns := &nodeSet{byName: make(map[string]*backend.Node, len(order)), order: order}
	for _, n := range order {
		ns.byName[n.Name] = n
	}
	return ns
}

// node returns the node named name in force (nil when there is none).
// A reload publishes new nodes before the router that uses them, so a
// plan's nodes are always found.
func (l *liveConfig) node(name string) *backend.Node { return l.nodeSet.Load().byName[name] }

// nodeMap returns the nodes in force by name; the map is never changed
// (a reload publishes a new one). Sessions and the engine call it for
// each lookup (session.State.SetNodeSource, engine.Engine.SetNodeSource).
func (l *liveConfig) nodeMap() map[string]*backend.Node { return l.nodeSet.Load().byName }

// allNodes returns the nodes in force in configuration order (nodes a
// reload added come last); not to be changed.
func (l *liveConfig) allNodes() []*backend.Node { return l.nodeSet.Load().order }
