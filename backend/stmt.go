package backend

import (
	"encoding/binary"

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
	if len(c.stmtOrder) >= maxCachedStmts {
		old := c.stmtOrder[0]
		c.stmtOrder = c.stmtOrder[1:]
		if s := c.stmts[old]; s != nil {
			delete(c.stmts, old)
			if err := c.closeStmt(s.ID); err != nil {
				return nil, err
			}
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
