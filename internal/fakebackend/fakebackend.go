package fakebackend

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/shardgate/shardgate/mysql"
)

// Caps are the capabilities the fake announces: what backend.Dial asks for
// (session tracking included) and both result-set endings, without TLS or
// compression.
const Caps = mysql.ClientLongPassword | mysql.ClientFoundRows | mysql.ClientLongFlag | mysql.ClientConnectWithDB |
	mysql.ClientLocalFiles | mysql.ClientProtocol41 | mysql.ClientTransactions | mysql.ClientSecureConnection |
	mysql.ClientMultiStatements | mysql.ClientMultiResults | mysql.ClientPSMultiResults | mysql.ClientPluginAuth |
	mysql.ClientPluginAuthLenencClientData | mysql.ClientSessionTrack | mysql.ClientDeprecateEOF | mysql.ClientIgnoreSpace

// Version is the server version the fake announces.
const Version = "10.11.0-MariaDB-fake"

// Reply is a scripted answer. The zero Reply is an OK packet.
type Reply struct {
	// Err answers ERR. A deadlock (1213), and a COMMIT or ROLLBACK that
	// fails, also end the connection's open transaction, as MariaDB rolls
	// it back.
	Err *mysql.SQLError
	// Drop closes the connection instead of answering: the statement was
	// received (and recorded), its answer is lost.
	Drop bool
	// Rows answers a result set; each value is nil (NULL), a string, a
	// []byte or an int. Columns are its column definitions; when nil,
	// every column is a VARCHAR in utf8mb3 named c1, c2, ...
	Rows    [][]any
	Columns []*mysql.Column
	// Affected, InsertID and Warnings go into the OK (or the EOF that ends
	// a result set).
	Affected, InsertID uint64
	Warnings           uint16
	// Flags are status flags added to what the fake's transaction model
	// reports (StatusInTrans, StatusNoBackslashEscapes, ...).
	Flags uint16
	// State is session state information (build it with SysVar, Schema
	// and StateChange); when set, the OK carries
	// SERVER_SESSION_STATE_CHANGED.
	State []byte
}

// Err returns a Reply that answers ERR code with the code's SQLSTATE.
func Err(code uint16, msg string) Reply {
	return Reply{Err: mysql.NewError(code, "%s", msg)}
}

// SysVar is a session state entry: system variable name was set to value.
func SysVar(name, value string) []byte {
	d := mysql.AppendLenEncString(mysql.AppendLenEncString(nil, name), value)
	return mysql.AppendLenEncBytes([]byte{mysql.TrackSystemVariables}, d)
}

// Schema is a session state entry: the current schema is now db.
func Schema(db string) []byte {
	return mysql.AppendLenEncBytes([]byte{mysql.TrackSchema}, mysql.AppendLenEncString(nil, db))
}

// StateChange is the session state entry for any other change of session
// state (user variables, temporary tables, prepared statements).
func StateChange() []byte {
	return mysql.AppendLenEncBytes([]byte{mysql.TrackStateChange}, mysql.AppendLenEncString(nil, "1"))
}

// TxnCharacteristics is the session state entry that reports the next
// transaction's characteristics (what MariaDB sends after SET TRANSACTION).
func TxnCharacteristics(sql string) []byte {
	return mysql.AppendLenEncBytes([]byte{mysql.TrackTransactionCharacteristics}, mysql.AppendLenEncString(nil, sql))
}

// rule is one scripted answer: for commands whose log entry starts with
// prefix (case-insensitive), times more times (-1: always).
type rule struct {
	prefix string
	times  int
	reply  Reply
	answer func(entry string) Reply // when set, the reply is answer's
}

// Server is a fake MySQL server on a loopback port.
type Server struct {
	l     net.Listener
	mu    sync.Mutex
	rules []*rule
	conns []*Conn
	log   []string // every connection's entries, in arrival order
	// journal, when set, also gets every entry, as "name: entry".
	journal *Journal
	name    string
	nextID  uint32
	wg      sync.WaitGroup
}

// Conn is one client connection the fake accepted.
type Conn struct {
	// ID is the connection id the handshake announced (the client's
	// backend.Conn.ThreadID).
	ID uint32
	nc net.Conn

	mu                  sync.Mutex
	log                 []string
	autocommit, inTrans bool
	done                chan struct{}
}

// Start serves on 127.0.0.1:0 until the test ends. Connection ids start at
// firstID, so connections to different fakes can be told apart by id.
func Start(tb testing.TB, firstID uint32) *Server {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	s := &Server{l: l, nextID: firstID}
	s.wg.Add(1)
	go s.accept()
	tb.Cleanup(s.Close)
	return s
}

// Addr is the host:port the fake listens on.
func (s *Server) Addr() string { return s.l.Addr().String() }

// Close stops accepting, closes every connection and waits for their
// goroutines.
func (s *Server) Close() {
	s.l.Close()
	s.mu.Lock()
	for _, c := range s.conns {
		c.nc.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// On answers commands whose log entry starts with prefix (compared
// case-insensitively) with r, from now on. Rules added later are tried
// first, so a test can override an earlier answer.
func (s *Server) On(prefix string, r Reply) { s.OnN(prefix, -1, r) }

// OnN is On for the next n matching commands only.
func (s *Server) OnN(prefix string, n int, r Reply) {
	s.mu.Lock()
	s.rules = append(s.rules, &rule{prefix: strings.ToUpper(prefix), times: n, reply: r})
	s.mu.Unlock()
}

// OnFunc is On with an answer computed from the command's log entry (to
// echo part of it back, say).
func (s *Server) OnFunc(prefix string, answer func(entry string) Reply) {
	s.mu.Lock()
	s.rules = append(s.rules, &rule{prefix: strings.ToUpper(prefix), times: -1, answer: answer})
	s.mu.Unlock()
}

// Conns returns the connections accepted so far, in order.
func (s *Server) Conns() []*Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Conn(nil), s.conns...)
}

// Conn returns the connection with id, or nil.
func (s *Server) Conn(id uint32) *Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		if c.ID == id {
			return c
		}
	}
	return nil
}

// Journal is one order of arrival across several fakes (JournalTo), for
// tests that care which node got a command first.
type Journal struct {
	mu      sync.Mutex
	entries []string
}

// Entries returns what the journal holds, in the order it arrived.
func (j *Journal) Entries() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]string(nil), j.entries...)
}

// JournalTo makes the fake add every entry it records to j as well, as
// "name: entry".
func (s *Server) JournalTo(j *Journal, name string) {
	s.mu.Lock()
	s.journal, s.name = j, name
	s.mu.Unlock()
}

// note records entry in the server's log and journal; called before the
// answer goes out, so a client that has the answer finds the entry.
func (s *Server) note(entry string) {
	s.mu.Lock()
	s.log = append(s.log, entry)
	j, name := s.journal, s.name
	s.mu.Unlock()
	if j != nil {
		j.mu.Lock()
		j.entries = append(j.entries, name+": "+entry)
		j.mu.Unlock()
	}
}

// Log returns what every connection received, in the order it arrived,
// each entry as Conn.Log has it.
func (s *Server) Log() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.log...)
}

// Log returns what the connection received, one entry per command: a
// query's text, or INIT_DB db, CHANGE_USER [db], RESET_CONNECTION,
// MULTI_STATEMENTS ON|OFF, PING, QUIT.
func (c *Conn) Log() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.log...)
}

// Done is closed once the connection is closed (by either side).
func (c *Conn) Done() <-chan struct{} { return c.done }

// Kill closes the connection from the server's side, as a server does for
// KILL, wait_timeout or a crash: the client finds out at its next read.
func (c *Conn) Kill() { c.nc.Close() }

// InTxn reports whether the fake's model says a transaction is open on
// the connection.
func (c *Conn) InTxn() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.inTrans
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		nc, err := s.l.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		c := &Conn{ID: s.nextID, nc: nc, autocommit: true, done: make(chan struct{})}
		s.nextID++
		s.conns = append(s.conns, c)
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			defer close(c.done)
			defer nc.Close()
			s.serve(c)
		}()
	}
}

// reply returns the scripted answer to entry.
func (s *Server) reply(entry string) Reply {
	up := strings.ToUpper(entry)
	s.mu.Lock()
	var found *rule
	for i := len(s.rules) - 1; i >= 0; i-- {
		r := s.rules[i]
		if r.times == 0 || !strings.HasPrefix(up, r.prefix) {
			continue
		}
		if r.times > 0 {
			r.times--
		}
		found = r
		break
	}
	s.mu.Unlock()
	switch {
	case found == nil:
		return Reply{}
	case found.answer != nil:
		return found.answer(entry)
	}
	return found.reply
}

func (s *Server) serve(c *Conn) {
	mc := mysql.NewConn(c.nc, 0, 0)
	salt := bytes.Repeat([]byte{'s'}, 20)
	if mc.WritePacket(mysql.AppendHandshake(nil, &mysql.Handshake{ServerVersion: Version, ConnectionID: c.ID,
		Salt: salt, Capabilities: Caps, Charset: 45, Status: mysql.StatusAutocommit, AuthPlugin: mysql.AuthNativePassword})) != nil ||
		mc.Flush() != nil {
		return
	}
	p, err := mc.ReadPacket()
	if err != nil {
		return
	}
	hr, err := mysql.ParseHandshakeResponse(p)
	if err != nil {
		return
	}
	w := writer{mc: mc, caps: hr.Capabilities & Caps}
	if w.ok(Reply{}, mysql.StatusAutocommit) != nil || mc.Flush() != nil {
		return
	}
	for {
		mc.ResetSeq()
		p, err := mc.ReadPacket()
		if err != nil || len(p) == 0 {
			return
		}
		entry, query := "", false
		switch p[0] {
		case mysql.ComQuit:
			c.record("QUIT")
			s.note("QUIT")
			return
		case mysql.ComQuery:
			entry, query = string(p[1:]), true
		case mysql.ComInitDB:
			entry = "INIT_DB " + string(p[1:])
		case mysql.ComPing:
			entry = "PING"
		case mysql.ComResetConnection:
			entry = "RESET_CONNECTION"
		case mysql.ComChangeUser:
			entry = "CHANGE_USER"
			if cu, err := mysql.ParseChangeUser(p, w.caps); err == nil && cu.Database != "" {
				entry += " " + cu.Database
			}
		case mysql.ComSetOption:
			entry = "MULTI_STATEMENTS ON"
			if len(p) >= 3 && uint16(p[1])|uint16(p[2])<<8 == mysql.OptionMultiStatementsOff {
				entry = "MULTI_STATEMENTS OFF"
			}
		default:
			entry = fmt.Sprintf("COMMAND %#x", p[0])
		}
		c.record(entry)
		s.note(entry)
		r := s.reply(entry)
		if r.Drop {
			return
		}
		if strings.HasPrefix(entry, "COMMAND ") && r.Err == nil {
			r.Err = mysql.NewError(mysql.ErUnknownComError, "Unknown command")
		}
		status := c.apply(entry, query, p[0], r)
		switch {
		case r.Err != nil:
			err = mc.WritePacket(mysql.AppendErr(nil, r.Err))
		case p[0] == mysql.ComSetOption:
			err = mc.WritePacket(mysql.AppendEOF(nil, 0, status))
		case r.Rows != nil || r.Columns != nil:
			err = w.rows(r, status)
		default:
			err = w.ok(r, status)
		}
		if err != nil || mc.Flush() != nil {
			return
		}
	}
}

func (c *Conn) record(entry string) {
	c.mu.Lock()
	c.log = append(c.log, entry)
	c.mu.Unlock()
}

// apply updates the connection's transaction model for a command that
// succeeded (or failed with r.Err) and returns the status flags of its
// answer.
func (c *Conn) apply(entry string, query bool, cmd byte, r Reply) uint16 {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case cmd == mysql.ComChangeUser || cmd == mysql.ComResetConnection:
		if r.Err == nil {
			c.autocommit, c.inTrans = true, false
		}
	case r.Err != nil:
		q := strings.ToUpper(strings.TrimSpace(entry))
		if r.Err.Code == mysql.ErLockDeadlock || query && (strings.HasPrefix(q, "COMMIT") || q == "ROLLBACK") {
			c.inTrans = false // a failed COMMIT rolls back (trans_commit)
		}
	case query:
		c.applyQuery(strings.ToUpper(strings.TrimSpace(entry)))
	}
	if r.Flags&mysql.StatusInTrans != 0 {
		c.inTrans = true
	}
	status := r.Flags
	if c.autocommit {
		status |= mysql.StatusAutocommit
	}
	if c.inTrans {
		status |= mysql.StatusInTrans
	}
	if len(r.State) > 0 {
		status |= mysql.StatusSessionStateChange
	}
	return status
}

// applyQuery is apply for a query that succeeded; q is its upper-case
// text.
func (c *Conn) applyQuery(q string) {
	compact := strings.NewReplacer(" ", "", "`", "", "@@SESSION.", "", "@@", "", "SESSION", "").Replace(q)
	switch {
	case strings.HasPrefix(q, "START TRANSACTION"), q == "BEGIN", q == "BEGIN WORK", strings.HasPrefix(q, "XA START"), strings.HasPrefix(q, "XA BEGIN"):
		c.inTrans = true
	case strings.HasPrefix(q, "COMMIT"), strings.HasPrefix(q, "ROLLBACK") && !strings.Contains(q, " TO "),
		strings.HasPrefix(q, "XA COMMIT"), strings.HasPrefix(q, "XA ROLLBACK"), strings.HasPrefix(q, "XA PREPARE"):
		c.inTrans = false
	case strings.HasPrefix(compact, "SETAUTOCOMMIT="):
		switch v := strings.Trim(strings.TrimPrefix(compact, "SETAUTOCOMMIT="), "'`;"); v {
		case "0", "OFF", "FALSE":
			c.autocommit = false
		default:
			c.autocommit, c.inTrans = true, false // turning it on commits
		}
	case strings.HasPrefix(q, "SET "), strings.HasPrefix(q, "SAVEPOINT"), strings.HasPrefix(q, "RELEASE SAVEPOINT"),
		strings.HasPrefix(q, "XA "), strings.HasPrefix(q, "DO "), strings.HasPrefix(q, "SHOW "), strings.HasPrefix(q, "SELECT @@"):
	default:
		if !c.autocommit {
			c.inTrans = true // the first statement after SET autocommit = 0 opens one
		}
	}
}

// writer encodes answers for the capabilities the client negotiated.
type writer struct {
	mc   *mysql.Conn
	caps uint32
}

func (w writer) okPacket(header byte, r Reply, status uint16) []byte {
	b := mysql.AppendOK(nil, header, mysql.OK{AffectedRows: r.Affected, LastInsertID: r.InsertID, Status: status, Warnings: r.Warnings})
	if len(r.State) > 0 && w.caps&mysql.ClientSessionTrack != 0 {
		b = mysql.AppendLenEncString(b, "") // info
		b = mysql.AppendLenEncBytes(b, r.State)
	}
	return b
}

func (w writer) ok(r Reply, status uint16) error {
	return w.mc.WritePacket(w.okPacket(mysql.OKHeader, r, status))
}

func (w writer) rows(r Reply, status uint16) error {
	cols := r.Columns
	if cols == nil && len(r.Rows) > 0 {
		for i := range r.Rows[0] {
			cols = append(cols, &mysql.Column{Name: "c" + strconv.Itoa(i+1), Type: mysql.TypeVarString, Charset: 33, Length: 255})
		}
	}
	err := w.mc.WritePacket(mysql.AppendLenEncInt(nil, uint64(len(cols))))
	for _, col := range cols {
		if err == nil {
			err = w.mc.WritePacket(mysql.AppendColumn(nil, col))
		}
	}
	deprecateEOF := w.caps&mysql.ClientDeprecateEOF != 0
	if err == nil && !deprecateEOF {
		err = w.mc.WritePacket(mysql.AppendEOF(nil, 0, status))
	}
	for _, row := range r.Rows {
		vals := make([][]byte, len(row))
		for i, v := range row {
			switch v := v.(type) {
			case nil:
			case string:
				vals[i] = []byte(v)
			case []byte:
				vals[i] = append([]byte{}, v...)
			case int:
				vals[i] = strconv.AppendInt(nil, int64(v), 10)
			default:
				return errors.New("fakebackend: a row value must be nil, string, []byte or int")
			}
		}
		if err == nil {
			err = w.mc.WritePacket(mysql.AppendTextRow(nil, vals))
		}
	}
	if err != nil {
		return err
	}
	if deprecateEOF {
		return w.mc.WritePacket(w.okPacket(mysql.EOFHeader, r, status))
	}
	return w.mc.WritePacket(mysql.AppendEOF(nil, r.Warnings, status))
}
