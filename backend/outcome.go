package backend

import (
	"fmt"

	"github.com/shardgate/shardgate/mysql"
)

// Outcome is what the packets that end one backend response say, as the
// proxy learns it while passing the response on: the session state
// decides from it whether the connection carries anything of the session
// (an open transaction, warnings to show), the execution engine sums it
// over the targets of a plan.
type Outcome struct {
	OK       bool   // the response ended with an OK or EOF carrying the server status (not ERR)
	Status   uint16 // server status of the final OK/EOF
	Warnings uint16
	InsertID uint64
	Sent     bool // at least one packet of the response reached the client's buffer
	// ResultSet is set when the response's last result is a result set
	// (it ended with EOF), Affected is the affected rows of its last OK.
	ResultSet bool
	Affected  uint64
	ErrCode   uint16 // the error code when the response ended with an ERR the relay read whole
	// StateChanged is set when the server reported that the statement
	// changed the session's state (SERVER_SESSION_STATE_CHANGED); State
	// holds what it reported (mysql.ParseStateChanges), nil when the
	// packet could not carry it (an EOF).
	StateChanged bool
	State        []byte
}

// SetInfo records a final OK or EOF packet; other packets leave o as it is.
func (o *Outcome) SetInfo(p []byte) {
	st, w, id, ok := mysql.ResultInfo(p)
	if ok {
		o.OK, o.Status, o.Warnings, o.InsertID = true, st, w, id
		o.ResultSet, o.Affected = p[0] == mysql.EOFHeader, 0
		if !o.ResultSet {
			o.Affected, _, _ = mysql.ReadLenEncInt(p[1:])
		}
		o.StateChanged = o.StateChanged || st&mysql.StatusSessionStateChange != 0
	}
}

// LostError reports a backend connection that failed during a command
// (an I/O error, a malformed response) before the client was sent
// anything of the response. The connection is marked broken. Whoever owns
// the client decides what else is lost with it: the client gets error 1430,
// and a session whose state or transaction lived on that connection is
// closed, as a server crash would close it.
type LostError struct {
	Conn  *Conn
	Cause error // the failure, or nil when the command could not be sent
}

func (e *LostError) Error() string {
	if e.Cause == nil {
		return fmt.Sprintf("lost connection to backend %s", e.Conn.Addr)
	}
	return fmt.Sprintf("lost connection to backend %s: %v", e.Conn.Addr, e.Cause)
}

func (e *LostError) Unwrap() error { return e.Cause }

// ErrLost is the error 1430 a client gets for a backend lost during its
// statement.
func ErrLost(bc *Conn) *mysql.SQLError {
	return mysql.NewError(mysql.ErServerLost, "Lost connection to backend %s during query", bc.Addr)
}
