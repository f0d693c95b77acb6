package server

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/router"
)

// session is one client connection. It is owned by the goroutine running
// serveConn: all fields except running, idle and nc (which other goroutines
// may Close or set deadlines on) are touched only by that goroutine.
type session struct {
	srv *Server
	nc  net.Conn
	c   *mysql.Conn
	id  uint32
	log *zap.Logger

	salt          []byte
	user          string
	caps          uint32 // capabilities both sides agreed on
	variant       uint32 // the caps that select a backend pool partition
	db            string
	coll          byte
	handshakeColl byte
	multiStmts    bool
	status        uint16 // server status of the last response
	lastInsertID  uint64 // last non-zero insert id reported to the client

	// pinned are the backend connections the session holds between
	// statements, at most one per node: for its whole life once sticky
	// (the connection carries state the client created), while a
	// transaction is open, or for one statement after a response with
	// warnings (for SHOW WARNINGS).
	pinned []*backend.Conn
	sticky bool
	// replay holds the SET statements that made the session sticky; they
	// are run on a connection to another node before it is pinned, so
	// every node sees the same session variables.
	replay []string
	// unreplayable names the first state the proxy cannot copy to another
	// node (temporary tables, locks, user variables outside SET, ...);
	// statements on a second node are refused while it is set.
	unreplayable string
	// vars are the session and user variables the client set, carried to
	// every connection the session uses (see vars.go).
	vars []trackedVar
	// sqlStmts are SQL-level prepared statements on sharded tables, by
	// lower-case name (see sqlprepare.go).
	sqlStmts map[string]string

	// txn is the statement that began the open explicit transaction ("" when
	// none), run on each node the transaction reaches; savepoints are the
	// SAVEPOINTs set in it since, replayed after it (see txn.go).
	txn        string
	savepoints []savepoint
	joined     []*backend.Conn // connections the open transaction has begun on

	// stmts are the binary prepared statements on sharded tables, which
	// the proxy routes at each execution (see prepared.go); ids from
	// routedStmtBase up.
	stmts      map[uint32]*routedStmt
	nextStmtID uint32

	act     activity                     // for SHOW PROCESSLIST
	running atomic.Pointer[backend.Conn] // backend running a statement now, for KILL
	// runningMany are the backends of a cross-shard merge under way.
	runningMany atomic.Pointer[[]*backend.Conn]
	idle        atomic.Bool // waiting for the next command

	stmt string // the text of the COM_QUERY being run
	// more is SERVER_MORE_RESULTS_EXISTS while the statements of a split
	// multi-statement text other than the last run (see multi.go).
	more uint16

	// binary is set while a prepared statement's execution runs through
	// the text path (a cross-shard plan): result rows are converted to the
	// binary protocol. binCols and binVals are its scratch.
	binary  bool
	binCols []*mysql.Column
	binVals [][]byte

	buf  []byte // scratch for packets the proxy builds
	qbuf []byte // scratch for rewritten COM_QUERY packets
	// exec and args are scratch for one COM_STMT_EXECUTE: its parameters
	// and their values as the router takes them.
	exec mysql.StmtExecute
	args []router.Arg
}

// maxClientPacket bounds one client command, as MySQL's largest
// max_allowed_packet (1 GiB) does; the backend enforces its own limit.
const maxClientPacket = 1 << 30

// serveConn runs one client connection to completion.
func (s *Server) serveConn(nc net.Conn) {
	defer s.wg.Done()
	s.connsTotal.Add(1)
	id := s.nextID.Add(1)
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(s.cfg.Frontend.NoDelay)
		if s.cfg.Frontend.SocketReadBuffer > 0 {
			tc.SetReadBuffer(s.cfg.Frontend.SocketReadBuffer)
		}
		if s.cfg.Frontend.SocketWriteBuffer > 0 {
			tc.SetWriteBuffer(s.cfg.Frontend.SocketWriteBuffer)
		}
	}
	ss := &session{
		srv:    s,
		nc:     nc,
		c:      mysql.NewConn(nc, s.cfg.Frontend.ReadBuffer, s.cfg.Frontend.WriteBuffer),
		id:     id,
		log:    s.log.With(zap.Uint32("conn", id), zap.String("client", nc.RemoteAddr().String())),
		status: mysql.StatusAutocommit,
		buf:    make([]byte, 0, 256),
	}
	ss.c.MaxPacket = maxClientPacket
	ss.c.LendWriteBuffer()
	defer nc.Close()
	if !s.allowed(nc.RemoteAddr()) {
		s.rejected.Add(1)
		ss.writeErr(mysql.NewError(mysql.ErHostNotPrivileged, "Host '%s' is not allowed to connect to this MySQL server", ss.host()))
		return
	}
	if s.shutting.Load() {
		ss.writeErr(mysql.NewError(mysql.ErServerShutdown, "Server shutdown in progress"))
		return
	}
	if !s.register(ss) {
		s.rejected.Add(1)
		ss.writeErr(mysql.NewError(mysql.ErTooManyConnections, "Too many connections (max_connections %d)", s.cfg.MaxConnections))
		return
	}
	defer s.unregister(ss)
	defer ss.releaseAll()
	defer func() {
		if r := recover(); r != nil {
			ss.log.Error("panic in session", zap.Any("panic", r), zap.ByteString("stack", debug.Stack()))
			ss.writeErr(mysql.NewError(mysql.ErUnknownError, "internal error in the proxy: %v", r))
		}
	}()
	if err := ss.handshake(); err != nil {
		ss.log.Debug("handshake failed", zap.Error(err))
		return
	}
	ss.log = ss.log.With(zap.String("user", ss.user))
	ss.log.Debug("client connected")
	ss.loop()
	ss.log.Debug("client disconnected")
}

func (ss *session) loop() {
	for {
		ss.idle.Store(true)
		if ss.srv.shutting.Load() {
			return
		}
		ss.c.ResetSeq()
		p, err := ss.c.ReadPacket()
		ss.idle.Store(false)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !errors.Is(err, os.ErrDeadlineExceeded) {
				var se *mysql.SQLError
				if errors.As(err, &se) {
					ss.writeErr(se)
				}
				ss.log.Debug("read from client failed", zap.Error(err))
			}
			return
		}
		if len(p) == 0 {
			ss.writeErr(mysql.ErrMalformedPacket)
			if ss.c.Flush() != nil {
				return
			}
			continue
		}
		quit, err := ss.dispatch(p)
		if err != nil && !errors.Is(err, errAnswered) {
			var se *mysql.SQLError
			if errors.As(err, &se) {
				ss.writeErr(se)
			} else {
				ss.log.Error("statement failed", zap.Error(err))
				ss.writeErr(mysql.AsSQLError(err))
			}
		}
		if ferr := ss.c.Flush(); ferr != nil || quit {
			return
		}
	}
}

// errCloseSession ends the session after the current response: the client
// connection can no longer be served faithfully (e.g. the backend holding
// its session state died, or the client vanished mid-result).
var errCloseSession = errors.New("close session")

// errAnswered reports a statement whose ERR packet already reached the
// client (relayed from a backend, or written by the proxy mid-result): it
// failed, but nothing more is to be sent for it.
var errAnswered = errors.New("error already sent to the client")

// dispatch runs one command. A non-nil error that is not errCloseSession
// is sent to the client as an ERR packet.
func (ss *session) dispatch(p []byte) (quit bool, err error) {
	cmd := p[0]
	switch cmd {
	case mysql.ComQuit:
		return true, nil
	case mysql.ComPing:
		return false, ss.writeOK(mysql.OK{Status: ss.status})
	case mysql.ComQuery:
		err = ss.query(p)
	case mysql.ComInitDB:
		if err = ss.useDB(string(p[1:])); err == nil {
			err = ss.writeOK(mysql.OK{Status: ss.status})
		}
	case mysql.ComFieldList, mysql.ComStatistics:
		err = ss.passthrough(p, false)
	case mysql.ComStmtPrepare:
		sql := string(p[1:])
		st := router.Classify(sql)
		if st.Kind == router.KindTxn || st.Keyword == "SAVEPOINT" || st.Keyword == "RELEASE" {
			// BEGIN, COMMIT, ... prepared (sysbench does this) run as the
			// proxy's transaction statements, like their text forms.
			err = ss.prepareLocal(sql)
			break
		}
		// The proxy owns every prepared statement that leaves no state on
		// its connection: each execution is routed and runs on any pooled
		// connection (statements cached per connection), so a prepared
		// statement does not tie the session to a backend connection and
		// many more clients than pooled connections can use them.
		if !st.Sticky && st.Kind != router.KindOther || ss.srv.router.Prepared(sql, router.Session{User: ss.user, DB: ss.db}) != nil {
			err = ss.prepareRouted(sql)
			break
		}
		// The statement id lives on this backend connection. Other nodes
		// do not need it, so this state needs no replay.
		ss.sticky = true
		err = ss.passthrough(p, false)
	case mysql.ComStmtExecute, mysql.ComStmtFetch, mysql.ComStmtReset, mysql.ComStmtClose, mysql.ComStmtSendLongData:
		if ps := ss.routedStmt(p); ps != nil {
			err = ss.routedStmtCommand(ps, p)
			break
		}
		if cmd == mysql.ComStmtClose || cmd == mysql.ComStmtSendLongData {
			if len(ss.pinned) == 0 {
				return false, nil // no statement: nothing to close, and no reply is due
			}
			err = ss.passthrough(p, true)
			break
		}
		if len(ss.pinned) == 0 {
			return false, mysql.NewError(mysql.ErUnknownStmtHandler, "Unknown prepared statement handler given to %s", comName(cmd))
		}
		err = ss.passthrough(p, false)
	case mysql.ComSetOption:
		err = ss.setOption(p)
	case mysql.ComResetConnection:
		if err = ss.reset(); err == nil {
			err = ss.writeOK(mysql.OK{Status: ss.status})
		}
	case mysql.ComChangeUser:
		err = ss.changeUser(p)
	case mysql.ComProcessKill:
		if len(p) < 5 {
			return false, mysql.ErrMalformedPacket
		}
		err = ss.kill(router.Kill{ID: uint64(binary.LittleEndian.Uint32(p[1:5]))})
	default:
		err = mysql.NewError(mysql.ErNotSupported, "command %s is not supported by shardgate", comName(cmd))
	}
	if errors.Is(err, errCloseSession) {
		return true, nil
	}
	return false, err
}

// query runs COM_QUERY.
func (ss *session) query(p []byte) error {
	sql := string(p[1:])
	ss.stmt = sql
	st := router.Classify(sql)
	ss.act.set("Query", sql)
	switch st.Kind {
	case router.KindEmpty:
		return mysql.NewError(mysql.ErEmptyQuery, "Query was empty")
	case router.KindKill:
		if k, ok := router.ParseKill(sql); ok {
			return ss.kill(k)
		}
		return mysql.NewError(mysql.ErNotSupported, "this form of KILL is not supported by shardgate; use KILL [CONNECTION | QUERY] <id> with an id from the proxy's SHOW PROCESSLIST")
	case router.KindRead:
		if st.Keyword != "SHOW" {
			break
		}
		if full, ok := router.IsShowProcesslist(sql); ok {
			return ss.showProcesslist(full)
		}
	}
	multi := ss.multiStmts && strings.IndexByte(strings.TrimRight(sql, "; \t\r\n"), ';') >= 0
	if !multi {
		switch {
		case st.Kind == router.KindTxn || st.Keyword == "SAVEPOINT" || st.Keyword == "RELEASE":
			if handled, err := ss.txnStatement(sql); handled {
				return err
			}
		case st.Kind == router.KindDDL && len(ss.pinned) > 0 && ss.inTxn() && !strings.Contains(strings.ToUpper(sql), "TEMPORARY"):
			// DDL commits the open transaction first, on every node, as
			// MySQL does (CREATE/DROP TEMPORARY TABLE do not).
			if err := ss.endAll("COMMIT", true); err != nil {
				return err
			}
		}
	}
	if !multi && (st.Keyword == "PREPARE" || st.Keyword == "EXECUTE" || st.Keyword == "DEALLOCATE" || st.Keyword == "DROP") {
		if handled, err := ss.sqlPrepare(sql); handled {
			return err
		}
	}
	if !multi && st.Keyword == "SET" {
		if vars, ok := router.ParseSet(sql); ok {
			return ss.setTracked(sql, vars)
		}
		if cs, coll, ok := router.ParseSetNames(sql); ok {
			if id, ok := mysql.CollationByName(cs, coll); ok {
				// The connections the session uses follow on next use.
				ss.coll = id
				return ss.writeOK(mysql.OK{Status: ss.status})
			}
		}
	}
	if multi {
		st.Sticky = true // later statements were not classified
	} else if st.Keyword == "USE" {
		if db, ok := router.ParseUse(sql); ok {
			if err := ss.useDB(db); err != nil {
				return err
			}
			return ss.writeOK(mysql.OK{Status: ss.status})
		}
	}
	plan, err := ss.srv.router.Route(sql, router.Session{User: ss.user, DB: ss.db})
	if err != nil {
		if multi {
			if texts, ok := ss.srv.router.SplitSharded(sql, router.Session{User: ss.user, DB: ss.db}); ok {
				return ss.queryMulti(texts)
			}
		}
		return err
	}
	var start time.Time
	if ss.srv.sqlLog != nil || ss.srv.slow > 0 {
		start = time.Now()
	}
	ss.srv.queries.Add(1)
	if plan.Kind != router.Forward {
		err = ss.execPlan(plan)
	} else {
		t := &plan.Targets[0]
		pkt, relay := p, ss.relayResult
		if t.SQL != "" {
			pkt = ss.queryPacket(t.SQL)
		}
		if len(plan.Renames) > 0 {
			relay = ss.relayRenamed(plan.Renames)
		}
		var res result
		res, err = ss.run(t.Node, pkt, st.Sticky, st.UsesLastInsertID, relay)
		if err == nil && st.Sticky && res.ok {
			ss.noteState(st, sql, multi)
			if st.Keyword == "SET" && !multi {
				err = ss.setOnOtherNodes(t.Node, sql)
			}
		}
	}
	if !start.IsZero() {
		ss.logSQL(sql, plan.Targets[0].Node, time.Since(start), err)
	}
	return err
}

// noteState records how a statement that made the session sticky can be
// repeated on another node.
func (ss *session) noteState(st router.Stmt, sql string, multi bool) {
	if ss.unreplayable != "" {
		return
	}
	if st.Keyword == "SET" && !multi && len(ss.replay) < maxReplay {
		ss.replay = append(ss.replay, sql)
		return
	}
	switch {
	case multi:
		ss.unreplayable = "a multi-statement text"
	case st.Keyword == "SET":
		ss.unreplayable = fmt.Sprintf("more than %d SET statements", maxReplay)
	default:
		ss.unreplayable = "a " + st.Keyword + " statement"
	}
}

// setOnOtherNodes runs a SET that succeeded on node on the connections the
// session holds to its other nodes, so every node sees the same session
// (autocommit, isolation level, sql_mode, ...). The response already went
// to the client: a failure here closes the session rather than leave the
// nodes disagreeing.
func (ss *session) setOnOtherNodes(node, sql string) error {
	for _, bc := range ss.pinned {
		if bc.Node().Name == node {
			continue
		}
		if _, err := bc.Exec(sql); err != nil {
			ss.log.Warn("SET failed on another node of the session; closing it", zap.String("node", bc.Node().Name), zap.Error(err))
			return ss.closeNow()
		}
	}
	return nil
}

// maxReplay bounds the SET statements kept for replay on other nodes.
const maxReplay = 256

// queryPacket builds a COM_QUERY packet for sql in a session buffer that is
// valid until the next call.
func (ss *session) queryPacket(sql string) []byte {
	ss.qbuf = append(append(ss.qbuf[:0], mysql.ComQuery), sql...)
	return ss.qbuf
}

func (ss *session) logSQL(sql, node string, d time.Duration, err error) {
	if ss.srv.sqlLog != nil {
		ss.srv.sqlLog.Info("sql", zap.Uint32("conn", ss.id), zap.String("user", ss.user), zap.String("db", ss.db),
			zap.String("node", node), zap.Duration("took", d), zap.String("sql", sql), zap.Error(err))
	}
	if ss.srv.slow > 0 && d >= ss.srv.slow {
		ss.log.Warn("slow query", zap.String("node", node), zap.Duration("took", d), zap.String("sql", sql))
	}
}

// passthrough sends a non-query command to the backend the session uses
// and relays its response (none when noReply).
func (ss *session) passthrough(p []byte, noReply bool) error {
	node, _ := ss.srv.router.DefaultNode(ss.user)
	relay := ss.relayResult
	switch p[0] {
	case mysql.ComStmtPrepare:
		relay = ss.relayPrepare
	case mysql.ComFieldList:
		relay = ss.relayFieldList
	case mysql.ComStatistics, mysql.ComStmtReset:
		relay = ss.relayOne
	case mysql.ComStmtFetch:
		relay = ss.relayFetch
	}
	if noReply {
		relay = nil
	}
	_, err := ss.run(node, p, false, false, relay)
	return err
}

// relayFunc forwards one response from bc to the client.
type relayFunc func(bc *backend.Conn) (result, error)

// run executes one client command on a backend connection of node: it
// borrows (or reuses) a connection, brings it to the session's state,
// forwards the command packet unchanged, relays the response and decides
// whether the session keeps the connection.
func (ss *session) run(node string, p []byte, sticky, usesLastID bool, relay relayFunc) (result, error) {
	bc, err := ss.acquire(node, usesLastID)
	if err != nil {
		return result{}, err
	}
	return ss.runOn(bc, node, p, sticky, relay)
}

// runOn is run on a connection the caller acquired.
func (ss *session) runOn(bc *backend.Conn, node string, p []byte, sticky bool, relay relayFunc) (result, error) {
	ss.running.Store(bc)
	defer ss.running.Store(nil)
	bc.ResetSeq()
	err := bc.WritePacket(p)
	if err == nil {
		err = bc.Flush()
	}
	if err != nil {
		bc.MarkBroken()
		ss.release(bc, false, result{})
		return result{}, ss.backendLost(bc)
	}
	if relay == nil {
		ss.release(bc, sticky, result{status: ss.status})
		return result{}, nil
	}
	res, err := relay(bc)
	if err != nil {
		bc.MarkBroken()
		ss.release(bc, false, res)
		var de *mysql.DstError
		if errors.As(err, &de) {
			// The client went away mid-response; the backend connection is
			// mid-result and cannot be reused.
			ss.log.Debug("client vanished mid-result", zap.Error(err))
			return res, errCloseSession
		}
		if errors.Is(err, mysql.ErrForwardCut) {
			// The client holds part of a packet: no ERR can follow it.
			ss.log.Warn("backend failed mid-packet; closing the client connection", zap.String("node", node), zap.Error(err))
			return res, ss.closeNow()
		}
		var se *mysql.SQLError
		if errors.As(err, &se) && !res.sent {
			return res, err // e.g. a renamed SHOW answered ERR
		}
		ss.log.Warn("backend failed mid-query", zap.String("node", node), zap.Error(err))
		return res, ss.backendLost(bc)
	}
	ss.noteResult(bc, res)
	ss.release(bc, sticky, res)
	return res, nil
}

// noteResult records what a response's final OK/EOF says about the
// session.
func (ss *session) noteResult(bc *backend.Conn, res result) {
	if res.insertID != 0 {
		ss.lastInsertID = res.insertID
		bc.LastInsertID = res.insertID
	}
	if res.ok {
		ss.status = res.status
	}
}

// closeNow ends the session at once, dropping whatever is buffered for
// the client (it would end inside a packet).
func (ss *session) closeNow() error {
	ss.nc.Close()
	return errCloseSession
}

// backendLost reports a backend that failed during a command. The client
// gets error 1430; if the session's state or transaction lived on that
// connection, the client connection is closed after the error, as a server
// crash would close it.
func (ss *session) backendLost(bc *backend.Conn) error {
	e := mysql.NewError(mysql.ErServerLost, "Lost connection to backend %s during query", bc.Addr)
	ss.writeErr(e)
	if ss.sticky || ss.status&mysql.StatusInTrans != 0 {
		ss.c.Flush()
		return errCloseSession
	}
	return errAnswered
}

// acquire returns a backend connection to node for the next statement,
// in the session's state.
func (ss *session) acquire(node string, usesLastID bool) (*backend.Conn, error) {
	n := ss.srv.nodes[node]
	bc := ss.pinnedOn(n)
	if bc == nil {
		if err := ss.canUseAnotherNode(n); err != nil {
			return nil, err
		}
		var err error
		bc, err = n.Get(context.Background(), ss.variant, ss.db, ss.coll)
		if err != nil {
			return nil, err
		}
		if ss.sticky {
			for _, q := range ss.replay {
				if _, err := bc.Exec(q); err != nil {
					ss.release(bc, false, result{})
					return nil, fmt.Errorf("repeating the session's %q on node %s: %w", q, node, err)
				}
			}
		}
	}
	if ss.txn != "" && !slices.Contains(ss.joined, bc) {
		if err := ss.joinTxn(bc); err != nil {
			bc.MarkBroken() // its transaction state is unknown
			ss.unpin(bc)
			ss.release(bc, false, result{})
			return nil, err
		}
		ss.joined = append(ss.joined, bc)
	}
	if ss.inTxn() {
		// Every statement of the transaction on this node must use this
		// connection, including the other targets of the same statement.
		ss.pin(bc)
	}
	if err := ss.syncState(bc, usesLastID); err != nil {
		if ss.pinnedOn(n) != bc {
			ss.release(bc, false, result{})
		}
		return nil, err
	}
	return bc, nil
}

// canUseAnotherNode checks that the session may take a connection to n
// while it holds connections to other nodes, and lets go of connections
// held only for SHOW WARNINGS.
func (ss *session) canUseAnotherNode(n *backend.Node) error {
	if len(ss.pinned) == 0 {
		return nil
	}
	other := ss.pinned[0].Node()
	inTxn := ss.inTxn()
	if inTxn {
		if err := ss.txnNodeCheck(n); err != nil {
			return err
		}
	}
	switch {
	case ss.sticky && ss.unreplayable != "":
		return mysql.NewError(mysql.ErNotSupported, "this statement runs on node %s but the session holds state on node %s created by %s, which cannot be repeated on another node; use a separate connection", n.Name, other.Name, ss.unreplayable)
	case inTxn:
		// The transaction extends to n (transaction_mode multi).
	case !ss.sticky:
		for _, bc := range ss.pinned {
			bc.Node().Put(bc)
		}
		ss.pinned = ss.pinned[:0]
	}
	return nil
}

func (ss *session) pinnedOn(n *backend.Node) *backend.Conn {
	for _, bc := range ss.pinned {
		if bc.Node() == n {
			return bc
		}
	}
	return nil
}

func (ss *session) pin(bc *backend.Conn) {
	for _, c := range ss.pinned {
		if c == bc {
			return
		}
	}
	ss.pinned = append(ss.pinned, bc)
}

func (ss *session) unpin(bc *backend.Conn) {
	for i, c := range ss.pinned {
		if c == bc {
			ss.pinned = append(ss.pinned[:i], ss.pinned[i+1:]...)
			return
		}
	}
}

// syncState changes only what differs between the connection's state and
// the session's: database, collation, multi-statement option and, for
// statements that read it, LAST_INSERT_ID().
func (ss *session) syncState(bc *backend.Conn, usesLastID bool) error {
	if bc.DB != ss.db {
		var err error
		if ss.db == "" {
			// Only a new login leaves a connection without a database.
			err = bc.ChangeUser("")
		} else {
			err = bc.UseDB(ss.db)
		}
		if err != nil {
			return err
		}
	}
	if bc.Collation != ss.coll {
		coll, _ := mysql.CollationByID(ss.coll)
		if _, err := bc.Exec(coll.SetNamesSQL()); err != nil {
			return err
		}
		bc.Collation = ss.coll
	}
	if bc.MultiStmts != ss.multiStmts {
		if err := bc.SetMultiStatements(ss.multiStmts); err != nil {
			return err
		}
	}
	if len(ss.vars) > 0 || len(bc.Vars) > 0 {
		if err := ss.syncVars(bc); err != nil {
			return err
		}
	}
	if usesLastID && bc.LastInsertID != ss.lastInsertID {
		if _, err := bc.Exec("DO LAST_INSERT_ID(" + strconv.FormatUint(ss.lastInsertID, 10) + ")"); err != nil {
			return err
		}
		bc.LastInsertID = ss.lastInsertID
	}
	return nil
}

// release decides whether the session keeps bc or returns it to its pool.
func (ss *session) release(bc *backend.Conn, sticky bool, res result) {
	if sticky {
		ss.sticky = true
	}
	if bc.Broken() {
		ss.unpin(bc)
		bc.Node().Put(bc)
		return
	}
	// A connection the open transaction reached stays whatever the last
	// response said: an ERR carries no status, and the transaction is
	// still open there.
	if ss.sticky || ss.inTxn() || slices.Contains(ss.joined, bc) ||
		res.status&mysql.StatusInTrans != 0 || res.status&mysql.StatusAutocommit == 0 && res.ok || res.warnings > 0 {
		ss.pin(bc)
		return
	}
	ss.unpin(bc)
	bc.Node().Put(bc)
}

// releaseAll returns the session's backend connections when the client
// leaves or resets: each is reset (dropping variables, temporary tables,
// locks and open transactions) when the session left state on it.
func (ss *session) releaseAll() {
	dirty := ss.sticky || ss.txn != "" || ss.status&mysql.StatusInTrans != 0 || ss.status&mysql.StatusAutocommit == 0
	for _, bc := range ss.pinned {
		if dirty {
			// A new login on the same connection drops everything the
			// session left there, the database included (statements such
			// as USE inside a multi-statement text change it unseen).
			if err := bc.ChangeUser(""); err != nil {
				bc.MarkBroken()
			}
		}
		bc.Node().Put(bc)
	}
	ss.pinned = ss.pinned[:0]
}

// useDB switches the session's database after checking it on the backend.
func (ss *session) useDB(db string) error {
	node, _ := ss.srv.router.DefaultNode(ss.user)
	bc, err := ss.acquire(node, false)
	if err != nil {
		return err
	}
	err = bc.UseDB(db)
	ss.release(bc, false, result{status: ss.status, ok: true})
	if err != nil {
		return err
	}
	ss.db = db
	return nil
}

// reset implements COM_RESET_CONNECTION: the backend connection the session
// held is reset and returned, and the session's state goes back to that of
// a new connection (the database is kept, as MySQL keeps it).
func (ss *session) reset() error {
	ss.releaseAll()
	ss.txn = ""
	ss.savepoints = ss.savepoints[:0]
	clear(ss.joined)
	ss.joined = ss.joined[:0]
	ss.stmts = nil
	ss.vars = nil
	ss.sqlStmts = nil
	ss.sticky = false
	ss.replay = nil
	ss.unreplayable = ""
	ss.coll = ss.handshakeColl
	ss.lastInsertID = 0
	ss.status = mysql.StatusAutocommit
	return nil
}

// changeUser implements COM_CHANGE_USER.
func (ss *session) changeUser(p []byte) error {
	cu, err := mysql.ParseChangeUser(p, ss.caps)
	if err != nil {
		return err
	}
	plugin := cu.AuthPlugin
	if plugin == "" {
		plugin = mysql.AuthNativePassword
	}
	if err := ss.authenticate(cu.User, plugin, cu.AuthResponse); err != nil {
		return errCloseSession // MySQL closes the connection after a failed change
	}
	ss.reset()
	ss.user = cu.User
	ss.db = ""
	if cu.Charset != 0 {
		if _, ok := mysql.CollationByID(byte(cu.Charset)); ok {
			ss.coll, ss.handshakeColl = byte(cu.Charset), byte(cu.Charset)
		}
	}
	if _, ok := ss.srv.router.DefaultNode(ss.user); !ok {
		ss.writeErr(mysql.NewError(mysql.ErDBAccessDenied, "Access denied for user '%s'@'%s': no schema in schema_list", ss.user, ss.host()))
		return errCloseSession
	}
	if cu.Database != "" {
		if err := ss.useDB(cu.Database); err != nil {
			return err
		}
	}
	return ss.writeOK(mysql.OK{Status: ss.status})
}

// setOption implements COM_SET_OPTION; the backend follows on next use.
func (ss *session) setOption(p []byte) error {
	if len(p) < 3 {
		return mysql.ErrMalformedPacket
	}
	switch binary.LittleEndian.Uint16(p[1:3]) {
	case mysql.OptionMultiStatementsOn:
		ss.multiStmts = true
	case mysql.OptionMultiStatementsOff:
		ss.multiStmts = false
	default:
		return mysql.NewError(mysql.ErUnknownComError, "Unknown command")
	}
	if ss.caps&mysql.ClientDeprecateEOF != 0 {
		return ss.c.WritePacket(mysql.AppendOK(ss.buf[:0], mysql.EOFHeader, mysql.OK{Status: ss.status}))
	}
	return ss.c.WritePacket(mysql.AppendEOF(ss.buf[:0], 0, ss.status))
}

// kill implements KILL [QUERY] id and COM_PROCESS_KILL on the proxy's own
// connection ids.
func (ss *session) kill(k router.Kill) error {
	target := ss.srv.session(uint32(k.ID))
	if target == nil || k.ID > uint64(^uint32(0)) {
		return mysql.NewError(mysql.ErUnknownThread, "Unknown thread id: %d", k.ID)
	}
	if target.user != ss.user {
		return mysql.NewError(mysql.ErKillDenied, "You are not owner of thread %d", k.ID)
	}
	if target == ss {
		if k.Query {
			return ss.writeOK(mysql.OK{Status: ss.status})
		}
		ss.writeErr(mysql.NewError(1927, "Connection was killed"))
		ss.c.Flush()
		return errCloseSession
	}
	if bc := target.running.Load(); bc != nil {
		if err := killOn(bc, func() bool { return target.running.Load() == bc }); err != nil {
			return err
		}
	}
	if many := target.runningMany.Load(); many != nil {
		for _, bc := range *many {
			if err := killOn(bc, func() bool { return target.runningMany.Load() == many }); err != nil {
				return err
			}
		}
	}
	if !k.Query {
		target.nc.Close()
	}
	return ss.writeOK(mysql.OK{Status: ss.status})
}

// killOn stops the statement running on bc with KILL QUERY from a new
// connection to its node, if still is true once that connection is up (bc
// may have gone back to the pool meanwhile).
func killOn(bc *backend.Conn, still func() bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	kc, err := bc.Node().Dial(ctx)
	cancel()
	if err != nil {
		return err
	}
	defer kc.Close()
	if !still() {
		return nil
	}
	if err := kc.KillQuery(bc.ThreadID, true); err != nil {
		var se *mysql.SQLError
		if !errors.As(err, &se) || se.Code != mysql.ErUnknownThread {
			return err
		}
	}
	return nil
}

func (ss *session) writeOK(ok mysql.OK) error {
	ok.Status |= ss.more
	ss.buf = mysql.AppendOK(ss.buf[:0], mysql.OKHeader, ok)
	return ss.c.WritePacket(ss.buf)
}

// endStatus is the status for the packet that ends a response: with
// SERVER_MORE_RESULTS_EXISTS while a split multi-statement text has more.
func (ss *session) endStatus() uint16 { return ss.status | ss.more }

// writeErr sends an ERR packet with the next sequence number. Errors from
// writing are ignored: the read loop notices a dead client.
func (ss *session) writeErr(err error) {
	se := mysql.AsSQLError(err)
	ss.srv.errorsSent.Add(1)
	ss.buf = mysql.AppendErr(ss.buf[:0], se)
	ss.c.WritePacket(ss.buf)
	ss.c.Flush()
}

func (ss *session) writeFlush(p []byte) error {
	if err := ss.c.WritePacket(p); err != nil {
		return err
	}
	return ss.c.Flush()
}

// comName names a command byte for error messages.
func comName(cmd byte) string {
	names := map[byte]string{
		mysql.ComSleep: "COM_SLEEP", mysql.ComCreateDB: "COM_CREATE_DB", mysql.ComDropDB: "COM_DROP_DB",
		mysql.ComRefresh: "COM_REFRESH", mysql.ComShutdown: "COM_SHUTDOWN", mysql.ComProcessInfo: "COM_PROCESS_INFO",
		mysql.ComConnect: "COM_CONNECT", mysql.ComDebug: "COM_DEBUG", mysql.ComTime: "COM_TIME",
		mysql.ComDelayedInsert: "COM_DELAYED_INSERT", mysql.ComBinlogDump: "COM_BINLOG_DUMP",
		mysql.ComTableDump: "COM_TABLE_DUMP", mysql.ComConnectOut: "COM_CONNECT_OUT",
		mysql.ComRegisterSlave: "COM_REGISTER_SLAVE", mysql.ComDaemon: "COM_DAEMON",
		mysql.ComBinlogDumpGTID: "COM_BINLOG_DUMP_GTID", mysql.ComStmtExecute: "mysqld_stmt_execute",
		mysql.ComStmtFetch: "mysqld_stmt_fetch", mysql.ComStmtReset: "mysqld_stmt_reset",
	}
	if n, ok := names[cmd]; ok {
		return fmt.Sprintf("%s (0x%02x)", n, cmd)
	}
	return fmt.Sprintf("0x%02x", cmd)
}
