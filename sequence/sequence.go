package sequence

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/mysql"
)

// SchemaVersion is the version of the sidecar's tables this proxy writes.
// A sidecar with a higher version belongs to a newer proxy: Init refuses
// it rather than write tables it does not know.
const SchemaVersion = 1

// Sidecar is the sidecar database on one backend node: state that every
// proxy sharing it must agree on. It talks to the node over one connection
// of its own (outside the pool, so its state never reaches a client),
// dialed on first use and again after it breaks.
type Sidecar struct {
	node *backend.Node
	db   string

	mu     sync.Mutex
	conn   *backend.Conn
	inited bool
}

// NewSidecar returns the sidecar database db on node. Nothing is done on
// the node until the first use.
func NewSidecar(node *backend.Node, db string) *Sidecar {
	return &Sidecar{node: node, db: db}
}

// Close closes the sidecar's connection.
func (s *Sidecar) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil {
		s.conn.Close()
		s.conn = nil
	}
}

// exec runs one statement on the sidecar connection, dialing it (and
// creating the sidecar's tables) first when needed. s.mu must be held.
func (s *Sidecar) exec(ctx context.Context, sql string) (*backend.Result, error) {
	if s.conn == nil || s.conn.Broken() {
		if s.conn != nil {
			s.conn.Close()
			s.conn = nil
		}
		c, err := s.node.Dial(ctx)
		if err != nil {
			return nil, fmt.Errorf("sidecar on node %s: %w", s.node.Name, err)
		}
		s.conn = c
		if !s.inited {
			if err := s.init(); err != nil {
				return nil, err
			}
			s.inited = true
		}
	}
	res, err := s.conn.Exec(sql)
	if err != nil {
		return nil, fmt.Errorf("sidecar on node %s: %w", s.node.Name, err)
	}
	return res, nil
}

// init creates the sidecar database and its tables when missing, records
// the schema version, and refuses a sidecar written by a newer proxy.
func (s *Sidecar) init() error {
	db := "`" + s.db + "`"
	for _, q := range []string{
		"CREATE DATABASE IF NOT EXISTS " + db,
		"CREATE TABLE IF NOT EXISTS " + db + ".sidecar_version (id TINYINT UNSIGNED NOT NULL PRIMARY KEY, version INT UNSIGNED NOT NULL) ENGINE=InnoDB",
		"INSERT IGNORE INTO " + db + ".sidecar_version VALUES (1, " + strconv.Itoa(SchemaVersion) + ")",
		"CREATE TABLE IF NOT EXISTS " + db + ".sequences (name VARCHAR(192) NOT NULL PRIMARY KEY, next_id BIGINT UNSIGNED NOT NULL, " +
			"updated TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP) ENGINE=InnoDB",
	} {
		if _, err := s.conn.Exec(q); err != nil {
			return fmt.Errorf("sidecar on node %s: creating %s: %w", s.node.Name, s.db, err)
		}
	}
	res, err := s.conn.Exec("SELECT version FROM " + db + ".sidecar_version WHERE id = 1")
	if err != nil {
		return fmt.Errorf("sidecar on node %s: %w", s.node.Name, err)
	}
	if len(res.Rows) != 1 || len(res.Rows[0]) != 1 {
		return fmt.Errorf("sidecar on node %s: %s.sidecar_version has no version row", s.node.Name, s.db)
	}
	v, err := strconv.Atoi(string(res.Rows[0][0]))
	if err != nil || v > SchemaVersion {
		return fmt.Errorf("sidecar on node %s: %s has schema version %s; this proxy knows versions up to %d (upgrade the proxy)",
			s.node.Name, s.db, res.Rows[0][0], SchemaVersion)
	}
	return nil
}

// reserve takes n values of sequence name: the block [first, first+n).
// A sequence seen for the first time is created starting at start().
func (s *Sidecar) reserve(ctx context.Context, name string, n uint64, start func() (uint64, error)) (first uint64, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	upd := "UPDATE `" + s.db + "`.sequences SET next_id = LAST_INSERT_ID(next_id + " + strconv.FormatUint(n, 10) +
		") WHERE name = " + quote(name)
	for try := 0; try < 2; try++ {
		res, err := s.exec(ctx, upd)
		if err != nil {
			return 0, err
		}
		if res.OK.AffectedRows == 1 {
			end := res.OK.LastInsertID
			if end < n {
				return 0, fmt.Errorf("sidecar on node %s: sequence %s answered next_id %d for a block of %d", s.node.Name, name, end, n)
			}
			return end - n, nil
		}
		if try == 1 {
			break
		}
		// No row yet: create it past every value already stored, then
		// reserve again (INSERT IGNORE: another proxy may win the race).
		v, err := start()
		if err != nil {
			return 0, fmt.Errorf("sequence %s: finding its first value: %w", name, err)
		}
		if _, err := s.exec(ctx, "INSERT IGNORE INTO `"+s.db+"`.sequences (name, next_id) VALUES ("+quote(name)+", "+
			strconv.FormatUint(max(v, 1), 10)+")"); err != nil {
			return 0, err
		}
	}
	return 0, fmt.Errorf("sidecar on node %s: sequence %s could not be created", s.node.Name, name)
}

// advance moves sequence name's next value to at least next. A sequence
// not created yet needs nothing: it starts past the stored values.
func (s *Sidecar) advance(ctx context.Context, name string, next uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, err := s.exec(ctx, "UPDATE `"+s.db+"`.sequences SET next_id = GREATEST(next_id, "+strconv.FormatUint(next, 10)+
		") WHERE name = "+quote(name))
	return err
}

// quote writes a name as an SQL string literal that reads the same under
// every sql_mode (names are database.table, which the config restricts,
// but a quote or backslash is written in hex all the same).
func quote(s string) string {
	if strings.ContainsAny(s, "\\'\x00") {
		return fmt.Sprintf("X'%x'", s)
	}
	return "'" + s + "'"
}

// Sequence is one global sequence, handing out values from the block it
// holds and reserving the next block when that is used up.
type Sequence struct {
	sc    *Sidecar
	name  string
	block uint64
	start func() (uint64, error)

	mu        sync.Mutex
	next, end uint64 // the block in hand: [next, end)
}

// New returns the sequence name kept in sc, reserving block values at a
// time (more when one request needs more). start gives the first value
// when the sequence does not exist yet: one past the largest value stored
// in the column it fills.
func New(sc *Sidecar, name string, block int, start func() (uint64, error)) *Sequence {
	return &Sequence{sc: sc, name: name, block: uint64(max(block, 1)), start: start}
}

// ErrExhausted is returned when a sequence passes the largest BIGINT.
var ErrExhausted = mysql.NewError(mysql.ErAutoincReadFailed, "Failed to read auto-increment value from storage engine (the global sequence is exhausted)")

// Next fills ids with the next values, in increasing order. A failure to
// reserve leaves ids unspecified and the sequence usable.
func (q *Sequence) Next(ctx context.Context, ids []uint64) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i := range ids {
		if q.next == q.end {
			n := max(q.block, uint64(len(ids)-i))
			first, err := q.sc.reserve(ctx, q.name, n, q.start)
			if err != nil {
				return err
			}
			if first+n < first || first+n > 1<<63-1 {
				return ErrExhausted
			}
			q.next, q.end = first, first+n
		}
		ids[i] = q.next
		q.next++
	}
	return nil
}

// Advance moves the sequence past an explicit value stored in its column
// (sequence_advance): the sidecar's next value becomes at least past+1, and
// the values of the block in hand up to past are skipped.
func (q *Sequence) Advance(ctx context.Context, past uint64) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if past < q.next {
		return nil // below what this proxy hands out next; the sidecar is past its block
	}
	if err := q.sc.advance(ctx, q.name, past+1); err != nil {
		return err
	}
	if past < q.end {
		q.next = past + 1
	} else {
		q.next = q.end // the next reservation starts past it
	}
	return nil
}

// Set is the sequences of a proxy, by logical table.
type Set struct {
	sc   *Sidecar
	seqs map[string]*Sequence // "db.table"
}

// NewSet returns an empty set of sequences kept in sc.
func NewSet(sc *Sidecar) *Set { return &Set{sc: sc, seqs: map[string]*Sequence{}} }

// Add registers the sequence of logical table db.table; see New.
func (s *Set) Add(db, table string, block int, start func() (uint64, error)) {
	name := db + "." + table
	s.seqs[name] = New(s.sc, name, block, start)
}

// NextIDs implements router.IDSource.
func (s *Set) NextIDs(db, table string, ids []uint64) error {
	q := s.seqs[db+"."+table]
	if q == nil {
		return mysql.NewError(mysql.ErUnknownError, "shardgate has no sequence for %s.%s", db, table)
	}
	if err := q.Next(context.Background(), ids); err != nil {
		var se *mysql.SQLError
		if errors.As(err, &se) && se.Code == mysql.ErAutoincReadFailed {
			return err
		}
		return mysql.NewError(mysql.ErAutoincReadFailed, "Failed to read auto-increment value from storage engine: global sequence %s: %v", q.name, err)
	}
	return nil
}

// Advance moves the sequence of logical table db.table past an explicit
// value (Sequence.Advance).
func (s *Set) Advance(db, table string, past uint64) error {
	q := s.seqs[db+"."+table]
	if q == nil {
		return nil
	}
	return q.Advance(context.Background(), past)
}
