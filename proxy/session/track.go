package session

import (
	"slices"
	"strings"

	"github.com/shardgate/shardgate/mysql"
)

// Session state tracking for the client (CLIENT_SESSION_TRACK). Every
// backend connection tracks everything, for the proxy (backend.Conn's
// trackers: all system variables, the schema, any state change, the
// transaction's characteristics). A client that negotiated
// CLIENT_SESSION_TRACK has trackers of its own, the session's: they start
// as the server's global defaults, a SET of them is the proxy's to answer
// (the backend's stay on), and the OK packets that end the client's
// statements carry what they would have reported on MariaDB directly:
// the server's report filtered through them (ClientState), and what the
// proxy changed for the session without the server reporting it to the
// client (USE, SET NAMES: noted in pending). A client without it gets
// nothing of this.

// Trackers are the values of a session's session state trackers, as
// the server normalises them.
type Trackers struct {
	SystemVariables string // session_track_system_variables: "*", "" or names separated by commas
	Schema          bool   // session_track_schema
	StateChange     bool   // session_track_state_change
	TransactionInfo string // session_track_transaction_info: OFF, STATE or CHARACTERISTICS
}

// TrackersSQL reads the session's trackers on a backend connection (in
// Trackers' order); the values of a new session are the @@GLOBAL ones.
const TrackersSQL = "SELECT @@%[1]s.session_track_system_variables, @@%[1]s.session_track_schema, " +
	"@@%[1]s.session_track_state_change, @@%[1]s.session_track_transaction_info LIMIT 1"

// ParseTrackers reads the row TrackersSQL returns.
func ParseTrackers(row [][]byte) (Trackers, bool) {
	if len(row) != 4 {
		return Trackers{}, false
	}
	on := func(v []byte) bool { return string(v) == "1" || strings.EqualFold(string(v), "ON") }
	return Trackers{SystemVariables: string(row[0]), Schema: on(row[1]), StateChange: on(row[2]),
		TransactionInfo: strings.ToUpper(string(row[3]))}, true
}

// trackState is the client's side of session state tracking, embedded
// in State: its methods are State's. It reads only its own fields.
type trackState struct {
	// client: the client negotiated CLIENT_SESSION_TRACK.
	client bool
	// known: trackers holds the session's trackers (read from the
	// server's defaults at its first statement, or set by the client).
	known    bool
	trackers Trackers
	varNames []string // the tracked system variables, lower case; nil with all
	allVars  bool
	// pending are the entries of the next OK that the proxy made itself,
	// by tracker (system variables, schema, state change).
	pendingVars   []byte
	pendingSchema []byte
	pendingState  bool
	pendingTxn    []byte
}

// TrackClient records whether the client negotiated CLIENT_SESSION_TRACK.
func (ts *trackState) TrackClient(on bool) { ts.client = on }

// TrackersUnknown reports whether the session must learn its trackers (a
// client with CLIENT_SESSION_TRACK whose trackers the proxy has not read
// since its login or reset) before its next statement.
func (ts *trackState) TrackersUnknown() bool { return ts.client && !ts.known }

// TrackersKnown reports whether the session's trackers are known.
func (ts *trackState) TrackersKnown() bool { return ts.known }

// ClientTrackers returns the session's trackers (meaningful once known).
func (ts *trackState) ClientTrackers() Trackers { return ts.trackers }

// SetTrackers records the session's trackers.
func (ts *trackState) SetTrackers(t Trackers) {
	ts.known, ts.trackers = true, t
	ts.varNames, ts.allVars = nil, false
	for _, n := range strings.Split(t.SystemVariables, ",") {
		switch n = strings.ToLower(strings.TrimSpace(n)); n {
		case "":
		case "*":
			ts.allVars = true
		default:
			ts.varNames = append(ts.varNames, n)
		}
	}
}

// forgetTrackers brings the trackers back to a new login's (Reset).
func (ts *trackState) forgetTrackers() {
	ts.known, ts.trackers, ts.varNames, ts.allVars = false, Trackers{}, nil, false
	ts.pendingVars, ts.pendingSchema, ts.pendingState, ts.pendingTxn = nil, nil, false, nil
}

// tracksVar reports whether the client tracks system variable name.
func (ts *trackState) tracksVar(name string) bool {
	return ts.client && ts.known && (ts.allVars || slices.Contains(ts.varNames, strings.ToLower(name)))
}

// TracksVar reports whether the client tracks any of the system
// variables names.
func (ts *trackState) TracksVar(names ...string) bool {
	return slices.ContainsFunc(names, ts.tracksVar)
}

// NoteVar notes, for the client's next OK, that the proxy set a system
// variable for the session (SET NAMES answered by the proxy).
func (ts *trackState) NoteVar(name, value string) {
	if ts.tracksVar(name) {
		ts.pendingVars = mysql.AppendTrackedVariable(ts.pendingVars, name, value)
	}
	ts.NoteStateChange()
}

// NoteSchema notes, for the client's next OK, that the session's schema
// changed (USE, COM_INIT_DB).
func (ts *trackState) NoteSchema(db string) {
	if ts.client && ts.known && ts.trackers.Schema {
		ts.pendingSchema = mysql.AppendTrackedSchema(ts.pendingSchema[:0], db)
	}
	ts.NoteStateChange()
}

// TracksTxnState reports whether the client tracks the transaction's
// state (session_track_transaction_info STATE or CHARACTERISTICS).
func (ts *trackState) TracksTxnState() bool {
	return ts.client && ts.known && ts.tracksTxn(mysql.TrackTransactionState)
}

// NoteTxnState notes, for the client's next OK, the transaction's state
// (MariaDB's eight characters) after a transaction control statement the
// proxy answered.
func (ts *trackState) NoteTxnState(state string) {
	if ts.client && ts.known && ts.tracksTxn(mysql.TrackTransactionState) {
		ts.pendingTxn = mysql.AppendStateChange(ts.pendingTxn, mysql.TrackTransactionState, mysql.AppendLenEncString(nil, state))
	}
}

// NoteStateChange notes, for the client's next OK, that the statement
// changed the session's state.
func (ts *trackState) NoteStateChange() {
	ts.pendingState = ts.pendingState || ts.client && ts.known && ts.trackers.StateChange
}

// NoteServerState notes, for the client's next OK, what a server reported
// the client's statement changed (session state information, see
// mysql.ParseStateChanges), as far as the client's trackers report it,
// when the proxy answers the statement with an OK of its own.
//
// With asIs, the server ran the statement with the client's trackers:
// its report is the client's as it is.
func (ts *trackState) NoteServerState(state []byte, asIs bool) {
	if !ts.client || !ts.known || len(state) == 0 {
		return
	}
	changes, err := mysql.ParseStateChanges(state)
	if err != nil {
		return
	}
	for _, c := range changes {
		switch c.Type {
		case mysql.TrackSystemVariables:
			if name, _, ok := c.SystemVariable(); ok && (asIs || ts.tracksVar(name)) {
				ts.pendingVars = mysql.AppendStateChange(ts.pendingVars, c.Type, c.Data)
			}
		case mysql.TrackSchema:
			if asIs || ts.trackers.Schema {
				ts.pendingSchema = mysql.AppendStateChange(ts.pendingSchema[:0], c.Type, c.Data)
			}
		case mysql.TrackStateChange:
			ts.pendingState = ts.pendingState || asIs || ts.trackers.StateChange
		case mysql.TrackTransactionState, mysql.TrackTransactionCharacteristics:
			if asIs || ts.tracksTxn(c.Type) {
				ts.pendingTxn = mysql.AppendStateChange(ts.pendingTxn, c.Type, c.Data)
			}
		}
	}
}

// tracksTxn reports whether the client tracks transaction entries of
// type typ (mysql.TrackTransactionState or Characteristics).
func (ts *trackState) tracksTxn(typ byte) bool {
	switch ts.trackers.TransactionInfo {
	case "STATE":
		return typ == mysql.TrackTransactionState
	case "CHARACTERISTICS":
		return true
	}
	return false
}

// ClientState returns the session state information for the OK packet
// that ends the client's statement, and forgets what was pending: what
// the proxy noted (NoteVar, NoteSchema, NoteServerState), then what the
// server reported for the packet the OK passes on (backend, nil for an OK
// of the proxy's), each entry as far as the client's trackers report it,
// in MariaDB's order (system variables, schema, state change,
// transaction). nil for a client without CLIENT_SESSION_TRACK or with
// nothing to report.
func (ts *trackState) ClientState(backend []byte) []byte {
	if !ts.client || !ts.known {
		return nil
	}
	var changes []mysql.StateChange
	if len(backend) > 0 {
		changes, _ = mysql.ParseStateChanges(backend)
	}
	if len(changes) == 0 && ts.pendingVars == nil && ts.pendingSchema == nil && !ts.pendingState && ts.pendingTxn == nil {
		return nil
	}
	vars, _ := mysql.ParseStateChanges(ts.pendingVars)
	for _, c := range changes {
		if name, _, ok := c.SystemVariable(); ok && ts.tracksVar(name) {
			vars = append(vars, c)
		}
	}
	// In the server's order for all variables: MariaDB orders them by
	// its hash of the tracked list, which a client's own list may order
	// otherwise.
	var out []byte
	for _, c := range vars {
		out = mysql.AppendStateChange(out, c.Type, c.Data)
	}
	schema := ts.pendingSchema
	state := ts.pendingState
	for _, c := range changes {
		switch c.Type {
		case mysql.TrackSchema:
			if ts.trackers.Schema {
				schema = mysql.AppendStateChange(nil, c.Type, c.Data)
			}
		case mysql.TrackStateChange:
			state = state || ts.trackers.StateChange
		}
	}
	out = append(out, schema...)
	if state {
		out = mysql.AppendTrackedStateChange(out)
	}
	out = append(out, ts.pendingTxn...)
	for _, c := range changes {
		if (c.Type == mysql.TrackTransactionState || c.Type == mysql.TrackTransactionCharacteristics) && ts.tracksTxn(c.Type) {
			out = mysql.AppendStateChange(out, c.Type, c.Data)
		}
	}
	ts.pendingVars, ts.pendingSchema, ts.pendingState, ts.pendingTxn = nil, nil, false, nil
	if len(out) == 0 {
		return nil
	}
	return out
}
