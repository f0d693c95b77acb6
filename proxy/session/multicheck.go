package session

import (
	"slices"

	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/router"
)

// Step is one statement of a split multi-statement text as CheckSteps
// sees it before any of the text runs: what it is (router.Classify) and
// the nodes its plan runs on.
type Step struct {
	Stmt  router.Stmt
	Nodes []string
}

// CheckSteps returns the error the first of steps that would be refused
// gets when they run one after the other as texts of their own (Acquire's
// checkHome and canUseAnotherNode, with what the earlier steps leave on
// the session), or nil: a multi-statement text is refused before any of
// it runs exactly when running its statements one by one would refuse
// one of them. txn reports a BEGIN in the text. It changes nothing.
//
// What a step leaves is taken as After records it for a statement that
// succeeds: a sticky statement that the session does not carry keeps its
// nodes' connections and, unless it is a SET the session repeats, is state
// no other node can be given (NoteState, noteHomes).
func (ss *stmtState) CheckSteps(steps []Step, txn bool) error {
	s := ss.s
	inTxn := txn || s.InTxn()
	held := make([]string, 0, len(s.pinned)+2) // nodes whose connections the session keeps
	for _, bc := range s.pinned {
		held = append(held, bc.Node().Name)
	}
	homes := slices.Clone(ss.homes)
	sticky, unreplayable := s.sticky, s.unreplayable
	for _, step := range steps {
		st := step.Stmt
		if st.Carried && !st.Multi {
			st.Sticky = false // carry: the session repeats what it leaves
		}
		portable := !st.Multi && !st.ReadsHeld && (!st.ReadsVars || !ss.varsUnknown)
		lends := portable && !ss.opaque // lend
		// lent: its connection to a new node goes back after it (giveBack)
		lent := sticky && unreplayable != "" && lends && !inTxn && !st.Sticky && !st.AssignsVars
		for _, name := range step.Nodes {
			if s.node(name) == nil {
				continue
			}
			if !portable && unreplayable != "" && len(homes) > 0 && !slices.Contains(homes, name) {
				return multiHeldElsewhere(name, homes[0], unreplayable)
			}
			if slices.Contains(held, name) {
				continue
			}
			if len(held) > 0 {
				switch {
				case inTxn && s.singleNodeTxn:
					return mysql.NewError(mysql.ErNotSupported,
						"this multi-statement text runs on node %s but its transaction is on node %s, and transaction_mode is single; nothing of it ran", name, held[0])
				case sticky && unreplayable != "" && !lends:
					return multiHeldElsewhere(name, held[0], unreplayable)
				}
			}
			if inTxn || sticky && !lent {
				held = append(held, name)
			}
		}
		if !st.Sticky || len(step.Nodes) == 0 {
			continue
		}
		sticky = true
		if unreplayable == "" && (st.Keyword != "SET" || st.Effects) {
			unreplayable = "a " + st.Keyword + " statement"
		}
		for _, name := range step.Nodes {
			if !slices.Contains(held, name) {
				held = append(held, name)
			}
			if unreplayable != "" && !slices.Contains(homes, name) {
				homes = append(homes, name)
			}
		}
	}
	return nil
}

// CheckNodes is CheckSteps for a text on nodes, in order, whose statements
// the proxy does not look at: none of them may run away from the state the
// session keeps.
func (ss *stmtState) CheckNodes(nodes []string, txn bool) error {
	return ss.CheckSteps([]Step{{Stmt: router.Stmt{Multi: true}, Nodes: nodes}}, txn)
}

// multiHeldElsewhere is the error of a multi-statement text one of whose
// statements would run on node while the session's state on home cannot
// follow it.
func multiHeldElsewhere(node, home, unreplayable string) error {
	return mysql.NewError(mysql.ErNotSupported, "this multi-statement text runs on node %s but the session holds state on node %s created by %s, which cannot be repeated on another node; nothing of it ran", node, home, unreplayable)
}
