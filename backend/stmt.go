package backend

import (
	"encoding/binary"
	"errors"
	"slices"

	"github.com/shardgate/shardgate/mysql"
)

// maxCachedStmts bounds the prepared statements a connection keeps; past
// it the least recently prepared one is closed on the server. The node's
// connections together keep at most backend.prepared_stmt_budget
// (Node.stmtsCached): past it a connection closes its own least recently
// prepared statement before it prepares another (one with none prepares
// anyway, so the budget is exceeded by at most one statement per
// connection).
//
// A statement stays prepared on a connection until the connection closes
// it to make room, the server drops it (a new login, a reset), or the
// session whose client prepared it asks for it to be closed
// (Conn.Forget on a connection the session holds; Node.ForgetOn on one it
// gave back: closed at once when the connection is idle, else when its
// holder gives it back). So statements the clients closed do not stay on
// the servers, and what the proxy holds there is bounded whatever the
// clients do.
const maxCachedStmts = 256

// Stmt is a statement prepared on one backend connection: its id there
// and the metadata the server sent (raw column definition payloads).
type Stmt struct {
	ID       uint32
	Params   [][]byte
	Cols     [][]byte
	Warnings uint16
	ctx      stmtCtx // the session state it was prepared in
}

// stmtCtx is the part of a connection's session state that MariaDB fixes
// in a statement when it prepares it: the current database (unqualified
// names), the connection collation, and the variables the parser and
// resolver read (sql_mode, character sets, ...). A cached statement is
// reused only in the same context; the server itself re-prepares a
// statement whose tables changed (and says 1615 when it gives up).
type stmtCtx struct {
	db   string
	coll byte
	vars [len(stmtCtxVars)]string
}

// stmtCtxVars are the session variables of a statement's context, as
// Conn.Vars names them.
var stmtCtxVars = [...]string{
	"@@SESSION.`sql_mode`", "@@SESSION.`old_mode`", "@@SESSION.`character_set_client`",
	"@@SESSION.`character_set_connection`", "@@SESSION.`collation_connection`",
	"@@SESSION.`sql_select_limit`", "@@SESSION.`explicit_defaults_for_timestamp`",
	"@@SESSION.`div_precision_increment`", "@@SESSION.`lc_time_names`",
}

// context is the connection's current stmtCtx (no allocation).
func (c *Conn) context() stmtCtx {
	x := stmtCtx{db: c.DB, coll: c.Collation}
	if len(c.Vars) > 0 {
		for i, name := range stmtCtxVars {
			x.vars[i] = c.Vars[name]
		}
	}
	return x
}

// PrepareCached returns the connection's prepared statement for query,
// preparing it with COM_STMT_PREPARE the first time and again when the
// session state it was prepared in has changed since. A backend ERR is
// returned as *mysql.SQLError and leaves the connection usable.
func (c *Conn) PrepareCached(query string) (*Stmt, error) {
	if s := c.stmts[query]; s != nil && s.ctx == c.context() {
		return s, nil
	}
	return c.Prepare(query)
}

// Prepare prepares query on the connection now, replacing the cached
// statement for it: its metadata and warnings are the server's current
// ones (what a client's COM_STMT_PREPARE must get).
func (c *Conn) Prepare(query string) (*Stmt, error) {
	if err := c.Forget(query); err != nil {
		return nil, err
	}
	s, err := c.prepareCached(query)
	var se *mysql.SQLError
	if errors.As(err, &se) && se.Code == erMaxPreparedStmtCount && len(c.stmtOrder) > 0 {
		// The server's max_prepared_stmt_count is shared by every
		// connection: give back this connection's cached statements
		// (the oldest half, at least one) and try once more.
		if err := c.evictCached(max(len(c.stmtOrder)/2, 1)); err != nil {
			return nil, err
		}
		if c.node != nil {
			c.node.stmtEvictions.Add(1)
		}
		s, err = c.prepareCached(query)
	}
	return s, err
}

// erMaxPreparedStmtCount is ER_MAX_PREPARED_STMT_COUNT_REACHED.
const erMaxPreparedStmtCount = 1461

// evictCached closes the n oldest cached statements.
func (c *Conn) evictCached(n int) error {
	for range n {
		if len(c.stmtOrder) == 0 {
			return nil
		}
		old := c.stmtOrder[0]
		c.stmtOrder = c.stmtOrder[1:]
		if s := c.stmts[old]; s != nil {
			delete(c.stmts, old)
			c.counted(-1)
			if err := c.closeStmt(s.ID); err != nil {
				return err
			}
		}
	}
	return nil
}

func (c *Conn) prepareCached(query string) (*Stmt, error) {
	if len(c.stmtOrder) >= maxCachedStmts || len(c.stmtOrder) > 0 && c.overBudget() {
		if err := c.evictCached(1); err != nil {
			return nil, err
		}
	}
	if err := c.command(mysql.ComStmtPrepare, query); err != nil {
		c.broken = true
		return nil, err
	}
	p, err := c.ReadPacket()
	if err != nil {
		c.broken = true
		return nil, err
	}
	if len(p) > 0 && p[0] == mysql.ErrHeader {
		return nil, mysql.ParseErr(p)
	}
	if len(p) < 12 || p[0] != mysql.OKHeader {
		c.broken = true
		return nil, mysql.ErrBadPacket
	}
	s := &Stmt{ID: binary.LittleEndian.Uint32(p[1:5]), Warnings: binary.LittleEndian.Uint16(p[10:12]), ctx: c.context()}
	ncols := int(binary.LittleEndian.Uint16(p[5:7]))
	nparams := int(binary.LittleEndian.Uint16(p[7:9]))
	for _, part := range []struct {
		n   int
		dst *[][]byte
	}{{nparams, &s.Params}, {ncols, &s.Cols}} {
		for range part.n {
			d, err := c.ReadPacket()
			if err != nil {
				c.broken = true
				return nil, err
			}
			*part.dst = append(*part.dst, append([]byte(nil), d...))
		}
		if part.n > 0 && c.Caps&mysql.ClientDeprecateEOF == 0 {
			if _, err := c.ReadPacket(); err != nil {
				c.broken = true
				return nil, err
			}
		}
	}
	if c.stmts == nil {
		c.stmts = make(map[string]*Stmt)
	}
	c.stmts[query] = s
	c.stmtOrder = append(c.stmtOrder, query)
	c.counted(1)
	return s, nil
}

// Forget closes the cached statement for query, if there is one: after
// the server said it needs to be prepared again (1615), the next
// PrepareCached prepares it anew.
func (c *Conn) Forget(query string) error {
	s := c.stmts[query]
	if s == nil {
		return nil
	}
	delete(c.stmts, query)
	c.counted(-1)
	if i := slices.Index(c.stmtOrder, query); i >= 0 {
		c.stmtOrder = slices.Delete(c.stmtOrder, i, i+1)
	}
	return c.closeStmt(s.ID)
}

// closeStmt sends COM_STMT_CLOSE, which has no reply.
func (c *Conn) closeStmt(id uint32) error {
	c.ResetSeq()
	var b [5]byte
	b[0] = mysql.ComStmtClose
	binary.LittleEndian.PutUint32(b[1:], id)
	if err := c.writeFlush(b[:]); err != nil {
		c.broken = true
		return err
	}
	return nil
}

// SendLongData sends one COM_STMT_SEND_LONG_DATA chunk, which has no reply.
func (c *Conn) SendLongData(id uint32, param uint16, data []byte) error {
	c.ResetSeq()
	b := make([]byte, 0, 7+len(data))
	b = append(b, mysql.ComStmtSendLongData)
	b = binary.LittleEndian.AppendUint32(b, id)
	b = binary.LittleEndian.AppendUint16(b, param)
	b = append(b, data...)
	if err := c.writeFlush(b); err != nil {
		c.broken = true
		return err
	}
	return nil
}

// forgetStmts drops the statement cache after the server dropped the
// statements (COM_CHANGE_USER, COM_RESET_CONNECTION).
func (c *Conn) forgetStmts() {
	c.counted(-len(c.stmts))
	c.stmts = nil
	c.stmtOrder = nil
}

// counted adds d to the node's count of cached statements.
func (c *Conn) counted(d int) {
	if c.node != nil && d != 0 {
		c.node.stmtsCached.Add(int64(d))
	}
}

// overBudget reports whether the node's connections keep as many
// statements as backend.prepared_stmt_budget allows.
func (c *Conn) overBudget() bool {
	return c.node != nil && c.node.stmtsCached.Load() >= int64(max(c.node.opts.PreparedStmtBudget, 1))
}

// Cached reports whether query is prepared on the connection now.
func (c *Conn) Cached(query string) bool { return c.stmts[query] != nil }

// ForgetOn closes the statement for query on c, a connection of the node
// the caller no longer holds (it prepared query there earlier): now when c
// is idle in the pool, else when its holder gives it back or the next
// caller takes it (closeStmtsLater). Safe for concurrent use.
func (n *Node) ForgetOn(c *Conn, query string) {
	n.mu.Lock()
	if len(c.closeLater) < maxCachedStmts {
		c.closeLater = append(c.closeLater, query)
	} else {
		// Sessions closing many statements at once (leaving): the
		// connection gives back all it keeps.
		c.closeAllLater = true
	}
	_, busy := n.busy[c]
	n.mu.Unlock()
	if busy || c.private {
		return
	}
	select {
	case n.sem <- struct{}{}:
	default:
		return // the pool is full: the next Get of c closes it
	}
	n.mu.Lock()
	vi := variantIndex(c.Variant)
	i := slices.Index(n.idle[vi], c)
	if i < 0 {
		// Closed, or taken meanwhile.
		n.mu.Unlock()
		<-n.sem
		return
	}
	n.idle[vi] = slices.Delete(n.idle[vi], i, i+1)
	n.nidle--
	n.checkoutLocked(c)
	n.mu.Unlock()
	n.Put(c) // closes the statement first
}

// closeStmtsLater closes the statements ForgetOn left to close on c, whose
// caller holds it.
func (n *Node) closeStmtsLater(c *Conn) {
	n.mu.Lock()
	qs, all := c.closeLater, c.closeAllLater
	c.closeLater, c.closeAllLater = nil, false
	n.mu.Unlock()
	if all {
		c.evictCached(len(c.stmtOrder))
		return
	}
	for _, q := range qs {
		if c.broken {
			return
		}
		c.Forget(q)
	}
}
