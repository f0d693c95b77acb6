package server

import (
	"bytes"
	"container/heap"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"sort"
	"strconv"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/router"
)

// errMergeMemory is returned when a merge that cannot stream outgrows
// merge_memory_limit.
func errMergeMemory(limit int64) error {
	return &mysql.SQLError{Code: 1038, State: "HY001", Message: fmt.Sprintf(
		"Out of sort memory: this cross-shard query needs more than merge_memory_limit (%d bytes) in the proxy; add a condition on the shard key, or raise merge_memory_limit in ks.yaml", limit)}
}

// stream is one target's text result set being read row by row. Row values
// alias the backend connection's read buffer and are valid until the next
// call to next.
type stream struct {
	bc    *backend.Conn
	ncols int
	vals  [][]byte
	raw   []byte
	done  bool
	res   result

	// rows holds the raw row packets of a buffered stream (see
	// merger.buffer); drained is true once its connection has nothing
	// more to read.
	rows    [][]byte
	drained bool
}

// next reads the next row, or the end of the result set (done).
func (s *stream) next() error {
	if s.drained {
		if len(s.rows) == 0 {
			s.done = true
			return nil
		}
		s.raw = s.rows[0]
		s.rows = s.rows[1:]
		var err error
		s.vals, err = mysql.ParseTextRow(s.raw, s.ncols, s.vals)
		return err
	}
	p, err := s.bc.ReadPacket()
	if err != nil {
		return err
	}
	if mysql.IsEOF(p) {
		s.done = true
		s.res.setInfo(p)
		return nil
	}
	if len(p) > 0 && p[0] == mysql.ErrHeader {
		s.done = true
		return mysql.ParseErr(p)
	}
	s.raw = p
	s.vals, err = mysql.ParseTextRow(p, s.ncols, s.vals)
	return err
}

// merger runs one merged SELECT for a session.
type merger struct {
	ss      *session
	m       *resolved
	streams []*stream
	cols    []*mysql.Column
	rawCols [][]byte
	outCols []*mysql.Column // the columns the client is sent
	kinds   []cmpKind
	used    int64 // bytes of rows held
	limit   int64
}

// execMerge runs a SELECT on every target at once (all statements are sent
// before any result is read, so the backends work in parallel) and merges
// the results as plan.Merge says.
func (ss *session) execMerge(plan *router.Plan) error {
	mg := &merger{ss: ss, limit: ss.srv.cfg.MergeMemoryLimit}
	defer mg.close()
	if err := mg.open(plan); err != nil {
		return err
	}
	var rows [][][]byte
	var err error
	switch {
	case mg.m.Grouped:
		rows, err = mg.group()
	case len(mg.m.OrderBy) > 0 && !mg.m.Distinct:
		return mg.streamSorted()
	default:
		rows, err = mg.collect()
	}
	if err != nil {
		return err
	}
	if mg.m.Distinct {
		if rows, err = mg.distinct(rows); err != nil {
			return err
		}
	}
	if len(mg.m.OrderBy) > 0 {
		sort.SliceStable(rows, func(i, j int) bool { return mg.less(rows[i], rows[j]) })
	}
	if mg.m.HasLimit {
		off := min(mg.m.Offset, uint64(len(rows)))
		end := min(off+mg.m.Count, uint64(len(rows)))
		rows = rows[off:end]
	}
	mg.writeHeader()
	for _, r := range rows {
		mg.writeRow(r, nil)
	}
	return mg.writeEOF()
}

// open sends the statement to every target and reads every column
// definition. Targets on a node where the session holds a connection (an
// open transaction, session state) share that one connection, which can
// carry one result at a time: they run one after another and their rows
// are read into memory (within the merge memory limit). All other targets
// get their own connections and are sent first, so the backends work in
// parallel.
func (mg *merger) open(plan *router.Plan) error {
	ss := mg.ss
	perNode := map[string]int{}
	for _, t := range plan.Targets {
		perNode[t.Node]++
	}
	// In a transaction every node has one connection, pinned when first
	// used: all targets on a node share it.
	inTxn := ss.inTxn()
	shared := func(t *router.Target) bool {
		return perNode[t.Node] > 1 && (inTxn || ss.pinnedOn(ss.srv.nodes[t.Node]) != nil)
	}
	for i := range plan.Targets {
		if t := &plan.Targets[i]; !shared(t) {
			bc, err := ss.send(t)
			if err != nil {
				return err
			}
			mg.streams = append(mg.streams, &stream{bc: bc})
		}
	}
	mg.publish()
	for _, s := range mg.streams {
		if err := mg.readHeader(s); err != nil {
			return err
		}
	}
	for i := range plan.Targets {
		if t := &plan.Targets[i]; shared(t) {
			bc, err := ss.send(t)
			if err != nil {
				return err
			}
			s := &stream{bc: bc}
			mg.streams = append(mg.streams, s)
			mg.publish()
			if err := mg.readHeader(s); err != nil {
				return err
			}
			if err := mg.buffer(s); err != nil {
				return err
			}
		}
	}
	m, err := resolveMerge(plan.Merge, len(mg.cols))
	if err != nil {
		return err
	}
	mg.m = m
	mg.kinds = make([]cmpKind, len(mg.cols))
	for i, c := range mg.cols {
		mg.kinds[i] = columnCmp(c)
	}
	return nil
}

// publish shows the merge's backend connections to KILL and Shutdown.
func (mg *merger) publish() {
	conns := make([]*backend.Conn, 0, len(mg.streams))
	for _, s := range mg.streams {
		if !slices.Contains(conns, s.bc) {
			conns = append(conns, s.bc)
		}
	}
	mg.ss.runningMany.Store(&conns)
}

// readHeader reads a target's column count and definitions; the first
// target's become the merged result's.
func (mg *merger) readHeader(s *stream) error {
	p, err := s.bc.ReadPacket()
	if err != nil {
		s.bc.MarkBroken()
		return mysql.NewError(mysql.ErServerLost, "Lost connection to backend %s during query", s.bc.Addr)
	}
	if len(p) > 0 && p[0] == mysql.ErrHeader {
		s.done = true
		return mysql.ParseErr(p)
	}
	n, _, k := mysql.ReadLenEncInt(p)
	if k == 0 || p[0] == mysql.OKHeader {
		s.bc.MarkBroken()
		return fmt.Errorf("backend %s: expected a result set", s.bc.Addr)
	}
	s.ncols = int(n)
	first := len(mg.cols) == 0
	for c := 0; c < s.ncols; c++ {
		p, err := s.bc.ReadPacket()
		if err != nil {
			s.bc.MarkBroken()
			return err
		}
		if first {
			col, err := mysql.ParseColumn(p)
			if err != nil {
				return err
			}
			mg.cols = append(mg.cols, col)
			mg.rawCols = append(mg.rawCols, append([]byte(nil), p...))
		}
	}
	if s.bc.Caps&mysql.ClientDeprecateEOF == 0 {
		if _, err := s.bc.ReadPacket(); err != nil {
			s.bc.MarkBroken()
			return err
		}
	}
	return nil
}

// buffer reads all of a stream's rows into memory so its connection is
// free for the next statement; next then serves them from memory.
func (mg *merger) buffer(s *stream) error {
	for {
		p, err := s.bc.ReadPacket()
		if err != nil {
			s.bc.MarkBroken()
			return mysql.NewError(mysql.ErServerLost, "Lost connection to backend %s during query", s.bc.Addr)
		}
		if mysql.IsEOF(p) {
			s.res.setInfo(p)
			s.drained = true
			return nil
		}
		if len(p) > 0 && p[0] == mysql.ErrHeader {
			s.drained = true
			s.done = true
			return mysql.ParseErr(p)
		}
		mg.used += int64(len(p)) + 24
		if mg.used > mg.limit {
			s.bc.MarkBroken() // the rest of the result is unread
			return errMergeMemory(mg.limit)
		}
		s.rows = append(s.rows, append([]byte(nil), p...))
	}
}

// close returns every stream's connection: drained ones to the pool, others
// closed (a half-read result cannot be reused).
func (mg *merger) close() {
	mg.ss.runningMany.Store(nil)
	for i, s := range mg.streams {
		if !s.done && !s.drained {
			s.bc.MarkBroken()
		}
		s.res.ok = s.res.ok && (s.done || s.drained)
		// Buffered streams share the session's connection: return it once.
		if !slices.ContainsFunc(mg.streams[i+1:], func(o *stream) bool { return o.bc == s.bc }) {
			mg.ss.release(s.bc, false, s.res)
		}
	}
	mg.streams = nil
}

// drain reads the rest of every stream whose remaining rows are bounded by
// a pushed-down LIMIT, so its connection can go back to the pool.
func (mg *merger) drain() {
	if !mg.m.HasLimit {
		return
	}
	for _, s := range mg.streams {
		for !s.done {
			if s.next() != nil {
				s.bc.MarkBroken()
				break
			}
		}
	}
}

// less orders rows by the ORDER BY keys, NULLs first ascending as in MySQL.
func (mg *merger) less(a, b [][]byte) bool {
	return mg.compareRows(a, b) < 0
}

func (mg *merger) compareRows(a, b [][]byte) int {
	for _, k := range mg.m.OrderBy {
		x, y := a[k.Col], b[k.Col]
		var c int
		switch {
		case x == nil && y == nil:
			c = 0
		case x == nil:
			c = -1
		case y == nil:
			c = 1
		default:
			c = compareValues(mg.kinds[k.Col], x, y)
		}
		if k.Desc {
			c = -c
		}
		if c != 0 {
			return c
		}
	}
	return 0
}

// streamHeap orders streams by their current rows.
type streamHeap struct {
	mg *merger
	s  []*stream
	ix []int
}

func (h *streamHeap) Len() int { return len(h.s) }
func (h *streamHeap) Less(i, j int) bool {
	c := h.mg.compareRows(h.s[i].vals, h.s[j].vals)
	if c != 0 {
		return c < 0
	}
	return h.ix[i] < h.ix[j]
}
func (h *streamHeap) Swap(i, j int) {
	h.s[i], h.s[j] = h.s[j], h.s[i]
	h.ix[i], h.ix[j] = h.ix[j], h.ix[i]
}
func (h *streamHeap) Push(x any) {}
func (h *streamHeap) Pop() any {
	n := len(h.s) - 1
	h.s, h.ix = h.s[:n], h.ix[:n]
	return nil
}

// streamSorted merges streams that are each sorted by the ORDER BY keys:
// memory holds one row per stream, and the merge stops as soon as the
// LIMIT is satisfied.
func (mg *merger) streamSorted() error {
	h := &streamHeap{mg: mg}
	for i, s := range mg.streams {
		if err := s.next(); err != nil {
			return mg.streamErr(s, err)
		}
		if !s.done {
			h.s = append(h.s, s)
			h.ix = append(h.ix, i)
		}
	}
	heap.Init(h)
	mg.writeHeader()
	var skipped, sent uint64
	for h.Len() > 0 {
		if mg.m.HasLimit && sent >= mg.m.Count {
			break
		}
		s := h.s[0]
		if mg.m.HasLimit && skipped < mg.m.Offset {
			skipped++
		} else {
			if err := mg.writeRow(s.vals, s.raw); err != nil {
				return &mysql.DstError{Err: err}
			}
			sent++
		}
		if err := s.next(); err != nil {
			return mg.streamErr(s, err)
		}
		if s.done {
			heap.Pop(h)
		} else {
			heap.Fix(h, 0)
		}
	}
	mg.drain()
	return mg.writeEOF()
}

func (mg *merger) streamErr(s *stream, err error) error {
	var se *mysql.SQLError
	if errors.As(err, &se) {
		return err
	}
	s.bc.MarkBroken()
	return mysql.NewError(mysql.ErServerLost, "Lost connection to backend %s during query", s.bc.Addr)
}

// account charges a row to the memory limit.
func (mg *merger) account(r [][]byte) error {
	n := int64(24 * len(r))
	for _, v := range r {
		n += int64(len(v))
	}
	mg.used += n
	if mg.used > mg.limit {
		return errMergeMemory(mg.limit)
	}
	return nil
}

func copyRow(r [][]byte) [][]byte {
	size := 0
	for _, v := range r {
		size += len(v)
	}
	buf := make([]byte, 0, size)
	out := make([][]byte, len(r))
	for i, v := range r {
		if v == nil {
			continue
		}
		start := len(buf)
		buf = append(buf, v...)
		out[i] = buf[start:len(buf):len(buf)]
	}
	return out
}

// collect reads every row of every stream (copied, within the memory
// limit). Without ORDER BY and DISTINCT it stops once a LIMIT is met.
func (mg *merger) collect() ([][][]byte, error) {
	var rows [][][]byte
	stopAt := uint64(0)
	if mg.m.HasLimit && len(mg.m.OrderBy) == 0 && !mg.m.Distinct {
		stopAt = mg.m.Offset + mg.m.Count
	}
	for _, s := range mg.streams {
		for {
			if stopAt > 0 && uint64(len(rows)) >= stopAt {
				mg.drain()
				return rows, nil
			}
			if err := s.next(); err != nil {
				return nil, mg.streamErr(s, err)
			}
			if s.done {
				break
			}
			if err := mg.account(s.vals); err != nil {
				return nil, err
			}
			rows = append(rows, copyRow(s.vals))
		}
	}
	return rows, nil
}

// sortKey appends a key for v under which values equal in the column's
// collation are identical bytes.
func sortKey(dst []byte, k cmpKind, v []byte) []byte {
	if v == nil {
		return append(dst, 0)
	}
	dst = append(dst, 1)
	var body []byte
	switch k {
	case cmpGeneralCI:
		body = generalCIKey(v)
	case cmpUnicodeCI:
		body = unicodeKey(v)
	case cmpBinPad:
		body = trimSpaces(v)
	case cmpDecimal, cmpSigned, cmpUnsigned:
		body = normDecimal(v)
	default:
		body = v
	}
	dst = strconv.AppendInt(dst, int64(len(body)), 10)
	dst = append(dst, ':')
	return append(dst, body...)
}

func trimSpaces(v []byte) []byte {
	for len(v) > 0 && v[len(v)-1] == ' ' {
		v = v[:len(v)-1]
	}
	return v
}

// normDecimal writes a decimal number in one canonical form ("-0.50" and
// "-.5" both become "-.5").
func normDecimal(v []byte) []byte {
	neg := len(v) > 0 && v[0] == '-'
	if neg {
		v = v[1:]
	}
	ip, fp := splitDecimal(v)
	for len(fp) > 0 && fp[len(fp)-1] == '0' {
		fp = fp[:len(fp)-1]
	}
	out := make([]byte, 0, len(v)+2)
	if neg && (len(ip) > 0 || len(fp) > 0) {
		out = append(out, '-')
	}
	out = append(out, ip...)
	if len(fp) > 0 {
		out = append(out, '.')
		out = append(out, fp...)
	}
	return out
}

// distinct keeps the first of rows equal over the visible columns.
func (mg *merger) distinct(rows [][][]byte) ([][][]byte, error) {
	seen := map[string]bool{}
	out := rows[:0]
	var key []byte
	for _, r := range rows {
		key = key[:0]
		for i := 0; i < mg.m.Columns; i++ {
			key = sortKey(key, mg.kinds[i], r[i])
		}
		if seen[string(key)] {
			continue
		}
		mg.used += int64(len(key))
		if mg.used > mg.limit {
			return nil, errMergeMemory(mg.limit)
		}
		seen[string(key)] = true
		out = append(out, r)
	}
	return out, nil
}

// group combines the rows of every stream by the GROUP BY keys.
type groupState struct {
	row  [][]byte   // first row, updated in place for MIN/MAX
	sums []*big.Rat // per aggregate: running SUM/COUNT
	flts []float64
	cnts []uint64 // AVG counts
	null []bool   // SUM/AVG still NULL
}

func (mg *merger) group() ([][][]byte, error) {
	groups := map[string]*groupState{}
	var order []*groupState
	var key []byte
	for _, s := range mg.streams {
		for {
			if err := s.next(); err != nil {
				return nil, mg.streamErr(s, err)
			}
			if s.done {
				break
			}
			key = key[:0]
			for _, c := range mg.m.GroupBy {
				key = sortKey(key, mg.kinds[c], s.vals[c])
			}
			g := groups[string(key)]
			if g == nil {
				if err := mg.account(s.vals); err != nil {
					return nil, err
				}
				g = mg.newGroup(copyRow(s.vals))
				groups[string(key)] = g
				order = append(order, g)
			}
			if err := mg.fold(g, s.vals); err != nil {
				return nil, err
			}
		}
	}
	if len(order) == 0 && len(mg.m.GroupBy) == 0 {
		// Every target returns one row for aggregates without GROUP BY,
		// so this only happens without targets; answer like MySQL.
		return nil, nil
	}
	rows := make([][][]byte, 0, len(order))
	for _, g := range order {
		r := mg.finish(g)
		if mg.m.Having != nil && !truthy(mg.eval(mg.m.Having, r)) {
			continue
		}
		rows = append(rows, r)
	}
	return rows, nil
}

func (mg *merger) newGroup(row [][]byte) *groupState {
	n := len(mg.m.Aggs)
	g := &groupState{row: row, sums: make([]*big.Rat, n), flts: make([]float64, n), cnts: make([]uint64, n), null: make([]bool, n)}
	for i := range g.null {
		g.null[i] = true
	}
	return g
}

func isFloatCol(c *mysql.Column) bool {
	return c.Type == mysql.TypeDouble || c.Type == mysql.TypeFloat
}

// fold adds one target row's partial aggregates to a group.
func (mg *merger) fold(g *groupState, r [][]byte) error {
	for i, a := range mg.m.Aggs {
		v := r[a.Col]
		switch a.Func {
		case router.AggCount:
			n, _ := strconv.ParseUint(string(v), 10, 64)
			g.cnts[i] += n
		case router.AggSum, router.AggAvg:
			if a.Func == router.AggAvg {
				n, _ := strconv.ParseUint(string(r[a.CountCol]), 10, 64)
				g.cnts[i] += n
			}
			if v == nil {
				continue
			}
			g.null[i] = false
			if isFloatCol(mg.cols[a.Col]) {
				f, _ := strconv.ParseFloat(string(v), 64)
				g.flts[i] += f
				continue
			}
			x, ok := new(big.Rat).SetString(string(v))
			if !ok {
				return fmt.Errorf("aggregate value %q is not a number", v)
			}
			if g.sums[i] == nil {
				g.sums[i] = x
			} else {
				g.sums[i].Add(g.sums[i], x)
			}
		case router.AggMin, router.AggMax:
			cur := g.row[a.Col]
			if v == nil {
				continue
			}
			if cur == nil {
				g.row[a.Col] = cloneValue(v)
				continue
			}
			c := compareValues(mg.kinds[a.Col], v, cur)
			if (a.Func == router.AggMin && c < 0) || (a.Func == router.AggMax && c > 0) {
				g.row[a.Col] = cloneValue(v)
			}
		}
	}
	return nil
}

// cloneValue copies a non-NULL value; an empty string stays non-nil, since
// nil is NULL.
func cloneValue(v []byte) []byte {
	return append(make([]byte, 0, len(v)), v...)
}

// finish writes a group's aggregates into its row.
func (mg *merger) finish(g *groupState) [][]byte {
	r := g.row
	for i, a := range mg.m.Aggs {
		col := mg.cols[a.Col]
		switch a.Func {
		case router.AggCount:
			r[a.Col] = strconv.AppendUint(nil, g.cnts[i], 10)
		case router.AggSum:
			switch {
			case g.null[i]:
				r[a.Col] = nil
			case isFloatCol(col):
				r[a.Col] = formatDouble(g.flts[i])
			default:
				r[a.Col] = []byte(g.sums[i].FloatString(int(col.Decimals)))
			}
		case router.AggAvg:
			switch {
			case g.null[i] || g.cnts[i] == 0:
				r[a.Col] = nil
			case isFloatCol(col):
				r[a.Col] = formatDouble(g.flts[i] / float64(g.cnts[i]))
			default:
				q := new(big.Rat).Quo(g.sums[i], new(big.Rat).SetUint64(g.cnts[i]))
				r[a.Col] = []byte(q.FloatString(avgDecimals(col)))
			}
		}
	}
	return r
}

// avgDecimals is the scale MySQL gives AVG of a column whose SUM has the
// column's decimals: four more (div_precision_increment), at most 30.
func avgDecimals(c *mysql.Column) int {
	return min(int(c.Decimals)+4, 30)
}

// formatDouble prints a DOUBLE as MariaDB's text protocol does: the
// shortest digits that read back as the same value, in positional notation
// for decimal exponents -15 to 14 and in scientific notation without '+'
// otherwise (1e15, 1.5e-16).
func formatDouble(f float64) []byte {
	if f == 0 {
		return []byte("0") // also -0
	}
	e := strconv.AppendFloat(nil, f, 'e', -1, 64) // [-]d[.ddd]e±XX
	neg := e[0] == '-'
	if neg {
		e = e[1:]
	}
	i := bytes.IndexByte(e, 'e')
	exp, _ := strconv.Atoi(string(e[i+1:]))
	digits := make([]byte, 0, i)
	for _, c := range e[:i] {
		if c != '.' {
			digits = append(digits, c)
		}
	}
	var b []byte
	if neg {
		b = append(b, '-')
	}
	switch {
	case exp < -15 || exp >= 15:
		b = append(b, e[:i]...)
		b = append(b, 'e')
		b = strconv.AppendInt(b, int64(exp), 10)
	case exp < 0:
		b = append(b, "0."...)
		for range -exp - 1 {
			b = append(b, '0')
		}
		b = append(b, digits...)
	case exp+1 >= len(digits):
		b = append(b, digits...)
		for range exp + 1 - len(digits) {
			b = append(b, '0')
		}
	default:
		b = append(b, digits[:exp+1]...)
		b = append(b, '.')
		b = append(b, digits[exp+1:]...)
	}
	return b
}

// writeHeader sends the visible columns' definitions (AVG columns get the
// scale MySQL gives AVG).
func (mg *merger) writeHeader() {
	c := mg.ss.c
	mg.ss.buf = mysql.AppendLenEncInt(mg.ss.buf[:0], uint64(mg.m.Columns))
	c.WritePacket(mg.ss.buf)
	avg := map[int]bool{}
	for _, a := range mg.m.Aggs {
		if a.Func == router.AggAvg && !isFloatCol(mg.cols[a.Col]) {
			avg[a.Col] = true
		}
	}
	mg.outCols = mg.outCols[:0]
	for i := 0; i < mg.m.Columns; i++ {
		if avg[i] {
			col := *mg.cols[i]
			col.Type = mysql.TypeNewDecimal
			col.Length += uint32(avgDecimals(&col) - int(col.Decimals))
			col.Decimals = byte(avgDecimals(&col))
			mg.ss.buf = mysql.AppendColumn(mg.ss.buf[:0], &col)
			c.WritePacket(mg.ss.buf)
			mg.outCols = append(mg.outCols, &col)
			continue
		}
		c.WritePacket(mg.rawCols[i])
		mg.outCols = append(mg.outCols, mg.cols[i])
	}
	if mg.ss.caps&mysql.ClientDeprecateEOF == 0 {
		c.WritePacket(mysql.AppendEOF(mg.ss.buf[:0], 0, mg.ss.status))
	}
}

// writeRow sends the visible part of a row; raw is the row's original
// packet when it can be sent unchanged.
func (mg *merger) writeRow(r [][]byte, raw []byte) error {
	if mg.ss.binary {
		// A prepared statement's execution: the binary protocol.
		var err error
		if mg.ss.buf, err = mysql.AppendBinaryRow(mg.ss.buf[:0], mg.outCols, r[:mg.m.Columns]); err != nil {
			return err
		}
		return mg.ss.c.WritePacket(mg.ss.buf)
	}
	if raw != nil && mg.m.Columns == len(mg.cols) {
		return mg.ss.c.WritePacket(raw)
	}
	mg.ss.buf = mysql.AppendTextRow(mg.ss.buf[:0], r[:mg.m.Columns])
	return mg.ss.c.WritePacket(mg.ss.buf)
}

func (mg *merger) writeEOF() error {
	var warnings uint16
	for _, s := range mg.streams {
		warnings += s.res.warnings
	}
	ss := mg.ss
	if ss.caps&mysql.ClientDeprecateEOF != 0 {
		return ss.c.WritePacket(mysql.AppendOK(ss.buf[:0], mysql.EOFHeader, mysql.OK{Status: ss.endStatus(), Warnings: warnings}))
	}
	return ss.c.WritePacket(mysql.AppendEOF(ss.buf[:0], warnings, ss.endStatus()))
}

// resolved is a router.Merge with every column index made absolute for
// the targets' actual row width.
type resolved struct {
	router.Merge
	Columns int // visible columns
}

func resolveMerge(m *router.Merge, ncols int) (*resolved, error) {
	r := &resolved{Merge: *m, Columns: ncols - m.Hidden}
	if r.Columns < 1 {
		return nil, fmt.Errorf("merge plan hides %d of %d columns", m.Hidden, ncols)
	}
	bad := false
	fix := func(i int) int {
		if i < 0 {
			i += ncols
		}
		if i < 0 || i >= ncols {
			bad = true
			return 0
		}
		return i
	}
	r.Aggs = append([]router.Agg(nil), m.Aggs...)
	for i := range r.Aggs {
		r.Aggs[i].Col = fix(r.Aggs[i].Col)
		if r.Aggs[i].Func == router.AggAvg {
			r.Aggs[i].CountCol = fix(r.Aggs[i].CountCol)
		}
	}
	r.GroupBy = make([]int, len(m.GroupBy))
	for i, c := range m.GroupBy {
		r.GroupBy[i] = fix(c)
	}
	r.OrderBy = make([]router.SortKey, len(m.OrderBy))
	for i, k := range m.OrderBy {
		r.OrderBy[i] = router.SortKey{Col: fix(k.Col), Desc: k.Desc}
	}
	r.Having = fixExpr(m.Having, fix)
	if bad {
		return nil, fmt.Errorf("merge plan refers to a column outside the %d the targets return", ncols)
	}
	return r, nil
}

func fixExpr(e *router.Expr, fix func(int) int) *router.Expr {
	if e == nil {
		return nil
	}
	c := *e
	if c.Op == router.OpCol {
		c.Col = fix(c.Col)
	}
	c.Args = make([]*router.Expr, len(e.Args))
	for i, a := range e.Args {
		c.Args[i] = fixExpr(a, fix)
	}
	return &c
}
