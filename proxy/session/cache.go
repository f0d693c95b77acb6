package session

import (
	"strings"

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

// LastGTID is the GTID of the session's last commit on node ("" when it
// wrote nothing there, or the node has no binary log).
func (rs *readState) LastGTID(node string) string { return rs.s.gtids[node] }

// NoteCachedAnswer records a statement the result cache answered: a
// result set of found rows (FOUND_ROWS()), no warnings, and no
// connection used.
func (ss *stmtState) NoteCachedAnswer(found uint64) {
	ss.warnNode = ""
	ss.RowCount, ss.FoundRows = -1, found
}

// FillRead marks the statement under way as a result cache fill (or not
// any more): a locking read that does not wait, which MariaDB runs with
// its lock wait timeouts at 0 for the statement and reports as a change
// of the session's state. Nothing of it stays on the connection.
func (ss *stmtState) FillRead(on bool) { ss.fillRead = on }

// fillNoise reports whether a state change entry is what a fill's
// NOWAIT reports (fillRead).
func fillNoise(c mysql.StateChange) bool {
	if c.Type == mysql.TrackStateChange {
		return true
	}
	name, _, ok := c.SystemVariable()
	return ok && (strings.EqualFold(name, "innodb_lock_wait_timeout") || strings.EqualFold(name, "lock_wait_timeout"))
}
