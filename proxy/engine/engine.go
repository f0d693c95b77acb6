package engine

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/router"
)

// Conns lends the engine backend connections in the session's state.
type Conns interface {
	// Acquire returns a connection to node brought to the session's state
	// (database, character set, variables, open transaction); usesLastID
	// asks for LAST_INSERT_ID() to be the session's too.
	Acquire(node string, usesLastID bool) (*backend.Conn, error)
	// Release gives back a connection with what its last response said;
	// sticky says the statement left state on the connection that the
	// session must keep. A broken connection is closed.
	Release(bc *backend.Conn, sticky bool, o backend.Outcome)
	// Shared reports whether every target on node must run on the one
	// connection the session holds there (an open transaction, session
	// state), one after another.
	Shared(node string) bool
	// Running shows the connection running the statement now (nil when
	// done) and RunningAll those of a merge under way, to KILL and
	// Shutdown.
	Running(bc *backend.Conn)
	RunningAll(conns []*backend.Conn)
	// Interrupted reports a KILL QUERY that came between two backend
	// statements of the client's statement.
	Interrupted() bool
}

// Writer sends what the engine builds to the client, framed for it. A
// failure to write to the client comes back as a *mysql.DstError.
type Writer interface {
	// Fields starts a result set. raw[i] is column i's definition packet
	// as a backend sent it, or nil to encode cols[i]; cols may be nil when
	// every raw packet is given.
	Fields(cols []*mysql.Column, raw [][]byte) error
	// Row sends one row of values (NULL is nil); raw is the row's text
	// packet when it can be sent unchanged, else nil. Values and raw are
	// only read during the call.
	Row(vals [][]byte, raw []byte) error
	// End ends a result set with the session's status.
	End(warnings uint16) error
	// OK answers a statement that returns no rows, with the session's
	// status; the session takes a non-zero LastInsertID as its own.
	OK(ok mysql.OK) error
	// TextRows reports whether rows go to the client in the text protocol
	// (false during a prepared statement's execution: Row converts them).
	TextRows() bool
	// Client is the client's packet stream, for responses passed on
	// unchanged from one backend.
	Client() *mysql.Conn
}

// StateWriter is a Writer that passes session state information on to
// its client (CLIENT_SESSION_TRACK). SessionState is the information of
// the OK packet that passes on a backend's OK whose information is
// backend (nil when it has none): what the client's own trackers report,
// nil when there is nothing to report.
type StateWriter interface {
	SessionState(backend []byte) []byte
}

// TargetStateWriter is a Writer whose client's one OK for a statement
// that ran on several targets (fanout) reports what their OKs did: it is
// given each target's session state information as it arrives.
type TargetStateWriter interface {
	NoteTargetState(state []byte)
}

// ErrAnswered reports a statement whose ERR packet already reached the
// client (relayed from a backend): it failed, and nothing more is to be
// sent for it.
var ErrAnswered = errors.New("error already sent to the client")

// Engine holds what every execution needs: the backend nodes and the
// merge memory limit. It is safe for concurrent use.
type Engine struct {
	nodes map[string]*backend.Node
	// source, when set (SetNodeSource, before the engine is used),
	// returns the nodes in force: a reload may add nodes.
	source     func() map[string]*backend.Node
	mergeLimit int64
	// fallbackRows and fallbackBytes bound what one exact fallback copies.
	fallbackRows, fallbackBytes int64
	fallbackTime                time.Duration
	// mergeTotal is what every merge under way holds, bounded by
	// mergeTotalLimit (merge_memory_total).
	mergeTotal      atomic.Int64
	mergeTotalLimit int64
	// members returns the members of an ENUM or SET column (SetMembers).
	members func(db, table, column string) []string
}

// New returns an engine over nodes; mergeLimit bounds the bytes of rows
// one merge that cannot stream may hold (merge_memory_limit).
func New(nodes map[string]*backend.Node, mergeLimit, mergeTotalLimit int64) *Engine {
	return &Engine{nodes: nodes, mergeLimit: mergeLimit, mergeTotalLimit: mergeTotalLimit}
}

// SetNodeSource makes the engine look nodes up in the maps source returns
// (never changed once returned) instead of the map given to New: nodes
// may be added while it runs. Call it before the engine is used.
func (e *Engine) SetNodeSource(source func() map[string]*backend.Node) { e.source = source }

// SetMembers gives the engine the members of ENUM and SET columns, which
// a cross-shard HAVING needs to use their values as numbers (MariaDB
// uses the member's index): members returns them in order for column
// column of logical table db.table, nil when it does not know them.
func (e *Engine) SetMembers(members func(db, table, column string) []string) {
	e.members = members
}

// node returns the node named name (nil when there is none).
func (e *Engine) node(name string) *backend.Node {
	if e.source != nil {
		return e.source()[name]
	}
	return e.nodes[name]
}

// Executor runs plans for one client session. It is owned by the
// session's goroutine.
//
// It holds what every kind of plan shares (the session's connections and
// client, the statement being run, the statistics the caller reads, the
// scratch a COM_QUERY is built in) and runs a single-target statement
// itself (Forward, RunOn, with its relayer). Every other plan kind has a
// primitive of its own, built by Execute for one statement with a
// pointer back to the executor: concatenate, merger, fanout, loadData,
// gather and meta.
type Executor struct {
	eng   *Engine
	conns Conns
	w     Writer
	sql   string // the statement being run, for targets without SQL of their own
	qbuf  []byte // scratch for COM_QUERY packets
	// relay passes single-backend responses on to the client; it lives
	// in the executor, not built per statement, so that the point-select
	// path allocates nothing.
	relay relayer
	// tables are the logical tables of the plan being executed: column
	// definitions name them, not their subtables.
	tables []string
	// Rows counts the rows sent to the client and ErrCode is the code of
	// the last backend error relayed; the caller reads and resets them
	// (statement statistics).
	Rows    uint64
	ErrCode uint16
	// BeforeOK, when set, runs before the OK of a write on several
	// targets (DML, LOAD DATA) goes to the client; its error is answered
	// instead. The caller commits there the transaction the statement ran
	// in (transaction_mode xa).
	BeforeOK func() error
	// Victim, when set, returns the error a statement interrupted by the
	// deadlock detector ends with (nil when it was not chosen): a relayed
	// interruption (1317) goes to the client as that error instead.
	Victim func() *mysql.SQLError
	// Renumber and More are set while the statements of a split
	// multi-statement text run, each answered in turn to the one client
	// command: relayed packets are numbered after the responses before
	// them, and More is added to the server status of every packet that
	// ends a relayed response (SERVER_MORE_RESULTS_EXISTS while statements
	// are still to come; the proxy's own answers take it from the
	// Writer). The caller sets and clears them.
	Renumber bool
	More     uint16
	// DivPrecision, when set, is the session's div_precision_increment
	// (the decimals a division and AVG add; MariaDB's default 4 when nil).
	// The caller sets it for the statement.
	DivPrecision *int
	// capturing is set while Capture runs a plan: rows a target answers
	// go to the Writer as values, never relayed to the client.
	capturing bool
}

// NewExecutor returns an executor that takes connections from conns and
// answers through w.
func (e *Engine) NewExecutor(conns Conns, w Writer) *Executor {
	x := &Executor{eng: e, conns: conns, w: w}
	x.relay.x = x
	return x
}

// Execute runs a plan whose answer the proxy builds (several targets, or
// one answered by the proxy itself: SHOW TABLES, EXPLAIN) and answers the
// client. sql is the client's statement, sent to targets that carry no SQL
// of their own. Forward plans go through Forward, which relays the
// backend's answer as it is.
func (x *Executor) Execute(plan *router.Plan, sql string) error {
	x.sql, x.tables = sql, plan.Tables
	switch plan.Kind {
	case router.Concat:
		if plan.Merge != nil {
			return newMerger(x).run(plan)
		}
		return concatenate{x}.run(plan)
	case router.SumOK, router.Fanout:
		return fanout{x}.run(plan)
	case router.ShowTables:
		return meta{x}.showTables(plan)
	case router.ShowTableStatus:
		return meta{x}.showTableStatus(plan)
	case router.Explain:
		return meta{x}.explain(plan)
	case router.LoadSplit:
		return loadData{x}.run(plan)
	case router.Fallback:
		return (&gather{x: x}).run(plan)
	}
	return fmt.Errorf("plan kind %d not implemented", plan.Kind)
}

// queryPacket builds a COM_QUERY packet for sql in a buffer that is valid
// until the next call.
func (x *Executor) queryPacket(sql string) []byte {
	x.qbuf = append(append(x.qbuf[:0], mysql.ComQuery), sql...)
	return x.qbuf
}

// send borrows a connection to t's node and sends t's statement on it.
func (x *Executor) send(t *router.Target) (*backend.Conn, error) {
	bc, err := x.conns.Acquire(t.Node, false)
	if err != nil {
		return nil, err
	}
	q := t.SQL
	if q == "" {
		q = x.sql // the plan sends the client's text unchanged
	}
	bc.ResetSeq()
	if err := bc.WritePacket(x.queryPacket(q)); err == nil {
		err = bc.Flush()
	}
	if err != nil {
		bc.MarkBroken()
		x.conns.Release(bc, false, backend.Outcome{})
		return nil, backend.ErrLost(bc)
	}
	return bc, nil
}

// collect runs a target whose result is small and returns it whole.
func (x *Executor) collect(t *router.Target) (*backend.Result, error) {
	bc, err := x.send(t)
	if err != nil {
		return nil, err
	}
	res, more, err := bc.ReadResult()
	for err == nil && more {
		_, more, err = bc.ReadResult()
	}
	var o backend.Outcome
	if err == nil && res != nil {
		o = backend.Outcome{OK: true, Status: res.OK.Status}
	}
	x.conns.Release(bc, false, o)
	return res, err
}

// SetFallbackLimits bounds the rows and bytes one exact fallback copies,
// and the time it takes (0: no bound).
func (e *Engine) SetFallbackLimits(rows, bytes int64, d time.Duration) {
	e.fallbackRows, e.fallbackBytes, e.fallbackTime = rows, bytes, d
}
