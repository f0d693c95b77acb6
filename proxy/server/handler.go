package server

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/proxy/engine"
	"github.com/shardgate/shardgate/proxy/session"
	"github.com/shardgate/shardgate/router"
)

// handler runs one client's commands: one method per COM_* command, the
// statements the proxy answers itself (transactions, SET, USE, KILL, SHOW
// PROCESSLIST, SQL-level PREPARE), and the hand-off of everything else to
// the router and the engine. Session state lives in conn.st; what the
// client is sent goes through conn. It is owned by the conn's goroutine.
type handler struct {
	c        *conn
	x        *engine.Executor
	settings execSettings    // the executor's session settings (exec_settings.go)
	ps       *stmtHandler    // binary prepared statements
	ls       *localStmts     // statements the proxy answers itself
	multi    *multiRunner    // multi-statement texts on sharded tables
	into     *intoRunner     // SELECT ... INTO @variables over several shards (into.go)
	track    *clientTrackers // the client's session state trackers (track.go)
	seqs     *sessionSeqs    // the session's sequence values (sequences.go)
	cmds     *userCmds       // COM_CHANGE_USER, COM_SET_OPTION
	qbuf     []byte          // scratch for rewritten COM_QUERY packets
	rc       cacheRunner     // the result cache's side of the session (rcache_query.go)
	// immediate is set while an EXECUTE IMMEDIATE the proxy checked runs.
	immediate bool
	// logical relays results of statements on subtables of relayTables
	// (logicalRelay).
	logical     engine.Relay
	relayTables []string
	// version and versionID are the default node's server version and
	// its router.VersionID (defaultVersion).
	version   string
	versionID int
	// ob is what the statement under way did, for the metrics (observe).
	ob stmtObs
	// counts keeps the session's ROW_COUNT() and FOUND_ROWS() (counts.go).
	counts counts
	fence  fenceGuard // holds back an ERR 1146 of a fenced subtable (stale.go)
}

func newHandler(c *conn) *handler {
	h := &handler{c: c, x: c.srv.engine.NewExecutor(c, c)}
	h.ps = &stmtHandler{h: h, stmtBudget: stmtBudget{h: h}}
	h.ls = &localStmts{h: h}
	h.multi = &multiRunner{h: h}
	h.into = &intoRunner{h: h}
	h.track = &clientTrackers{h: h}
	h.seqs = &sessionSeqs{h: h}
	h.cmds = &userCmds{h: h}
	h.counts.h = h
	h.rc.h = h
	return h
}

// errCloseSession ends the session after the current response: the client
// connection can no longer be served faithfully (e.g. the backend holding
// its session state died, or the client vanished mid-result).
var errCloseSession = errors.New("close session")

// routerSession is what the router needs to know of the session. It
// carries no sequence values: a statement that needs some gets a
// router.NeedIDsError, and route reserves them (fetch).
func (h *handler) routerSession() router.Session {
	return router.Session{User: h.c.user, DB: h.c.st.DB, Mode: h.c.st.Mode(), Catalog: h.c.srv.tables}
}

// logicalRelay returns a relay that names logical tables in column
// definitions (engine.RelayResultLogical), built once per session.
func (h *handler) logicalRelay(tables []string) engine.Relay {
	h.relayTables = tables
	if h.logical == nil {
		h.logical = func(x *engine.Executor, bc *backend.Conn) (backend.Outcome, error) {
			return engine.RelayResultLogical(x, bc, h.relayTables, false)
		}
	}
	return h.logical
}

// probeSession is routerSession for plans made only to be looked at (the
// metadata of a prepared statement, the choice of how to run it): every
// sequence value they would take is 0, and none is reserved.
func (h *handler) probeSession() router.Session {
	s := h.routerSession()
	s.IDs = probeIDs{}
	return s
}

// route plans a text statement. What the router could plan only after
// I/O it does not do (a table definition not read yet, values of a global
// sequence) is fetched, and the statement planned again; a table being
// moved holds the statement at its gate.
func (h *handler) route(sql string, s router.Session) (*router.Plan, error) {
	return h.routeWith(sql, s, nil, false)
}

// routeArgs is route for a binary prepared statement's execution.
func (h *handler) routeArgs(sql string, s router.Session, args []router.Arg) (*router.Plan, error) {
	return h.routeWith(sql, s, args, true)
}

func (h *handler) routeWith(sql string, s router.Session, args []router.Arg, prepared bool) (*router.Plan, error) {
	rt := h.c.srv.rt()
	p, err := h.routeOnce(rt, sql, s, args, prepared)
	for tries := 0; err != nil && tries < 2; tries++ {
		var again bool
		if again, err = h.fetch(err, &s); !again {
			break
		}
		p, err = h.routeOnce(rt, sql, s, args, prepared)
	}
	if m := h.c.srv.moving.Load(); m != nil && err == nil && len(p.Tables) > 0 {
		if waited, gerr := h.enterGates(*m, p.Tables); gerr != nil {
			return nil, gerr
		} else if waited {
			return h.routeWith(sql, s, args, prepared)
		}
	}
	return p, err
}

func (h *handler) routeOnce(rt *router.Router, sql string, s router.Session, args []router.Arg, prepared bool) (*router.Plan, error) {
	if prepared {
		return rt.RouteArgs(sql, s, args)
	}
	return rt.Route(sql, s)
}

// fetch does the I/O a routing error asks for: it reads the table
// definition a router.NeedSchemaError names, or reserves the sequence
// values a router.NeedIDsError counts (sessionSeqs.reserve). again
// reports whether the statement can be planned again; err is the
// statement's error otherwise.
func (h *handler) fetch(err error, s *router.Session) (again bool, _ error) {
	if h.readDefinition(err) {
		return true, nil
	}
	return h.seqs.reserve(err, s)
}

// readDefinition reads the table definition err asks for (a
// router.NeedSchemaError) and reports whether it is now known.
func (h *handler) readDefinition(err error) bool {
	if err == nil {
		return false // before anything escapes: this is every statement's path
	}
	var ne *router.NeedSchemaError
	return errors.As(err, &ne) && h.c.srv.tables.loadNamed(ne.DB, ne.Table)
}

// dispatch runs one command. A non-nil error that is not errCloseSession
// is sent to the client as an ERR packet.
func (h *handler) dispatch(p []byte) (quit bool, err error) {
	c := h.c
	c.interrupted.Store(false)
	cmd := p[0]
	if c.st.TrackersUnknown() && cmd != mysql.ComQuit && cmd != mysql.ComPing {
		if err := h.track.load(); err != nil { // track.go
			return false, err
		}
	}
	switch cmd {
	case mysql.ComQuit:
		return true, nil
	case mysql.ComPing:
		return false, c.okStatus()
	case mysql.ComQuery:
		err = h.query(p)
	case mysql.ComInitDB:
		if err = h.useDB(string(p[1:])); err == nil {
			err = c.okStatus()
		}
	case mysql.ComFieldList, mysql.ComStatistics:
		err = h.passthrough(p)
	case mysql.ComStmtPrepare:
		err = h.ps.prepare(p)
	case mysql.ComStmtBulkExecute:
		err = bulkRunner{h.ps}.run(p)
	case mysql.ComStmtExecute, mysql.ComStmtFetch, mysql.ComStmtReset, mysql.ComStmtClose, mysql.ComStmtSendLongData:
		if ps := h.ps.lookup(p); ps != nil {
			err = h.ps.command(ps, p)
			break
		}
		// An id the session never got: it is never passed on, since a
		// pooled connection holds statements of other sessions.
		if cmd == mysql.ComStmtClose || cmd == mysql.ComStmtSendLongData {
			return false, nil // no reply is due
		}
		id, _ := mysql.StmtExecuteID(p)
		return false, unknownStmt(cmd, id)
	case mysql.ComSetOption:
		err = h.cmds.setOption(p)
	case mysql.ComResetConnection:
		h.ps.closeAll()
		c.st.Reset()
		err = c.okStatus()
	case mysql.ComChangeUser:
		err = h.cmds.changeUser(p)
	case mysql.ComProcessKill:
		if len(p) < 5 {
			return false, mysql.ErrBadPacket
		}
		err = c.srv.kill(c, router.Kill{ID: uint64(binary.LittleEndian.Uint32(p[1:5]))})
	default:
		err = mysql.NewError(mysql.ErNotSupported, "command %s is not supported by shardgate", comName(cmd))
	}
	if errors.Is(err, errCloseSession) {
		return true, nil
	}
	return false, err
}

// forwardComment sends a text the server reads as comments only to the
// default node, unchanged, and relays its answer (OK, or 1065): nothing
// runs, so no state is left, and nothing is routed.
func (h *handler) forwardComment(p []byte) error {
	node, _ := h.c.srv.rt().DefaultNode(h.c.user)
	_, err := h.x.Forward(node, p, false, false, engine.RelayResult)
	return h.settle(err)
}

// execute runs a plan the proxy answers itself (Executor.Execute). In
// transaction_mode xa, a write outside any transaction that reaches
// several nodes runs as one XA transaction: committed, two-phase, before
// its OK is sent, or rolled back everywhere when a node fails it.
func (h *handler) execute(plan *router.Plan, sql string) error {
	st := h.c.st
	h.settings.apply(h.x, st)
	if (plan.Kind != router.SumOK && plan.Kind != router.LoadSplit) || !st.BeginImplicitXA(plan.Nodes()) {
		return h.settle(h.x.Execute(plan, sql))
	}
	h.x.BeforeOK = h.commitImplicit
	err := h.x.Execute(plan, sql)
	h.x.BeforeOK = nil
	if st.TxnSQL() != "" {
		// It failed before its commit (which ends the transaction):
		// undone on every node.
		if rerr := st.End(false); rerr != nil {
			h.c.log.Warn("rolling back a failed write across nodes", zap.Error(rerr))
		}
		var se *mysql.SQLError
		if errors.As(err, &se) {
			err = &mysql.SQLError{Code: se.Code, State: se.State, Message: se.Message + "; rolled back on every node (transaction_mode xa)"}
		}
	}
	return h.settle(err)
}

// endDeadlocked ends the transaction of a statement a node answered with
// a deadlock (1213): MariaDB rolled that node's part back and ended the
// transaction there, so the proxy rolls back the other nodes' parts, as
// one server would have ended it all (left open, their locks would hold
// up other transactions, and the client's next BEGIN would commit them).
func (h *handler) endDeadlocked(err error) {
	code := h.x.ErrCode // a relayed error
	if code == 0 && err != nil {
		code = errorCode(err)
	}
	if code != mysql.ErLockDeadlock || !h.c.st.InTxn() {
		return
	}
	if rerr := h.c.st.End(false); rerr != nil {
		h.c.log.Warn("rolling back a deadlocked transaction across nodes", zap.Error(rerr))
	}
}

// errorCode returns the MySQL code err carries (0 for none). Apart from
// its callers so that the error variable it needs is allocated only on
// an error.
func errorCode(err error) uint16 {
	var se *mysql.SQLError
	if errors.As(err, &se) {
		return se.Code
	}
	return 0
}

// commitImplicit commits the transaction execute opened (BeforeOK).
func (h *handler) commitImplicit() error { return h.c.st.End(true) }

// settle turns what a backend failure means into the session's answer: a
// client that went away or holds half a packet ends the session; a lost
// backend connection is reported, and ends the session when its state
// lived there. Other errors go to the client as they are.
func (h *handler) settle(err error) error {
	if err == nil {
		return nil // before anything escapes: this is every statement's path
	}
	return h.settleErr(err)
}

func (h *handler) settleErr(err error) error {
	var de *mysql.DstError
	var lost *backend.LostError
	switch {
	case errors.As(err, &de):
		h.c.log.Debug("client vanished mid-result", zap.Error(err))
		return errCloseSession
	case errors.Is(err, mysql.ErrForwardCut):
		h.c.log.Warn("backend failed mid-packet; closing the client connection", zap.Error(err))
		return h.c.closeNow()
	case errors.Is(err, session.ErrCommitUnknown):
		h.c.log.Error("closing the client connection", zap.Error(err))
		return h.c.closeNow()
	case errors.As(err, &lost):
		if lost.Cause != nil {
			h.c.log.Warn("backend failed mid-query", zap.String("addr", lost.Conn.Addr), zap.Error(lost.Cause))
		}
		return h.backendLost(lost.Conn)
	}
	if node := h.c.st.TxnLost(); node != "" {
		// The statement lost the transaction's connection to node (a
		// statement on several nodes reports that as an error of its
		// own): its part there is gone, as after a server crash, which
		// would close the connection.
		h.c.log.Info("the open transaction lost its connection to a node; closing the client connection", zap.String("node", node), zap.Error(err))
		return h.c.closeNow()
	}
	var se *mysql.SQLError
	if errors.As(err, &se) && se.Code == mysql.ErErrorDuringCommit {
		h.c.log.Error("COMMIT failed", zap.Error(err))
	}
	return err
}

// backendLost reports a backend that failed during a command, or closed
// the connection while it was idle (a server's idle_transaction_timeout,
// a KILL from elsewhere, a crash). If the session's state or transaction
// lived on that connection, the client's connection is closed, as the
// server's close or crash would close it (clients see 2013/2006, as
// directly); otherwise the client gets error 1430 and goes on with another
// backend connection.
func (h *handler) backendLost(bc *backend.Conn) error {
	if h.c.st.HoldsState() {
		h.c.log.Info("the backend connection holding the session's state or transaction is gone; closing the client connection", zap.String("addr", bc.Addr))
		return h.c.closeNow()
	}
	h.c.writeErr(backend.ErrLost(bc))
	return engine.ErrAnswered
}

// allowed applies the statement policy (deny_statements,
// blacklist_sql_file) to a text a client wants to run, or prepare.
func (h *handler) allowed(sql string, stmt *router.Stmt) error {
	switch why := h.c.srv.lv().policy.Check(sql, stmt); why {
	case "":
		return nil
	case "blacklist":
		return mysql.NewError(mysql.ErSpecificAccessDenied, "Access denied; this statement is in shardgate's blacklist_sql_file")
	case router.DenyStoredProgram:
		return mysql.NewError(mysql.ErSpecificAccessDenied, "Access denied; shardgate does not create stored programs whose body has KILL, dynamic SQL (PREPARE, EXECUTE) or a statement it refuses: they would run with the rights of the backend account every client shares (deny_statements: stored_program; quote a name spelled like one of these words)")
	default:
		return mysql.NewError(mysql.ErSpecificAccessDenied, "Access denied; shardgate does not run %s statements for clients: they act on the server every client shares through the proxy's backend account (deny_statements: %s)", strings.ReplaceAll(why, "_", " "), why)
	}
}

// queryPacket builds a COM_QUERY packet for sql in a buffer that is valid
// until the next call.
func (h *handler) queryPacket(sql string) []byte {
	h.qbuf = append(append(h.qbuf[:0], mysql.ComQuery), sql...)
	return h.qbuf
}

func (h *handler) logSQL(sql, node string, d time.Duration, err error) {
	c := h.c
	if c.srv.sqlLog != nil {
		c.srv.sqlLog.Info("sql", zap.Uint32("conn", c.id), zap.String("user", c.user), zap.String("db", c.st.DB),
			zap.String("node", node), zap.Duration("took", d), zap.String("sql", sql), zap.Error(err))
	}
}

// passthrough sends COM_FIELD_LIST or COM_STATISTICS to the default node
// and relays its response.
func (h *handler) passthrough(p []byte) error {
	node, _ := h.c.srv.rt().DefaultNode(h.c.user)
	relay := engine.RelayOne
	if p[0] == mysql.ComFieldList {
		relay = engine.RelayFieldList
	}
	_, err := h.x.Forward(node, p, false, false, relay)
	return h.settle(err)
}

// useDB switches the session's database after checking it on the backend.
func (h *handler) useDB(db string) error {
	st := h.c.st
	node, _ := h.c.srv.rt().DefaultNode(h.c.user)
	bc, err := st.Acquire(node, false)
	if err != nil {
		return err
	}
	err = bc.UseDB(db)
	st.Release(bc, false, backend.Outcome{OK: true, Status: st.Status})
	if err != nil {
		return err
	}
	st.DB = db
	st.NoteSchema(db)
	h.c.act.setDB(db)
	return nil
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
