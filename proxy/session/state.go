package session

import (
	"context"
	"fmt"
	"slices"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/router"
	"github.com/shardgate/shardgate/xa"
)

// State is one client session's state and the backend connections it
// holds. It is owned by the goroutine serving the client.
type State struct {
	nodeSet // nodes.go
	// locked names the nodes where the session holds table locks (LOCK
	// TABLES), on the connection it keeps there.
	locked   []string
	profiles // profiling.go

	Variant uint32 // the client capabilities that select a backend pool partition
	DB      string
	Coll    byte // collation of the connection (SET NAMES)
	// ClientCharset is the character set the client's text is in when it
	// changed it other than by a SET NAMES the proxy knows (SET CHARACTER
	// SET, SET character_set_client), as the server reported it; "" when
	// it is Coll's.
	ClientCharset string
	HandshakeColl byte // the collation the client logged in with
	MultiStmts    bool
	Status        uint16 // server status of the last response
	LastInsertID  uint64 // last non-zero insert id reported to the client
	// dedicated is the session's own backend connection when the client
	// logged in with a backend account (Dedicate): every statement runs on
	// it, and nothing else.
	dedicated *backend.Conn
	// EndWarnings are the warnings of the servers' answers to the last
	// End (ROLLBACK of non-transactional changes: 1196).
	EndWarnings uint16
	// mode is the session's sql_mode as the server last reported it
	// (session tracking), as far as it changes how text is read.
	mode router.Mode

	// pinned are the backend connections the session holds between
	// statements, at most one per node: for its whole life once sticky
	// (the connection carries state the client created), while a
	// transaction is open, or for one statement after a response with
	// warnings (for SHOW WARNINGS).
	pinned []*backend.Conn
	// owner is the session in the pools: the pooled connection it used
	// last is its own again at its next statement unless another session
	// took it, and stays open past the idle timeout until the session
	// leaves (backend.Owner): MariaDB's per-session status counters stay
	// the session's.
	owner  *backend.Owner
	sticky bool
	// replay holds the SET statements that made the session sticky; they
	// are run on a connection to another node before it is pinned, so
	// every node sees the same session variables.
	replay []string
	// unreplayable names the first state the proxy cannot copy to another
	// node (temporary tables, locks, user variables outside SET, ...);
	// statements on a second node are refused while it is set.
	unreplayable string

	txnState // the open transaction (txn.go, xa.go)
	varState // variables carried to every connection (vars.go)
	stmtState
	readState
	trackState // the client's session state trackers (track.go)

	// ctx is the client connection's context (SetContext): every backend
	// call of the session takes it, so a client that is gone, or killed,
	// waits for no pool, no server and no sidecar any more.
	ctx context.Context
	// knobs are the test hooks of the session's server (SetKnobs).
	knobs *Knobs

	// Stmts are the prepared statements the proxy keeps for the session.
	Stmts Stmts
}

// New returns the state of a session that logged in with collation coll
// and the given client capabilities.
func New(nodes map[string]*backend.Node, singleNodeTxn bool, coll byte, variant uint32, multiStmts bool) *State {
	s := &State{nodeSet: nodeSet{nodes: nodes}, Variant: variant, Coll: coll, HandshakeColl: coll, MultiStmts: multiStmts, Status: mysql.StatusAutocommit}
	s.txnState.s, s.varState.s, s.readState.s, s.stmtState.s = s, s, s, s
	s.RowCount = -1
	s.owner = new(backend.Owner)
	s.ctx, s.knobs = context.Background(), noKnobs
	s.singleNodeTxn = singleNodeTxn
	return s
}

// SetContext sets the context of the client connection the session
// serves; every backend call of the session takes it.
func (s *State) SetContext(ctx context.Context) { s.ctx = ctx }

// SetTxnMode sets the session's transaction_mode (config.TransactionMulti,
// TransactionSingle or TransactionXA); co is the coordinator xa needs.
func (s *State) SetTxnMode(mode string, co *xa.Coordinator) {
	s.singleNodeTxn = mode == config.TransactionSingle
	s.xa = nil
	if mode == config.TransactionXA {
		s.xa = co
	}
}

// HoldsState reports whether losing a connection the session holds loses
// something of the session (its state or its transaction): the client
// connection must then close, as a server crash would close it.
func (s *State) HoldsState() bool {
	// joined: a transaction reached a node even when the last response
	// (a SET run outside it) did not say InTrans.
	return s.sticky || s.Status&mysql.StatusInTrans != 0 || len(s.joined) > 0 || s.lost != ""
}

// TxnLost names a node whose connection the open transaction lost: that
// node's part of it is gone, so none of it may commit ("" when none).
func (ts *txnState) TxnLost() string { return ts.lost }

// maxReplay bounds the SET statements kept for replay on other nodes.
const maxReplay = 256

// SetOnOtherNodes runs a SET that succeeded on node on the connections the
// session holds to its other nodes, so every node sees the same session
// (autocommit, isolation level, sql_mode, ...). The response already went
// to the client: on failure the caller must close the session rather than
// leave the nodes disagreeing.
func (s *State) SetOnOtherNodes(node, sql string) error {
	for _, bc := range s.pinned {
		if bc.Node().Name == node {
			continue
		}
		// The SET may read user variables (SET x = @saved): they must
		// have the session's values there first.
		if len(s.vars) > 0 || len(bc.Vars) > 0 {
			if err := s.syncVars(bc); err != nil {
				return fmt.Errorf("SET on node %s: %w", bc.Node().Name, err)
			}
		}
		if _, err := bc.Run(sql); err != nil { // the client's own SET, without the proxy's deadline
			return fmt.Errorf("SET on node %s: %w", bc.Node().Name, err)
		}
	}
	return nil
}

// Reset brings the session back to a new connection's state (the
// database is kept, as MySQL keeps it), after resetting and returning
// every connection it held.
func (s *State) Reset() {
	if bc := s.dedicated; bc != nil {
		// The session's own connection stays: the server resets it.
		s.pinned = s.pinned[:0]
		if err := bc.ResetConnection(s.HandshakeColl); err != nil {
			bc.MarkBroken()
		}
		defer func() { s.Dedicate(bc) }()
	} else {
		s.ReleaseAll()
	}
	s.newTxn(router.Txn{})
	s.Stmts = Stmts{}
	s.vars = nil
	s.sticky = false
	s.locked = nil
	s.profiled = nil
	s.replay = nil
	s.unreplayable, s.opaque, s.varsUnknown, s.homes, s.varsHomes, s.varsAnywhere = "", false, false, nil, nil, false
	s.Coll = s.HandshakeColl
	s.ClientCharset = ""
	s.LastInsertID, s.RowCount, s.FoundRows = 0, -1, 0
	s.mode = 0
	s.WaitTimeout = 0
	s.CompletionType, s.divPrec = 0, 0
	s.Status = mysql.StatusAutocommit
	s.forgetTrackers()
}

// Mode is how the session's sql_mode reads statement text: the mode the
// server last reported, with the two flags every response's status
// carries (so a server whose global sql_mode has them is read right from
// the first statement).
func (s *State) Mode() router.Mode {
	m := s.mode
	if s.Status&mysql.StatusNoBackslashEscapes != 0 {
		m |= router.ModeNoBackslashEscapes
	}
	if s.Status&mysql.StatusAnsiQuotes != 0 {
		m |= router.ModeANSIQuotes
	}
	return m
}

// NoteLocks records that LOCK TABLES succeeded on nodes: the session keeps
// its connections there (they hold the locks) until UNLOCK TABLES. Locks
// are state the session may hold on several nodes at once, so unlike other
// state they do not keep the session from reaching other nodes.
func (s *State) NoteLocks(nodes []string) {
	s.sticky = true
	for _, n := range nodes {
		if !slices.Contains(s.locked, n) {
			s.locked = append(s.locked, n)
		}
	}
}

// Locked reports whether the session holds table locks.
func (s *State) Locked() bool { return len(s.locked) > 0 }

// Unlock runs UNLOCK TABLES on every connection that holds the session's
// table locks. A failure leaves the connection broken (its locks go with
// it when it closes).
func (s *State) Unlock() error {
	var first error
	for _, bc := range s.pinned {
		if !slices.Contains(s.locked, bc.Node().Name) {
			continue
		}
		if _, err := bc.Exec("UNLOCK TABLES"); err != nil {
			bc.MarkBroken()
			if first == nil {
				first = fmt.Errorf("UNLOCK TABLES on node %s: %w", bc.Node().Name, err)
			}
		}
	}
	s.locked = nil
	if first == nil && s.xa == nil && s.InTxn() {
		// UNLOCK TABLES that releases the locks of LOCK TABLES commits
		// the open transaction, as MariaDB's does: on every node.
		first = s.End(true)
	}
	return first
}
