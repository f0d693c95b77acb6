package server

import (
	"fmt"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/proxy/session"
)

// What the session's prepared statements cost, and what gives it back.
//
// A client's statements are capped per session (max_prepared_stmt_count)
// and for the whole proxy (max_prepared_stmt_total) with MariaDB's error
// 1461; the proxy's count of open statements (counters.stmtsOpen) follows
// the session's (sync). The backend statements a client statement was
// prepared as on pooled connections (backend.PrepareCached, cached there
// for the next execution) are recorded as uses: when the client closes the
// statement, resets its session or leaves, each is closed on the server,
// at once on a connection the session holds, else through the node
// (backend.Node.ForgetOn). The node's connections keep at most
// backend.prepared_stmt_budget statements together whatever the clients
// do.

// stmtBudget is the stmtHandler's account of its session's prepared
// statements (embedded in it): their count, backend statements and the
// last one prepared; owned by the conn's goroutine.
type stmtBudget struct {
	h *handler
	// held is the session's count of prepared statements as the
	// server's count (stmtsOpen) has it; uses are the backend statements
	// each client statement was prepared as.
	held int
	uses map[uint32][]stmtUse
	// lastID is the statement the last successful COM_STMT_PREPARE made
	// (0 after a failed one): id 0xffffffff names it (MariaDB's
	// LAST_STMT_ID, which Connector/J sends with a COM_STMT_EXECUTE or
	// COM_STMT_BULK_EXECUTE pipelined after its prepare).
	lastID uint32
	// longHeld is the long data (COM_STMT_SEND_LONG_DATA) the session's
	// statements hold for their next executions, taken from the server's
	// packet_memory_total.
	longHeld int64
}

// holdLong takes n bytes of long data from packet_memory_total; false
// when it cannot hold them.
func (s *stmtBudget) holdLong(n int) bool {
	if !s.h.c.srv.packets.Take(int64(n)) {
		return false
	}
	s.longHeld += int64(n)
	return true
}

// clearLong forgets ps's long data and gives its memory back.
func (s *stmtBudget) clearLong(ps *session.Stmt) {
	n := int64(ps.ClearLong())
	s.longHeld -= n
	s.h.c.srv.packets.Give(n)
}

// lastStmtID is MariaDB's LAST_STMT_ID: the statement the last
// COM_STMT_PREPARE made.
const lastStmtID = 0xffffffff

// stmtID is the session's id a command names: id itself, or the last
// prepared statement's for lastStmtID.
func (s *stmtBudget) stmtID(id uint32) uint32 {
	if id == lastStmtID {
		return s.lastID
	}
	return id
}

// stmtUse is a backend statement one of the session's client statements
// was prepared as: q, prepared and cached on bc.
type stmtUse struct {
	bc *backend.Conn
	q  string
}

// errMaxStmts is ER_MAX_PREPARED_STMT_COUNT_REACHED (1461, 42000) with the
// limit that was reached.
func errMaxStmts(limit int) error {
	return &mysql.SQLError{Code: erMaxPreparedStmtCount, State: "42000",
		Message: fmt.Sprintf("Can't create more than max_prepared_stmt_count statements (current value: %d)", limit)}
}

// erMaxPreparedStmtCount is ER_MAX_PREPARED_STMT_COUNT_REACHED.
const erMaxPreparedStmtCount = 1461

// sync brings the proxy's count of open client statements in line with
// the session's.
func (s *stmtBudget) sync() {
	c := s.h.c
	if c.st == nil {
		return
	}
	if d := c.st.Stmts.Len() - s.held; d != 0 {
		c.srv.stmtsOpen.Add(int64(d))
		s.held += d
	}
}

// room returns error 1461 when one more prepared statement would pass the
// session's cap or the proxy's.
func (s *stmtBudget) room() error {
	c := s.h.c
	s.sync()
	cfg := c.srv.cfg()
	if s.held >= cfg.MaxPreparedStmts {
		return errMaxStmts(cfg.MaxPreparedStmts)
	}
	if c.srv.stmtsOpen.Load() >= int64(cfg.MaxPreparedStmtsTotal) {
		return errMaxStmts(cfg.MaxPreparedStmtsTotal)
	}
	return nil
}

// record notes that client statement id was prepared as q on bc, which
// keeps it cached (the caller held bc when it looked).
func (s *stmtBudget) record(id uint32, bc *backend.Conn, q string) {
	if bc.Node() == nil {
		return
	}
	us := s.uses[id]
	for _, u := range us {
		if u.bc == bc && u.q == q {
			return
		}
	}
	if s.uses == nil {
		s.uses = make(map[uint32][]stmtUse)
	}
	s.uses[id] = append(us, stmtUse{bc, q})
}

// release closes on the servers the backend statements client statement
// id was prepared as.
func (s *stmtBudget) release(id uint32) {
	c := s.h.c
	for _, u := range s.uses[id] {
		if c.st.Holds(u.bc) || u.bc == c.st.Dedicated() {
			u.bc.Forget(u.q) // a failed write marks it broken
		} else {
			u.bc.Node().ForgetOn(u.bc, u.q)
		}
	}
	delete(s.uses, id)
}

// close closes client statement id: on the servers, and in the session.
func (s *stmtBudget) close(id uint32) {
	if ps := s.h.c.st.Stmts.Get(id); ps != nil {
		s.clearLong(ps)
	}
	s.release(id)
	s.h.c.st.Stmts.Close(id)
	s.sync()
}

// closeAll releases every statement of the session, which is resetting or
// ending: the proxy's count and the backend statements. The session's
// table is emptied by its Reset (or dropped with it).
func (s *stmtBudget) closeAll() {
	if s == nil || s.h == nil || s.h.c.st == nil {
		return
	}
	for id := range s.uses {
		s.release(id)
	}
	s.h.c.srv.stmtsOpen.Add(-int64(s.held))
	s.held = 0
	s.h.c.srv.packets.Give(s.longHeld) // the statements' long data goes with them
	s.longHeld = 0
}

// releaseAll gives back what a leaving client's session holds: its
// prepared statements, then its backend connections.
func (c *conn) releaseAll() {
	if c.st != nil {
		c.h.ps.closeAll()
		c.st.ReleaseAll()
	}
}

// busy reports whether the session runs a command (SHOW PROCESSLIST's
// Command is not Sleep).
func (c *conn) busy() bool {
	_, _, cmd, _, _ := c.act.get()
	return cmd != "Sleep"
}
