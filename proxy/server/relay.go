package server

import (
	"encoding/binary"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/mysql"
)

// result is what the proxy learns from the packets that end a response.
type result struct {
	ok       bool   // the response ended with OK or EOF (not ERR)
	status   uint16 // server status of the final OK/EOF
	warnings uint16
	insertID uint64
	sent     bool // at least one packet reached the client's buffer
}

// relayResult forwards a COM_QUERY or COM_STMT_EXECUTE response: any number
// of results (OK, ERR, result sets, LOCAL INFILE requests) chained by
// SERVER_MORE_RESULTS_EXISTS. Rows are copied as raw packets.
func (ss *session) relayResult(bc *backend.Conn) (result, error) {
	var r result
	deprecateEOF := bc.Caps&mysql.ClientDeprecateEOF != 0
	for {
		p, err := bc.ForwardPacket(ss.c)
		if err != nil {
			return r, err
		}
		r.sent = true
		switch {
		case p.First == mysql.ErrHeader:
			r.ok = false
			return r, nil
		case p.First == mysql.OKHeader && p.Small != nil:
			r.setInfo(p.Small)
			if r.status&mysql.StatusMoreResultsExists != 0 {
				continue
			}
			return r, nil
		case p.First == mysql.LocalInfileHeader && p.Small != nil:
			if err := ss.relayLocalInfile(bc); err != nil {
				return r, err
			}
			continue
		}
		if p.Small == nil {
			return r, mysql.ErrMalformedPacket
		}
		ncols, _, n := mysql.ReadLenEncInt(p.Small)
		if n == 0 {
			return r, mysql.ErrMalformedPacket
		}
		for i := uint64(0); i < ncols; i++ {
			if _, err := bc.ForwardPacket(ss.c); err != nil {
				return r, err
			}
		}
		if !deprecateEOF {
			p, err := bc.ForwardPacket(ss.c)
			if err != nil {
				return r, err
			}
			r.setInfo(p.Small)
			if r.status&mysql.StatusCursorExists != 0 {
				return r, nil // COM_STMT_EXECUTE opened a cursor: rows come with COM_STMT_FETCH
			}
		}
		if err := ss.relayRows(bc, &r); err != nil {
			return r, err
		}
		if !r.ok || r.status&mysql.StatusMoreResultsExists == 0 {
			return r, nil
		}
	}
}

// relayRows forwards rows up to and including the EOF/OK or ERR that ends
// them.
func (ss *session) relayRows(bc *backend.Conn, r *result) error {
	continued := false
	for {
		p, err := bc.ForwardPacket(ss.c)
		if err != nil {
			return err
		}
		if continued {
			// The previous packet was a full 16 MiB: this one continues
			// the same row whatever its first byte.
			continued = p.Len == mysql.MaxPacketPayload
			continue
		}
		if p.Len == mysql.MaxPacketPayload {
			continued = true
			continue
		}
		switch {
		case p.First == mysql.EOFHeader && p.Small != nil:
			r.setInfo(p.Small)
			return nil
		case p.First == mysql.ErrHeader:
			r.ok = false
			return nil
		}
	}
}

func (r *result) setInfo(p []byte) {
	st, w, id, ok := mysql.ResultInfo(p)
	if ok {
		r.ok, r.status, r.warnings, r.insertID = true, st, w, id
	}
}

// relayLocalInfile streams a LOAD DATA LOCAL file from the client to the
// backend after the backend asked for it: packets up to and including the
// empty one that ends the file.
func (ss *session) relayLocalInfile(bc *backend.Conn) error {
	if err := ss.c.Flush(); err != nil {
		return &mysql.DstError{Err: err}
	}
	for {
		p, err := ss.c.ForwardPacket(bc.Conn)
		if err != nil {
			// Reading the client failed: the client is gone. A failed write
			// to the backend is reported as a backend failure.
			if _, isDst := err.(*mysql.DstError); isDst {
				return err.(*mysql.DstError).Err
			}
			return &mysql.DstError{Err: err}
		}
		if p.Len == 0 {
			return bc.Flush()
		}
	}
}

// relayPrepare forwards a COM_STMT_PREPARE response.
func (ss *session) relayPrepare(bc *backend.Conn) (result, error) {
	r := result{ok: true, status: ss.status}
	p, err := bc.ForwardPacket(ss.c)
	if err != nil {
		return r, err
	}
	r.sent = true
	if p.First == mysql.ErrHeader {
		return r, nil
	}
	if p.First != mysql.OKHeader || len(p.Small) < 12 {
		return r, mysql.ErrMalformedPacket
	}
	cols := int(binary.LittleEndian.Uint16(p.Small[5:7]))
	params := int(binary.LittleEndian.Uint16(p.Small[7:9]))
	deprecateEOF := bc.Caps&mysql.ClientDeprecateEOF != 0
	for _, n := range []int{params, cols} {
		if n == 0 {
			continue
		}
		if !deprecateEOF {
			n++
		}
		for i := 0; i < n; i++ {
			if _, err := bc.ForwardPacket(ss.c); err != nil {
				return r, err
			}
		}
	}
	return r, nil
}

// relayFetch forwards a COM_STMT_FETCH response: rows and EOF, or ERR.
func (ss *session) relayFetch(bc *backend.Conn) (result, error) {
	r := result{sent: true}
	err := ss.relayRows(bc, &r)
	return r, err
}

// relayFieldList forwards a COM_FIELD_LIST response: column definitions up
// to EOF, or ERR.
func (ss *session) relayFieldList(bc *backend.Conn) (result, error) {
	r := result{sent: true, ok: true, status: ss.status}
	for {
		p, err := bc.ForwardPacket(ss.c)
		if err != nil {
			return r, err
		}
		if p.First == mysql.ErrHeader || (p.First == mysql.EOFHeader && p.Small != nil) {
			return r, nil
		}
	}
}

// relayOne forwards a one-packet response (COM_STATISTICS, COM_STMT_RESET).
func (ss *session) relayOne(bc *backend.Conn) (result, error) {
	_, err := bc.ForwardPacket(ss.c)
	return result{sent: true, ok: true, status: ss.status}, err
}
