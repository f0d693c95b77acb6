package resultcache

import "math"

// Image is a row image of a change: column name to value, as package
// changestream decodes them (int64 or uint64 for integer columns).
type Image = map[string]any

// Invalidate drops the answers a change of a row of table (a logical
// db.table) may have made wrong: those of the key points its before and
// after images hold, and of the ranges their keys fall in. It also moves
// the fill guards of those points (and the table's, for range fills), so
// a fill under way when the change arrived does not keep its answer.
func (c *Cache) Invalidate(table string, before, after Image) {
	c.idxMu.Lock()
	defer c.idxMu.Unlock()
	tb := c.tables[table]
	if tb == nil {
		return // no answer and no fill of the table ever: nothing to guard
	}
	tb.anyGen++
	dropped := 0
	for col := range tb.cols {
		for _, img := range [2]Image{before, after} {
			if img == nil {
				continue
			}
			v, big, ok := intValue(img[col])
			if !ok {
				continue
			}
			if !big {
				c.guard[guardSlot(table, col, v)].Add(1)
				c.scratch = tb.points[point{col, v}].appendTo(c.scratch[:0])
				for _, e := range c.scratch {
					c.removeLocked(e)
					dropped++
				}
				clear(c.scratch) // holds no dropped answer
			}
			for e := range tb.ranges {
				if e.col == col && e.rng.holds(v, big) {
					c.removeLocked(e)
					dropped++
				}
			}
		}
	}
	c.st.changes.Add(1)
	c.st.invalidated.Add(uint64(dropped))
}

// intValue reads an integer column's value; big marks an unsigned one
// above MaxInt64, which no point can name.
func intValue(x any) (v int64, big, ok bool) {
	switch n := x.(type) {
	case int64:
		return n, false, true
	case uint64:
		if n > math.MaxInt64 {
			return 0, true, true
		}
		return int64(n), false, true
	case int32:
		return int64(n), false, true
	case uint32:
		return int64(n), false, true
	case int:
		return int64(n), false, true
	}
	return 0, false, false
}

// FlushTable drops every answer of table: a statement changed it (DDL,
// TRUNCATE, RENAME), or a change could not be read row by row.
func (c *Cache) FlushTable(table string) {
	c.idxMu.Lock()
	defer c.idxMu.Unlock()
	tb := c.tables[table]
	if tb == nil {
		return
	}
	tb.gen++
	tb.anyGen++
	var all []*entry
	for _, set := range tb.points {
		all = set.appendTo(all)
	}
	for e := range tb.ranges {
		all = append(all, e)
	}
	for _, e := range all {
		c.removeLocked(e)
	}
	c.st.invalidated.Add(uint64(len(all)))
	c.st.tableFlushes.Add(1)
}

// Flush drops every answer: a reader lost its stream, or a statement
// changed tables it could not name.
func (c *Cache) Flush() {
	c.idxMu.Lock()
	defer c.idxMu.Unlock()
	c.flushGen.Add(1)
	n := 0
	for _, tb := range c.tables {
		tb.gen++
		tb.anyGen++
		n += tb.n
		tb.points = map[point]pointSet{}
		tb.ranges = map[*entry]struct{}{}
		tb.n = 0
	}
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		s.m = map[Key]*entry{}
		s.head, s.tail, s.bytes = nil, nil, 0
		s.mu.Unlock()
	}
	c.st.invalidated.Add(uint64(n))
	c.st.flushes.Add(1)
}
