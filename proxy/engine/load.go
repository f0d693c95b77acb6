package engine

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/router"
)

// loadData runs a LoadSplit plan: LOAD DATA LOCAL INFILE into a sharded
// table, or into every copy of a global one. It owns both ends of the
// file's journey: the LOCAL INFILE exchange with the client, which sends
// the file once, and one with each subtable's server, which gets its
// part; cutting the file into lines and choosing each line's part is its
// loadSplitter's. The whole file is held in memory, bounded by
// merge_memory_limit; a client that sends more gets an error after the
// rest of its file is read (the protocol has no way to stop it).
type loadData struct {
	x *Executor
}

// run asks the client for the file (the LOCAL INFILE request the server
// would send), splits it, then runs LOAD DATA LOCAL INFILE on each
// subtable that got lines, answering that server's file request with
// them, and answers one OK with the counts summed.
func (l loadData) run(plan *router.Plan) error {
	x := l.x
	client := x.w.Client()
	req := append([]byte{mysql.LocalInfileHeader}, plan.Load.Path...)
	if err := client.WritePacket(req); err != nil {
		return &mysql.DstError{Err: err}
	}
	if err := client.Flush(); err != nil {
		return &mysql.DstError{Err: err}
	}
	sp := newLoadSplitter(plan.Load, len(plan.Targets), plan.Copies, x.eng.mergeLimit)
	for {
		p, err := client.ReadPacket()
		if err != nil {
			return &mysql.DstError{Err: err}
		}
		if len(p) == 0 {
			break
		}
		sp.write(p)
	}
	sp.finish()
	if sp.err != nil {
		return sp.err
	}
	var total mysql.OK
	var info infoSum
	var done []string
	for i := range plan.Targets {
		if sp.parts[i].Len() == 0 {
			continue
		}
		t := &plan.Targets[i]
		ok, err := l.one(t, sp.parts[i].Bytes())
		if err != nil {
			se := mysql.AsSQLError(err)
			msg := se.Message
			if len(done) > 0 {
				msg += "; already loaded into: " + strings.Join(done, ", ")
			}
			return &mysql.SQLError{Code: se.Code, State: se.State, Message: msg}
		}
		done = append(done, t.Node+" "+t.Subtable)
		if plan.Copies && len(done) > 1 {
			continue
		}
		total.AffectedRows += ok.AffectedRows
		total.Warnings += ok.Warnings
		info.add(ok.Info)
	}
	total.Info = info.String()
	if total.Info == "" {
		total.Info = "Records: 0  Deleted: 0  Skipped: 0  Warnings: 0"
	}
	if x.BeforeOK != nil {
		if err := x.BeforeOK(); err != nil {
			return err
		}
	}
	return x.w.OK(total)
}

// loadChunk is the size of the file packets sent to a backend.
const loadChunk = 1 << 20

// one runs one target's LOAD DATA LOCAL INFILE and sends data as its
// file.
func (l loadData) one(t *router.Target, data []byte) (mysql.OK, error) {
	x := l.x
	bc, err := x.send(t)
	if err != nil {
		return mysql.OK{}, err
	}
	x.conns.Running(bc)
	defer x.conns.Running(nil)
	fail := func(err error) (mysql.OK, error) {
		bc.MarkBroken()
		x.conns.Release(bc, false, backend.Outcome{})
		return mysql.OK{}, mysql.NewError(mysql.ErServerLost, "Lost connection to backend %s during LOAD DATA: %v", bc.Addr, err)
	}
	p, err := bc.ReadPacket()
	if err != nil {
		return fail(err)
	}
	switch {
	case len(p) > 0 && p[0] == mysql.ErrHeader:
		e := mysql.ParseErr(p)
		x.conns.Release(bc, false, backend.Outcome{})
		return mysql.OK{}, e
	case len(p) == 0 || p[0] != mysql.LocalInfileHeader:
		return fail(fmt.Errorf("expected a LOCAL INFILE request, got %x", p[:min(len(p), 1)]))
	}
	for len(data) > 0 {
		n := min(len(data), loadChunk)
		if err := bc.WritePacket(data[:n]); err != nil {
			return fail(err)
		}
		data = data[n:]
	}
	if err := bc.WritePacket(nil); err != nil {
		return fail(err)
	}
	if err := bc.Flush(); err != nil {
		return fail(err)
	}
	return fanout{x}.end(bc, t.Node, false, false)
}

// loadSplitter cuts a LOAD DATA file into lines as the server reads it and
// appends each to its target's part.
type loadSplitter struct {
	l      *router.Load
	parts  []bytes.Buffer
	copies bool
	limit  int64
	size   int64
	buf    []byte // the start of a line not complete yet
	line   int    // lines seen, for IGNORE and errors
	err    error
}

func newLoadSplitter(l *router.Load, targets int, copies bool, limit int64) *loadSplitter {
	return &loadSplitter{l: l, parts: make([]bytes.Buffer, targets), copies: copies, limit: limit}
}

// write takes the next piece of the file.
func (s *loadSplitter) write(p []byte) {
	if s.err != nil {
		return // read the rest of the file, keep nothing
	}
	s.feed(p, s.take)
}

// feed appends p to the line not complete yet and hands every complete
// line (and its terminator) to take, keeping the rest for the next piece.
func (s *loadSplitter) feed(p []byte, take func(line, term []byte)) {
	s.buf = append(s.buf, p...)
	start := 0
	for s.err == nil {
		end, next, ok := s.lineEnd(s.buf, start)
		if !ok {
			break
		}
		take(s.buf[start:end], s.buf[end:next])
		start = next
	}
	s.buf = append(s.buf[:0], s.buf[start:]...)
}

// finish takes the last line, which may have no terminator.
func (s *loadSplitter) finish() {
	if s.err == nil && len(s.buf) > 0 {
		s.take(s.buf, nil)
	}
	s.buf = nil
}

// lineEnd finds the end of the line starting at start: the index of its
// terminator and of the byte after it. A terminator inside an enclosed
// field or after the escape character does not end the line.
func (s *loadSplitter) lineEnd(b []byte, start int) (end, next int, ok bool) {
	l := s.l
	term := l.LineTerm
	enclosed := false
	fieldStart := true
	for i := start; i < len(b); i++ {
		c := b[i]
		if l.Escaped != 0 && c == l.Escaped {
			i++ // the next byte is data
			fieldStart = false
			continue
		}
		if l.Enclosed != 0 && c == l.Enclosed {
			if fieldStart {
				enclosed, fieldStart = true, false
				continue
			}
			if enclosed {
				// A doubled quote is data; one before a terminator ends
				// the field.
				if i+1 < len(b) && b[i+1] == l.Enclosed {
					i++
					continue
				}
				if i+1 == len(b) {
					return 0, 0, false // wait for the byte after it
				}
				rest := b[i+1:]
				if bytes.HasPrefix(rest, []byte(l.FieldTerm)) || bytes.HasPrefix(rest, []byte(term)) {
					enclosed = false
				}
				continue
			}
		}
		if enclosed {
			continue
		}
		if bytes.HasPrefix(b[i:], []byte(l.FieldTerm)) {
			i += len(l.FieldTerm) - 1
			fieldStart = true
			continue
		}
		if bytes.HasPrefix(b[i:], []byte(term)) {
			return i, i + len(term), true
		}
		if len(b)-i < len(term) && bytes.HasPrefix([]byte(term), b[i:]) {
			return 0, 0, false // the terminator may be cut by the packet
		}
		fieldStart = false
	}
	return 0, 0, false
}

// take routes one line (without its terminator; term is the terminator
// read, nil for a last line without one).
func (s *loadSplitter) take(line, term []byte) {
	s.line++
	if uint64(s.line) <= s.l.Ignore {
		return
	}
	if term == nil {
		term = []byte(s.l.LineTerm)
	}
	if s.copies {
		for i := range s.parts {
			s.add(i, line, term)
		}
		return
	}
	key, null, ok := s.field(line, s.l.KeyField)
	if !ok {
		s.err = mysql.NewError(mysql.ErNotSupported, "LOAD DATA: line %d has no field %d, where the shard key is", s.line, s.l.KeyField+1)
		return
	}
	i, err := s.l.Subtable(key, null)
	if err != nil {
		s.err = fmt.Errorf("line %d: %w", s.line, err)
		if se, ok := err.(*mysql.SQLError); ok {
			s.err = &mysql.SQLError{Code: se.Code, State: se.State, Message: fmt.Sprintf("LOAD DATA line %d: %s", s.line, se.Message)}
		}
		return
	}
	s.add(i, line, term)
}

func (s *loadSplitter) add(i int, line, term []byte) {
	s.size += int64(len(line) + len(term))
	if s.limit > 0 && s.size > s.limit {
		s.err = mysql.NewError(mysql.ErNotSupported, "LOAD DATA into a sharded table holds the file in the proxy, and this one is larger than merge_memory_limit (%d bytes); split it", s.limit)
		return
	}
	s.parts[i].Write(line)
	s.parts[i].Write(term)
}

// field returns field n of a line, its enclosure removed and its escapes
// read; null is set for \N, and for NULL not enclosed when fields may be
// (ENCLOSED BY), as the server reads them.
func (s *loadSplitter) field(line []byte, n int) (value string, null, ok bool) {
	l := s.l
	var out []byte
	idx := 0
	i := 0
	for idx < n {
		// skip a field
		enclosed := l.Enclosed != 0 && i < len(line) && line[i] == l.Enclosed
		if enclosed {
			i++
		}
		for i < len(line) {
			c := line[i]
			if l.Escaped != 0 && c == l.Escaped {
				i += 2
				continue
			}
			if enclosed && c == l.Enclosed {
				if i+1 < len(line) && line[i+1] == l.Enclosed {
					i += 2
					continue
				}
				enclosed = false
				i++
				continue
			}
			if !enclosed && bytes.HasPrefix(line[i:], []byte(l.FieldTerm)) {
				break
			}
			i++
		}
		if i >= len(line) {
			return "", false, false
		}
		i += len(l.FieldTerm)
		idx++
	}
	enclosed := l.Enclosed != 0 && i < len(line) && line[i] == l.Enclosed
	if enclosed {
		i++
	}
	raw := i
	for i < len(line) {
		c := line[i]
		if l.Escaped != 0 && c == l.Escaped && i+1 < len(line) {
			if !enclosed && i == raw && line[i+1] == 'N' && (i+2 == len(line) || bytes.HasPrefix(line[i+2:], []byte(l.FieldTerm))) {
				return "", true, true
			}
			out = append(out, unescape(line[i+1]))
			i += 2
			continue
		}
		if enclosed && c == l.Enclosed {
			if i+1 < len(line) && line[i+1] == l.Enclosed {
				out = append(out, c)
				i += 2
				continue
			}
			break
		}
		if !enclosed && bytes.HasPrefix(line[i:], []byte(l.FieldTerm)) {
			break
		}
		out = append(out, c)
		i++
	}
	if !enclosed && l.Enclosed != 0 && string(out) == "NULL" {
		return "", true, true
	}
	return string(out), false, true
}

// unescape reads an escaped byte as the server does.
func unescape(c byte) byte {
	switch c {
	case '0':
		return 0
	case 'b':
		return '\b'
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 't':
		return '\t'
	case 'Z':
		return 26
	}
	return c
}
