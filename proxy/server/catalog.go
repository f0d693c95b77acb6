package server

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"go.uber.org/zap"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/router"
	"github.com/shardgate/shardgate/schema"
	"github.com/shardgate/shardgate/sequence"
)

// tables is what the proxy knows of the logical tables its rules name:
// their definitions (read from every subtable, compared for drift), and
// the global sequences of the rules that have one.
type tables struct {
	srv     *Server
	catalog *schema.Catalog
	infos   map[schema.Key]router.TableInfo // under mu once built: a cutover replaces entries
	sidecar *sequence.Sidecar               // nil without sequences
	seqs    *sequence.Set

	loadMu sync.Mutex     // one load of the definitions at a time
	bg     sync.WaitGroup // the start-up load, waited for by close

	mu    sync.Mutex
	drift map[schema.Key][]string // differences between a table's subtables
}

func newTables(s *Server) *tables {
	t := &tables{srv: s, catalog: schema.NewCatalog(), infos: map[schema.Key]router.TableInfo{}, drift: map[schema.Key][]string{}}
	for _, ti := range s.rt().Tables() {
		t.infos[schema.KeyOf(ti.DB, ti.Table)] = ti
	}
	if s.cfg().Sequences() {
		t.sidecar = sequence.NewSidecar(s.nodes[s.cfg().Sidecar.Node], s.cfg().Sidecar.DB)
		t.seqs = sequence.NewSet(t.sidecar)
		for _, ti := range t.infos {
			if ti.Sequence != "" {
				key := schema.KeyOf(ti.DB, ti.Table)
				t.seqs.Add(ti.DB, ti.Table, ti.SequenceBlock, func() (uint64, error) {
					cur, _ := t.info(key) // the subtables in force
					return t.sequenceStart(cur)
				})
			}
		}
	}
	return t
}

// start reads every definition in the background.
func (t *tables) start() {
	t.bg.Add(1)
	go func() {
		defer t.bg.Done()
		t.loadAll()
	}()
}

// close waits for the start-up load and releases the sidecar connection.
func (t *tables) close() {
	t.bg.Wait()
	if t.sidecar != nil {
		t.sidecar.Close()
	}
}

// Columns implements router.Catalog.
func (t *tables) Columns(db, table string) ([]string, bool) {
	tb := t.catalog.Table(db, table)
	if tb == nil {
		return nil, false
	}
	return tb.Names(), true
}

// Knows implements router.TableKnower: whether the definition of db.table
// has been read.
func (t *tables) Knows(db, table string) bool {
	return t.catalog.Table(db, table) != nil
}

// ids is the session's router.IDSource: nil without sequences.
// probeIDs stands in for the sequences where a plan is made only to be
// looked at (the metadata of a prepared statement, the choice of how to
// run an execution): it takes no values, and gives 0.
type probeIDs struct{}

func (probeIDs) NextIDs(_, _ string, ids []uint64) error {
	clear(ids)
	return nil
}

// info returns the table with a rule under key.
func (t *tables) info(key schema.Key) (router.TableInfo, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ti, ok := t.infos[key]
	return ti, ok
}

// members returns the members of ENUM or SET column column of logical
// table db.table, from its definition (nil when not known): the merge's
// HAVING uses them as numbers, as MariaDB does.
func (t *tables) members(db, table, column string) []string {
	if c := t.column(db, table, column); c != nil {
		return c.Members()
	}
	return nil
}

// column returns column of logical table db.table as the proxy read it,
// nil when it does not know the table or the column.
func (t *tables) column(db, table, column string) *schema.Column {
	tb := t.catalog.Table(db, table)
	if tb == nil {
		return nil
	}
	i, ok := tb.Column(column)
	if !ok {
		return nil
	}
	return &tb.Columns[i]
}

// infoList lists the tables with rules.
func (t *tables) infoList() []router.TableInfo {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]router.TableInfo, 0, len(t.infos))
	for _, ti := range t.infos {
		out = append(out, ti)
	}
	return out
}

// ruleChanged takes the subtables of db.table from rt (a cutover put a new
// rule in force) and reads its definition from them.
func (t *tables) ruleChanged(rt *router.Router, db, table string) {
	for _, ti := range rt.Tables() {
		if ti.DB == db && ti.Table == table {
			t.mu.Lock()
			t.infos[schema.KeyOf(db, table)] = ti
			t.mu.Unlock()
			if err := t.load(ti); err != nil {
				t.srv.log.Warn("reading a table's definition after a cutover failed", zap.String("table", db+"."+table), zap.Error(err))
			}
		}
	}
}

// loadAll reads the definition of every table with a rule. Tables that do
// not exist yet are skipped (they are read when created through the proxy
// or first needed).
func (t *tables) loadAll() {
	for _, ti := range t.infoList() {
		if err := t.load(ti); err != nil {
			t.srv.log.Warn("reading a table's definition failed", zap.String("table", ti.DB+"."+ti.Table), zap.Error(err))
		}
	}
}

// refresh reads again the definitions of the tables with rules named
// (logical names, any database): after DDL through the proxy.
func (t *tables) refresh(names []string) {
	for _, ti := range t.infoList() {
		for _, n := range names {
			if n == ti.Table {
				if err := t.load(ti); err != nil {
					t.srv.log.Warn("reading a table's definition after DDL failed", zap.String("table", ti.DB+"."+ti.Table), zap.Error(err))
				}
			}
		}
	}
}

// loadNamed reads the definition of db.table when a rule names it; it
// reports whether the catalog knows the table afterwards.
func (t *tables) loadNamed(db, table string) bool {
	ti, ok := t.info(schema.KeyOf(db, table))
	if !ok {
		return false
	}
	if err := t.load(ti); err != nil {
		t.srv.log.Warn("reading a table's definition failed", zap.String("table", db+"."+table), zap.Error(err))
	}
	return t.catalog.Table(db, table) != nil
}

// load reads every subtable of ti, stores the first definition found as
// the logical table's, and records (and logs) how the others differ from
// it. A table no subtable has is dropped from the catalog.
func (t *tables) load(ti router.TableInfo) error {
	t.loadMu.Lock()
	defer t.loadMu.Unlock()
	var first *schema.Table
	var firstAt string
	var drift []string
	var errs []error
	missing := 0
	for _, sub := range ti.Subtables {
		tb, err := t.readSubtable(sub.Node, ti.DB, sub.Subtable, ti.Table)
		where := sub.Node + " " + sub.Subtable
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
		case tb == nil:
			missing++
		case first == nil:
			first, firstAt = tb, where
		default:
			for _, d := range schema.Diff(first, tb) {
				drift = append(drift, fmt.Sprintf("%s against %s: %s", where, firstAt, strings.ReplaceAll(strings.ReplaceAll(d, "the first", firstAt), "the second", where)))
			}
		}
	}
	if missing > 0 && first != nil {
		drift = append(drift, fmt.Sprintf("%d of %d subtables do not exist", missing, len(ti.Subtables)))
	}
	key := schema.KeyOf(ti.DB, ti.Table)
	t.mu.Lock()
	if len(drift) > 0 {
		t.drift[key] = drift
	} else {
		delete(t.drift, key)
	}
	t.mu.Unlock()
	if len(drift) > 0 {
		t.srv.log.Warn("subtables of a sharded table differ", zap.String("table", ti.DB+"."+ti.Table), zap.Strings("differences", drift))
	}
	switch {
	case first != nil:
		t.catalog.Put(first)
	case len(errs) == 0:
		t.catalog.Drop(ti.DB, ti.Table)
	}
	return errors.Join(errs...)
}

// driftReport returns the differences between subtables found by the
// last reads, by table.
func (t *tables) driftReport() map[string][]string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string][]string, len(t.drift))
	for k, d := range t.drift {
		out[k.DB+"."+k.Table] = d
	}
	return out
}

// readSubtable reads one physical table's definition on node.
func (t *tables) readSubtable(node, db, sub, logical string) (*schema.Table, error) {
	var tb *schema.Table
	err := t.srv.onNode(node, func(c *backend.Conn) error {
		var err error
		tb, err = schema.Read(connQuerier{c}, db, sub, logical)
		return err
	})
	return tb, err
}

// sequenceStart is the first value of ti's sequence when it is created:
// one past the largest value its column holds in any subtable, and at
// least the subtables' own AUTO_INCREMENT counters (a table created with
// AUTO_INCREMENT=1000000, or restored from a dump, starts where it says).
func (t *tables) sequenceStart(ti router.TableInfo) (uint64, error) {
	var top uint64
	for _, sub := range ti.Subtables {
		err := t.srv.onNode(sub.Node, func(c *backend.Conn) error {
			res, err := c.Exec("SELECT AUTO_INCREMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = " +
				mysql.QuoteString(ti.DB, "utf8mb4") + " AND TABLE_NAME = " + mysql.QuoteString(sub.Subtable, "utf8mb4"))
			if err != nil {
				return err
			}
			if len(res.Rows) == 1 && len(res.Rows[0]) == 1 && res.Rows[0][0] != nil {
				if v, err := strconv.ParseUint(string(res.Rows[0][0]), 10, 64); err == nil && v > 1 && v-1 > top {
					top = v - 1
				}
			}
			return nil
		})
		if err != nil {
			return 0, fmt.Errorf("%s %s: %w", sub.Node, sub.Subtable, err)
		}
		err = t.srv.onNode(sub.Node, func(c *backend.Conn) error {
			res, err := c.Exec("SELECT MAX(" + mysql.QuoteIdent(ti.Sequence) + ") FROM " + mysql.QuoteIdent(ti.DB) + "." + mysql.QuoteIdent(sub.Subtable))
			if err != nil {
				var se *mysql.SQLError
				if errors.As(err, &se) && se.Code == 1146 { // ER_NO_SUCH_TABLE: nothing stored there
					return nil
				}
				return err
			}
			if len(res.Rows) == 1 && len(res.Rows[0]) == 1 && res.Rows[0][0] != nil {
				v, err := strconv.ParseInt(string(res.Rows[0][0]), 10, 64)
				if err != nil {
					return fmt.Errorf("largest %s in %s is %q", ti.Sequence, sub.Subtable, res.Rows[0][0])
				}
				if v > 0 && uint64(v) > top {
					top = uint64(v)
				}
			}
			return nil
		})
		if err != nil {
			return 0, fmt.Errorf("%s %s: %w", sub.Node, sub.Subtable, err)
		}
	}
	return top + 1, nil
}

// onNode runs f on a connection of its own to node (outside the pool: the
// proxy's own reads leave nothing for a client to find), closed after.
func (s *Server) onNode(node string, f func(c *backend.Conn) error) error {
	n := s.node(node)
	if n == nil {
		return fmt.Errorf("no node %s", node)
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg().Backend.CommandTimeout+s.cfg().Backend.DialTimeout)
	defer cancel()
	c, err := n.Dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	return f(c)
}

// connQuerier is a schema.Querier over a backend connection.
type connQuerier struct{ c *backend.Conn }

func (q connQuerier) Query(sql string) ([][][]byte, error) {
	res, err := q.c.Exec(sql)
	if err != nil {
		return nil, err
	}
	return res.Rows, nil
}

// Numeric implements router.ColumnTyper: whether db.table's column holds
// numbers (integers, decimals, floats, BIT, YEAR).
func (t *tables) Numeric(db, table, column string) bool {
	c := t.column(db, table, column)
	if c == nil {
		return false
	}
	typ := strings.ToLower(c.Type)
	for _, p := range []string{"tinyint", "smallint", "mediumint", "int", "bigint", "decimal", "float", "double", "bit", "year"} {
		if strings.HasPrefix(typ, p) {
			return true
		}
	}
	return false
}

// Integer implements router.IntegerTyper: whether a column of a table the
// proxy has read is of an integer type (a string compared with it routes
// by the number MariaDB converts it to).
func (t *tables) Integer(db, table, column string) bool {
	c := t.column(db, table, column)
	if c == nil {
		return false
	}
	switch c.DataType() {
	case "tinyint", "smallint", "mediumint", "int", "integer", "bigint":
		return true
	}
	return false
}

// IntegerKey implements router.KeyTyper for the result cache: column is
// an integer column that is by itself the primary key (primary) or a
// unique key of logical table db.table, as its definition says.
func (t *tables) IntegerKey(db, table, column string) (primary, ok bool) {
	tb := t.catalog.Table(db, table)
	if tb == nil || !t.Integer(db, table, column) {
		return false, false
	}
	i, _ := tb.Column(column)
	pri := 0
	for _, c := range tb.Columns {
		if c.Key == "PRI" {
			pri++
		}
	}
	switch tb.Columns[i].Key {
	case "PRI":
		return true, pri == 1
	case "UNI":
		return false, true
	}
	return false, false
}
