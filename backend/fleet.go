package backend

import "slices"

// Health is what this proxy's checks last said of a node's servers: the
// master's address, whether it answers and is writable, and the replicas
// that look promoted (writable, no longer replicating). In a fleet every
// proxy publishes it, and the leader decides a master switch from all of
// them.
type Health struct {
	Master   string
	Up       bool
	ReadOnly bool
	Promoted []string
}

// Health returns the node's Health now.
func (n *Node) Health() Health {
	h := Health{Master: n.Addr(), Up: n.up.Load(), ReadOnly: n.readOnly.Load()}
	for _, r := range n.Replicas() {
		if r.status.Load().Promoted && r.Up() && r.Addr() != h.Master {
			h.Promoted = append(h.Promoted, r.Addr())
		}
	}
	slices.Sort(h.Promoted)
	return h
}

// FollowFleet makes the node's master the one a fleet records: the node
// stops following promotions its own checks see (followPromotion), and
// the caller moves it with SwitchMaster.
func (n *Node) FollowFleet() { n.fleetMaster.Store(true) }
