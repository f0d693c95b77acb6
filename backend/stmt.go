package backend

import (
	"encoding/binary"
	"errors"

	"github.com/shardgate/shardgate/mysql"
)

// maxCachedStmts bounds the prepared statements a connection keeps; past
// it the least recently prepared one is closed on the server.
const maxCachedStmts = 256

// Stmt is a statement prepared on one backend connection: its id there
// and the metadata the server sent (raw column definition payloads).
type Stmt struct {
	ID       uint32
	Params   [][]byte
	Cols     [][]byte
	Warnings uint16
}

// PrepareCached returns the connection's prepared statement for query,
// preparing it with COM_STMT_PREPARE the first time. A backend ERR is
// returned as *mysql.SQLError and leaves the connection usable.
func (c *Conn) PrepareCached(query string) (*Stmt, error) {
	if s := c.stmts[query]; s != nil {
		return s, nil
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
			if err := c.closeStmt(s.ID); err != nil {
				return err
			}
		}
	}
	return nil
}

func (c *Conn) prepareCached(query string) (*Stmt, error) {
	if len(c.stmtOrder) >= maxCachedStmts {
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
		return nil, mysql.ErrMalformedPacket
	}
	s := &Stmt{ID: binary.LittleEndian.Uint32(p[1:5]), Warnings: binary.LittleEndian.Uint16(p[10:12])}
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
	return s, nil
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
	c.stmts = nil
	c.stmtOrder = nil
}
