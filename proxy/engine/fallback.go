package engine

import (
	"encoding/binary"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/router"
)

// gather runs the exact fallback of a read the shards cannot answer
// together (a Fallback plan): on one connection to the plan's node it
// gathers each sharded table the statement reads into a temporary table
// and runs the rewritten statement there, as one server holding all the
// rows would. It owns, for one statement, that connection's temporary
// tables (dropped before the connection goes back) and the copy's
// bounds: the rows and bytes copied so far against fallback_max_rows and
// fallback_max_bytes, and the time since start against fallback_max_time.
// A gather is built per statement.
type gather struct {
	x     *Executor
	start time.Time // when the copy began
	// rows and bytes are what the copy has taken so far.
	rows, bytes int64
	// table is the logical table being copied, for the limits' errors.
	table string
}

// run runs a Fallback plan: on one connection to the default node (the
// session's own when it holds one there, as in a transaction, so the copy
// reads what the transaction reads) it creates a temporary table per
// gathered table, with the columns of its first subtable, copies every
// subtable's rows into it, runs the rewritten statement and relays its
// result (column definitions naming the logical tables), then drops the
// temporary tables. Whatever happens, the connection goes back without
// the temporary tables, or broken.
func (g *gather) run(plan *router.Plan) error {
	x := g.x
	return g.withTables(plan, true, func(bc *backend.Conn) (backend.Outcome, error) {
		t := &plan.Targets[0]
		if !x.w.TextRows() {
			return g.binary(bc, g.bounded(t.SQL))
		}
		x.conns.Running(bc)
		defer x.conns.Running(nil)
		bc.ResetSeq()
		err := bc.WritePacket(x.queryPacket(g.bounded(t.SQL)))
		if err == nil {
			err = bc.Flush()
		}
		if err != nil {
			bc.MarkBroken()
			return backend.Outcome{}, backend.ErrLost(bc)
		}
		first, _, err := bc.PeekPacket()
		if err != nil {
			bc.MarkBroken()
			return backend.Outcome{}, backend.ErrLost(bc)
		}
		if first == mysql.ErrHeader {
			p, err := bc.ReadPacket()
			if err != nil {
				bc.MarkBroken()
				return backend.Outcome{}, backend.ErrLost(bc)
			}
			e := mysql.ParseErr(p)
			return backend.Outcome{}, &mysql.SQLError{Code: e.Code, State: e.State, Message: strings.ReplaceAll(e.Message, router.FallbackSuffix, "")}
		}
		if first == mysql.OKHeader {
			return g.ok(bc) // SELECT ... INTO @variables over the copy
		}
		res, err := concatenate{x}.one(bc, true)
		if err != nil {
			bc.MarkBroken()
			return backend.Outcome{}, err
		}
		if !res.OK {
			return res, ErrAnswered
		}
		return res, x.w.End(res.Warnings)
	})
}

// ok answers the OK that ended a fallback's statement (one that assigns
// variables rather than returning rows).
func (g *gather) ok(bc *backend.Conn) (backend.Outcome, error) {
	p, err := bc.ReadPacket()
	if err != nil {
		bc.MarkBroken()
		return backend.Outcome{}, backend.ErrLost(bc)
	}
	ok, _, err := bc.ParseOK(p)
	if err != nil {
		bc.MarkBroken()
		return backend.Outcome{}, backend.ErrLost(bc)
	}
	var res backend.Outcome
	res.SetInfo(p)
	ok.LastInsertID = 0
	return res, g.x.w.OK(ok)
}

// binary runs a fallback's statement for a binary-protocol client as a
// prepared statement of bc, so its rows come in the server's own binary
// form (not converted from text), and closes it.
func (g *gather) binary(bc *backend.Conn, q string) (backend.Outcome, error) {
	x := g.x
	st, err := bc.Prepare(q)
	if err != nil {
		if bc.Broken() {
			return backend.Outcome{}, backend.ErrLost(bc)
		}
		se := mysql.AsSQLError(err)
		return backend.Outcome{}, &mysql.SQLError{Code: se.Code, State: se.State, Message: strings.ReplaceAll(se.Message, router.FallbackSuffix, "")}
	}
	defer func() {
		if ferr := bc.Forget(q); ferr != nil {
			bc.MarkBroken()
		}
	}()
	if len(st.Params) != 0 {
		return backend.Outcome{}, mysql.NewError(mysql.ErNotSupported, "a copied read with parameters is not supported")
	}
	exec := []byte{mysql.ComStmtExecute, 0, 0, 0, 0, 0, 1, 0, 0, 0}
	binary.LittleEndian.PutUint32(exec[1:], st.ID)
	x.conns.Running(bc)
	defer x.conns.Running(nil)
	bc.ResetSeq()
	if err := bc.WritePacket(exec); err == nil {
		err = bc.Flush()
	}
	if err != nil {
		bc.MarkBroken()
		return backend.Outcome{}, backend.ErrLost(bc)
	}
	res, err := x.relay.result(bc, false, x.tables)
	if err != nil {
		bc.MarkBroken()
	}
	return res, err
}

// WithFallbackTables runs f on a connection to a Fallback plan's node
// that holds the plan's temporary tables, with the subtables' rows copied
// into them when copy is set (empty otherwise: enough to prepare the
// statement), and drops them afterwards.
func (x *Executor) WithFallbackTables(plan *router.Plan, copy bool, f func(bc *backend.Conn) (backend.Outcome, error)) error {
	return (&gather{x: x}).withTables(plan, copy, f)
}

// withTables is WithFallbackTables for this gather, which bounds the copy.
func (g *gather) withTables(plan *router.Plan, copy bool, f func(bc *backend.Conn) (backend.Outcome, error)) (err error) {
	x := g.x
	bc, err := x.conns.Acquire(plan.Targets[0].Node, false)
	if err != nil {
		return err
	}
	var created []string
	var res backend.Outcome
	defer func() {
		for _, name := range created {
			if _, derr := bc.Exec("DROP TEMPORARY TABLE IF EXISTS " + name); derr != nil {
				bc.MarkBroken() // the temporary table must not outlive the statement
			}
		}
		if !res.OK {
			res = backend.Outcome{}
		}
		x.conns.Release(bc, false, res)
	}()
	g.start = time.Now()
	interrupted := func() error {
		if x.conns.Interrupted() {
			return mysql.NewError(mysql.ErQueryInterrupted, "Query execution was interrupted")
		}
		return nil
	}
	for i := range plan.Gathers {
		if err := interrupted(); err != nil {
			return err
		}
		gt := &plan.Gathers[i]
		temp := mysql.QuoteIdent(gt.DB) + "." + mysql.QuoteIdent(gt.Temp)
		ddl, err := g.definition(gt, temp, bc, plan.Targets[0].Node)
		if err != nil {
			return err
		}
		if _, err := bc.Exec(ddl); err != nil {
			return fallbackErr(bc, err)
		}
		created = append(created, temp)
		if !copy {
			continue
		}
		g.table = gt.Table
		for j := range gt.Subtables {
			if err := interrupted(); err != nil {
				return err
			}
			sub := &gt.Subtables[j]
			if sub.Node != plan.Targets[0].Node {
				if err := g.copyRows(bc, sub, temp); err != nil {
					return err
				}
				continue
			}
			// A subtable on the same node is copied there, by the server
			// (and never needs a second connection to the node).
			// KILL and a client that leaves stop the copy (Running).
			x.conns.Running(bc)
			res, err := bc.Exec(g.bounded("INSERT INTO " + temp + " " + sub.SQL))
			x.conns.Running(nil)
			if err != nil {
				return fallbackErr(bc, err)
			}
			g.rows += int64(res.OK.AffectedRows)
			if lim := x.eng.fallbackRows; lim > 0 && g.rows > lim {
				return mysql.NewError(mysql.ErNotSupported, "this read needs a copy of more than fallback_max_rows (%d) rows of sharded table %s; add a condition on the shard key, or raise the limit", lim, gt.Table)
			}
		}
	}
	// Shown as running before the last check: a KILL from now on either
	// finds the flag set below or the connection.
	x.conns.Running(bc)
	if err := interrupted(); err != nil {
		x.conns.Running(nil)
		return err
	}
	res, err = f(bc)
	return err
}

// bounded prefixes a statement of the fallback with the time it has left
// of fallback_max_time, as MariaDB's max_statement_time.
func (g *gather) bounded(q string) string {
	lim := g.x.eng.fallbackTime
	if lim <= 0 {
		return q
	}
	left := max(lim-time.Since(g.start), time.Millisecond)
	return fmt.Sprintf("SET STATEMENT max_statement_time=%.3f FOR %s", left.Seconds(), q)
}

// fallbackErr is the client's error for a failed statement of the
// fallback's own on bc.
func fallbackErr(bc *backend.Conn, err error) error {
	if bc.Broken() {
		return backend.ErrLost(bc)
	}
	se := mysql.AsSQLError(err)
	return &mysql.SQLError{Code: se.Code, State: se.State, Message: "the proxy's copy of a sharded table for this statement failed: " + se.Message}
}

// keyLine matches the lines of SHOW CREATE TABLE that define keys and
// constraints; keyColumns reads a key's columns.
var (
	keyLine    = regexp.MustCompile(`^\s*(PRIMARY KEY|UNIQUE KEY|UNIQUE INDEX|UNIQUE|KEY|INDEX|FULLTEXT|SPATIAL|CONSTRAINT|FOREIGN KEY)\b`)
	uniqueLine = regexp.MustCompile(`^\s*(PRIMARY KEY|UNIQUE)\b`)
	plainKey   = regexp.MustCompile(`^\s*(KEY|INDEX|UNIQUE KEY|UNIQUE INDEX|PRIMARY KEY|FULLTEXT|SPATIAL)\b`)
)

// definition returns the CREATE TEMPORARY TABLE of gt's copy, from its
// first subtable's SHOW CREATE TABLE: the columns (without AUTO_INCREMENT),
// the plain keys, and the unique keys that contain the shard key (unique
// over all subtables too), so the copy is read in the order one server's
// table would be; no constraints, no table options but the character set.
func (g *gather) definition(gt *router.Gather, temp string, bc *backend.Conn, node string) (string, error) {
	sub := gt.Subtables[0]
	show := "SHOW CREATE TABLE " + mysql.QuoteIdent(gt.DB) + "." + mysql.QuoteIdent(sub.Subtable)
	var res *backend.Result
	var err error
	if sub.Node == node {
		res, err = bc.Exec(show) // no second connection to the node
	} else {
		res, err = g.x.collect(&router.Target{Node: sub.Node, SQL: show})
	}
	if err != nil {
		return "", err
	}
	if len(res.Rows) != 1 || len(res.Rows[0]) < 2 {
		return "", fmt.Errorf("SHOW CREATE TABLE %s answered no definition", sub.Subtable)
	}
	def := string(res.Rows[0][1])
	open, end := strings.IndexByte(def, '('), strings.LastIndexByte(def, ')')
	if open < 0 || end < open {
		return "", fmt.Errorf("SHOW CREATE TABLE %s: unexpected definition", sub.Subtable)
	}
	var cols []string
	for _, line := range strings.Split(def[open+1:end], "\n") {
		line = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(line), ","))
		if line == "" {
			continue
		}
		if keyLine.MatchString(line) {
			keep := plainKey.MatchString(line)
			if uniqueLine.MatchString(line) {
				keep = gt.Key != "" && strings.Contains(strings.ToLower(line), "`"+gt.Key+"`")
			}
			if keep {
				cols = append(cols, line)
			}
			continue
		}
		if strings.Contains(line, " GENERATED ALWAYS AS ") || strings.Contains(line, " AS (") {
			return "", mysql.NewError(mysql.ErNotSupported, "this read of sharded table %s needs a copy of the table, which shardgate cannot make of generated columns", gt.Table)
		}
		line = strings.Replace(line, " AUTO_INCREMENT", "", 1)
		cols = append(cols, line)
	}
	opts := ""
	for _, o := range []string{"DEFAULT CHARSET=", "COLLATE="} {
		if i := strings.Index(def[end:], o); i >= 0 {
			v := def[end+i:]
			if j := strings.IndexByte(v, ' '); j >= 0 {
				v = v[:j]
			}
			opts += " " + v
		}
	}
	return "CREATE TEMPORARY TABLE " + temp + " (" + strings.Join(cols, ", ") + ")" + opts, nil
}

// copyBatch is the size of one INSERT of copied rows.
const copyBatch = 1 << 20

// copyRows reads one subtable (t.SQL is SELECT *) and inserts its rows
// into temp on bc, counting them against the fallback's limits.
func (g *gather) copyRows(bc *backend.Conn, t *router.Target, temp string) error {
	src, err := g.x.send(t)
	if err != nil {
		return err
	}
	g.x.conns.Running(src)
	cols, err := g.readColumns(src)
	if err != nil {
		return err
	}
	b := insertBatch{bc: bc, ins: []byte("INSERT INTO " + temp + " VALUES "), cols: cols, charset: sourceCharset(src)}
	b.head = len(b.ins)
	fail, err := g.copyBody(src, &b)
	if err != nil {
		return err
	}
	if err := g.release(src, nil); err != nil {
		return err
	}
	if fail != nil {
		return fail
	}
	return b.flush()
}

// release owns giving the subtable's connection back once its read is
// over: broken (and err returned) when err is set, reusable otherwise.
func (g *gather) release(src *backend.Conn, err error) error {
	g.x.conns.Running(nil)
	if err != nil {
		src.MarkBroken()
		g.x.conns.Release(src, false, backend.Outcome{})
		return err
	}
	g.x.conns.Release(src, false, backend.Outcome{OK: true})
	return nil
}

// releaseOnErr owns the end of a read the backend answered with the ERR
// packet p: the connection stays usable, and the error is the backend's.
func (g *gather) releaseOnErr(src *backend.Conn, p []byte) error {
	g.x.conns.Running(nil)
	g.x.conns.Release(src, false, backend.Outcome{})
	return mysql.ParseErr(p)
}

// copyColumns is what the copy needs of a subtable's columns to write
// their values as literals: how many, their types, and which are binary.
type copyColumns struct {
	n      int
	types  []byte
	binary []bool
}

// readColumns owns the header of the subtable's result set: its column
// count and definitions, and the EOF after them. On error the
// connection has been given back.
func (g *gather) readColumns(src *backend.Conn) (copyColumns, error) {
	var cols copyColumns
	p, err := src.ReadPacket()
	if err != nil {
		return cols, g.release(src, backend.ErrLost(src))
	}
	if len(p) > 0 && p[0] == mysql.ErrHeader {
		return cols, g.releaseOnErr(src, p)
	}
	ncols, _, n := mysql.ReadLenEncInt(p)
	if n == 0 {
		return cols, g.release(src, fmt.Errorf("backend %s: expected a result set", src.Addr))
	}
	cols.n = int(ncols)
	for range ncols {
		cp, err := src.ReadPacket()
		if err != nil {
			return cols, g.release(src, backend.ErrLost(src))
		}
		c, err := mysql.ParseColumnExt(cp, src.ExtMetadata())
		if err != nil {
			return cols, g.release(src, err)
		}
		cols.types = append(cols.types, c.Type)
		cols.binary = append(cols.binary, c.Charset == 63)
	}
	if src.Caps&mysql.ClientDeprecateEOF == 0 {
		if _, err := src.ReadPacket(); err != nil {
			return cols, g.release(src, backend.ErrLost(src))
		}
	}
	return cols, nil
}

// sourceCharset owns the character set text values arrive in: the
// source connection's result character set. They are written with its
// introducer, so the copy stores the same characters whatever the
// column's character set.
func sourceCharset(src *backend.Conn) string {
	if c, ok := mysql.CollationByID(src.Collation); ok && src.Collation != 0 && c.Charset != "binary" {
		return c.Charset
	}
	return "utf8mb4"
}

// copyBody owns the rows of the subtable's result set: it reads them all,
// so the connection stays usable, and adds each to b while the copy is
// within its limits. fail is why the copy stops (a limit, a failed
// INSERT), with the connection still to be given back; err is a failed
// read, with the connection already given back.
func (g *gather) copyBody(src *backend.Conn, b *insertBatch) (fail, err error) {
	var vals [][]byte
	for {
		p, err := src.ReadPacket()
		if err != nil {
			return nil, g.release(src, backend.ErrLost(src))
		}
		if mysql.IsEOF(p) {
			return fail, nil
		}
		if len(p) > 0 && p[0] == mysql.ErrHeader {
			return nil, g.releaseOnErr(src, p)
		}
		if fail != nil {
			continue // read the rest, so the connection stays usable
		}
		vals, err = mysql.ParseTextRow(p, b.cols.n, vals)
		if err != nil {
			return nil, g.release(src, backend.ErrLost(src))
		}
		g.rows++
		g.bytes += int64(len(p))
		if fail = g.overLimit(); fail != nil {
			continue
		}
		b.add(vals)
		if len(b.ins) >= copyBatch {
			fail = b.flush()
		}
	}
}

// overLimit owns the fallback's limits (fallback_max_rows,
// fallback_max_time, fallback_max_bytes): the error of the first one the
// copy so far has passed, or nil.
func (g *gather) overLimit() error {
	e := g.x.eng
	if lim := e.fallbackRows; lim > 0 && g.rows > lim {
		return mysql.NewError(mysql.ErNotSupported, "this read needs a copy of more than fallback_max_rows (%d) rows of sharded table %s; add a condition on the shard key, or raise the limit", lim, g.table)
	}
	if lim := e.fallbackTime; lim > 0 && g.rows%256 == 0 && time.Since(g.start) > lim {
		return mysql.NewError(mysql.ErStatementTimeout, "Query execution was interrupted (fallback_max_time exceeded: copying sharded table rows took longer than %v)", lim)
	}
	if lim := e.fallbackBytes; lim > 0 && g.bytes > lim {
		return mysql.NewError(mysql.ErNotSupported, "this read needs a copy of more than fallback_max_bytes (%d) bytes of sharded tables; add a condition on the shard key, or raise the limit", lim)
	}
	return nil
}

// insertBatch owns one multi-row INSERT into the temporary table being
// built: the statement's bytes, reused batch after batch, and how its
// values are written.
type insertBatch struct {
	bc      *backend.Conn
	ins     []byte
	head    int // length of "INSERT INTO temp VALUES "
	cols    copyColumns
	charset string
}

// add appends one row's values as a parenthesised tuple of literals.
func (b *insertBatch) add(vals [][]byte) {
	if len(b.ins) > b.head {
		b.ins = append(b.ins, ',')
	}
	b.ins = append(b.ins, '(')
	for i, v := range vals {
		if i > 0 {
			b.ins = append(b.ins, ',')
		}
		b.ins = appendLiteral(b.ins, v, b.cols.types[i], b.cols.binary[i], b.charset)
	}
	b.ins = append(b.ins, ')')
}

// flush runs the INSERT when it holds rows and empties it for the next.
func (b *insertBatch) flush() error {
	if len(b.ins) == b.head {
		return nil
	}
	_, err := b.bc.Exec(string(b.ins))
	b.ins = b.ins[:b.head]
	if err != nil {
		return fallbackErr(b.bc, err)
	}
	return nil
}

// appendLiteral writes a text-protocol value as an SQL literal that stores
// the same value: NULL, a number as it is, binary data as _binary, and
// text with charset's introducer (mysql.AppendQuoted: no sql_mode or
// character set reads it differently).
func appendLiteral(b, v []byte, typ byte, binary bool, charset string) []byte {
	switch {
	case v == nil:
		return append(b, "NULL"...)
	case !binary && isNumericType(typ):
		return append(b, v...)
	case binary:
		return mysql.AppendQuoted(b, string(v), "binary")
	}
	return mysql.AppendQuoted(b, string(v), charset)
}

func isNumericType(t byte) bool {
	switch t {
	case mysql.TypeTiny, mysql.TypeShort, mysql.TypeLong, mysql.TypeLongLong, mysql.TypeInt24,
		mysql.TypeDecimal, mysql.TypeNewDecimal, mysql.TypeFloat, mysql.TypeDouble, mysql.TypeYear:
		return true
	}
	return false
}
