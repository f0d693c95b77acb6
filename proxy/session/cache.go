package session

import (
	"slices"
	"strings"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/mysql"
)

// CacheReadable reports whether the result cache may answer the
// session's next statement, or keep the answer it gets: outside any
// transaction and with autocommit on, holding no connection (no warnings
// kept for SHOW WARNINGS, no locks, no state only one connection has),
// and with every session variable known, so that the key (WriteVars)
// says everything that shapes the answer (WriteVars).
func (rs *readState) CacheReadable() bool {
	s := rs.s
	return s.dedicated == nil && !s.sticky && !s.InTxn() && s.Status&mysql.StatusAutocommit != 0 &&
		len(s.pinned) == 0 && len(s.locked) == 0 && !s.varsUnknown && !s.opaque && s.unreplayable == ""
}

// WriteVars writes each variable the session set (system and user
// variables: a statement that reads a user variable is not cached, but
// telling them apart would take reading the names) to w, as SQL
// assignment target and literal, in the order they were set.
func (rs *readState) WriteVars(w interface{ WriteString(string) }) {
	for _, v := range rs.s.vars {
		w.WriteString(v.target)
		w.WriteString(v.literal)
	}
}

// LastGTIDs are the GTIDs of the session's last commit on each node it
// wrote on (nodes without binary logs have none): read only.
func (rs *readState) LastGTIDs() map[string]string { return rs.s.gtids }

// NoteCachedAnswer records a statement the result cache answered: a
// result set of found rows (FOUND_ROWS()), no warnings, and no
// connection used.
func (ss *stmtState) NoteCachedAnswer(found uint64) {
	ss.warnNode = ""
	ss.RowCount, ss.FoundRows = -1, found
	ss.afterHit = true
}

// clearDiagnostics empties the diagnostics of bc before a statement that
// reads them right after an answer of the cache (clearDiag): bc's last
// statement, another, may have left warnings the cache's answer did not.
func (ss *stmtState) clearDiagnostics(bc *backend.Conn) error {
	if !ss.clearDiag {
		return nil
	}
	ss.clearDiag = false
	// A statement that uses a table and leaves no message clears the
	// list (one that uses none leaves it).
	_, err := ss.s.ownExec(bc, "DO (SELECT 1 FROM information_schema.CHARACTER_SETS LIMIT 0)")
	return err
}

// FillRead marks the statement under way as a result cache fill (or not
// any more): a locking read that does not wait, which MariaDB runs with
// its lock wait timeouts at 0 for the statement and reports as a change
// of the session's state, and their return at the next statement on the
// connection (backend.Conn.FillNoise). Nothing of it stays there.
func (ss *stmtState) FillRead(on bool) { ss.fillRead = on }

// withoutFillNoise drops from a statement's state changes what a fill's
// NOWAIT reports (FillRead): its lock wait timeouts, and the flag that
// state changed when nothing else that raises it did (a commit's
// last_gtid does not); saw reports timeouts among them.
func withoutFillNoise(changes []mysql.StateChange) (_ []mysql.StateChange, saw bool) {
	out := changes[:0]
	flag := false
	for _, c := range changes {
		switch name, _, ok := c.SystemVariable(); {
		case c.Type == mysql.TrackStateChange:
			flag = true
		case ok && (strings.EqualFold(name, "innodb_lock_wait_timeout") || strings.EqualFold(name, "lock_wait_timeout")):
			saw = true
		default:
			out = append(out, c)
		}
	}
	if flag && (!saw || slices.ContainsFunc(out, raisesFlag)) {
		out = append(out, mysql.StateChange{Type: mysql.TrackStateChange, Data: []byte("1")})
	}
	return out, saw
}

// raisesFlag reports whether a state change is one MariaDB raises the
// state change flag for: all but a commit's last_gtid.
func raisesFlag(c mysql.StateChange) bool {
	name, _, ok := c.SystemVariable()
	return !ok || !strings.EqualFold(name, "last_gtid")
}

// onlyFillNoise reports whether a statement's state information holds
// nothing but what a fill's NOWAIT reports.
func onlyFillNoise(state []byte) bool {
	changes, err := mysql.ParseStateChanges(state)
	if err != nil {
		return false
	}
	rest, _ := withoutFillNoise(changes)
	return len(rest) == 0
}

// dropFillNoise is withoutFillNoise for bc's last statement, which ends
// bc.FillNoise once the timeouts' return is seen.
func (ss *stmtState) dropFillNoise(bc *backend.Conn, changes []mysql.StateChange) []mysql.StateChange {
	out, saw := withoutFillNoise(changes)
	if saw && !ss.fillRead {
		bc.FillNoise = false
	}
	return out
}
