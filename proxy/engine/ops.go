package engine

import (
	"container/heap"
	"fmt"
	"sort"
	"sync/atomic"

	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/router"
)

// The merge operators. Each is a small piece over row streams, composed by
// merge.go into the pipeline one merged SELECT needs:
//
//	targets ─┬─ orderedMerge (ORDER BY, streaming) ──────────────┐
//	         ├─ concatRows (no ORDER BY, streaming) ──────────────┤
//	         └─ concatRows → grouper | collectRows                │
//	                       → distinctRows → sortRows → sliceRows ─┴─ limitRows → Writer
//
// Streaming operators hold one row per target; the others hold rows in
// memory, charged to a budget (merge_memory_limit).

// rowIter is a stream of rows. next returns the next row, nil at the end;
// its values (NULL is nil) and raw, the row's text packet when it has one,
// are valid until the next call.
type rowIter interface {
	next() (row [][]byte, raw []byte, err error)
}

// sliceRows serves rows held in memory.
type sliceRows struct {
	rows [][][]byte
	i    int
}

func (s *sliceRows) next() ([][]byte, []byte, error) {
	if s.i >= len(s.rows) {
		return nil, nil, nil
	}
	s.i++
	return s.rows[s.i-1], nil, nil
}

// concatRows serves its inputs' rows one input after another.
type concatRows struct {
	in []rowIter
}

func (c *concatRows) next() ([][]byte, []byte, error) {
	for len(c.in) > 0 {
		row, raw, err := c.in[0].next()
		if err != nil || row != nil {
			return row, raw, err
		}
		c.in = c.in[1:]
	}
	return nil, nil, nil
}

// limitRows skips offset rows, then serves at most count. It stops reading
// its input as soon as count rows are served.
type limitRows struct {
	in              rowIter
	offset, count   uint64
	skipped, served uint64
}

func (l *limitRows) next() ([][]byte, []byte, error) {
	if l.served >= l.count {
		return nil, nil, nil
	}
	for l.skipped < l.offset {
		row, _, err := l.in.next()
		if err != nil || row == nil {
			return nil, nil, err
		}
		l.skipped++
	}
	row, raw, err := l.in.next()
	if row != nil {
		l.served++
	}
	return row, raw, err
}

// orderedMerge merges inputs that are each sorted by cmp into one sorted
// stream (a k-way merge on a heap): memory holds one row per input. Equal
// rows come in input order.
type orderedMerge struct {
	cmp  func(a, b [][]byte) int
	in   []rowIter
	live []int // indexes into in of the inputs with a current row, as a heap
	rows [][][]byte
	raws [][]byte
	// primed is set once every input's first row is read; pending once the
	// top row was served (its input advances on the next call).
	primed, pending bool
}

func newOrderedMerge(in []rowIter, cmp func(a, b [][]byte) int) *orderedMerge {
	return &orderedMerge{cmp: cmp, in: in, rows: make([][][]byte, len(in)), raws: make([][]byte, len(in))}
}

// prime reads every input's first row. next primes on its first call; call
// it earlier to see the inputs' first errors before anything is written.
func (m *orderedMerge) prime() error {
	if m.primed {
		return nil
	}
	m.primed = true
	for i, it := range m.in {
		row, raw, err := it.next()
		if err != nil {
			return err
		}
		if row != nil {
			m.rows[i], m.raws[i] = row, raw
			m.live = append(m.live, i)
		}
	}
	heap.Init(m)
	return nil
}

func (m *orderedMerge) next() ([][]byte, []byte, error) {
	if err := m.prime(); err != nil {
		return nil, nil, err
	}
	if m.pending {
		m.pending = false
		top := m.live[0]
		row, raw, err := m.in[top].next()
		if err != nil {
			return nil, nil, err
		}
		if row == nil {
			heap.Pop(m)
		} else {
			m.rows[top], m.raws[top] = row, raw
			heap.Fix(m, 0)
		}
	}
	if len(m.live) == 0 {
		return nil, nil, nil
	}
	m.pending = true
	top := m.live[0]
	return m.rows[top], m.raws[top], nil
}

func (m *orderedMerge) Len() int { return len(m.live) }
func (m *orderedMerge) Less(i, j int) bool {
	a, b := m.live[i], m.live[j]
	if c := m.cmp(m.rows[a], m.rows[b]); c != 0 {
		return c < 0
	}
	return a < b
}
func (m *orderedMerge) Swap(i, j int) { m.live[i], m.live[j] = m.live[j], m.live[i] }
func (m *orderedMerge) Push(x any)    {}
func (m *orderedMerge) Pop() any {
	m.live = m.live[:len(m.live)-1]
	return nil
}

// budget charges the rows a merge holds in memory against
// merge_memory_limit.
type budget struct {
	used, limit int64
	// global, when set, is what every merge under way holds together,
	// bounded by globalLimit (merge_memory_total); release gives back
	// this budget's share.
	global      *atomic.Int64
	globalLimit int64
	charged     int64 // what this budget added to global
}

func (b *budget) charge(n int64) error {
	b.used += n
	if b.used > b.limit {
		return errMergeMemory(b.limit)
	}
	if b.global == nil {
		return nil
	}
	b.charged += n
	if b.global.Add(n) > b.globalLimit {
		return &mysql.SQLError{Code: 1038, State: "HY001", Message: fmt.Sprintf(
			"Out of sort memory: the cross-shard queries running in the proxy together need more than merge_memory_total (%d bytes); try again, or raise merge_memory_total in ks.yaml", b.globalLimit)}
	}
	return nil
}

// release gives back what the budget charged to the global total.
func (b *budget) release() {
	if b.global != nil && b.charged > 0 {
		b.global.Add(-b.charged)
		b.charged = 0
	}
}

// chargeRow charges a row: its values and a slice header per value.
func (b *budget) chargeRow(r [][]byte) error {
	n := int64(24 * len(r))
	for _, v := range r {
		n += int64(len(v))
	}
	return b.charge(n)
}

// errMergeMemory is returned when a merge that cannot stream outgrows
// merge_memory_limit.
func errMergeMemory(limit int64) error {
	return &mysql.SQLError{Code: 1038, State: "HY001", Message: fmt.Sprintf(
		"Out of sort memory: this cross-shard query needs more than merge_memory_limit (%d bytes) in the proxy; add a condition on the shard key, or raise merge_memory_limit in ks.yaml", limit)}
}

// collectRows reads every row of in into memory (copied, within mem).
func collectRows(in rowIter, mem *budget) ([][][]byte, error) {
	var rows [][][]byte
	var a rowArena
	for {
		row, _, err := in.next()
		if err != nil || row == nil {
			return rows, err
		}
		if err := mem.chargeRow(row); err != nil {
			return nil, err
		}
		rows = append(rows, a.copy(row))
	}
}

// rowArena copies rows into blocks it allocates a few at a time, so that
// holding many rows costs far less than an allocation per row.
type rowArena struct {
	bytes []byte
	vals  [][]byte
}

// arenaBlock is the size of a block of row bytes; arenaVals the values per
// block of value slices.
const (
	arenaBlock = 64 << 10
	arenaVals  = 1024
)

// copy returns a copy of r (NULLs stay nil) that no later read changes.
func (a *rowArena) copy(r [][]byte) [][]byte {
	size := 0
	for _, v := range r {
		size += len(v)
	}
	if cap(a.bytes)-len(a.bytes) < size {
		a.bytes = make([]byte, 0, max(arenaBlock, size))
	}
	if cap(a.vals)-len(a.vals) < len(r) {
		a.vals = make([][]byte, 0, max(arenaVals, len(r)))
	}
	start := len(a.vals)
	a.vals = append(a.vals, r...)
	out := a.vals[start:len(a.vals):len(a.vals)]
	for i, v := range r {
		switch {
		case v == nil:
		case len(v) == 0:
			out[i] = emptyValue // not nil, which is NULL
		default:
			b := len(a.bytes)
			a.bytes = append(a.bytes, v...)
			out[i] = a.bytes[b:len(a.bytes):len(a.bytes)]
		}
	}
	return out
}

// emptyValue is the empty string, as a non-nil value.
var emptyValue = []byte{}

// distinctRows keeps the first of rows equal over the first ncols columns
// (compared as cols say).
func distinctRows(rows [][][]byte, ncols int, cols *columns, mem *budget) ([][][]byte, error) {
	seen := map[string]bool{}
	out := rows[:0]
	var key []byte
	for _, r := range rows {
		key = key[:0]
		for i := 0; i < ncols; i++ {
			key = sortKey(key, cols.kinds[i], r[i])
		}
		if seen[string(key)] {
			continue
		}
		if err := mem.charge(int64(len(key))); err != nil {
			return nil, err
		}
		seen[string(key)] = true
		out = append(out, r)
	}
	return out, nil
}

// orderCovers reports whether keys name every one of the first n columns
// and nothing else, so that rows equal in those columns are neighbours in
// an order by keys.
func orderCovers(keys []router.SortKey, n int) bool {
	if n == 0 || n > 64 {
		return false
	}
	var seen uint64
	for _, k := range keys {
		if k.Col >= n {
			return false
		}
		seen |= 1 << k.Col
	}
	return seen == 1<<n-1
}

// distinctSorted drops rows equal to the row before them. Its input's rows
// are only valid until the next call, so the last row served is copied
// into buffers that are reused.
type distinctSorted struct {
	in   rowIter
	eq   func(a, b [][]byte) bool
	prev [][]byte
	buf  []byte
	have bool
}

func (d *distinctSorted) next() ([][]byte, []byte, error) {
	for {
		row, raw, err := d.in.next()
		if err != nil || row == nil {
			return row, raw, err
		}
		if d.have && d.eq(d.prev, row) {
			continue
		}
		d.keep(row)
		return row, raw, nil
	}
}

func (d *distinctSorted) keep(row [][]byte) {
	if d.buf == nil {
		d.buf = make([]byte, 0, 256) // never nil: an empty value must not turn into NULL
	}
	d.buf = d.buf[:0]
	for _, v := range row {
		d.buf = append(d.buf, v...)
	}
	d.prev = d.prev[:0]
	off := 0
	for _, v := range row {
		if v == nil {
			d.prev = append(d.prev, nil)
			continue
		}
		d.prev = append(d.prev, d.buf[off:off+len(v):off+len(v)])
		off += len(v)
	}
	d.have = true
}

// sortRows sorts rows in memory by keys, stably.
func sortRows(rows [][][]byte, cols *columns, keys []router.SortKey) {
	sort.SliceStable(rows, func(i, j int) bool { return cols.compareRows(keys, rows[i], rows[j]) < 0 })
}
