package server

import (
	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/proxy/metrics"
)

// A proxy in a fleet (package fleet, wired by cmd/proxy) is driven
// through three methods: Reload applies each topology version, NodeHealth
// is what it reports of the servers, and FollowMaster moves a node's
// writes to the master the fleet's leader recorded. The server itself
// knows nothing of etcd.

// FleetOptions connect the server to its fleet (Options.Fleet).
type FleetOptions struct {
	// Status returns the fleet as the proxy last saw it, for /stats, the
	// status page and /metrics.
	Status func() *metrics.FleetStats
	// Cutover, when set, announces this proxy's cutovers to the fleet
	// (cutover.go; fleet.Agent.Cutover): the other proxies hold the
	// table's statements too.
	Cutover FleetCutover
}

// NodeHealth returns what the proxy's health checks last saw of each
// node's servers.
func (s *Server) NodeHealth() map[string]backend.Health {
	out := make(map[string]backend.Health)
	for _, n := range s.allNodes() {
		out[n.Name] = n.Health()
	}
	return out
}

// FollowMaster makes addr the master of node, as the fleet's leader
// recorded it (a node the proxy does not have yet is skipped: the
// version that adds it brings its master too).
func (s *Server) FollowMaster(node, addr string) {
	n := s.node(node)
	if n == nil || addr == "" {
		return
	}
	n.FollowFleet()
	if n.Addr() != addr {
		s.log.Warn("following the fleet's recorded master")
		n.SwitchMaster(addr)
	}
}

// fleetStats returns the fleet's stats, nil without a fleet.
func (s *Server) fleetStats() *metrics.FleetStats {
	if s.fleet == nil || s.fleet.Status == nil {
		return nil
	}
	return s.fleet.Status()
}
