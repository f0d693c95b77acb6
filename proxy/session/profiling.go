package session

import (
	"slices"

	"github.com/shardgate/shardgate/backend"
)

// Profiling (SET profiling = 1) is the connection's: the server records
// each statement the connection runs, and SHOW PROFILES lists them. The
// proxy runs statements of its own on a session's connection (the
// read-back of what a SET assigned, the SET that brings the session's
// variables to it), which a client must not see there. MariaDB records a
// statement only when profiling is on both when it starts and when it
// ends (PROFILING::finish_current_query), so SET profiling = 0 before
// them and SET profiling = 1 after them are not recorded either.

// profiles are the connections the client turned profiling on (SET
// profiling = 1, reported by the server); part of State (embedded).
type profiles struct {
	profiled []*backend.Conn
}

// noteProfiling records what the server reported a client's statement
// did to profiling on bc (session tracking: ON or OFF).
func (s *profiles) noteProfiling(bc *backend.Conn, value string) {
	on := value == "ON" || value == "on" || value == "1"
	i := slices.Index(s.profiled, bc)
	switch {
	case on && i < 0:
		s.profiled = append(s.profiled, bc)
	case !on && i >= 0:
		s.profiled = slices.Delete(s.profiled, i, i+1)
	}
}

// ownExec runs q, a statement of the proxy's own, on bc, out of the
// client's profiles when the client turned profiling on there.
func (s *profiles) ownExec(bc *backend.Conn, q string) (*backend.Result, error) {
	if !slices.Contains(s.profiled, bc) {
		return bc.Exec(q)
	}
	if _, err := bc.Exec("SET profiling = 0"); err != nil {
		return nil, err
	}
	res, err := bc.Exec(q)
	if _, e := bc.Exec("SET profiling = 1"); e != nil && err == nil {
		err = e
	}
	return res, err
}
