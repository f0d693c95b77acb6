package server

import (
	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/router"
)

// counts keeps what ROW_COUNT() and FOUND_ROWS() return for the session:
// the proxy answers them (router.BindCounts), since the session's
// statements run on pooled connections, on several nodes and in the
// proxy itself, whose own values are not the session's.
type counts struct {
	h *handler
	// ans is what the proxy answered the statement under way with, when
	// it answered itself (conn.OK, conn.End).
	ans answer
}

// answer is what a statement's response was: a result set, or an OK with
// its affected rows.
type answer struct {
	rows     bool
	affected uint64
}

// note records in the session what the statement answered, for its
// next ROW_COUNT() and FOUND_ROWS(): the backend's response when the
// statement was forwarded, the proxy's own otherwise (an answer of nothing
// but OK when it wrote none: SET, USE, transaction control).
func (k *counts) note(forwarded bool, res backend.Outcome, err error) {
	h := k.h
	st := h.c.st
	switch {
	case err != nil:
		st.NoteAnswer(true, false, 0, 0)
	case forwarded:
		st.NoteAnswer(!res.OK, res.ResultSet, res.Affected, h.x.Rows)
	default:
		st.NoteAnswer(false, k.ans.rows, k.ans.affected, h.x.Rows)
	}
	k.ans = answer{}
}

// bind gives a statement's calls of ROW_COUNT() and FOUND_ROWS()
// the session's values (router.BindCounts); a statement it cannot bind
// stays sticky (it runs on the connection, whose values it reads).
func (k *counts) bind(sql string, stmt *router.Stmt, p []byte) (string, []byte) {
	h := k.h
	st := h.c.st
	if stmt.Multi || stmt.Kind != router.KindRead && stmt.Kind != router.KindWrite && stmt.Keyword != "SET" {
		// DDL (CREATE TABLE ... DEFAULT ROW_COUNT(), which MariaDB
		// refuses) and the rest run as written, on the session's
		// connection.
		stmt.Carried = false
		return sql, p
	}
	bound, ok := router.BindCounts(sql, st.Mode(), st.RowCount, st.FoundRows)
	if !ok {
		stmt.Carried = false
		return sql, p
	}
	if bound == sql {
		return sql, p
	}
	return bound, h.queryPacket(bound)
}
