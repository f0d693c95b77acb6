package engine

import (
	"encoding/binary"
	"errors"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/mysql"
)

// Relay passes one backend response on to the client as it reads it.
type Relay func(x *Executor, bc *backend.Conn) (backend.Outcome, error)

// relayer passes the response of one backend on to the client packet by
// packet, decoding only the packets that end a result (their status, and
// the session state the client is not told of) and, for statements on
// subtables, the column definitions that name them. It owns the scratch
// buffers those rewritten packets are built in, kept between statements
// so that relaying allocates nothing. Every Relay of the package runs
// through the executor's one relayer; x is the executor it counts rows
// and relayed errors for and whose client it writes to.
type relayer struct {
	x       *Executor
	ebuf    []byte // end packets rewritten for the client
	scratch []byte // column definitions renamed for the client
}

// Forward runs one client command on a connection to node: it borrows (or
// reuses) a connection in the session's state, sends the command packet p
// unchanged, relays the response with relay (nil: the command has no
// response) and gives the connection back. sticky says the command leaves
// state on the connection; usesLastID that it reads LAST_INSERT_ID().
func (x *Executor) Forward(node string, p []byte, sticky, usesLastID bool, relay Relay) (backend.Outcome, error) {
	bc, err := x.conns.Acquire(node, usesLastID)
	if err != nil {
		return backend.Outcome{}, err
	}
	return x.RunOn(bc, p, sticky, relay)
}

// RunOn is Forward on a connection the caller acquired.
func (x *Executor) RunOn(bc *backend.Conn, p []byte, sticky bool, relay Relay) (backend.Outcome, error) {
	x.conns.Running(bc)
	defer x.conns.Running(nil)
	bc.ResetSeq()
	err := bc.WritePacket(p)
	if err == nil {
		err = bc.Flush()
	}
	if err != nil {
		bc.MarkBroken()
		x.conns.Release(bc, false, backend.Outcome{})
		return backend.Outcome{}, &backend.LostError{Conn: bc}
	}
	if relay == nil {
		x.conns.Release(bc, sticky, backend.Outcome{})
		return backend.Outcome{}, nil
	}
	res, err := relay(x, bc)
	if err != nil {
		bc.MarkBroken()
		x.conns.Release(bc, false, res)
		var de *mysql.DstError
		var se *mysql.SQLError
		switch {
		case errors.As(err, &de), errors.Is(err, mysql.ErrForwardCut):
			// The client went away, or holds part of a packet: the caller
			// ends the session.
			return res, err
		case errors.As(err, &se) && !res.Sent:
			return res, err // e.g. a renamed SHOW answered ERR
		}
		return res, &backend.LostError{Conn: bc, Cause: err}
	}
	x.conns.Release(bc, sticky, res)
	return res, nil
}

// RelayResult forwards a COM_QUERY or COM_STMT_EXECUTE response: any number
// of results (OK, ERR, result sets, LOCAL INFILE requests) chained by
// SERVER_MORE_RESULTS_EXISTS. Rows are copied as raw packets; the packets
// that end a result go through relayer.end.
func RelayResult(x *Executor, bc *backend.Conn) (backend.Outcome, error) {
	return x.relay.result(bc, false, nil)
}

// RelayResultLogical is RelayResult for a statement on subtables of the
// logical tables named: column definitions that name a subtable (table,
// org_table) name its logical table instead, as the server would for the
// table the client wrote. cursor is as for RelayCursorResult.
func RelayResultLogical(x *Executor, bc *backend.Conn, tables []string, cursor bool) (backend.Outcome, error) {
	return x.relay.result(bc, cursor, tables)
}

// LogicalName maps a subtable name of one of tables (the logical name,
// "_", then digits: hash and range subtables and the periods of date
// rules; or "_gN_" then digits: the subtables of a later generation) to
// that logical name.
func LogicalName(tables []string, name []byte) (string, bool) {
	for _, t := range tables {
		if len(name) > len(t)+1 && string(name[:len(t)]) == t && name[len(t)] == '_' {
			rest := name[len(t)+1:]
			if len(rest) > 1 && rest[0] == 'g' {
				if i := indexByte(rest, '_'); i > 1 && allDigits(rest[1:i]) {
					rest = rest[i+1:]
				}
			}
			if allDigits(rest) {
				return t, true
			}
		}
	}
	return "", false
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

func allDigits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return len(b) > 0
}

// column passes one column definition on, naming the logical table where
// it names a subtable of one of tables.
func (rl *relayer) column(bc *backend.Conn, client *mysql.Conn, tables []string) error {
	if len(tables) == 0 {
		_, err := rl.forward(bc, client)
		return err
	}
	p, err := bc.ReadPacket()
	if err != nil {
		return err
	}
	out, ok := mysql.RenameColumnTables(rl.scratch[:0], p, func(name []byte) (string, bool) { return LogicalName(tables, name) })
	if !ok {
		out = p
	} else {
		rl.scratch = out
	}
	if err := client.WritePacket(out); err != nil {
		return &mysql.DstError{Err: err}
	}
	return nil
}

// RelayCursorResult is RelayResult for a COM_STMT_EXECUTE that asked for
// a cursor: a result whose end says SERVER_STATUS_CURSOR_EXISTS ends the
// response there (its rows come with COM_STMT_FETCH). Any other response
// may carry that flag too without opening a cursor for the client (MariaDB
// sets it on results of a CALL whose procedure used a cursor), so only
// these executions read it so.
func RelayCursorResult(x *Executor, bc *backend.Conn) (backend.Outcome, error) {
	return x.relay.result(bc, true, nil)
}

// result relays a whole response (see RelayResult, RelayCursorResult and
// RelayResultLogical).
func (rl *relayer) result(bc *backend.Conn, cursor bool, tables []string) (backend.Outcome, error) {
	var r backend.Outcome
	client := rl.x.w.Client()
	deprecateEOF := bc.Caps&mysql.ClientDeprecateEOF != 0
	for {
		first, length, err := bc.PeekPacket()
		if err != nil {
			return r, err
		}
		if first == mysql.ErrHeader {
			if done, err := rl.victim(bc, &r); done || err != nil {
				return r, err
			}
		}
		if first == mysql.OKHeader && length > 0 && length < mysql.MaxPacketPayload {
			if err := rl.end(bc, &r); err != nil {
				return r, err
			}
			r.Sent = true
			if r.Status&mysql.StatusMoreResultsExists != 0 {
				continue
			}
			return r, nil
		}
		p, err := rl.forward(bc, client)
		if err != nil {
			return r, err
		}
		r.Sent = true
		switch {
		case p.First == mysql.ErrHeader:
			r.OK = false
			if len(p.Small) >= 3 {
				r.ErrCode = binary.LittleEndian.Uint16(p.Small[1:3])
				rl.x.ErrCode = r.ErrCode
			}
			return r, nil
		case p.First == mysql.LocalInfileHeader && p.Small != nil:
			if err := relayLocalInfile(client, bc, rl.x.Renumber); err != nil {
				return r, err
			}
			continue
		}
		if p.Small == nil {
			return r, mysql.ErrBadPacket
		}
		ncols, _, n := mysql.ReadLenEncInt(p.Small)
		if n == 0 {
			return r, mysql.ErrBadPacket
		}
		for i := uint64(0); i < ncols; i++ {
			if err := rl.column(bc, client, tables); err != nil {
				return r, err
			}
		}
		if !deprecateEOF {
			if err := rl.end(bc, &r); err != nil {
				return r, err
			}
			if cursor && r.Status&mysql.StatusCursorExists != 0 {
				return r, nil // COM_STMT_EXECUTE opened a cursor: rows come with COM_STMT_FETCH
			}
		}
		if err := rl.rows(bc, &r); err != nil {
			return r, err
		}
		if !r.OK || r.Status&mysql.StatusMoreResultsExists == 0 {
			return r, nil
		}
	}
}

// rows forwards rows up to and including the EOF/OK or ERR that ends
// them.
func (rl *relayer) rows(bc *backend.Conn, r *backend.Outcome) error {
	client := rl.x.w.Client()
	continued := false
	for {
		first, length, err := bc.PeekPacket()
		if err != nil {
			return err
		}
		if first == mysql.ErrHeader && !continued {
			if done, err := rl.victim(bc, r); done || err != nil {
				return err
			}
		}
		if !continued && first == mysql.EOFHeader && length < mysql.MaxPacketPayload {
			return rl.end(bc, r)
		}
		p, err := rl.forward(bc, client)
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
		if p.First == mysql.ErrHeader {
			r.OK = false
			return nil
		}
		rl.x.Rows++
	}
}

// end reads the OK or EOF packet that ends a result (or the EOF after
// column definitions), records in r what it says, including the session
// state changes the server reports, and passes it on with the state
// information the client's own trackers report (StateWriter), or without
// it and without SERVER_SESSION_STATE_CHANGED. A packet without a state
// change goes out unchanged when there is nothing to report.
func (rl *relayer) end(bc *backend.Conn, r *backend.Outcome) error {
	p, err := bc.ReadPacket()
	if err != nil {
		return err
	}
	r.SetInfo(p)
	out := p
	switch {
	case len(p) == 5 && p[0] == mysql.EOFHeader:
		if r.Status&mysql.StatusSessionStateChange != 0 && !rl.eofState() {
			rl.ebuf = mysql.AppendEOF(rl.ebuf[:0], r.Warnings, r.Status&^mysql.StatusSessionStateChange)
			out = rl.ebuf
		}
	case r.Status&mysql.StatusSessionStateChange != 0 && bc.Caps&mysql.ClientSessionTrack != 0:
		// Without a state change the two formats are the same bytes.
		ok, state, err := mysql.ParseOKTracked(p)
		if err != nil {
			return err
		}
		if state != nil {
			r.State = append(r.State[:0], state...)
		}
		rl.ebuf = mysql.AppendOKTracked(rl.ebuf[:0], p[0], ok, rl.clientState(state))
		out = rl.ebuf
	case len(p) > 0 && (p[0] == mysql.OKHeader || p[0] == mysql.EOFHeader):
		// Something the proxy did for the statement may be due in its
		// OK.
		if st := rl.clientState(nil); st != nil {
			ok, _, err := mysql.ParseOKTracked(p)
			if err != nil {
				return err
			}
			rl.ebuf = mysql.AppendOKTracked(rl.ebuf[:0], p[0], ok, st)
			out = rl.ebuf
		}
	}
	if rl.x.More != 0 {
		out = rl.withStatus(out, rl.x.More)
	}
	if err := rl.x.w.Client().WritePacket(out); err != nil {
		return &mysql.DstError{Err: err}
	}
	return nil
}

// eofState reports whether the client keeps SERVER_SESSION_STATE_CHANGED
// in an EOF, which carries no information (EOFStateWriter).
func (rl *relayer) eofState() bool {
	ew, ok := rl.x.w.(EOFStateWriter)
	return ok && ew.EOFState()
}

// EOFStateWriter is a Writer whose client is told of a change of session
// state in an EOF packet (SERVER_SESSION_STATE_CHANGED, without the
// information an EOF cannot carry) when its trackers would have seen the
// change the server reports there; EOFState says whether they would
// (MariaDB sets it in the EOF of a result set that changed the
// transaction's state, for a client tracking it).
type EOFStateWriter interface {
	EOFState() bool
}

// clientState is the session state information the client gets in an
// OK that passes on a backend's with information state (StateWriter).
func (rl *relayer) clientState(state []byte) []byte {
	if sw, ok := rl.x.w.(StateWriter); ok {
		return sw.SessionState(state)
	}
	return nil
}

// forward passes one packet of bc's response on to client, numbered
// after what the client was sent before it when the response is not the
// first of the client's command (Executor.Renumber).
func (rl *relayer) forward(bc *backend.Conn, client *mysql.Conn) (mysql.Packet, error) {
	if rl.x.Renumber {
		return bc.ForwardPacketRenumbered(client)
	}
	return bc.ForwardPacket(client)
}

// withStatus returns p, an OK or EOF packet, with bits added to its
// server status, built in rl.ebuf (p may be rl.ebuf itself).
func (rl *relayer) withStatus(p []byte, bits uint16) []byte {
	i := 3 // EOF: header, warnings, status
	if len(p) != 5 || p[0] != mysql.EOFHeader {
		_, _, n1 := mysql.ReadLenEncInt(p[1:])
		_, _, n2 := mysql.ReadLenEncInt(p[1+n1:])
		if n1 == 0 || n2 == 0 {
			return p
		}
		i = 1 + n1 + n2 // OK: header, affected rows, insert id, status
	}
	if i+2 > len(p) {
		return p
	}
	rl.ebuf = append(rl.ebuf[:0], p...)
	binary.LittleEndian.PutUint16(rl.ebuf[i:], binary.LittleEndian.Uint16(p[i:])|bits)
	return rl.ebuf
}

// relayLocalInfile streams a LOAD DATA LOCAL file from the client to the
// backend after the backend asked for it: packets up to and including the
// empty one that ends the file, numbered after the request when renumber
// (the client's numbers follow the responses before it: Executor.Renumber).
func relayLocalInfile(client *mysql.Conn, bc *backend.Conn, renumber bool) error {
	if err := client.Flush(); err != nil {
		return &mysql.DstError{Err: err}
	}
	forward := client.ForwardPacket
	if renumber {
		forward = client.ForwardPacketRenumbered
	}
	for {
		p, err := forward(bc.Conn)
		if err != nil {
			// Reading the client failed: the client is gone. A failed write
			// to the backend is reported as a backend failure.
			if de, isDst := err.(*mysql.DstError); isDst {
				return de.Err
			}
			return &mysql.DstError{Err: err}
		}
		if p.Len == 0 {
			return bc.Flush()
		}
	}
}

// RelayFetch forwards a COM_STMT_FETCH response: rows and EOF, or ERR.
func RelayFetch(x *Executor, bc *backend.Conn) (backend.Outcome, error) {
	r := backend.Outcome{Sent: true}
	err := x.relay.rows(bc, &r)
	return r, err
}

// RelayFieldList forwards a COM_FIELD_LIST response: column definitions up
// to EOF, or ERR.
func RelayFieldList(x *Executor, bc *backend.Conn) (backend.Outcome, error) {
	r := backend.Outcome{Sent: true} // carries no server status
	for {
		p, err := bc.ForwardPacket(x.w.Client())
		if err != nil {
			return r, err
		}
		if p.First == mysql.ErrHeader || (p.First == mysql.EOFHeader && p.Small != nil) {
			return r, nil
		}
	}
}

// RelayOne forwards a one-packet response (COM_STATISTICS, COM_STMT_RESET).
func RelayOne(x *Executor, bc *backend.Conn) (backend.Outcome, error) {
	_, err := bc.ForwardPacket(x.w.Client())
	return backend.Outcome{Sent: true}, err // carries no server status
}

// RelayPrepareAs forwards a COM_STMT_PREPARE response with the statement
// id the client is to use, id, in place of the backend's, which it stores
// in backendID (left 0 when the backend answered ERR).
func RelayPrepareAs(id uint32, backendID *uint32) Relay {
	return func(x *Executor, bc *backend.Conn) (backend.Outcome, error) {
		var r backend.Outcome
		client := x.w.Client()
		p, err := bc.ReadPacket()
		if err != nil {
			return r, err
		}
		if len(p) > 0 && p[0] == mysql.ErrHeader {
			r.Sent = true
			return r, client.WritePacket(p)
		}
		if p[0] != mysql.OKHeader || len(p) < 12 {
			return r, mysql.ErrBadPacket
		}
		*backendID = binary.LittleEndian.Uint32(p[1:5])
		binary.LittleEndian.PutUint32(p[1:5], id) // p is ours until the next read
		if err := client.WritePacket(p); err != nil {
			return r, &mysql.DstError{Err: err}
		}
		r.Sent = true
		cols := int(binary.LittleEndian.Uint16(p[5:7]))
		params := int(binary.LittleEndian.Uint16(p[7:9]))
		return r, forwardDefinitions(client, bc, params, cols)
	}
}

// forwardDefinitions forwards the parameter and column definitions of a
// COM_STMT_PREPARE response, each list followed by an EOF without
// CLIENT_DEPRECATE_EOF.
func forwardDefinitions(client *mysql.Conn, bc *backend.Conn, params, cols int) error {
	deprecateEOF := bc.Caps&mysql.ClientDeprecateEOF != 0
	for _, n := range []int{params, cols} {
		if n == 0 {
			continue
		}
		if !deprecateEOF {
			n++
		}
		for i := 0; i < n; i++ {
			if _, err := bc.ForwardPacket(client); err != nil {
				return err
			}
		}
	}
	return nil
}

// victim answers the ERR packet bc is about to send with the deadlock
// error when it is the interruption (1317) of a statement the deadlock
// detector chose as a victim (Executor.Victim); done reports that it did.
func (rl *relayer) victim(bc *backend.Conn, r *backend.Outcome) (done bool, err error) {
	if rl.x.Victim == nil {
		return false, nil
	}
	code, isErr, err := bc.PeekErrCode()
	if err != nil || !isErr || code != mysql.ErQueryInterrupted {
		return false, err
	}
	v := rl.x.Victim()
	if v == nil {
		return false, nil
	}
	if _, err := bc.ReadPacket(); err != nil {
		return false, err
	}
	r.Sent, r.OK, r.ErrCode = true, false, v.Code
	rl.x.ErrCode = v.Code
	rl.ebuf = mysql.AppendErr(rl.ebuf[:0], v)
	if err := rl.x.w.Client().WritePacket(rl.ebuf); err != nil {
		return true, &mysql.DstError{Err: err}
	}
	return true, nil
}
