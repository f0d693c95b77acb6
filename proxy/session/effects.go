package session

import (
	"github.com/shardgate/shardgate/router"
)

// A statement's effects on the session are decided once, by the router
// (router.Stmt, router.Plan), and applied here, in two places: Before the
// statement runs and After it answered. The server calls them around
// every statement it routes, and nothing else decides implicit commits,
// transactions left out, where reads go, or what a statement leaves on a
// connection that the session must keep.

// Outcome is what a routed statement did, for After.
type Outcome struct {
	// Err is the statement's error (nil when it succeeded).
	Err error
	// OK is set when the backend answered a forwarded statement with OK
	// (not a result set, not an error).
	OK bool
}

// Before applies the effects that precede a statement: DDL commits the
// open transaction first, on every node, as MariaDB's DDL does (CREATE and
// DROP TEMPORARY TABLE do not); DDL, LOCK TABLES and UNLOCK TABLES run
// outside the transaction (they join no XA branch). A multi-statement
// text has neither: the server applies them statement by statement on the
// one connection the text runs on. Before also settles st.Multi: a text
// of several statements is one only when the client enabled them. After
// must follow every Before that returned nil.
func (s *State) Before(st *router.Stmt) error {
	st.Multi = st.Multi && s.MultiStmts
	s.carry(st)
	if st.Multi {
		return nil
	}
	if st.ImplicitCommit {
		if err := s.CommitImplicitly(); err != nil {
			return err
		}
	}
	s.SetOutsideTxn(st.OutsideTxn)
	return nil
}

// Route says where the reads of a statement planned as kind may go (Read):
// a replica may answer what the router allows (router.ReplicaUse) when the
// session's schema splits reads (split) and the plan runs on one target or
// concatenates; everything else goes to the master.
func (s *State) Route(st *router.Stmt, kind router.PlanKind, split bool) {
	s.Read = ReadMaster
	if !split || kind != router.Forward && kind != router.Concat {
		return
	}
	switch st.Replica {
	case router.ReplicaAny:
		s.Read = ReadReplica
	case router.ReplicaFollow:
		s.Read = ReadFollow
	}
}

// After records what a statement left on the session, from its facts, its
// plan and its outcome, and ends the statement (reads go to the master
// again, the transaction is no longer left out):
//   - LOCK TABLES: the nodes that hold the locks, whose connections the
//     session keeps; a LOCK TABLES that failed on some nodes releases the
//     locks the others took, as MariaDB releases those of a failed LOCK
//     TABLES.
//   - A statement that left state the server does not report (sticky):
//     the session keeps the connection, and remembers how to repeat the
//     state on another node (SET) or that it cannot.
//   - A SET: the connections the session holds to other nodes get it too.
//
// A non-nil error means the session's nodes now disagree (a SET failed on
// another node after the client got its answer) or a failed LOCK TABLES
// left locks it could not release; the caller decides whether the client
// connection can go on.
func (s *State) After(st *router.Stmt, sql string, plan *router.Plan, o Outcome) error {
	defer s.endStatement()
	if s.readBack {
		if err := s.readBackVars(sql, plan); err != nil {
			return err
		}
	}
	switch {
	case o.Err != nil || plan != nil && plan.Kind == router.Forward && !o.OK || st.Multi:
		// A failed statement's diagnostics are the client's to read:
		// nothing is read on its connection.
		if st.CallsRoutine {
			if plan != nil {
				s.varsLost(plan.Nodes()...)
			} else {
				s.varsLost()
			}
		}
	case st.CallsRoutine || st.Effects && st.Keyword == "SET":
		s.readRoutineVars(plan)
	case st.CalcFoundRows:
		s.readFoundRows(plan)
	}
	s.noteHomes(st, plan, o)
	if plan == nil {
		return nil
	}
	if plan.Kind != router.Forward {
		if !plan.Sticky || !st.LockTables {
			return nil
		}
		if o.Err == nil {
			s.NoteLocks(plan.Nodes())
			return nil
		}
		if st.Multi {
			return nil
		}
		s.NoteLocks(plan.Nodes())
		return s.Unlock()
	}
	if o.Err != nil || !o.OK || !st.Sticky {
		return nil
	}
	node := plan.Targets[0].Node
	if st.LockTables && !st.Multi {
		s.NoteLocks([]string{node})
		return nil
	}
	s.NoteState(*st, sql, st.Multi)
	if st.Keyword == "SET" && !st.Multi {
		return s.SetOnOtherNodes(node, sql)
	}
	return nil
}

// endStatement ends what lasts one statement.
func (s *State) endStatement() {
	s.Read = ReadMaster
	s.outsideTxn = false
	s.readBack, s.held, s.portable, s.stateless, s.lending, s.replayedSet = false, nil, false, false, false, false
	s.inStmt, s.leaves, s.varsRead, s.warned, s.insertSelect, s.ddl, s.offset = false, false, false, false, false, false, 0
}
