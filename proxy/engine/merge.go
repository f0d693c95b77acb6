package engine

import (
	"fmt"
	"slices"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/router"
)

// merger runs a Concat plan with a Merge: one SELECT whose targets' rows
// are combined as one server would answer it (ordered, grouped,
// deduplicated, limited). It sends the statement to every target, reads
// their column definitions, builds the pipeline of operators the plan's
// Merge asks for (see ops.go) over the targets' streams, and writes the
// pipeline's rows. It owns, for one statement, the targets' streams and
// their connections (given back by close, whatever happened) and the
// memory budget of the rows it holds. A merger is built per statement.
type merger struct {
	x       *Executor
	m       *resolved
	streams []*stream
	cols    *columns
	rawCols [][]byte
	mem     budget
}

// newMerger returns a merger for one statement of x, its memory bounded
// by merge_memory_limit and, with the other merges under way, by
// merge_memory_total.
func newMerger(x *Executor) *merger {
	mg := &merger{x: x, mem: budget{limit: x.eng.mergeLimit}}
	if x.eng.mergeTotalLimit > 0 {
		mg.mem.global, mg.mem.globalLimit = &x.eng.mergeTotal, x.eng.mergeTotalLimit
	}
	return mg
}

// run runs a SELECT on every target at once (all statements are sent
// before any result is read, so the backends work in parallel) and merges
// the results as plan.Merge says.
func (mg *merger) run(plan *router.Plan) error {
	x := mg.x
	defer mg.close()
	if err := mg.open(plan); err != nil {
		return err
	}
	in, err := mg.pipeline()
	if err != nil {
		return err
	}
	if err := mg.writeHeader(); err != nil {
		return err
	}
	visible := mg.m.Columns
	for {
		row, raw, err := in.next()
		if err != nil {
			return err
		}
		if row == nil {
			break
		}
		if visible != len(mg.cols.defs) {
			raw = nil // helper columns are cut: the row is re-encoded
		}
		x.Rows++
		if err := x.w.Row(row[:visible], raw); err != nil {
			return err
		}
	}
	if mg.m.HasLimit {
		// Rows past the LIMIT are bounded by the LIMIT pushed down to each
		// target: read them so the connections can be reused.
		for _, s := range mg.streams {
			s.drain()
		}
	}
	var warnings uint16
	for _, s := range mg.streams {
		warnings += s.res.Warnings
	}
	return x.w.End(warnings)
}

// pipeline composes the operators for the plan's Merge over the streams.
func (mg *merger) pipeline() (rowIter, error) {
	m := mg.m
	in := make([]rowIter, len(mg.streams))
	for i, s := range mg.streams {
		in[i] = s
	}
	var out rowIter
	switch {
	case m.Distinct && !m.Grouped && orderCovers(m.OrderBy, m.Columns):
		// Each target returns its distinct rows sorted by every visible
		// column, so after the ordered merge duplicates are neighbours:
		// the rows stream with one row remembered.
		keys := m.OrderBy
		om := newOrderedMerge(in, func(a, b [][]byte) int { return mg.cols.compareRows(keys, a, b) })
		if err := om.prime(); err != nil {
			return nil, err
		}
		out = &distinctSorted{in: om, eq: func(a, b [][]byte) bool { return mg.cols.compareRows(keys, a, b) == 0 }}
	case m.Grouped || m.Distinct:
		var rows [][][]byte
		var err error
		if m.Grouped {
			rows, err = (&grouper{cols: mg.cols, m: m, mem: &mg.mem}).run(&concatRows{in: in})
		} else {
			rows, err = collectRows(&concatRows{in: in}, &mg.mem)
		}
		if err == nil && m.Distinct {
			rows, err = distinctRows(rows, m.Columns, mg.cols, &mg.mem)
		}
		if err != nil {
			return nil, err
		}
		if len(m.OrderBy) > 0 {
			sortRows(rows, mg.cols, m.OrderBy)
		}
		out = &sliceRows{rows: rows}
	case len(m.OrderBy) > 0:
		om := newOrderedMerge(in, func(a, b [][]byte) int { return mg.cols.compareRows(m.OrderBy, a, b) })
		// Each target's first row is read before anything is written, so
		// an error there is the statement's only answer.
		if err := om.prime(); err != nil {
			return nil, err
		}
		out = om
	default:
		out = &concatRows{in: in}
	}
	if m.HasLimit {
		out = &limitRows{in: out, offset: m.Offset, count: m.Count}
	}
	return out, nil
}

// open sends the statement to every target and reads every column
// definition. Targets on a node where every statement must use the one
// connection the session holds (an open transaction, session state) share
// it, and it carries one result at a time: they run one after another and
// their rows are read into memory (within the merge memory limit). All
// other targets get their own connections and are sent first, so the
// backends work in parallel.
func (mg *merger) open(plan *router.Plan) error {
	// Which targets share the session's connection is decided once,
	// before anything is sent: acquiring a connection may end a pin (one
	// kept for SHOW WARNINGS lasts until the next statement), and a target
	// seen as shared in one pass and not in the other would run in neither.
	shared, perNode := mg.sharedTargets(plan)
	if err := mg.sendOwn(plan, shared, perNode); err != nil {
		return err
	}
	mg.publish()
	for _, s := range mg.streams {
		if err := mg.readHeader(s); err != nil {
			return err
		}
	}
	if err := mg.runShared(plan, shared); err != nil {
		return err
	}
	m, err := resolveMerge(plan.Merge, len(mg.cols.defs))
	if err != nil {
		return err
	}
	mg.m = m
	mg.members()
	return nil
}

// sharedTargets owns the decision of which targets run on the session's
// connection (more than one target on a node whose connection the
// session shares); it also returns how many targets each node has.
func (mg *merger) sharedTargets(plan *router.Plan) ([]bool, map[string]int) {
	perNode := map[string]int{}
	for _, t := range plan.Targets {
		perNode[t.Node]++
	}
	shared := make([]bool, len(plan.Targets))
	for i, t := range plan.Targets {
		shared[i] = perNode[t.Node] > 1 && mg.x.conns.Shared(t.Node)
	}
	return shared, perNode
}

// sendOwn owns sending the statement to the targets with connections of
// their own. They gather them node by node, in name order, all of a
// node's at once (LockBulk): concurrent merges cannot each hold part of
// a pool and wait for the rest. Every stream opened joins mg.streams,
// on error too, so close gives its connection back.
func (mg *merger) sendOwn(plan *router.Plan, shared []bool, perNode map[string]int) error {
	own := make([]*stream, len(plan.Targets))
	nodes := make([]string, 0, len(perNode))
	for node := range perNode {
		nodes = append(nodes, node)
	}
	slices.Sort(nodes)
	var sendErr error
	for _, node := range nodes {
		if sendErr = mg.sendNode(plan, node, shared, own); sendErr != nil {
			break
		}
	}
	for _, s := range own {
		if s != nil {
			mg.streams = append(mg.streams, s) // closed by close, on error too
		}
	}
	return sendErr
}

// sendNode owns sending the statement to one node's own-connection
// targets, holding the node's pool in bulk when there are several;
// it records each stream in own at its target's index.
func (mg *merger) sendNode(plan *router.Plan, node string, shared []bool, own []*stream) error {
	k := 0
	for i, t := range plan.Targets {
		if t.Node == node && !shared[i] {
			k++
		}
	}
	n := mg.x.eng.node(node)
	bulk := k > 1 && n != nil
	if bulk {
		n.LockBulk()
		defer n.UnlockBulk()
	}
	for i := range plan.Targets {
		if t := &plan.Targets[i]; t.Node == node && !shared[i] {
			bc, err := mg.x.send(t)
			if err != nil {
				return err
			}
			own[i] = &stream{bc: bc}
		}
	}
	return nil
}

// runShared owns the targets on the session's connection: one at a
// time, each sent, its header read and its rows buffered before the
// next, since they share one connection.
func (mg *merger) runShared(plan *router.Plan, shared []bool) error {
	for i := range plan.Targets {
		if t := &plan.Targets[i]; shared[i] {
			bc, err := mg.x.send(t)
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
	mg.x.conns.RunningAll(conns)
}

// readHeader reads a target's column count and definitions; the first
// target's become the merged result's.
func (mg *merger) readHeader(s *stream) error {
	p, err := s.bc.ReadPacket()
	if err != nil {
		return s.lost()
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
	first := mg.cols == nil
	raw, err := readColumns(s.bc, s.ncols, first, mg.x.tables)
	if err != nil {
		s.bc.MarkBroken()
		return err
	}
	if first {
		defs := make([]*mysql.Column, len(raw))
		for i, p := range raw {
			if defs[i], err = mysql.ParseColumnExt(p, s.bc.ExtMetadata()); err != nil {
				return err
			}
		}
		mg.cols, mg.rawCols = newColumns(defs), raw
		if mg.x.DivPrecision != nil {
			mg.cols.divPrec = *mg.x.DivPrecision
		}
	}
	return nil
}

// members gives a HAVING the members of the ENUM and SET columns it may
// use as numbers (Engine.SetMembers).
func (mg *merger) members() {
	if mg.m.Having == nil || mg.x.eng.members == nil {
		return
	}
	for i, d := range mg.cols.defs {
		if d.Flags&(mysql.FlagEnum|mysql.FlagSet) == 0 || d.OrgName == "" {
			continue
		}
		if mg.cols.members == nil {
			mg.cols.members = make([][]string, len(mg.cols.defs))
		}
		table := d.OrgTable
		if l, ok := LogicalName(mg.x.tables, []byte(table)); ok {
			table = l
		}
		mg.cols.members[i] = mg.x.eng.members(d.Schema, table, d.OrgName)
	}
}

// buffer reads all of a stream's rows into memory so its connection is
// free for the next statement; next then serves them from memory.
func (mg *merger) buffer(s *stream) error {
	for {
		p, err := s.bc.ReadPacket()
		if err != nil {
			return s.lost()
		}
		if mysql.IsEOF(p) {
			s.res.SetInfo(p)
			s.drained = true
			return nil
		}
		if len(p) > 0 && p[0] == mysql.ErrHeader {
			s.drained = true
			s.done = true
			return mysql.ParseErr(p)
		}
		if err := mg.mem.charge(int64(len(p)) + 24); err != nil {
			s.bc.MarkBroken() // the rest of the result is unread
			return err
		}
		s.rows = append(s.rows, append([]byte(nil), p...))
	}
}

// close returns every stream's connection: read to the end ones to the
// pool, others closed (a half-read result cannot be reused).
func (mg *merger) close() {
	mg.mem.release()
	mg.x.conns.RunningAll(nil)
	for i, s := range mg.streams {
		if !s.done && !s.drained {
			s.bc.MarkBroken()
		}
		s.res.OK = s.res.OK && (s.done || s.drained)
		// Buffered streams share the session's connection: return it once.
		if !slices.ContainsFunc(mg.streams[i+1:], func(o *stream) bool { return o.bc == s.bc }) {
			mg.x.conns.Release(s.bc, false, s.res)
		}
	}
	mg.streams = nil
}

// writeHeader sends the visible columns' definitions (AVG columns get the
// type and scale MySQL gives AVG).
func (mg *merger) writeHeader() error {
	avg := map[int]bool{}
	for _, a := range mg.m.Aggs {
		if a.Func == router.AggAvg && !isFloatCol(mg.cols.defs[a.Col]) {
			avg[a.Col] = true
		}
	}
	n := mg.m.Columns
	cols := make([]*mysql.Column, n)
	raw := make([][]byte, n)
	for i := range n {
		if avg[i] {
			cols[i] = avgColumn(mg.cols.defs[i], mg.cols.divPrec)
			continue
		}
		cols[i], raw[i] = mg.cols.defs[i], mg.rawCols[i]
	}
	return mg.x.w.Fields(cols, raw)
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
