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
	pendingTxn    []byte // transaction characteristics entries
	// txnNow is the transaction's state (MariaDB's eight characters,
	// zero before any) as the client's session has it: what the servers
	// and the proxy reported since the transaction began, merged over the
	// nodes it spans; txnShown is the state the client was last told. A
	// state reaches the client when it changes, as from one MariaDB: a
	// second node's report of a write the first node already reported is
	// no change.
	txnNow, txnShown [8]byte
	// txnForce: the next OK reports txnNow even unchanged (a server that
	// ran the client's statement with the client's trackers reported it).
	txnForce bool
	// chars is the transaction's characteristics as the client was last
	// told them (session_track_transaction_info CHARACTERISTICS: the
	// statements that reproduce them, "" for none).
	chars string
	// asIs: the statement runs on a connection with the client's own
	// trackers, overridden for it alone (SET STATEMENT ... FOR): what the
	// server reports is the client's, unfiltered (ReportAsIs).
	asIs bool
	// out is ClientState's result, reused from one OK to the next.
	out []byte
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
	ts.txnNow, ts.txnShown, ts.txnForce, ts.chars, ts.asIs = [8]byte{}, [8]byte{}, false, "", false
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

// ReportAsIs says whether what the servers report for the statement
// under way is the client's as it is (on: it runs with the client's
// trackers, as the statement itself sets them), until it is turned off.
func (ts *trackState) ReportAsIs(on bool) { ts.asIs = on }

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
// proxy answered: it replaces what the transaction had (a transaction
// began or ended).
func (ts *trackState) NoteTxnState(state string) {
	if ts.client && ts.known && len(state) == len(ts.txnNow) {
		copy(ts.txnNow[:], state)
	}
}

// noteChars records the transaction's characteristics a server reported
// (a TrackTransactionCharacteristics entry's payload).
func (ts *trackState) noteChars(data []byte) {
	n, _, w := mysql.ReadLenEncInt(data)
	if w != 0 && n == uint64(len(data)-w) && string(data[w:]) != ts.chars {
		ts.chars = string(data[w:])
	}
}

// setTxnPrefix is how the characteristics of the next transaction alone
// (SET TRANSACTION without GLOBAL or SESSION) begin.
const setTxnPrefix = "SET TRANSACTION "

// NoteTxnCharacteristics notes, for the client's next OK, the
// transaction's characteristics after a transaction control statement
// the proxy answered: start is MariaDB's statement for the transaction
// it began ("START TRANSACTION READ ONLY;"), "" when it ended one. Those
// the session set for the next transaction (SET TRANSACTION ISOLATION
// LEVEL) come first, and end with it, as MariaDB reports them.
func (ts *trackState) NoteTxnCharacteristics(start string) {
	if !ts.client || !ts.known {
		return
	}
	next := start
	if start != "" && len(ts.chars) > len(setTxnPrefix) && ts.chars[:len(setTxnPrefix)] == setTxnPrefix {
		next = ts.chars + " " + start
	}
	if next == ts.chars {
		return
	}
	ts.chars = next
	if ts.tracksTxn(mysql.TrackTransactionCharacteristics) {
		ts.pendingTxn = mysql.AppendStateChange(ts.pendingTxn, mysql.TrackTransactionCharacteristics, mysql.AppendLenEncString(nil, next))
	}
}

// txnIdle is the state of a session outside any transaction.
const txnIdle = "________"

// mergeTxn merges a server's report of the transaction's state (the
// payload of a TrackTransactionState entry) into the session's: a
// server's idle state ends the transaction, the first report of one
// begins it, and later reports (another node's, or the same node's
// further on) add what they set.
func (ts *trackState) mergeTxn(data []byte) {
	n, _, w := mysql.ReadLenEncInt(data)
	if w == 0 || n != uint64(len(ts.txnNow)) || len(data) != w+len(ts.txnNow) {
		return
	}
	st := data[w:]
	if string(st) == txnIdle || ts.txnNow == [8]byte{} || string(ts.txnNow[:]) == txnIdle {
		copy(ts.txnNow[:], st)
		return
	}
	for i, c := range st {
		if c != '_' && ts.txnNow[i] == '_' {
			ts.txnNow[i] = c
		}
	}
}

// appendTxn appends the transaction's state for the client's OK when
// it changed since the client was told (nothing when the client does not
// track it).
func (ts *trackState) appendTxn(out []byte) []byte {
	now, shown := ts.txnNow, ts.txnShown
	for _, st := range []*[8]byte{&now, &shown} {
		if *st == [8]byte{} { // nothing yet: no transaction
			copy(st[:], txnIdle)
		}
	}
	if now == shown && !ts.txnForce {
		return out
	}
	ts.txnShown, ts.txnForce = ts.txnNow, false
	if !ts.asIs && !ts.tracksTxn(mysql.TrackTransactionState) {
		return out
	}
	out = append(out, mysql.TrackTransactionState, byte(1+len(ts.txnNow)), byte(len(ts.txnNow)))
	return append(out, ts.txnNow[:]...)
}

// NoteTargetState notes, for the client's next OK, what one of the
// several targets of a statement the proxy answers with one OK (a write
// on several nodes) reported: the transaction's state merges into the
// session's, the rest as NoteServerState.
func (ts *trackState) NoteTargetState(state []byte) { ts.NoteServerState(state, false) }

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
		case mysql.TrackTransactionState:
			ts.mergeTxn(c.Data)
			ts.txnForce = ts.txnForce || asIs
		case mysql.TrackTransactionCharacteristics:
			ts.noteChars(c.Data)
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
// nothing to report. The result is the session's buffer, valid until the
// next call: callers copy it into the packet they write. It allocates
// nothing once that buffer has grown (a relayed OK is filtered in
// place, entry by entry).
func (ts *trackState) ClientState(backend []byte) []byte {
	if !ts.client || !ts.known {
		return nil
	}
	if !validChanges(backend) {
		backend = nil
	}
	if len(backend) == 0 && len(ts.pendingVars) == 0 && len(ts.pendingSchema) == 0 && !ts.pendingState && len(ts.pendingTxn) == 0 &&
		ts.txnNow == ts.txnShown {
		return nil
	}
	// In the server's order for all variables: MariaDB orders them by
	// its hash of the tracked list, which a client's own list may order
	// otherwise.
	out := append(ts.out[:0], ts.pendingVars...)
	schema, fromBackend := ts.pendingSchema, false
	state := ts.pendingState
	for b := backend; len(b) > 0; {
		typ, data, rest := nextChange(b)
		b = rest
		switch typ {
		case mysql.TrackSystemVariables:
			if name, ok := varName(data); ok && (ts.asIs || ts.tracksVarBytes(name)) {
				out = mysql.AppendStateChange(out, typ, data)
			}
		case mysql.TrackSchema:
			if ts.asIs || ts.trackers.Schema {
				schema, fromBackend = data, true
			}
		case mysql.TrackStateChange:
			state = state || ts.asIs || ts.trackers.StateChange
		case mysql.TrackTransactionState:
			ts.mergeTxn(data)
			ts.txnForce = ts.txnForce || ts.asIs
		}
	}
	if fromBackend {
		out = mysql.AppendStateChange(out, mysql.TrackSchema, schema)
	} else {
		out = append(out, schema...)
	}
	if state {
		out = mysql.AppendTrackedStateChange(out)
	}
	out = ts.appendTxn(out)
	out = append(out, ts.pendingTxn...)
	for b := backend; len(b) > 0; {
		typ, data, rest := nextChange(b)
		b = rest
		if typ == mysql.TrackTransactionCharacteristics {
			ts.noteChars(data)
			if ts.asIs || ts.tracksTxn(typ) {
				out = mysql.AppendStateChange(out, typ, data)
			}
		}
	}
	ts.out = out
	ts.pendingVars, ts.pendingSchema, ts.pendingState, ts.pendingTxn = ts.pendingVars[:0], ts.pendingSchema[:0], false, ts.pendingTxn[:0]
	if len(out) == 0 {
		return nil
	}
	return out
}

// validChanges reports whether b is well-formed session state
// information (mysql.ParseStateChanges would read it), without
// allocating.
func validChanges(b []byte) bool {
	for len(b) > 0 {
		n, _, w := mysql.ReadLenEncInt(b[1:])
		if w == 0 || n > uint64(len(b)-1-w) {
			return false
		}
		b = b[1+w+int(n):]
	}
	return true
}

// nextChange splits the first entry off b, well-formed session state
// information (validChanges): its type and payload, and the entries
// after it.
func nextChange(b []byte) (typ byte, data, rest []byte) {
	n, _, w := mysql.ReadLenEncInt(b[1:])
	end := 1 + w + int(n)
	return b[0], b[1+w : end], b[end:]
}

// varName is the name in a TrackSystemVariables entry's payload (its
// name and value, both length-encoded).
func varName(data []byte) ([]byte, bool) {
	n, _, w := mysql.ReadLenEncInt(data)
	if w == 0 || n > uint64(len(data)-w) {
		return nil, false
	}
	name, rest := data[w:w+int(n)], data[w+int(n):]
	v, _, w := mysql.ReadLenEncInt(rest)
	return name, w != 0 && v <= uint64(len(rest)-w)
}

// tracksVarBytes is tracksVar for a name read from a packet.
func (ts *trackState) tracksVarBytes(name []byte) bool {
	if !ts.client || !ts.known {
		return false
	}
	if ts.allVars {
		return true
	}
	for _, n := range ts.varNames {
		if equalFoldBytes(name, n) {
			return true
		}
	}
	return false
}

// equalFoldBytes reports whether b and s are equal, ASCII letters
// compared without case (system variable names are ASCII).
func equalFoldBytes(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		x, y := b[i], s[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
