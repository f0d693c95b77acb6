package session

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/router"
)

// Acquire returns a backend connection to node for the next statement,
// in the session's state: the one the session holds there, or a pooled
// one brought to the session's database, collation, variables and open
// transaction. usesLastID asks for LAST_INSERT_ID() to be the session's.
func (s *State) Acquire(node string, usesLastID bool) (*backend.Conn, error) {
	n := s.node(node)
	if err := s.checkHome(n); err != nil {
		return nil, err
	}
	if rc := s.replicaPinnedOn(n); rc != nil {
		if s.Read != ReadMaster && s.replicaAllowed() {
			return rc, nil // the read before ran there: SHOW WARNINGS sees its warnings
		}
		s.unpin(rc)
		rc.Node().Put(rc)
	}
	bc := s.pinnedOn(n)
	if bc != nil && bc.Stale() {
		var err error
		if bc, err = s.masterMoved(bc); err != nil {
			return nil, err
		}
	}
	if s.dedicated != nil && bc != s.dedicated {
		// Never another connection: it would run as the proxy's account.
		return nil, mysql.NewError(mysql.ErServerLost, "the session's own backend connection is gone (or the statement is for another node than %s)", s.dedicated.Node().Name)
	}
	if bc == nil {
		if err := s.canUseAnotherNode(n); err != nil {
			return nil, err
		}
		if s.Read == ReadReplica {
			bc = s.replicaConn(n)
		}
		if bc == nil {
			var err error
			bc, err = n.GetFor(s.ctx, s.owner, s.Variant, s.DB, s.Coll)
			if err != nil {
				return nil, err
			}
		}
		s.lent(bc)
		if s.sticky && len(s.replay) > 0 {
			if err := s.replayOn(bc, node, usesLastID); err != nil {
				return nil, err
			}
		}
	}
	if s.InTxn() {
		// Every statement of the transaction on this node must use this
		// connection, including the other targets of the same statement.
		s.pin(bc)
	}
	if err := s.syncState(bc, usesLastID); err != nil {
		if s.pinnedOn(n) != bc {
			s.Release(bc, false, backend.Outcome{})
		}
		return nil, err
	}
	// The transaction reaches this node: an explicit one begins there, and
	// its savepoints (also those of a transaction autocommit=0 began) are
	// set there, after the session's settings (autocommit, isolation).
	if (s.txn.SQL != "" || s.Status&mysql.StatusAutocommit == 0) && !s.outsideTxn && !slices.Contains(s.joined, bc) {
		if err := s.joinTxn(bc); err != nil {
			bc.MarkBroken() // its transaction state is unknown
			s.unpin(bc)
			s.Release(bc, false, backend.Outcome{})
			return nil, err
		}
		s.joined = append(s.joined, bc)
	}
	s.using = append(s.using, bc)
	return bc, nil
}

// replayOn brings a connection a sticky session takes to its state: the
// state it carries first, then its SETs, which came after it (a SET the
// proxy does not read back may assign a variable it carries). On failure
// bc is given back (broken when a SET failed on it).
func (vs *varState) replayOn(bc *backend.Conn, node string, usesLastID bool) error {
	s := vs.s
	if err := s.syncState(bc, usesLastID); err != nil {
		s.Release(bc, false, backend.Outcome{})
		return err
	}
	for _, q := range s.replay {
		// The client's own SET: as long as the server lets it run, as
		// the first time (backend.Conn.Run).
		if _, err := bc.Run(q); err != nil {
			// The connection does not have the session's state: it serves
			// no one (a sticky session would keep it).
			bc.MarkBroken()
			s.Release(bc, false, backend.Outcome{})
			return fmt.Errorf("repeating the session's %q on node %s: %w", q, node, err)
		}
	}
	return nil
}

// SetOutsideTxn, in transaction_mode xa, keeps the statements that follow
// (until SetOutsideTxn(false)) from beginning the transaction on the
// connections they use: statements that commit implicitly (DDL, LOCK
// TABLES) are refused inside an XA branch, and in MariaDB they run
// outside any transaction.
func (s *State) SetOutsideTxn(on bool) { s.outsideTxn = on && s.xa != nil }

// AcquireOutsideTxn is Acquire for a tracked SET: in transaction_mode xa
// it does not begin the transaction on the connection when the session
// has none open there (a SET opens none in MariaDB, and SET autocommit
// is refused inside an XA transaction).
func (s *State) AcquireOutsideTxn(node string) (*backend.Conn, error) {
	s.outsideTxn = s.xa != nil
	defer func() { s.outsideTxn = false }()
	return s.Acquire(node, false)
}

// Release decides whether the session keeps bc or returns it to its pool,
// after recording what the response's final OK/EOF says of the session.
// sticky marks a statement that left state on bc the proxy cannot carry.
func (s *State) Release(bc *backend.Conn, sticky bool, o backend.Outcome) {
	if i := slices.Index(s.using, bc); i >= 0 {
		s.using = slices.Delete(s.using, i, i+1)
	}
	if sticky || s.leaves {
		s.sticky = true
	}
	if bc.Broken() {
		s.unpin(bc)
		bc.Node().Put(bc)
		return
	}
	// A fill's NOWAIT reports its lock wait timeouts, and the statement
	// after it on the connection their return (cache.go).
	if s.fillRead {
		bc.FillNoise = true // until the return of the timeouts is seen (absorb)
	}
	noisy := bc.FillNoise
	if s.giveBack(bc, o, noisy) {
		return
	}
	s.warned = s.warned || o.Warnings > 0
	s.noteWarnings(bc, o)
	if o.InsertID != 0 {
		s.LastInsertID = o.InsertID
		bc.LastInsertID = o.InsertID
	}
	if o.OK {
		s.Status = s.statusAfter(bc, o.Status)
	}
	if o.StateChanged {
		s.absorb(bc, o.State, sticky, noisy)
	}
	if o.OK && o.Status&mysql.StatusAutocommit != 0 && o.Status&mysql.StatusInTrans == 0 && s.txn.SQL == "" {
		// SET autocommit = 1 ended, there, the transaction autocommit
		// = 0 had begun: the connection is no longer the transaction's.
		if i := slices.Index(s.joined, bc); i >= 0 {
			s.joined = slices.Delete(s.joined, i, i+1)
		}
	}
	// A connection the open transaction reached stays whatever the last
	// response said: an ERR carries no status, and the transaction is
	// still open there.
	kept := s.sticky || s.InTxn() || slices.Contains(s.joined, bc) ||
		o.Status&mysql.StatusInTrans != 0 || o.Status&mysql.StatusAutocommit == 0 && o.OK || o.Warnings > 0
	if s.hold(bc, kept || s.Holds(bc)) || kept {
		s.pin(bc)
		return
	}
	s.unpin(bc)
	bc.Node().Put(bc)
}

// statusAfter is the session's status after a statement whose last
// answer bc gave with status: the server's, except that a connection
// outside the session's XA transaction (a tracked SET on a pooled
// connection, DDL or LOCK TABLES: AcquireOutsideTxn, SetOutsideTxn) knows
// nothing of it, so the transaction flags stay the session's.
func (s *State) statusAfter(bc *backend.Conn, status uint16) uint16 {
	status &= mysql.StatusSession
	if s.xa != nil && !slices.Contains(s.joined, bc) {
		const txn = mysql.StatusInTrans | mysql.StatusInTransReadonly
		status = status&^txn | s.Status&txn
	}
	return status
}

// absorb takes in what the server reported a client's statement changed
// in its session (state, see mysql.ParseStateChanges). What MariaDB 10.11
// reports, and what it means here (TestServerStateTracking pins it):
//   - the transaction's state and characteristics, at BEGIN, at the first
//     write, at COMMIT: the proxy follows transactions by the status flags;
//     nothing to do;
//   - characteristics holding SET TRANSACTION: the next transaction's
//     isolation or access mode, set on this connection only;
//   - a system variable set (other than by a SET the proxy runs itself),
//     the current schema, or "some other state" (user variables set by
//     SET, temporary tables, SQL prepared statements).
//
// The last two are state the proxy does not carry: the session keeps the
// connection from now on, and it is reset before anyone else gets it
// (ReleaseAll). A change of the current schema is also followed: the
// client changed its database. A packet that cannot carry the details
// (an EOF) says nothing here. What MariaDB does not report at all (a user
// variable assigned by SELECT ... INTO or :=, LAST_INSERT_ID(expr),
// GET_LOCK, FLUSH ... WITH READ LOCK) is caught from the statement's text
// (router.Classify).
func (vs *varState) absorb(bc *backend.Conn, state []byte, noted, noisy bool) {
	s := vs.s
	keep := s.keep
	if noted {
		// A statement the caller classified as leaving state: it decides
		// (NoteState) whether other nodes can be brought to the same.
		keep = func() { s.sticky = true }
	}
	changes, err := mysql.ParseStateChanges(state)
	if err != nil {
		keep()
		return
	}
	if noisy {
		changes = s.dropFillNoise(bc, changes)
	}
	for _, c := range changes {
		if name, value, ok := c.SystemVariable(); ok {
			switch name = strings.ToLower(name); name {
			case "last_gtid":
				// A commit's GTID (binary logs on): where replicas must
				// have got to before this session reads from them. It is
				// not state of the connection.
				s.noteGTID(bc, value)
				continue
			case "sql_mode":
				s.mode = router.ParseMode(value)
			case "wait_timeout":
				s.setWaitTimeout(value)
			case "completion_type":
				s.setCompletionType(value)
			case "div_precision_increment":
				s.setDivPrecision(value)
			case "profiling":
				s.noteProfiling(bc, value)
			case "character_set_client", "character_set_connection", "character_set_results", "collation_connection":
				if name == "character_set_client" {
					s.ClientCharset = value
				}
				// The character sets are now what the statement left on
				// the connection (the session keeps it), not those of
				// one collation: the proxy leaves them alone until the
				// client's next SET NAMES, which must then run on it.
				if s.ClientCharset == "" {
					if coll, ok := mysql.CollationByID(s.Coll); ok && s.Coll != 0 {
						s.ClientCharset = coll.Charset
					}
				}
				s.Coll, bc.Collation = 0, 0
			}
		}
		switch c.Type {
		case mysql.TrackTransactionState:
		case mysql.TrackTransactionCharacteristics:
			if bytes.Contains(bytes.ToUpper(c.Data), []byte("SET TRANSACTION")) {
				keep()
				s.opaque = s.opaque || !s.replayedSet // the next transaction's characteristics, on this node only
			}
		case mysql.TrackSchema:
			if name, ok := c.Schema(); ok {
				bc.DB, s.DB = name, name
			}
			keep()
		case mysql.TrackSystemVariables:
			if name, _, ok := c.SystemVariable(); ok && !s.replayedSet && s.carrySysVar(bc, name) {
				continue // read back: carried to every connection like a SET's
			}
			keep()
			s.opaque = s.opaque || !s.replayedSet // a system variable other nodes lack, unless the SET is repeated
		default:
			// User variables, temporary tables, SQL prepared statements:
			// the variables are read back, the rest stays here.
			keep()
			if !s.replayedSet && s.readUserVars(bc) != nil {
				s.varsLost(bc.Node().Name)
			}
		}
	}
}

// ReleaseAll returns the session's backend connections when the client
// leaves or resets: each is reset (dropping variables, temporary tables,
// locks and open transactions) when the session left state on it.
func (s *State) ReleaseAll() {
	// joined: a connection the transaction reached may still hold it
	// open when the session's flags say none is (autocommit turned on
	// after the transaction reached several nodes).
	dirty := s.sticky || s.txn.SQL != "" || s.Status&mysql.StatusInTrans != 0 || s.Status&mysql.StatusAutocommit == 0 ||
		len(s.joined) > 0 || s.lost != ""
	if s.xaTxn.ID != 0 {
		s.End(false) // XA branches end with XA ROLLBACK, not a new login
	}
	for _, bc := range s.pinned {
		if slices.Contains(s.profiled, bc) {
			// A new login keeps profiling on, and the profiles: the
			// next client would see this one's statements.
			bc.MarkBroken()
		}
		if dirty && !bc.Private() && !bc.Broken() { // a private one is closed by Put
			// A new login on the same connection drops everything the
			// session left there, the database included (statements such
			// as USE inside a multi-statement text change it unseen).
			if err := bc.ChangeUser(""); err != nil {
				bc.MarkBroken()
			} else {
				bc.Disown()
			}
		}
		bc.Node().Put(bc)
	}
	s.pinned = s.pinned[:0]
	s.using = s.using[:0]
	s.locked = nil
	s.profiled = nil
	// The connections the session used last are no longer its own: they
	// close at the idle timeout (the client left) and keep no counters
	// for it (a reset begins them anew in MariaDB).
	s.owner.Leave()
	s.owner = new(backend.Owner)
}

// Shared reports whether every statement on node must use the one
// connection the session holds (or will hold) there: in a transaction, or
// while it holds one.
func (s *State) Shared(node string) bool {
	return s.InTxn() || s.pinnedOn(s.node(node)) != nil
}

// SetNames records the client's SET NAMES (collation coll). The
// connections the session holds run it on their next use even when the
// proxy believes they have coll: a statement the server did not report
// (SET character_set_results = NULL is not) may have changed one of the
// character sets since.
func (s *State) SetNames(coll byte) {
	s.Coll, s.ClientCharset = coll, ""
	for _, bc := range s.pinned {
		bc.Collation = 0
	}
}

// Holds reports whether the session holds bc.
func (s *State) Holds(bc *backend.Conn) bool { return slices.Contains(s.pinned, bc) }

// AppendBackendIDs appends the thread ids of the backend connections the
// session holds (what CONNECTION_ID() returned there).
func (s *State) AppendBackendIDs(ids []uint32) []uint32 {
	for _, bc := range s.pinned {
		ids = append(ids, bc.ThreadID)
	}
	return ids
}

// Dedicate makes bc, logged in with the client's own backend account, the
// session's connection for good.
func (s *State) Dedicate(bc *backend.Conn) {
	s.dedicated = bc
	s.pin(bc)
	s.sticky = true
	s.unreplayable = "a login with a backend account"
}

// Dedicated returns the session's own backend connection, or nil.
func (s *State) Dedicated() *backend.Conn { return s.dedicated }

// Undedicate closes the session's own backend connection, if it has one.
func (s *State) Undedicate() {
	bc := s.dedicated
	if bc == nil {
		return
	}
	s.dedicated = nil
	s.unpin(bc)
	bc.Node().Put(bc) // closes it
	s.sticky, s.unreplayable = false, ""
}

func (s *State) pinnedOn(n *backend.Node) *backend.Conn {
	for _, bc := range s.pinned {
		if bc.Node() == n {
			return bc
		}
	}
	return nil
}

func (s *State) pin(bc *backend.Conn) {
	if !slices.Contains(s.pinned, bc) {
		s.pinned = append(s.pinned, bc)
	}
}

func (s *State) unpin(bc *backend.Conn) {
	if i := slices.Index(s.pinned, bc); i >= 0 {
		s.pinned = slices.Delete(s.pinned, i, i+1)
	}
	if i := slices.Index(s.joined, bc); i >= 0 {
		// The transaction's part on that node is gone with it.
		s.joined = slices.Delete(s.joined, i, i+1)
		if s.lost == "" {
			s.lost = bc.Node().Name
		}
	}
}

// syncState changes only what differs between the connection's state and
// the session's: database, collation, multi-statement option, variables
// and, for statements that read it, LAST_INSERT_ID().
func (s *State) syncState(bc *backend.Conn, usesLastID bool) error {
	if bc.DB != s.DB && !(s.DB == "" && bc.Private()) { // a new login is not the proxy's to make there
		var err error
		if s.DB == "" {
			// Only a new login leaves a connection without a database.
			err = bc.ChangeUser("")
		} else {
			err = bc.UseDB(s.DB)
		}
		if err != nil {
			return err
		}
	}
	if s.Coll != 0 && bc.Collation != s.Coll {
		coll, _ := mysql.CollationByID(s.Coll)
		if _, err := bc.Exec(coll.SetNamesSQL()); err != nil {
			return err
		}
		bc.Collation = s.Coll
	}
	if bc.MultiStmts != s.MultiStmts {
		if err := bc.SetMultiStatements(s.MultiStmts); err != nil {
			return err
		}
	}
	if len(s.vars) > 0 || len(bc.Vars) > 0 {
		if err := s.syncVars(bc); err != nil {
			return err
		}
	}
	if usesLastID && bc.LastInsertID != s.LastInsertID {
		if _, err := s.ownExec(bc, "DO LAST_INSERT_ID("+strconv.FormatUint(s.LastInsertID, 10)+")"); err != nil {
			return err
		}
		bc.LastInsertID = s.LastInsertID
	}
	return s.clearDiagnostics(bc)
}
