package session

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/router"
	"github.com/shardgate/shardgate/xa"
)

// Transactions in transaction_mode xa: every node the transaction reaches
// begins it with XA START (joinTxn) instead of START TRANSACTION, and End
// finishes the branches (package xa has the protocol). START TRANSACTION
// READ ONLY has nothing to commit and runs as in multi. SAVEPOINT, ROLLBACK
// TO and RELEASE SAVEPOINT work inside XA branches as in plain
// transactions; statements that commit implicitly (DDL) commit the
// transaction first, two-phase, as COMMIT would.

// xaEligible reports whether the open transaction runs as XA: all but
// START TRANSACTION READ ONLY.
func (ts *txnState) xaEligible() bool {
	s := ts.s
	return !s.txn.ReadOnly
}

// BeginImplicitXA opens, in transaction_mode xa, the transaction of one
// statement outside any transaction that writes on several nodes (in
// MariaDB one statement is one transaction): its nodes begin XA branches as
// the statement reaches them, and the caller ends it with End. The
// client's status flags do not show it. It reports whether it opened one.
func (ts *txnState) BeginImplicitXA(nodes []string) bool {
	s := ts.s
	if s.xa == nil || len(nodes) < 2 || s.InTxn() || len(s.locked) > 0 {
		return false // under LOCK TABLES, XA START is refused
	}
	s.newTxn(router.Txn{Verb: router.TxnBegin, SQL: "START TRANSACTION"})
	return true
}

// XATxn returns the open XA transaction's id (zero when none).
func (ts *txnState) XATxn() xa.Txn { return ts.xaTxn }

// endXA ends an XA transaction: ROLLBACK everywhere; COMMIT on one node in
// one phase; COMMIT on several in two.
func (ts *txnState) endXA(commit bool) error {
	s := ts.s
	t := s.xaTxn
	branches := s.branches[:0]
	for _, bc := range s.pinned {
		if slices.Contains(s.joined, bc) {
			branches = append(branches, bc)
		}
	}
	lost := s.lost
	for _, bc := range s.joined {
		if bc.Broken() || !slices.Contains(branches, bc) {
			lost = bc.Node().Name // its branch is gone (the server rolled it back)
		}
	}
	s.branches = branches
	s.newTxn(router.Txn{})
	s.Status &^= mysql.StatusInTrans | mysql.StatusInTransReadonly
	s.EndWarnings = 0
	var err error
	var warned []*backend.Conn
	switch {
	case commit && lost != "":
		s.xaRollback(t, branches, nil)
		err = mysql.NewError(mysql.ErXARBRollback, "XA_RBROLLBACK: Transaction branch was rolled back: the connection to node %s was lost during the transaction; rolled back on every node", lost)
	case !commit:
		_, warned = s.xaRollback(t, branches, nil)
	case len(branches) == 1:
		err = s.xaOnePhase(t, branches[0])
	case len(branches) > 1:
		err = s.xaTwoPhase(t, branches)
	}
	clear(s.branches)
	s.releaseAfterTxn(warned)
	return err
}

// xaOnePhase commits the only branch: XA END and XA COMMIT ... ONE PHASE in
// one round trip. When it does not commit (a deadlock made the branch
// rollback-only, say) it is rolled back and the client gets the server's
// error.
func (ts *txnState) xaOnePhase(t xa.Txn, bc *backend.Conn) error {
	s := ts.s
	x := t.XID(bc.Node().Name)
	_, e1, e2 := bc.ExecPair("XA END "+x, "XA COMMIT "+x+" ONE PHASE")
	if e1 == nil && e2 == nil {
		s.xa.NoteOnePhase()
		return nil
	}
	err := cmpErr(e1, e2)
	if bc.Broken() {
		// The answer is lost: the commit may have happened.
		return fmt.Errorf("%w: node %s: %v", ErrCommitUnknown, bc.Node().Name, err)
	}
	if _, e := bc.Exec("XA ROLLBACK " + x); e != nil && !rolledBack(e) {
		bc.MarkBroken()
	}
	return err
}

// xaTwoPhase commits branches with two-phase commit. Each phase goes to
// every node at the same time (each branch has its own connection).
func (ts *txnState) xaTwoPhase(t xa.Txn, branches []*backend.Conn) error {
	s := ts.s
	s.xa.Enter(t)
	errs := make([]error, len(branches))
	onEach(branches, errs, func(bc *backend.Conn) error {
		x := t.XID(bc.Node().Name)
		_, e1, e2 := bc.ExecPair("XA END "+x, "XA PREPARE "+x)
		return cmpErr(e1, e2)
	})
	var err error
	for _, e := range errs {
		if e != nil {
			err = e
			break
		}
	}
	if err == nil {
		s.knobs.xaStage(XABeforeDecision, "")
		var outcome xa.Outcome
		outcome, err = s.xa.Decide(s.ctx, t)
		switch outcome {
		case xa.Commit:
			onEach(branches, errs, func(bc *backend.Conn) error {
				s.knobs.xaStage(XABeforeCommit, bc.Node().Name)
				_, e := bc.Exec("XA COMMIT " + t.XID(bc.Node().Name))
				return e
			})
			done := true
			for i, e := range errs {
				if e != nil {
					// The decision is durable: the client is told the
					// transaction committed, and recovery commits this
					// branch once the node answers. Its connection closes
					// now, so the branch is free for recovery.
					done = false
					branches[i].MarkBroken()
					branches[i].Abort()
				}
			}
			s.xa.Finish(t, true, done)
			return nil
		case xa.Unknown:
			var names []string
			for _, bc := range branches {
				names = append(names, bc.Node().Name)
				bc.MarkBroken()
				bc.Abort()
			}
			s.xa.Finish(t, false, false)
			return mysql.NewError(mysql.ErErrorDuringCommit,
				"Got error during COMMIT: the transaction is prepared on %s but its commit decision could not be written or read (%v); recovery commits or rolls it back everywhere once the sidecar answers",
				strings.Join(names, ", "), err)
		}
		err = mysql.NewError(mysql.ErXARBRollback, "XA_RBROLLBACK: Transaction branch was rolled back: the commit decision could not be written (%v); the transaction was rolled back on every node", err)
	}
	// A branch may be prepared unless its server answered the PREPARE
	// with an error (a lost answer may hide a PREPARE that happened).
	prepared := make([]bool, len(branches))
	for i, e := range errs {
		prepared[i] = e == nil || branches[i].Broken()
	}
	done, _ := s.xaRollback(t, branches, prepared)
	s.xa.Finish(t, false, done)
	return err
}

// onEach runs f on every branch at the same time and puts its results in
// errs.
func onEach(branches []*backend.Conn, errs []error, f func(bc *backend.Conn) error) {
	var wg sync.WaitGroup
	for i := 1; i < len(branches); i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f(branches[i])
		}()
	}
	errs[0] = f(branches[0])
	wg.Wait()
}

// xaRollback rolls back every branch: XA END (which fails harmlessly on a
// branch that is prepared or rollback-only already) and XA ROLLBACK, in one
// round trip. A branch that cannot be rolled back has its connection
// closed: the server rolls back an unprepared branch then; one that may be
// prepared (prepared[i]; nil: none) is left to recovery, and done is
// false. It returns the connections whose answer had warnings (1196).
func (ts *txnState) xaRollback(t xa.Txn, branches []*backend.Conn, prepared []bool) (done bool, warned []*backend.Conn) {
	s := ts.s
	done = true
	for i, bc := range branches {
		if !bc.Broken() {
			x := t.XID(bc.Node().Name)
			ok, _, e := bc.ExecPair("XA END "+x, "XA ROLLBACK "+x)
			if e == nil || rolledBack(e) {
				if ok.Warnings > 0 {
					s.EndWarnings += ok.Warnings
					warned = append(warned, bc)
				}
				continue
			}
			bc.MarkBroken()
			bc.Abort()
		}
		if prepared != nil && prepared[i] {
			done = false
		}
	}
	return done, warned
}

func cmpErr(e1, e2 error) error {
	if e1 != nil {
		return e1
	}
	return e2
}

// rolledBack reports the errors of an XA ROLLBACK that leave the branch
// rolled back: XAER_NOTA (not there: finished already) and XA_RBROLLBACK
// (MariaDB's answer for a branch that wrote nothing).
func rolledBack(err error) bool {
	var se *mysql.SQLError
	return errors.As(err, &se) && (se.Code == mysql.ErXAERNota || se.Code == mysql.ErXARBRollback)
}
