package server

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/proxy/engine"
	"github.com/shardgate/shardgate/proxy/session"
	"github.com/shardgate/shardgate/router"
)

// The client's own session state trackers (proxy/session/track.go): the
// proxy learns them from the server's defaults before a tracking client's
// first statement, answers a SET of them itself (the backend connections
// keep every tracker on for the proxy), and puts what they report into
// the OK packets it sends.

// SessionState is the engine's Writer's: what the client's trackers
// report in an OK packet (nil without CLIENT_SESSION_TRACK).
func (c *conn) SessionState(backend []byte) []byte {
	if c.st == nil || c.caps&mysql.ClientSessionTrack == 0 {
		return nil
	}
	return c.st.ClientState(backend)
}

// NoteTargetState is the engine's TargetStateWriter's: what one target
// of a statement on several reported, for the one OK the client gets.
func (c *conn) NoteTargetState(state []byte) {
	if c.st != nil && c.caps&mysql.ClientSessionTrack != 0 {
		c.st.NoteTargetState(state)
	}
}

// EOFState is the engine's EOFStateWriter's: the client tracks the
// transaction's state, whose changes are what the server reports in an
// EOF.
func (c *conn) EOFState() bool {
	return c.st != nil && c.caps&mysql.ClientSessionTrack != 0 && c.st.TracksTxnState()
}

// trackDefaults keeps the server's default trackers (@@GLOBAL), a new
// session's, for trackDefaultsAge after reading them, so a tracking
// client's login costs no backend query of its own; a SET GLOBAL through
// the proxy forgets them (renewPools). It is safe for concurrent use.
type trackDefaults struct {
	cached atomic.Pointer[trackedDefaults]
}

// trackedDefaults are default trackers and when they were read.
type trackedDefaults struct {
	t    session.Trackers
	node string
	at   time.Time
}

// trackDefaultsAge bounds how long a change of the globals made other
// than through the proxy takes to reach new sessions.
const trackDefaultsAge = time.Second

// forget drops the cached defaults.
func (d *trackDefaults) forget() { d.cached.Store(nil) }

// clientTrackers keeps the client's own trackers for its handler: it
// learns them (load), binds a statement's reads of them (bind), and
// answers the SETs that change them (set, setNames). The handler holds
// it as track.
type clientTrackers struct {
	h *handler
	// forStatement: the statement under way sets the client's trackers
	// for itself (runLent); query sets it, forward reads it.
	forStatement bool
}

// load gives the session the server's default trackers, a new
// session's: read on the default node, or cached (trackDefaults).
func (tr *clientTrackers) load() error {
	h := tr.h
	c, st := h.c, h.c.st
	node, _ := c.srv.rt().DefaultNode(c.user)
	if d := c.srv.trackDefaults.cached.Load(); d != nil && d.node == node && time.Since(d.at) < trackDefaultsAge {
		st.SetTrackers(d.t)
		return nil
	}
	bc, err := st.Acquire(node, false)
	if err != nil {
		return err
	}
	res, err := bc.Exec(fmt.Sprintf(session.TrackersSQL, "GLOBAL"))
	st.Release(bc, false, backend.Outcome{})
	var se *mysql.SQLError
	switch {
	case errors.As(err, &se):
		st.SetTrackers(session.Trackers{}) // a server without trackers
		return nil
	case err != nil:
		if bc.Broken() {
			return h.backendLost(bc)
		}
		return err
	}
	t, ok := session.Trackers{}, len(res.Rows) == 1
	if ok {
		t, ok = session.ParseTrackers(res.Rows[0])
	}
	if !ok {
		return fmt.Errorf("reading the session state trackers: %d rows", len(res.Rows))
	}
	st.SetTrackers(t)
	c.srv.trackDefaults.cached.Store(&trackedDefaults{t: t, node: node, at: time.Now()})
	return nil
}

// bind gives a statement's reads of the session's trackers the
// session's values (router.BindTrackers): the connection's are the
// proxy's. A text it cannot read runs as written.
func (tr *clientTrackers) bind(sql string, p []byte) (string, []byte) {
	h, st := tr.h, tr.h.c.st
	if !st.TrackersKnown() && tr.load() != nil {
		return sql, p
	}
	t := st.ClientTrackers()
	bound, ok := router.BindTrackers(sql, st.Mode(), func(name string) string {
		switch name {
		case "session_track_schema":
			return boolLiteral(t.Schema)
		case "session_track_state_change":
			return boolLiteral(t.StateChange)
		case "session_track_transaction_info":
			return mysql.QuoteString(t.TransactionInfo, "utf8mb3")
		}
		// In the character set of system variables' values.
		return mysql.QuoteString(t.SystemVariables, "utf8mb3")
	})
	if !ok || bound == sql {
		return sql, p
	}
	return bound, h.queryPacket(bound)
}

// boolLiteral is a boolean variable's value as the server reads it out.
func boolLiteral(on bool) string {
	if on {
		return "1"
	}
	return "0"
}

// set answers a SET of the client's trackers (router.SetsTrackers):
// it runs on a pooled connection, whose answer (the server's error, or
// what the new trackers report) is the client's; the values it left are
// read back as the session's, and the connection's own trackers are put
// back. A SET that assigns other variables too (mixed) carries them as a
// SET of them alone does (localStmts.carrySet); one that assigns some the
// session cannot carry leaves them on the connection, which the session
// keeps from then on, as it keeps one a statement it cannot carry left
// state on.
func (tr *clientTrackers) set(sql string, mixed bool) error {
	h := tr.h
	c, st := h.c, h.c.st
	if !st.TrackersKnown() {
		if err := tr.load(); err != nil {
			return err
		}
	}
	var vars []router.SetVar
	carried := false
	if mixed {
		vars, carried = router.ParseSetBesideTrackers(sql, st.Mode())
	}
	sticky := mixed && !carried
	node, _ := c.srv.rt().DefaultNode(c.user)
	bc, err := st.AcquireOutsideTxn(node)
	if err != nil {
		return err
	}
	c.running.Store(bc)
	// The connection gets the client's trackers first: the statement
	// changes some of them, and what it reports is what the client's
	// report.
	_, err = bc.Exec(trackersSQL(st.ClientTrackers()))
	var res, back *backend.Result
	if err == nil {
		res, err = bc.Run(sql) // the client's own SET: without the proxy's deadline
	}
	if err == nil {
		if back, err = bc.Exec(fmt.Sprintf(session.TrackersSQL, "SESSION")); err == nil && len(back.Rows) != 1 {
			err = fmt.Errorf("reading the session state trackers back: %d rows", len(back.Rows))
		}
	}
	if rerr := bc.Retrack(); rerr != nil && !bc.Broken() {
		bc.MarkBroken() // its trackers are no longer the proxy's
	}
	keep := false // the other assignments set something the session cannot carry
	if err == nil && carried {
		vars, keep, err = h.ls.carrySet(bc, res, vars) // local.go
	}
	c.running.Store(nil)
	var se *mysql.SQLError
	switch {
	case err != nil && carried && errors.As(err, &se) && !bc.Broken():
		h.ls.afterFailedSet(bc, vars) // local.go
		st.Release(bc, false, backend.Outcome{})
	case err != nil || !sticky:
		if keep {
			st.Keep()
		}
		o := backend.Outcome{}
		if err == nil && carried {
			o = backend.Outcome{OK: true, Status: res.OK.Status, Warnings: res.OK.Warnings}
		}
		st.Release(bc, sticky, o)
	default:
		st.Release(bc, true, backend.Outcome{OK: true, Status: res.OK.Status, Warnings: res.OK.Warnings,
			StateChanged: res.State != nil, State: res.State})
	}
	if err != nil {
		if errors.As(err, &se) && !bc.Broken() {
			return err
		}
		return h.backendLost(bc)
	}
	t, ok := session.ParseTrackers(back.Rows[0])
	if !ok {
		return fmt.Errorf("reading the session state trackers back: %d columns", len(back.Rows[0]))
	}
	st.SetTrackers(t)
	st.NoteServerState(res.State, true) // the server had the client's trackers
	return c.writeOK(mysql.OK{Status: st.Status, Warnings: res.OK.Warnings})
}

// trackersSQL gives a connection trackers t.
func trackersSQL(t session.Trackers) string {
	if t.TransactionInfo == "" {
		t.TransactionInfo = "OFF"
	}
	return "SET SESSION session_track_system_variables = " + mysql.QuoteString(t.SystemVariables, "") +
		", session_track_schema = " + onOff(t.Schema) + ", session_track_state_change = " + onOff(t.StateChange) +
		", session_track_transaction_info = " + t.TransactionInfo
}

// lend gives bc, a connection the session acquired for a prepared
// statement's execution, the client's trackers: the statement reads
// them (router.Stmt.ReadsTrackers), and was prepared as the client wrote
// it, so its reads and their types are the server's at each execution;
// relay, which relays the execution, puts the proxy's trackers back
// before the connection goes back (restoring).
func (tr *clientTrackers) lend(bc *backend.Conn) error {
	st := tr.h.c.st
	if !st.TrackersKnown() {
		if err := tr.load(); err != nil {
			return err
		}
	}
	_, err := bc.Exec(trackersSQL(st.ClientTrackers()))
	return err
}

// restoring wraps relay, the execution's relay on a connection lend gave
// the client's trackers, so that the connection gets the proxy's back.
func (tr *clientTrackers) restoring(relay engine.Relay) engine.Relay {
	return func(x *engine.Executor, bc *backend.Conn) (backend.Outcome, error) {
		r, err := relay(x, bc)
		if rerr := bc.Retrack(); rerr != nil && err == nil {
			err = rerr // the caller marks it broken: its trackers are not the proxy's
		}
		return r, err
	}
}

// runLent runs a statement that sets the client's trackers for itself
// alone (SET STATEMENT session_track_... = ... FOR ...,
// router.StatementSetsTrackers) on node, on a connection given the
// client's trackers first: the server then applies the statement's own,
// and what it reports, and what the statement reads of them, are the
// client's as they are (session.ReportAsIs). The connection gets the
// proxy's trackers back before it goes back (restoring).
func (tr *clientTrackers) runLent(node string, pkt []byte, stmt *router.Stmt, relay engine.Relay) (backend.Outcome, error) {
	h, st := tr.h, tr.h.c.st
	bc, err := st.Acquire(node, stmt.UsesLastInsertID)
	if err != nil {
		return backend.Outcome{}, err
	}
	if err := tr.lend(bc); err != nil {
		st.Release(bc, false, backend.Outcome{})
		var se *mysql.SQLError
		if errors.As(err, &se) && !bc.Broken() {
			return backend.Outcome{}, err
		}
		return backend.Outcome{}, h.backendLost(bc)
	}
	st.ReportAsIs(true)
	defer st.ReportAsIs(false)
	return h.x.RunOn(bc, pkt, stmt.Sticky, tr.restoring(relay))
}

// backendTrackers are the trackers the proxy keeps on every backend
// connection (backend.Conn's).
var backendTrackers = session.Trackers{SystemVariables: "*", Schema: true, StateChange: true, TransactionInfo: "CHARACTERISTICS"}

// afterRoutine wraps relay, the relay of a CALL: a stored procedure that
// sets the session's trackers (SET session_track_... in its body) sets
// the client's, as on MariaDB, but it set them on the connection, where
// they are the proxy's. When the CALL's answer says it may have
// (routineMayTrack), the connection's trackers are read back (one round
// trip); when the procedure changed them they become the session's, and
// the connection gets the proxy's back. (The CALL's own OK was filtered
// through the client's trackers as they were before it.)
func (tr *clientTrackers) afterRoutine(relay engine.Relay) engine.Relay {
	return func(x *engine.Executor, bc *backend.Conn) (backend.Outcome, error) {
		r, err := relay(x, bc)
		if err != nil || !bc.Tracking() || !routineMayTrack(r.State) {
			return r, err
		}
		back, rerr := bc.Exec(fmt.Sprintf(session.TrackersSQL, "SESSION"))
		var t session.Trackers
		ok := rerr == nil && len(back.Rows) == 1
		if ok {
			t, ok = session.ParseTrackers(back.Rows[0])
		}
		switch {
		case !ok:
			bc.MarkBroken() // its trackers are unknown
		case t != backendTrackers:
			tr.h.c.st.SetTrackers(t)
			if bc.Retrack() != nil {
				bc.MarkBroken()
			}
		}
		return r, nil
	}
}

// routineMayTrack reports whether a statement whose OK reported state
// (session state information, on a connection with the proxy's
// trackers) may have changed the trackers: MariaDB reports a change of
// state (TrackStateChange) when a statement sets one, and when it turned
// that tracker off, the variable it set. A procedure that only reads or
// writes rows reports neither (a write: last_gtid), and costs no read
// back.
func routineMayTrack(state []byte) bool {
	changes, err := mysql.ParseStateChanges(state)
	if err != nil {
		return true
	}
	for _, c := range changes {
		if c.Type == mysql.TrackStateChange {
			return true
		}
		if name, _, ok := c.SystemVariable(); ok && router.IsTracker(name) {
			return true
		}
	}
	return false
}

// noteNames notes, for the client's trackers, the character sets a SET
// NAMES the proxy answered set (MariaDB reports these three, not
// collation_connection).
func noteNames(c *conn, coll byte) {
	cs, ok := mysql.CollationByID(coll)
	if !ok {
		return
	}
	for _, name := range []string{"character_set_connection", "character_set_client", "character_set_results"} {
		c.st.NoteVar(name, cs.Charset)
	}
}

// onOff is a boolean variable's value in SQL.
func onOff(on bool) string {
	if on {
		return "ON"
	}
	return "OFF"
}

// setNames answers SET NAMES for a client that tracks the character sets
// it sets: on a pooled connection, whose report (the three character
// sets, in the server's order) is the client's; otherwise the proxy only
// records it (the connections follow on their next use).
func (tr *clientTrackers) setNames(sql string, id byte) error {
	h := tr.h
	c, st := h.c, h.c.st
	if !st.TracksVar("character_set_client", "character_set_connection", "character_set_results") {
		st.SetNames(id)
		noteNames(c, id)
		return c.okStatus()
	}
	node, _ := c.srv.rt().DefaultNode(c.user)
	bc, err := st.AcquireOutsideTxn(node)
	if err != nil {
		return err
	}
	c.running.Store(bc)
	res, err := bc.Exec(sql)
	c.running.Store(nil)
	if err != nil {
		st.Release(bc, false, backend.Outcome{})
		var se *mysql.SQLError
		if errors.As(err, &se) && !bc.Broken() {
			return err
		}
		return h.backendLost(bc)
	}
	st.SetNames(id)
	bc.Collation = id // what it has now, whoever gets it next
	st.Release(bc, false, backend.Outcome{OK: true, Status: res.OK.Status, Warnings: res.OK.Warnings})
	st.NoteServerState(res.State, false)
	return c.writeOK(mysql.OK{Status: st.Status, Warnings: res.OK.Warnings})
}

// noteTxn notes, for a client that tracks the transaction's state, what
// a transaction control statement the proxy answered left: MariaDB's
// state string of a transaction begun explicitly ("T_______", "T_R_____"
// WITH CONSISTENT SNAPSHOT), or of
// none after COMMIT or ROLLBACK, with autocommit off too (the session
// reports it when it changed, as MariaDB does).
func noteTxn(st *session.State, txn router.Txn) {
	switch {
	case txn.Verb == router.TxnBegin && txn.Snapshot:
		st.NoteTxnState("T_R_____") // the snapshot is a read, at once
		st.NoteTxnCharacteristics(txnStart(txn))
	case txn.Verb == router.TxnBegin || txn.Chain && st.InTxn():
		st.NoteTxnState("T_______")
		st.NoteTxnCharacteristics(txnStart(txn))
	case txn.Verb == router.TxnCommit || txn.Verb == router.TxnRollback:
		st.NoteTxnState("________")
		st.NoteTxnCharacteristics("")
	}
}

// txnStart is MariaDB's statement for the characteristics of a
// transaction txn began (its session tracker's: snapshot first, then the
// access mode). A chained transaction's READ ONLY is not known here.
func txnStart(txn router.Txn) string {
	s, mode := "START TRANSACTION", ""
	switch {
	case txn.ReadOnly:
		mode = " READ ONLY"
	case txn.ReadWrite:
		mode = " READ WRITE"
	}
	if txn.Snapshot {
		s += " WITH CONSISTENT SNAPSHOT"
		if mode != "" {
			s += ","
		}
	}
	return s + mode + ";"
}
