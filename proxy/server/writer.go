package server

import (
	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/mysql"
)

// conn is the engine's Writer: it frames what the engine builds for this
// client (CLIENT_DEPRECATE_EOF, the session's status, the binary protocol
// of a prepared statement's execution).

// Fields starts a result set: the column count, the definitions and,
// without CLIENT_DEPRECATE_EOF, an EOF.
func (c *conn) Fields(cols []*mysql.Column, raw [][]byte) error {
	n := len(raw)
	if raw == nil {
		n = len(cols)
	}
	c.buf = mysql.AppendLenEncInt(c.buf[:0], uint64(n))
	if err := c.c.WritePacket(c.buf); err != nil {
		return &mysql.DstError{Err: err}
	}
	c.binCols = c.binCols[:0]
	ext := c.extMetadata()
	for i := 0; i < n; i++ {
		var p []byte
		if raw != nil && raw[i] != nil {
			p = raw[i]
		} else {
			c.buf = mysql.AppendColumn(c.buf[:0], extColumn(cols[i], ext))
			p = c.buf
		}
		if c.binary {
			var col *mysql.Column
			if cols != nil && cols[i] != nil {
				col = cols[i]
			} else {
				var err error
				if col, err = mysql.ParseColumnExt(p, ext); err != nil {
					return err
				}
			}
			c.binCols = append(c.binCols, col)
		}
		if err := c.c.WritePacket(p); err != nil {
			return &mysql.DstError{Err: err}
		}
	}
	if c.caps&mysql.ClientDeprecateEOF == 0 {
		if err := c.c.WritePacket(mysql.AppendEOF(c.buf[:0], 0, c.status())); err != nil {
			return &mysql.DstError{Err: err}
		}
	}
	return nil
}

// Row sends one row: as the raw text packet when there is one, converted
// to the binary protocol during a prepared statement's execution.
func (c *conn) Row(vals [][]byte, raw []byte) error {
	var p []byte
	switch {
	case c.binary:
		var err error
		if c.buf, err = mysql.AppendBinaryRow(c.buf[:0], c.binCols, vals); err != nil {
			return err
		}
		p = c.buf
	case raw != nil:
		p = raw
	default:
		c.buf = mysql.AppendTextRow(c.buf[:0], vals)
		p = c.buf
	}
	if err := c.c.WritePacket(p); err != nil {
		return &mysql.DstError{Err: err}
	}
	return nil
}

// End ends a result set with the session's status.
func (c *conn) End(warnings uint16) error {
	c.h.counts.ans = answer{rows: true}
	var err error
	if c.caps&mysql.ClientDeprecateEOF != 0 {
		err = c.c.WritePacket(mysql.AppendOK(c.buf[:0], mysql.EOFHeader, mysql.OK{Status: c.endStatus(), Warnings: warnings}))
	} else {
		err = c.c.WritePacket(mysql.AppendEOF(c.buf[:0], warnings, c.endStatus()))
	}
	if err != nil {
		return &mysql.DstError{Err: err}
	}
	return nil
}

// OK answers with ok and the session's status; its insert id becomes the
// session's LAST_INSERT_ID.
func (c *conn) OK(ok mysql.OK) error {
	if ok.LastInsertID != 0 {
		c.st.LastInsertID = ok.LastInsertID
	}
	ok.Status = c.st.Status
	c.h.counts.ans = answer{affected: ok.AffectedRows}
	if err := c.writeOK(ok); err != nil {
		return &mysql.DstError{Err: err}
	}
	return nil
}

// TextRows reports whether rows go out in the text protocol.
func (c *conn) TextRows() bool { return !c.binary }

// Client is the client's packet stream.
func (c *conn) Client() *mysql.Conn { return c.c }

// conn is also the engine's Conns: connections come from the session
// state, and what runs is shown to KILL and Shutdown.

func (c *conn) Acquire(node string, usesLastID bool) (*backend.Conn, error) {
	return c.st.Acquire(node, usesLastID)
}

func (c *conn) Release(bc *backend.Conn, sticky bool, o backend.Outcome) { c.st.Release(bc, sticky, o) }

func (c *conn) Shared(node string) bool { return c.st.Shared(node) }

func (c *conn) Running(bc *backend.Conn) {
	c.running.Store(bc)
	c.noteRunning(bc, nil) // deadlock.go
}

// Interrupted reports a KILL QUERY that arrived between two backend
// statements of the running client statement.
func (c *conn) Interrupted() bool { return c.interrupted.Load() }

func (c *conn) RunningAll(conns []*backend.Conn) {
	c.noteRunning(nil, conns) // deadlock.go
	if conns == nil {
		c.runningMany.Store(nil)
		return
	}
	c.runningMany.Store(&conns)
}
