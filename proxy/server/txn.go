package server

import (
	"fmt"
	"slices"
	"strings"

	"go.uber.org/zap"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/router"
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
// This is not two-phase commit: when a later node fails to commit, the
// earlier ones have committed. The client gets ERROR 1180 naming the nodes
// that committed and those rolled back.

// txnVerb is what a transaction statement does.
type txnVerb uint8

const (
	txnNone txnVerb = iota
	txnBegin
	txnCommit
	txnRollback
	txnSavepoint
	txnRollbackTo
	txnRelease
)

// parseTxn recognises transaction control statements and returns the
// savepoint name for the savepoint forms.
func parseTxn(sql string) (txnVerb, string) {
	w := strings.Fields(strings.ToUpper(strings.TrimRight(stripComments(sql), "; \t\r\n")))
	orig := strings.Fields(strings.TrimRight(stripComments(sql), "; \t\r\n"))
	if len(w) == 0 {
		return txnNone, ""
	}
	name := func(i int) string {
		if i >= len(orig) {
			return ""
		}
		return strings.ToLower(strings.Trim(orig[i], "`"))
	}
	switch w[0] {
	case "BEGIN":
		if len(w) == 1 || (len(w) == 2 && w[1] == "WORK") {
			return txnBegin, ""
		}
	case "START":
		if len(w) >= 2 && w[1] == "TRANSACTION" {
			return txnBegin, ""
		}
	case "COMMIT", "ROLLBACK":
		i := 1
		if i < len(w) && w[i] == "WORK" {
			i++
		}
		if w[0] == "ROLLBACK" && i < len(w) && w[i] == "TO" {
			i++
			if i < len(w) && w[i] == "SAVEPOINT" {
				i++
			}
			return txnRollbackTo, name(i)
		}
		// AND [NO] CHAIN and [NO] RELEASE are refused by the caller.
		if i != len(w) {
			return txnNone, ""
		}
		if w[0] == "COMMIT" {
			return txnCommit, ""
		}
		return txnRollback, ""
	case "SAVEPOINT":
		if len(w) == 2 {
			return txnSavepoint, name(1)
		}
	case "RELEASE":
		if len(w) == 3 && w[1] == "SAVEPOINT" {
			return txnRelease, name(2)
		}
	}
	return txnNone, ""
}

// stripComments removes leading /* */ and -- comments (a client may put a
// hint or a trace id there).
func stripComments(sql string) string {
	for {
		s := strings.TrimLeft(sql, " \t\r\n")
		switch {
		case strings.HasPrefix(s, "/*"):
			end := strings.Index(s[2:], "*/")
			if end < 0 {
				return s
			}
			sql = s[end+4:]
		case strings.HasPrefix(s, "-- "), strings.HasPrefix(s, "#"):
			end := strings.IndexByte(s, '\n')
			if end < 0 {
				return ""
			}
			sql = s[end+1:]
		default:
			return s
		}
	}
}

// inTxn reports whether statements run inside a transaction: an explicit
// one the proxy is tracking, or autocommit is off, or a backend says one is
// open (e.g. begun inside a multi-statement text).
func (ss *session) inTxn() bool {
	return ss.txn != "" || ss.status&mysql.StatusAutocommit == 0 || ss.status&mysql.StatusInTrans != 0
}

// txnStatement runs a transaction control statement. handled is false when
// the statement is not one the proxy manages (it then runs as usual).
func (ss *session) txnStatement(sql string) (handled bool, err error) {
	verb, name := parseTxn(sql)
	switch verb {
	case txnNone:
		if st := router.Classify(sql); st.Kind == router.KindTxn && st.Keyword != "START" && st.Keyword != "BEGIN" {
			// COMMIT/ROLLBACK with AND CHAIN or RELEASE.
			return true, mysql.NewError(mysql.ErNotSupported, "%s with AND CHAIN or RELEASE is not supported by shardgate; use COMMIT or ROLLBACK and start a new transaction", st.Keyword)
		}
		return false, nil
	case txnBegin:
		// BEGIN inside a transaction commits it first, as in MySQL.
		if len(ss.pinned) > 0 && ss.inTxn() {
			if err := ss.endAll("COMMIT", true); err != nil {
				return true, err
			}
		}
		ss.txn = sql
		ss.savepoints = ss.savepoints[:0]
		ss.status |= mysql.StatusInTrans
		return true, ss.writeOK(mysql.OK{Status: ss.status})
	case txnCommit, txnRollback:
		word := "COMMIT"
		if verb == txnRollback {
			word = "ROLLBACK"
		}
		if err := ss.endAll(word, verb == txnCommit); err != nil {
			return true, err
		}
		return true, ss.writeOK(mysql.OK{Status: ss.status})
	case txnSavepoint, txnRollbackTo, txnRelease:
		if verb != txnSavepoint && len(ss.pinned) == 0 && !slices.ContainsFunc(ss.savepoints, func(sp savepoint) bool { return sp.name == name }) {
			return true, mysql.NewError(mysql.ErSPDoesNotExist, "SAVEPOINT %s does not exist", name)
		}
		for _, bc := range ss.pinned {
			if _, err := bc.Exec(sql); err != nil {
				return true, ss.txnBackendErr(bc, err)
			}
		}
		ss.noteSavepoint(verb, name, sql)
		return true, ss.writeOK(mysql.OK{Status: ss.status})
	}
	return false, nil
}

// noteSavepoint keeps the list of savepoints that a node joining the
// transaction later must also set.
func (ss *session) noteSavepoint(verb txnVerb, name, sql string) {
	if ss.txn == "" {
		return
	}
	idx := -1
	for i, sp := range ss.savepoints {
		if sp.name == name {
			idx = i
		}
	}
	switch verb {
	case txnSavepoint:
		if idx >= 0 { // setting an existing name moves it
			ss.savepoints = append(ss.savepoints[:idx], ss.savepoints[idx+1:]...)
		}
		ss.savepoints = append(ss.savepoints, savepoint{name: name, sql: sql})
	case txnRollbackTo:
		if idx >= 0 {
			ss.savepoints = ss.savepoints[:idx+1]
		}
	case txnRelease:
		if idx >= 0 {
			ss.savepoints = ss.savepoints[:idx]
		}
	}
}

// savepoint is one SAVEPOINT of the open transaction.
type savepoint struct{ name, sql string }

// endAll sends COMMIT or ROLLBACK to every connection the session holds,
// in the order the transaction reached them, and ends the transaction.
// When a commit fails part way, the remaining nodes are rolled back and the
// error says which nodes committed.
func (ss *session) endAll(word string, commit bool) error {
	ss.txn = ""
	ss.savepoints = ss.savepoints[:0]
	clear(ss.joined)
	ss.joined = ss.joined[:0]
	ss.status &^= mysql.StatusInTrans
	var done, failed, rolledBack []string
	var firstErr error
	for _, bc := range ss.pinned {
		w := word
		if firstErr != nil {
			w = "ROLLBACK"
		}
		_, err := bc.Exec(w)
		switch {
		case err == nil && firstErr == nil:
			done = append(done, bc.Node().Name)
		case err == nil:
			rolledBack = append(rolledBack, bc.Node().Name)
		default:
			if bc.Broken() {
				failed = append(failed, bc.Node().Name+" (connection lost)")
			} else {
				failed = append(failed, bc.Node().Name)
			}
			if firstErr == nil {
				firstErr = err
			}
		}
	}
	ss.releaseAfterTxn()
	if firstErr == nil {
		return nil
	}
	if !commit || len(done) == 0 {
		// Nothing is half committed: report the backend's own error.
		return firstErr
	}
	ss.log.Error("transaction committed on some nodes only", zap.Strings("committed", done),
		zap.Strings("failed", failed), zap.Strings("rolled_back", rolledBack), zap.Error(firstErr))
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
// autocommit off, which starts the next transaction at once).
func (ss *session) releaseAfterTxn() {
	if ss.sticky || ss.status&mysql.StatusAutocommit == 0 {
		// Broken ones still go back (and are closed).
		keep := ss.pinned[:0]
		for _, bc := range ss.pinned {
			if bc.Broken() {
				bc.Node().Put(bc)
				continue
			}
			keep = append(keep, bc)
		}
		clear(ss.pinned[len(keep):])
		ss.pinned = keep
		return
	}
	for _, bc := range ss.pinned {
		bc.Node().Put(bc)
	}
	clear(ss.pinned)
	ss.pinned = ss.pinned[:0]
}

// txnBackendErr turns a failure of a statement the proxy sent on a pinned
// connection into the client's error.
func (ss *session) txnBackendErr(bc *backend.Conn, err error) error {
	if bc.Broken() {
		return ss.backendLost(bc)
	}
	return err
}

// joinTxn opens the session's transaction on a connection to a node it
// has not reached yet.
func (ss *session) joinTxn(bc *backend.Conn) error {
	if ss.txn == "" {
		return nil
	}
	if _, err := bc.Exec(ss.txn); err != nil {
		return fmt.Errorf("starting the transaction on node %s: %w", bc.Node().Name, err)
	}
	for _, sp := range ss.savepoints {
		if _, err := bc.Exec(sp.sql); err != nil {
			return fmt.Errorf("setting savepoint %s on node %s: %w", sp.name, bc.Node().Name, err)
		}
	}
	return nil
}

// txnNodeCheck refuses, in transaction_mode single, a statement that would
// take a transaction to a second node.
func (ss *session) txnNodeCheck(n *backend.Node) error {
	if ss.srv.cfg.TransactionMode != config.TransactionSingle || len(ss.pinned) == 0 {
		return nil
	}
	return mysql.NewError(mysql.ErNotSupported,
		"this statement runs on node %s but the open transaction is on node %s, and transaction_mode is single; commit first, or set transaction_mode: multi",
		n.Name, ss.pinned[0].Node().Name)
}
