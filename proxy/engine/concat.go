package engine

import (
	"errors"
	"fmt"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/router"
)

// concatenate runs a Concat plan without a merge: a SELECT planned on
// several subtables whose rows need no ordering, grouping or limit across
// targets. It answers one result set: the first target's column
// definitions, then every target's rows in target order, then one end
// packet. In the text protocol rows pass as raw packets, renumbered;
// nothing is buffered. The targets run one after another, each on a
// connection borrowed for it and given back before the next is sent.
//
// It also relays the one result of an exact fallback (gather.run), whose
// column definitions name the logical tables as a concatenation's do.
type concatenate struct {
	x *Executor
}

// run answers the plan's targets as one result set.
func (c concatenate) run(plan *router.Plan) error {
	x := c.x
	var warnings uint16
	started := false
	for i := range plan.Targets {
		bc, err := x.send(&plan.Targets[i])
		if err != nil {
			return err
		}
		x.conns.Running(bc)
		res, err := c.one(bc, !started)
		x.conns.Running(nil)
		if err != nil {
			bc.MarkBroken()
			x.conns.Release(bc, false, res)
			var de *mysql.DstError
			switch {
			case errors.As(err, &de), errors.Is(err, mysql.ErrForwardCut):
				return err
			case started || res.Sent:
				return backend.ErrLost(bc) // after rows: the client gets the error, the session goes on
			}
			return &backend.LostError{Conn: bc, Cause: err}
		}
		x.conns.Release(bc, false, res)
		if !res.OK {
			return ErrAnswered // the backend's ERR reached the client
		}
		started = true
		warnings += res.Warnings
	}
	return x.w.End(warnings)
}

// one relays one target's result set: its column definitions only when
// first, its rows always, never its final EOF/OK (run writes one for all).
func (c concatenate) one(bc *backend.Conn, first bool) (backend.Outcome, error) {
	x := c.x
	var r backend.Outcome
	client := x.w.Client()
	h, _, err := bc.PeekPacket()
	if err != nil {
		return r, err
	}
	if h == mysql.ErrHeader {
		_, err := bc.ForwardPacketRenumbered(client)
		r.Sent = true
		return r, err
	}
	p, err := bc.ReadPacket()
	if err != nil {
		return r, err
	}
	ncols, _, n := mysql.ReadLenEncInt(p)
	if n == 0 || p[0] == mysql.OKHeader {
		return r, fmt.Errorf("backend %s: expected a result set", bc.Addr)
	}
	raw, err := readColumns(bc, int(ncols), first, x.tables)
	if err != nil {
		return r, err
	}
	if first {
		if err := x.w.Fields(nil, raw); err != nil {
			return r, err
		}
		r.Sent = true
	}
	if !x.w.TextRows() || x.capturing {
		return r, c.convert(bc, int(ncols), &r)
	}
	continued := false
	for {
		h, length, err := bc.PeekPacket()
		if err != nil {
			return r, err
		}
		if !continued && length < mysql.MaxPacketPayload && (h == mysql.EOFHeader || h == mysql.ErrHeader) {
			if h == mysql.ErrHeader {
				_, err := bc.ForwardPacketRenumbered(client)
				r.Sent = true
				return r, err
			}
			p, err := bc.ReadPacket()
			if err != nil {
				return r, err
			}
			r.SetInfo(p)
			return r, nil
		}
		if !continued {
			x.Rows++ // a row's first packet
		}
		continued = length == mysql.MaxPacketPayload
		if _, err := bc.ForwardPacketRenumbered(client); err != nil {
			return r, err
		}
		r.Sent = true
	}
}

// readColumns reads a result set's column definitions and the EOF after
// them (without CLIENT_DEPRECATE_EOF), keeping copies when keep, which name
// the logical table of tables where they name one of its subtables.
func readColumns(bc *backend.Conn, ncols int, keep bool, tables []string) ([][]byte, error) {
	var raw [][]byte
	for i := 0; i < ncols; i++ {
		p, err := bc.ReadPacket()
		if err != nil {
			return nil, err
		}
		if keep {
			d, ok := mysql.RenameColumnTables(nil, p, func(name []byte) (string, bool) { return LogicalName(tables, name) })
			if !ok {
				d = append([]byte(nil), p...)
			}
			raw = append(raw, d)
		}
	}
	if bc.Caps&mysql.ClientDeprecateEOF == 0 {
		if _, err := bc.ReadPacket(); err != nil {
			return nil, err
		}
	}
	return raw, nil
}

// convert reads a target's text rows and hands them to the writer as
// values, for a prepared statement's execution (binary protocol).
func (c concatenate) convert(bc *backend.Conn, ncols int, r *backend.Outcome) error {
	x := c.x
	var vals [][]byte
	for {
		p, err := bc.ReadPacket()
		if err != nil {
			return err
		}
		switch {
		case mysql.IsEOF(p):
			r.SetInfo(p)
			return nil
		case len(p) > 0 && p[0] == mysql.ErrHeader:
			r.Sent = true
			if err := x.w.Client().WritePacket(p); err != nil {
				return &mysql.DstError{Err: err}
			}
			return nil
		}
		if vals, err = mysql.ParseTextRow(p, ncols, vals); err != nil {
			return err
		}
		x.Rows++
		if err := x.w.Row(vals, nil); err != nil {
			return err
		}
		r.Sent = true
	}
}
