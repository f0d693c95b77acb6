package sequence

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/sidecar"
)

// Sidecar is the sidecar database sequences are kept in.
type Sidecar = sidecar.Sidecar

// NewSidecar returns the sidecar database db on node (sidecar.New).
func NewSidecar(node *backend.Node, db string) *Sidecar { return sidecar.New(node, db) }

// tables is the sequences' table in the sidecar, one row per sequence:
// its name (database.table) and next free value.
var tables = &sidecar.Component{Name: "sequence", Migrations: [][]string{
	{"CREATE TABLE IF NOT EXISTS sequences (name VARCHAR(192) NOT NULL PRIMARY KEY, next_id BIGINT UNSIGNED NOT NULL, " +
		"updated TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP) ENGINE=InnoDB"},
}}

// reserve takes n values of the sequence: the block [first, first+n).
// A sequence seen for the first time is created starting at q.start().
func (q *Sequence) reserve(ctx context.Context, n uint64) (first uint64, err error) {
	name := mysql.QuoteString(q.name, "utf8mb4")
	upd := "UPDATE " + q.sc.Table("sequences") + " SET next_id = LAST_INSERT_ID(next_id + " + strconv.FormatUint(n, 10) +
		") WHERE name = " + name
	for try := 0; try < 2; try++ {
		res, err := q.sc.Exec(ctx, tables, upd)
		if err != nil {
			return 0, err
		}
		if res.OK.AffectedRows == 1 {
			end := res.OK.LastInsertID
			if end < n {
				return 0, fmt.Errorf("sidecar %s: sequence %s answered next_id %d for a block of %d", q.sc.DB(), q.name, end, n)
			}
			return end - n, nil
		}
		if try == 1 {
			break
		}
		// No row yet: create it past every value already stored, then
		// reserve again (INSERT IGNORE: another proxy may win the race).
		v, err := q.start()
		if err != nil {
			return 0, fmt.Errorf("sequence %s: finding its first value: %w", q.name, err)
		}
		if _, err := q.sc.Exec(ctx, tables, "INSERT IGNORE INTO "+q.sc.Table("sequences")+" (name, next_id) VALUES ("+name+", "+
			strconv.FormatUint(max(v, 1), 10)+")"); err != nil {
			return 0, err
		}
	}
	return 0, fmt.Errorf("sidecar %s: sequence %s could not be created", q.sc.DB(), q.name)
}

// advance moves the sequence's next value in the sidecar to at least
// next. A sequence not created yet needs nothing: it starts past the
// stored values.
func (q *Sequence) advance(ctx context.Context, next uint64) error {
	_, err := q.sc.Exec(ctx, tables, "UPDATE "+q.sc.Table("sequences")+" SET next_id = GREATEST(next_id, "+strconv.FormatUint(next, 10)+
		") WHERE name = "+mysql.QuoteString(q.name, "utf8mb4"))
	return err
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
			first, err := q.reserve(ctx, n)
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

// Peek fills ids with the values Next would hand out now, taking none: what
// is left of the block in hand, then the sidecar's next value on (for a
// sequence not created yet, the value it would start at). EXPLAIN shows
// them; another session or proxy may take them first.
func (q *Sequence) Peek(ctx context.Context, ids []uint64) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	i := 0
	for v := q.next; i < len(ids) && v < q.end; v++ {
		ids[i] = v
		i++
	}
	if i == len(ids) {
		return nil
	}
	next, err := q.stored(ctx)
	if err != nil {
		return err
	}
	for ; i < len(ids); i++ {
		ids[i] = next
		next++
	}
	return nil
}

// stored returns the next value the sidecar would reserve, reading it
// without changing anything (reserve's first value of a new block).
func (q *Sequence) stored(ctx context.Context) (uint64, error) {
	res, err := q.sc.Read(ctx, tables, "SELECT next_id FROM "+q.sc.Table("sequences")+" WHERE name = "+mysql.QuoteString(q.name, "utf8mb4"))
	if err != nil {
		return 0, err
	}
	if len(res.Rows) == 1 && len(res.Rows[0]) == 1 && res.Rows[0][0] != nil {
		return strconv.ParseUint(string(res.Rows[0][0]), 10, 64)
	}
	v, err := q.start()
	if err != nil {
		return 0, fmt.Errorf("sequence %s: finding its first value: %w", q.name, err)
	}
	return max(v, 1), nil
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
	if err := q.advance(ctx, past+1); err != nil {
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

// PeekIDs fills ids with the values NextIDs would give next, taking none
// (Sequence.Peek): router.IDPeeker, for EXPLAIN.
func (s *Set) PeekIDs(db, table string, ids []uint64) error {
	q := s.seqs[db+"."+table]
	if q == nil {
		return mysql.NewError(mysql.ErUnknownError, "shardgate has no sequence for %s.%s", db, table)
	}
	if err := q.Peek(context.Background(), ids); err != nil {
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
