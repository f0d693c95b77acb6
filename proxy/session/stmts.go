package session

import (
	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/router"
)

// Stmts are the prepared statements of a session: binary ones
// (COM_STMT_PREPARE) by id, from StmtBase up, and the SQL-level ones the
// proxy runs itself (PREPARE name FROM ...) by lower-case name.
type Stmts struct {
	byID   map[uint32]*Stmt
	nextID uint32
	byName map[string]string
	bytes  int // text held by byID and byName, bounded by MaxStmtBytes
}

// Stmt is one binary prepared statement of the session. Its id is always
// the proxy's: no id a client sends ever reaches a backend unmapped, so no
// client can name a statement another session prepared on a pooled
// connection. It is one of:
//   - a statement the proxy routes at each execution (on sharded tables,
//     or any that leaves no state on its connection);
//   - a statement the proxy runs itself (Local: BEGIN, COMMIT, KILL, ...);
//   - a statement the backend keeps (Conn set): one that leaves state on
//     its connection, which the session keeps; BackendID is its id there.
type Stmt struct {
	ID    uint32
	SQL   string
	Local bool
	// UsesIDs is set when the statement calls LAST_INSERT_ID() or
	// CONNECTION_ID(): the connection it runs on gets the session's.
	UsesIDs bool
	// Once: the backend closes the statement after each execution (see
	// cacheable in proxy/server).
	Once bool
	// Conn and BackendID locate a statement the backend keeps.
	Conn      *backend.Conn
	BackendID uint32
	NParams   int
	Types     []byte   // parameter types bound by the last execution
	Long      [][]byte // COM_STMT_SEND_LONG_DATA per parameter, until the next execution
	HasLong   []bool
	LongSize  int // bytes of long data received since the last execution; -1 once a parameter's passed max_allowed_packet, -2 once packet_memory_total could not hold more
	// Order maps the placeholders of the targets' restored SQL to the
	// client's (router.PlaceholderOrder), nil when they are in the
	// client's order; Ordered says it has been computed.
	Order   []int
	Ordered bool
	// Offsets are the placeholders' byte offsets in SQL, for executions
	// whose values are inlined (router.MarkerOffsets under OffsetsMode,
	// the sql_mode reading that found them); nil until needed.
	Offsets     []int
	OffsetsMode uint8
	// Class is router.Classify(SQL), computed at the first execution
	// that asks (Classified), for the read/write split.
	Class      router.Stmt
	Classified bool
	// Cursor is the connection holding the statement's open cursor, and
	// CursorID the statement's id there.
	Cursor   *backend.Conn
	CursorID uint32
}

// StmtBase is the first id the proxy gives a statement (backend ids are
// small per-connection counters, so the two never look alike).
const StmtBase = 1 << 31

// MaxStmts is the largest max_prepared_stmt_count MariaDB accepts, a
// bound per session whatever the configuration; the server applies the
// configured caps (max_prepared_stmt_count, max_prepared_stmt_total)
// before Add and SetNamed.
const MaxStmts = 1 << 20

// erMaxPreparedStmtCount is ER_MAX_PREPARED_STMT_COUNT_REACHED.
const erMaxPreparedStmtCount = 1461

func errTooManyStmts() error {
	return mysql.NewError(erMaxPreparedStmtCount, "Can't create more than max_prepared_stmt_count statements (current value: %d)", MaxStmts)
}

// MaxStmtBytes bounds the text of the prepared statements one session
// keeps (binary and SQL-level together): 16 382 statements of 64 MiB each
// would otherwise be allowed.
const MaxStmtBytes = 64 << 20

func errStmtBytes() error {
	return mysql.NewError(erMaxPreparedStmtCount, "Can't create more than max_prepared_stmt_count statements: the session's prepared statements would hold more than %d MiB of text", MaxStmtBytes>>20)
}

// Add registers a binary prepared statement and gives it an id.
func (t *Stmts) Add(sql string, nparams int) (*Stmt, error) {
	if len(t.byID) >= MaxStmts {
		return nil, errTooManyStmts()
	}
	if t.bytes+len(sql) > MaxStmtBytes {
		return nil, errStmtBytes()
	}
	t.bytes += len(sql)
	if t.byID == nil {
		t.byID = make(map[uint32]*Stmt)
		t.nextID = StmtBase
	}
	ps := &Stmt{ID: t.nextID, SQL: sql, NParams: nparams}
	t.nextID++
	t.byID[ps.ID] = ps
	return ps, nil
}

// Get returns the statement with id, or nil when the id is not one of the
// proxy's.
func (t *Stmts) Get(id uint32) *Stmt {
	if id < StmtBase {
		return nil
	}
	return t.byID[id]
}

// Close forgets a binary prepared statement.
func (t *Stmts) Close(id uint32) {
	if ps := t.byID[id]; ps != nil {
		t.bytes -= len(ps.SQL)
		delete(t.byID, id)
	}
}

// Named returns the text of the SQL-level prepared statement name.
func (t *Stmts) Named(name string) (string, bool) {
	text, ok := t.byName[name]
	return text, ok
}

// SetNamed keeps text as SQL-level prepared statement name.
func (t *Stmts) SetNamed(name, text string) error {
	if t.byName == nil {
		t.byName = make(map[string]string)
	}
	old, ok := t.byName[name]
	if !ok && len(t.byName) >= MaxStmts {
		return errTooManyStmts()
	}
	if t.bytes-len(old)+len(text) > MaxStmtBytes {
		return errStmtBytes()
	}
	t.bytes += len(text) - len(old)
	t.byName[name] = text
	return nil
}

// DropNamed forgets SQL-level prepared statement name; it reports whether
// it was the proxy's.
func (t *Stmts) DropNamed(name string) bool {
	old, ok := t.byName[name]
	t.bytes -= len(old)
	delete(t.byName, name)
	return ok
}

// Room returns the error a client gets when the session holds as many
// statements as it may, else nil.
func (t *Stmts) Room() error {
	if len(t.byID) >= MaxStmts {
		return errTooManyStmts()
	}
	return nil
}

// Len is the number of prepared statements the session keeps, binary and
// SQL-level.
func (t *Stmts) Len() int { return len(t.byID) + len(t.byName) }

// ClearLong forgets the long data sent for the next execution; it returns
// the bytes it held.
func (st *Stmt) ClearLong() (held int) {
	held = max(st.LongSize, 0)
	st.Long, st.HasLong, st.LongSize = nil, nil, 0
	return held
}
