package server

import (
	"context"

	"github.com/shardgate/shardgate/move"
)

// In a fleet only the leader runs the data-movement workflows. The fleet's
// agent calls LeadWorkflows for each term this proxy leads; a proxy that
// does not lead records the workflows it is asked to start in the sidecar
// (workflows.Start), where the leader finds them. Without a fleet the
// proxy runs every workflow from its start, as it always did.
//
// Two runners of one workflow are kept apart by the sidecar row: a run
// claims the workflow's lease with the term it leads in (the election
// revision, larger for every later term), a later term takes the lease
// at once, and every save of the run's state is a compare-and-set on
// owner and term (move.Store.SaveOwned). A deposed leader that has not
// noticed yet (frozen, partitioned from etcd) fails its next save and
// stops; its runs never write the state of the new leader's term.

// LeadWorkflows runs the fleet's workflows while this proxy leads, for
// the term term (fleet.Leader): it resumes every saved workflow that has
// not ended, picks up the ones recorded later, and when ctx ends (the
// term is over) stops them where they are, their saved state unchanged.
// It returns once they have stopped.
func (s *Server) LeadWorkflows(ctx context.Context, term int64) {
	// The Kafka sinks of streams: run on the leader too (streams.go).
	streams := s.streams.goLead(ctx)
	defer func() { <-streams }()
	if s.flows == nil {
		<-ctx.Done()
		return
	}
	s.flows.m.Lead(ctx, term, func(w *move.Workflow) { s.gates.gate(w.Spec.Table) })
}

// fleetLeader names the fleet's leader and its admin address, as this
// proxy last saw them ("" when unknown).
func (s *Server) fleetLeader() (id, admin string) {
	st := s.fleetStats()
	if st == nil {
		return "", ""
	}
	for _, m := range st.Members {
		if m.ID == st.Leader {
			return m.ID, m.AdminAddr
		}
	}
	return st.Leader, ""
}
