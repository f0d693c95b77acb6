package session

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/router"
	"github.com/shardgate/shardgate/xa"
)

// Transactions span nodes lazily. BEGIN and START TRANSACTION are answered
// by the proxy; the statement is remembered and run on each node's
// connection just before the first statement of the transaction that
// reaches that node (with the SAVEPOINTs set since), and the connection
// stays pinned to the session until the transaction ends. COMMIT and
// ROLLBACK go to every node the transaction reached, in the order it
// reached them. With autocommit off, every connection the session holds is
// in a transaction already (the replayed SET autocommit=0 opens one on each
// new node), so COMMIT and ROLLBACK fan out the same way.
//
// In transaction_mode multi this is not two-phase commit: when a later
// node fails to commit, the earlier ones have committed. The client gets
// ERROR 1180 naming the nodes that committed and those rolled back. In
// transaction_mode xa (xa.go) each node's part is an XA branch and COMMIT
// is two-phase when there are several.

// txnState is the session's open transaction: the statement that began
// it, its savepoints, the connections it reached, and its XA id in
// transaction_mode xa. It is part of State (embedded) and reaches the
// session's connections through s.
type txnState struct {
	s *State
	// singleNodeTxn is transaction_mode single: a transaction stays on
	// the node it began on.
	singleNodeTxn bool
	// txn is the statement that began the open explicit transaction ("" when
	// none), run on each node the transaction reaches; savepoints are the
	// SAVEPOINTs set in it since, replayed after it (see txn.go).
	txn        router.Txn
	savepoints []savepoint
	joined     []*backend.Conn // connections the open transaction has begun on
	lost       string          // a node whose connection the open transaction lost (its part there is gone)

	// xa is the two-phase commit coordinator when the session's
	// transaction_mode is xa (nil otherwise); xaTxn is the open
	// transaction's id once it began as XA on a node (zero otherwise);
	// branches is scratch space for End.
	xa    *xa.Coordinator
	xaTxn xa.Txn
	// outsideTxn makes Acquire leave the transaction out (AcquireOutsideTxn).
	outsideTxn bool
	branches   []*backend.Conn
}

// InTxn reports whether statements run inside a transaction: an explicit
// one the proxy is tracking, or autocommit is off, or a backend says one is
// open (e.g. begun inside a multi-statement text).
func (ts *txnState) InTxn() bool {
	s := ts.s
	return s.txn.SQL != "" || s.Status&mysql.StatusAutocommit == 0 || s.Status&mysql.StatusInTrans != 0
}

// TxnSQL is the statement that began the open explicit transaction ("" when
// none: autocommit off, or no transaction).
func (ts *txnState) TxnSQL() string { return ts.txn.SQL }

// OpenTxn is the statement that began the open explicit transaction
// (Verb TxnNone when none), for AND CHAIN to begin the next one alike.
func (ts *txnState) OpenTxn() router.Txn { return ts.txn }

// Begin opens an explicit transaction (t, as router.ParseTxn composed it),
// committing the open one first, as MySQL does. No node sees it until a
// statement of the transaction reaches that node.
func (ts *txnState) Begin(t router.Txn) error {
	s := ts.s
	if len(s.pinned) > 0 && s.InTxn() {
		if err := s.End(true); err != nil {
			return err
		}
	}
	s.newTxn(t)
	s.Status |= mysql.StatusInTrans
	if t.ReadOnly {
		s.Status |= mysql.StatusInTransReadonly // as MariaDB's START TRANSACTION READ ONLY
	}
	return nil
}

// CommitImplicitly ends the open transaction with COMMIT when one is open
// on a node, as DDL does in MySQL.
func (ts *txnState) CommitImplicitly() error {
	s := ts.s
	if s.InTxn() && (len(s.pinned) > 0 || s.txn.SQL != "") {
		// Also a BEGIN no statement followed: the transaction ends.
		return s.End(true)
	}
	return nil
}

// Savepoint runs SAVEPOINT, ROLLBACK TO or RELEASE SAVEPOINT (sql, composed
// by ParseTxn) on every node the transaction reached and keeps the list of
// savepoints a node joining later must set.
func (ts *txnState) Savepoint(verb router.TxnVerb, name, sql string) error {
	s := ts.s
	if verb != router.TxnSavepoint && len(s.pinned) == 0 && !slices.ContainsFunc(s.savepoints, func(sp savepoint) bool { return sp.name == name }) {
		return mysql.NewError(mysql.ErSPDoesNotExist, "SAVEPOINT %s does not exist", name)
	}
	for _, bc := range s.pinned {
		if _, err := bc.Exec(sql); err != nil {
			if bc.Broken() {
				return &backend.LostError{Conn: bc, Cause: err}
			}
			return err
		}
	}
	s.noteSavepoint(verb, name, sql)
	return nil
}

// noteSavepoint keeps the list of savepoints that a node joining the
// transaction later must also set.
func (ts *txnState) noteSavepoint(verb router.TxnVerb, name, sql string) {
	s := ts.s
	if s.txn.SQL == "" && s.Status&mysql.StatusAutocommit != 0 {
		return // no transaction: the server keeps no savepoint either
	}
	idx := slices.IndexFunc(s.savepoints, func(sp savepoint) bool { return sp.name == name })
	switch verb {
	case router.TxnSavepoint:
		if idx >= 0 { // setting an existing name moves it
			s.savepoints = slices.Delete(s.savepoints, idx, idx+1)
		}
		s.savepoints = append(s.savepoints, savepoint{name: name, sql: sql})
	case router.TxnRollbackTo:
		if idx >= 0 {
			s.savepoints = s.savepoints[:idx+1]
		}
	case router.TxnRelease:
		if idx >= 0 {
			s.savepoints = s.savepoints[:idx]
		}
	}
}

// ErrCommitUnknown wraps the error of a COMMIT whose answer was lost on
// the first node it went to: it may or may not have committed there. The
// client's connection is closed, as the server's crash during COMMIT
// would close it, rather than answered with an error that says "not
// committed".
var ErrCommitUnknown = errors.New("the connection was lost during COMMIT; the commit may or may not have happened")

// newTxn makes t (TxnNone for none) the open transaction's statement,
// with no savepoint, no node reached and no XA id yet.
func (ts *txnState) newTxn(t router.Txn) {
	s := ts.s
	s.txn = t
	s.xaTxn = xa.Txn{}
	s.savepoints = s.savepoints[:0]
	clear(s.joined)
	s.joined = s.joined[:0]
	s.lost = ""
}

// savepoint is one SAVEPOINT of the open transaction.
type savepoint struct{ name, sql string }

// End sends COMMIT (commit) or ROLLBACK to every connection the session
// holds, in the order the transaction reached them, and ends the
// transaction. When a commit fails part way, the remaining nodes are
// rolled back and the error (1180) says which nodes committed.
func (ts *txnState) End(commit bool) error {
	s := ts.s
	if s.xaTxn.ID != 0 {
		return s.endXA(commit)
	}
	// Said in full when the session's completion_type (the backend's too)
	// would chain a transaction or close the connection: the proxy does
	// what the client's statement means. Plain otherwise, as the client
	// sent it (the server's processlist shows it).
	var lostErr error
	if commit && s.lost != "" {
		// A node's part is gone: nothing of the transaction may commit.
		commit = false
		lostErr = mysql.NewError(mysql.ErErrorDuringCommit, "Got error during COMMIT: the connection to node %s was lost during the transaction; nothing was committed, rolled back on every node", s.lost)
	}
	word, rollback := "ROLLBACK", "ROLLBACK"
	if s.CompletionType != 0 {
		word, rollback = "ROLLBACK AND NO CHAIN NO RELEASE", "ROLLBACK AND NO CHAIN NO RELEASE"
	}
	if commit {
		word = "COMMIT"
		if s.CompletionType != 0 {
			word = "COMMIT AND NO CHAIN NO RELEASE"
		}
	}
	s.newTxn(router.Txn{})
	s.Status &^= mysql.StatusInTrans | mysql.StatusInTransReadonly
	var done, failed, rolledBack []string
	var firstErr error
	var warned []*backend.Conn
	s.EndWarnings = 0
	for _, bc := range s.pinned {
		w := word
		if firstErr != nil {
			w = rollback
		}
		if h := s.knobs.BeforeCommit.Load(); h != nil && commit && firstErr == nil {
			(*h)(bc.Node().Name)
		}
		res, err := bc.Exec(w)
		if err == nil && res.OK.Warnings > 0 {
			// ROLLBACK of changes to non-transactional tables (1196):
			// the session keeps the connection for SHOW WARNINGS.
			s.EndWarnings += res.OK.Warnings
			warned = append(warned, bc)
		}
		switch {
		case err == nil && firstErr == nil:
			done = append(done, bc.Node().Name)
		case err == nil:
			rolledBack = append(rolledBack, bc.Node().Name)
		default:
			if bc.Broken() {
				if commit && firstErr == nil && len(done) == 0 {
					err = fmt.Errorf("%w: node %s: %v", ErrCommitUnknown, bc.Node().Name, err)
				}
				failed = append(failed, bc.Node().Name+" (connection lost)")
			} else {
				failed = append(failed, bc.Node().Name)
			}
			if firstErr == nil {
				firstErr = err
			}
		}
	}
	s.releaseAfterTxn(warned)
	if lostErr != nil {
		return lostErr
	}
	if firstErr == nil {
		return nil
	}
	if !commit || len(done) == 0 {
		// Nothing is half committed: report the backend's own error.
		return firstErr
	}
	return mysql.NewError(mysql.ErErrorDuringCommit, "Got error during COMMIT: the transaction committed on %s; COMMIT failed on %s (%v)%s",
		strings.Join(done, ", "), strings.Join(failed, ", "), firstErr, listSuffix("; rolled back on ", rolledBack))
}

func listSuffix(prefix string, names []string) string {
	if len(names) == 0 {
		return ""
	}
	return prefix + strings.Join(names, ", ")
}

// releaseAfterTxn returns the connections a finished transaction held,
// unless the session keeps them for another reason (session state, or
// autocommit off, which starts the next transaction at once, or warnings
// of the COMMIT or ROLLBACK for the next statement to read: keep).
func (ts *txnState) releaseAfterTxn(keep []*backend.Conn) {
	s := ts.s
	if s.sticky || s.Status&mysql.StatusAutocommit == 0 {
		// Broken ones still go back (and are closed).
		keep := s.pinned[:0]
		for _, bc := range s.pinned {
			if bc.Broken() {
				bc.Node().Put(bc)
				continue
			}
			keep = append(keep, bc)
		}
		clear(s.pinned[len(keep):])
		s.pinned = keep
		return
	}
	kept := s.pinned[:0]
	for _, bc := range s.pinned {
		if slices.Contains(keep, bc) && !bc.Broken() {
			kept = append(kept, bc)
			continue
		}
		bc.Node().Put(bc)
	}
	clear(s.pinned[len(kept):])
	s.pinned = kept
}

// joinTxn opens the session's transaction on a connection to a node it
// has not reached yet.
func (ts *txnState) joinTxn(bc *backend.Conn) error {
	s := ts.s
	if s.xa != nil && s.xaEligible() {
		if s.xaTxn.ID == 0 {
			s.xaTxn = s.xa.Begin()
		}
		if _, err := bc.Exec("XA START " + s.xaTxn.XID(bc.Node().Name)); err != nil {
			return fmt.Errorf("starting the XA transaction on node %s: %w", bc.Node().Name, err)
		}
	} else if s.txn.SQL != "" {
		if _, err := bc.Exec(s.txn.SQL); err != nil {
			return fmt.Errorf("starting the transaction on node %s: %w", bc.Node().Name, err)
		}
	}
	for _, sp := range s.savepoints {
		if _, err := bc.Exec(sp.sql); err != nil {
			return fmt.Errorf("setting savepoint %s on node %s: %w", sp.name, bc.Node().Name, err)
		}
	}
	return nil
}

// txnNodeCheck refuses, in transaction_mode single, a statement that would
// take a transaction to a second node.
func (ts *txnState) txnNodeCheck(n *backend.Node) error {
	s := ts.s
	if !s.singleNodeTxn || len(s.pinned) == 0 {
		return nil
	}
	return mysql.NewError(mysql.ErNotSupported,
		"this statement runs on node %s but the open transaction is on node %s, and transaction_mode is single; commit first, or set transaction_mode: multi",
		n.Name, s.pinned[0].Node().Name)
}
