package server

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/router"
)

// execPlan runs a plan with several targets (or one whose answer the proxy
// builds itself) and answers the client.
func (ss *session) execPlan(plan *router.Plan) error {
	switch plan.Kind {
	case router.Concat:
		if plan.Merge != nil {
			return ss.execMerge(plan)
		}
		return ss.execConcat(plan)
	case router.SumOK, router.Fanout:
		return ss.execWrites(plan)
	case router.ShowTables:
		return ss.execShowTables(plan)
	case router.Explain:
		return ss.execExplain(plan)
	}
	return fmt.Errorf("plan kind %d not implemented", plan.Kind)
}

// send borrows a connection to t's node and sends t's statement on it.
func (ss *session) send(t *router.Target) (*backend.Conn, error) {
	bc, err := ss.acquire(t.Node, false)
	if err != nil {
		return nil, err
	}
	q := t.SQL
	if q == "" {
		q = ss.stmt // the plan sends the client's text unchanged
	}
	bc.ResetSeq()
	if err := bc.WritePacket(ss.queryPacket(q)); err == nil {
		err = bc.Flush()
	}
	if err != nil {
		bc.MarkBroken()
		ss.release(bc, false, result{})
		return nil, mysql.NewError(mysql.ErServerLost, "Lost connection to backend %s during query", bc.Addr)
	}
	return bc, nil
}

// execConcat answers a SELECT planned on several subtables with one result
// set: the first target's column definitions, then every target's rows in
// target order, then one EOF. Rows are forwarded as raw packets,
// renumbered; nothing is buffered.
func (ss *session) execConcat(plan *router.Plan) error {
	var warnings uint16
	started := false
	for i := range plan.Targets {
		t := &plan.Targets[i]
		bc, err := ss.send(t)
		if err != nil {
			if started {
				ss.writeErr(err)
				return errAnswered
			}
			return err
		}
		ss.running.Store(bc)
		res, err := ss.concatOne(bc, !started)
		ss.running.Store(nil)
		if err != nil {
			bc.MarkBroken()
			ss.release(bc, false, res)
			var de *mysql.DstError
			if errors.As(err, &de) {
				return errCloseSession
			}
			if errors.Is(err, mysql.ErrForwardCut) {
				return ss.closeNow()
			}
			if started || res.sent {
				ss.writeErr(mysql.NewError(mysql.ErServerLost, "Lost connection to backend %s during query", bc.Addr))
				return errAnswered
			}
			return ss.backendLost(bc)
		}
		ss.release(bc, false, res)
		if !res.ok {
			return errAnswered // the backend's ERR reached the client
		}
		started = true
		warnings += res.warnings
		if res.ok {
			ss.status = res.status &^ mysql.StatusMoreResultsExists
		}
	}
	if ss.caps&mysql.ClientDeprecateEOF != 0 {
		return ss.c.WritePacket(mysql.AppendOK(ss.buf[:0], mysql.EOFHeader, mysql.OK{Status: ss.endStatus(), Warnings: warnings}))
	}
	return ss.c.WritePacket(mysql.AppendEOF(ss.buf[:0], warnings, ss.endStatus()))
}

// concatOne relays one target's result set: its metadata only when first,
// its rows always, never its final EOF/OK (the caller writes one for all).
func (ss *session) concatOne(bc *backend.Conn, first bool) (result, error) {
	var r result
	deprecateEOF := bc.Caps&mysql.ClientDeprecateEOF != 0
	h, _, err := bc.PeekPacket()
	if err != nil {
		return r, err
	}
	if h == mysql.ErrHeader {
		_, err := bc.ForwardPacketRenumbered(ss.c)
		r.sent = true
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
	if first {
		ss.buf = mysql.AppendLenEncInt(ss.buf[:0], ncols)
		ss.c.WritePacket(ss.buf)
	}
	meta := int(ncols)
	if !deprecateEOF {
		meta++
	}
	if first && ss.binary {
		ss.binCols = ss.binCols[:0]
	}
	for i := 0; i < meta; i++ {
		switch {
		case first && ss.binary && i < int(ncols):
			var p []byte
			if p, err = bc.ReadPacket(); err == nil {
				var col *mysql.Column
				if col, err = mysql.ParseColumn(p); err == nil {
					ss.binCols = append(ss.binCols, col)
					err = ss.c.WritePacket(p)
				}
			}
		case first:
			_, err = bc.ForwardPacketRenumbered(ss.c)
		default:
			_, err = bc.ReadPacket()
		}
		if err != nil {
			return r, err
		}
	}
	r.sent = first
	continued := false
	for ss.binary {
		// A prepared statement's execution: rows go out in the binary
		// protocol.
		p, err := bc.ReadPacket()
		if err != nil {
			return r, err
		}
		switch {
		case mysql.IsEOF(p):
			r.setInfo(p)
			return r, nil
		case len(p) > 0 && p[0] == mysql.ErrHeader:
			r.sent = true
			return r, ss.c.WritePacket(p)
		}
		vals, err := mysql.ParseTextRow(p, len(ss.binCols), ss.binVals)
		if err != nil {
			return r, err
		}
		ss.binVals = vals
		if ss.buf, err = mysql.AppendBinaryRow(ss.buf[:0], ss.binCols, vals); err != nil {
			return r, err
		}
		if err := ss.c.WritePacket(ss.buf); err != nil {
			return r, &mysql.DstError{Err: err}
		}
		r.sent = true
	}
	for {
		h, length, err := bc.PeekPacket()
		if err != nil {
			return r, err
		}
		if !continued && length < mysql.MaxPacketPayload && (h == mysql.EOFHeader || h == mysql.ErrHeader) {
			if h == mysql.ErrHeader {
				_, err := bc.ForwardPacketRenumbered(ss.c)
				r.sent = true
				return r, err
			}
			p, err := bc.ReadPacket()
			if err != nil {
				return r, err
			}
			r.setInfo(p)
			return r, nil
		}
		continued = length == mysql.MaxPacketPayload
		if _, err := bc.ForwardPacketRenumbered(ss.c); err != nil {
			return r, err
		}
		r.sent = true
	}
}

// execWrites runs DML (SumOK) or DDL (Fanout) on every target and answers
// one OK packet, or one error that says which targets failed and which
// had already applied the statement. DML stops at the first failure, as
// one MySQL statement would; DDL runs everywhere so a re-run converges.
func (ss *session) execWrites(plan *router.Plan) error {
	var total mysql.OK
	var info infoSum
	var done, failed []string
	var firstErr *mysql.SQLError
	idSet := false // the insert id came from plan.IDTarget
	for i := range plan.Targets {
		t := &plan.Targets[i]
		where := t.Node
		if t.Subtable != "" {
			where += " " + t.Subtable
		}
		ok, err := ss.writeOne(t)
		if err != nil {
			se := mysql.AsSQLError(err)
			if firstErr == nil {
				firstErr = se
			}
			failed = append(failed, where+": "+se.Message)
			if plan.Kind == router.SumOK || errors.Is(err, errCloseSession) {
				break
			}
			continue
		}
		done = append(done, where)
		if plan.Copies && len(done) > 1 {
			// Every target holds a copy of the same rows (a global
			// table): the client sees one copy's counts.
			continue
		}
		total.AffectedRows += ok.AffectedRows
		total.Warnings += ok.Warnings
		if i == plan.IDTarget && ok.LastInsertID != 0 {
			idSet = true
			total.LastInsertID = ok.LastInsertID
		} else if !idSet && total.LastInsertID == 0 {
			total.LastInsertID = ok.LastInsertID
		}
		info.add(ok.Info)
		ss.status = ok.Status &^ mysql.StatusMoreResultsExists
	}
	if firstErr != nil {
		msg := firstErr.Message
		if len(plan.Targets) > 1 {
			msg = fmt.Sprintf("failed on %d of %d targets: %s", len(failed), len(plan.Targets), strings.Join(failed, "; "))
			if len(done) > 0 {
				msg += "; already applied on: " + strings.Join(done, ", ")
			}
		}
		return &mysql.SQLError{Code: firstErr.Code, State: firstErr.State, Message: msg}
	}
	if total.LastInsertID != 0 {
		ss.lastInsertID = total.LastInsertID
	}
	total.Status = ss.status
	total.Info = info.String()
	return ss.writeOK(total)
}

// writeOne runs one write target and reads its OK or ERR.
func (ss *session) writeOne(t *router.Target) (mysql.OK, error) {
	bc, err := ss.send(t)
	if err != nil {
		return mysql.OK{}, err
	}
	ss.running.Store(bc)
	defer ss.running.Store(nil)
	p, err := bc.ReadPacket()
	if err != nil {
		bc.MarkBroken()
		ss.release(bc, false, result{})
		return mysql.OK{}, mysql.NewError(mysql.ErServerLost, "Lost connection to backend %s during query: %v", bc.Addr, err)
	}
	switch {
	case len(p) > 0 && p[0] == mysql.ErrHeader:
		e := mysql.ParseErr(p)
		ss.release(bc, false, result{status: ss.status})
		return mysql.OK{}, e
	case len(p) > 0 && p[0] == mysql.OKHeader:
		ok, err := mysql.ParseOK(p)
		if err != nil {
			bc.MarkBroken()
			ss.release(bc, false, result{})
			return mysql.OK{}, err
		}
		res := result{ok: true, status: ok.Status, warnings: ok.Warnings, insertID: ok.LastInsertID}
		ss.noteResult(bc, res)
		ss.release(bc, false, res)
		return ok, nil
	}
	// A result set (e.g. DDL that returns rows) is not expected here.
	bc.MarkBroken()
	ss.release(bc, false, result{})
	return mysql.OK{}, mysql.NewError(mysql.ErNotSupported, "statement on %s returned a result set where an OK was expected", t.Node)
}

// infoSum adds up the info strings of OK packets ("Rows matched: 1
// Changed: 1  Warnings: 0", "Records: 3  Duplicates: 0  Warnings: 0").
type infoSum struct {
	kind    int // 0 none, 1 matched/changed, 2 records/duplicates, -1 other
	a, b, w uint64
	other   string
}

func (s *infoSum) add(info string) {
	if info == "" {
		return
	}
	var a, b, w uint64
	switch {
	case s.kind >= 0 && fmt1(info, "Rows matched: %d  Changed: %d  Warnings: %d", &a, &b, &w) && s.kind != 2:
		s.kind = 1
	case s.kind >= 0 && fmt1(info, "Records: %d  Duplicates: %d  Warnings: %d", &a, &b, &w) && s.kind != 1:
		s.kind = 2
	default:
		s.kind, s.other = -1, info
		return
	}
	s.a, s.b, s.w = s.a+a, s.b+b, s.w+w
}

func fmt1(s, format string, a, b, w *uint64) bool {
	n, err := fmt.Sscanf(s, format, a, b, w)
	return err == nil && n == 3
}

func (s *infoSum) String() string {
	switch s.kind {
	case 1:
		return fmt.Sprintf("Rows matched: %d  Changed: %d  Warnings: %d", s.a, s.b, s.w)
	case 2:
		return fmt.Sprintf("Records: %d  Duplicates: %d  Warnings: %d", s.a, s.b, s.w)
	case -1:
		return s.other
	}
	return ""
}

// collect runs a target whose result is small and returns it whole.
func (ss *session) collect(t *router.Target) (*backend.Result, error) {
	bc, err := ss.send(t)
	if err != nil {
		return nil, err
	}
	res, more, err := bc.ReadResult()
	for err == nil && more {
		_, more, err = bc.ReadResult()
	}
	r := result{ok: err == nil, status: ss.status}
	if res != nil {
		r.status = res.OK.Status
	}
	ss.release(bc, false, r)
	return res, err
}

// execShowTables answers SHOW TABLES with the union over the targets,
// subtable names replaced by their logical table, without duplicates, in
// name order.
func (ss *session) execShowTables(plan *router.Plan) error {
	names := renamer(plan.Renames)
	var cols []mysql.Column
	seen := map[string]bool{}
	var rows [][][]byte
	for i := range plan.Targets {
		res, err := ss.collect(&plan.Targets[i])
		if err != nil {
			return err
		}
		if cols == nil {
			for _, c := range res.Columns {
				cols = append(cols, *c)
			}
		}
		for _, row := range res.Rows {
			if len(row) == 0 || row[0] == nil {
				continue
			}
			row[0] = []byte(names.name(string(row[0])))
			var key strings.Builder
			for _, v := range row {
				key.Write(v)
				key.WriteByte(0)
			}
			if seen[key.String()] {
				continue
			}
			seen[key.String()] = true
			rows = append(rows, row)
		}
	}
	sort.SliceStable(rows, func(i, j int) bool { return string(rows[i][0]) < string(rows[j][0]) })
	return ss.writeResultSet(cols, rows)
}

// execExplain answers EXPLAIN FORMAT='shard' with the plan's targets.
func (ss *session) execExplain(plan *router.Plan) error {
	cols := []mysql.Column{
		{Name: "node", Type: mysql.TypeVarString, Length: 256, Charset: 45},
		{Name: "backend", Type: mysql.TypeVarString, Length: 256, Charset: 45},
		{Name: "subtable", Type: mysql.TypeVarString, Length: 256, Charset: 45},
		{Name: "sql", Type: mysql.TypeVarString, Length: 65535, Charset: 45},
	}
	rows := make([][][]byte, 0, len(plan.Targets))
	for _, t := range plan.Targets {
		addr := ""
		if n := ss.srv.nodes[t.Node]; n != nil {
			addr = n.Addr
		}
		rows = append(rows, [][]byte{[]byte(t.Node), []byte(addr), nullable(t.Subtable), []byte(t.SQL)})
	}
	return ss.writeResultSet(cols, rows)
}

// renames maps physical table names to logical ones in results.
type renames map[string]string

func renamer(rs []router.Rename) renames {
	m := make(renames, len(rs))
	for _, r := range rs {
		m[r.Physical] = r.Logical
	}
	return m
}

func (m renames) name(s string) string {
	if l, ok := m[s]; ok {
		return l
	}
	return s
}

// text replaces quoted occurrences (`t_0000`, 't_0000') of physical names.
func (m renames) text(s string) string {
	for p, l := range m {
		if strings.Contains(s, p) {
			s = strings.ReplaceAll(s, "`"+p+"`", "`"+l+"`")
			s = strings.ReplaceAll(s, "'"+p+"'", "'"+l+"'")
		}
	}
	return s
}

// relayRenamed returns a relay for metadata statements on a sharded table
// (SHOW CREATE TABLE, SHOW INDEX, DESCRIBE): the small result is decoded,
// physical names are replaced by the logical name, and it is re-sent.
func (ss *session) relayRenamed(rs []router.Rename) relayFunc {
	return func(bc *backend.Conn) (result, error) {
		m := renamer(rs)
		res, more, err := bc.ReadResult()
		for err == nil && more {
			_, more, err = bc.ReadResult()
		}
		if err != nil {
			var se *mysql.SQLError
			if errors.As(err, &se) && !bc.Broken() {
				return result{ok: false}, &mysql.SQLError{Code: se.Code, State: se.State, Message: m.text(se.Message)}
			}
			return result{}, err
		}
		if res.Columns == nil {
			return result{ok: true, status: res.OK.Status, sent: true}, ss.writeOK(res.OK)
		}
		cols := make([]mysql.Column, len(res.Columns))
		for i, c := range res.Columns {
			cols[i] = *c
			cols[i].Table = m.name(c.Table)
			cols[i].OrgTable = m.name(c.OrgTable)
		}
		for _, row := range res.Rows {
			for i, v := range row {
				if v == nil {
					continue
				}
				if l, ok := m[string(v)]; ok {
					row[i] = []byte(l)
				} else {
					row[i] = []byte(m.text(string(v)))
				}
			}
		}
		return result{ok: true, status: res.OK.Status, sent: true}, ss.writeResultSet(cols, res.Rows)
	}
}
