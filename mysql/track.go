package mysql

import "encoding/binary"

// Session state tracking (CLIENT_SESSION_TRACK). The proxy asks every
// backend connection to report, in each OK packet, what a statement
// changed in the session (system variables, the current schema, any other
// state, the next transaction's characteristics): that is how it knows,
// from the server rather than from the statement's text, whether a
// connection carries something of its client.

// Types of session state change entries (SESSION_TRACK_*).
const (
	TrackSystemVariables            byte = 0
	TrackSchema                     byte = 1
	TrackStateChange                byte = 2
	TrackGTIDs                      byte = 3
	TrackTransactionCharacteristics byte = 4
	TrackTransactionState           byte = 5
)

// ParseOKTracked decodes an OK packet payload sent to a client with
// CLIENT_SESSION_TRACK: the info string is length-encoded (and absent when
// empty and nothing changed), and when Status has
// StatusSessionStateChange the session state information follows; it is
// returned as its raw entries (see ParseStateChanges), aliasing p.
func ParseOKTracked(p []byte) (OK, []byte, error) {
	ok, r, err := parseOKHead(p)
	if err != nil {
		return OK{}, nil, err
	}
	if !r.more() {
		return ok, nil, nil
	}
	ok.Info = string(r.lenEncBytes())
	var state []byte
	if ok.Status&StatusSessionStateChange != 0 && r.more() {
		state = r.lenEncBytes()
	}
	if !r.ok() {
		return OK{}, nil, ErrBadPacket
	}
	return ok, state, nil
}

// StateChange is one entry of the session state information.
type StateChange struct {
	Type byte
	Data []byte // the entry's payload, aliasing the packet
}

// ParseStateChanges splits session state information into its entries.
func ParseStateChanges(b []byte) ([]StateChange, error) {
	var out []StateChange
	r := reader{b: b}
	for r.more() {
		t := r.byte1()
		d := r.lenEncBytes()
		if !r.ok() {
			return nil, ErrBadPacket
		}
		out = append(out, StateChange{Type: t, Data: d})
	}
	return out, nil
}

// SystemVariable decodes a TrackSystemVariables entry.
func (c StateChange) SystemVariable() (name, value string, ok bool) {
	if c.Type != TrackSystemVariables {
		return "", "", false
	}
	r := reader{b: c.Data}
	n := r.lenEncBytes()
	v := r.lenEncBytes()
	return string(n), string(v), r.ok()
}

// Schema decodes a TrackSchema entry.
func (c StateChange) Schema() (string, bool) {
	if c.Type != TrackSchema {
		return "", false
	}
	r := reader{b: c.Data}
	n := r.lenEncBytes()
	return string(n), r.ok()
}

// AppendOKTracked appends an OK packet payload for a client with
// CLIENT_SESSION_TRACK. With session state information (state: entries
// as AppendStateChange writes them) the info string is always present,
// length-encoded, the state follows and SERVER_SESSION_STATE_CHANGED is
// set, as MariaDB writes it; without, it is AppendOK's packet.
func AppendOKTracked(b []byte, header byte, ok OK, state []byte) []byte {
	if len(state) == 0 {
		ok.Status &^= StatusSessionStateChange
		return AppendOK(b, header, ok)
	}
	ok.Status |= StatusSessionStateChange
	b = append(b, header)
	b = AppendLenEncInt(b, ok.AffectedRows)
	b = AppendLenEncInt(b, ok.LastInsertID)
	b = binary.LittleEndian.AppendUint16(b, ok.Status)
	b = binary.LittleEndian.AppendUint16(b, ok.Warnings)
	b = AppendLenEncString(b, ok.Info)
	b = AppendLenEncInt(b, uint64(len(state)))
	return append(b, state...)
}

// AppendStateChange appends one entry of session state information: its
// type and its length-encoded payload.
func AppendStateChange(b []byte, typ byte, data []byte) []byte {
	b = append(b, typ)
	b = AppendLenEncInt(b, uint64(len(data)))
	return append(b, data...)
}

// AppendTrackedVariable appends a TrackSystemVariables entry.
func AppendTrackedVariable(b []byte, name, value string) []byte {
	d := AppendLenEncString(AppendLenEncString(nil, name), value)
	return AppendStateChange(b, TrackSystemVariables, d)
}

// AppendTrackedSchema appends a TrackSchema entry.
func AppendTrackedSchema(b []byte, name string) []byte {
	return AppendStateChange(b, TrackSchema, AppendLenEncString(nil, name))
}

// AppendTrackedStateChange appends the TrackStateChange entry ("1": some
// state changed).
func AppendTrackedStateChange(b []byte) []byte {
	return AppendStateChange(b, TrackStateChange, []byte{'1'})
}
