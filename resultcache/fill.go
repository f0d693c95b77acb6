package resultcache

import "hash/maphash"

// Deps is what an answer depends on (router.Cacheable's facts): rows of
// logical table Table whose Column is one of Points, or, without Points,
// whose primary key Column is in Range; read on Node.
type Deps struct {
	Table  string
	Column string
	Points []int64
	Range  *Range
	Node   string
}

// Token is what a fill saw before its statement went to the node: Store
// keeps the answer only when nothing it depends on moved since.
type Token struct {
	deps     Deps
	tbl      *table
	flushGen uint64
	gen      uint64
	anyGen   uint64
	guards   []uint64
	epoch    uint64
	ok       bool // the node's reader was up
}

// Begin takes the Token of a fill of d, before its statement is sent.
func (c *Cache) Begin(d Deps) Token {
	t := Token{deps: d, flushGen: c.flushGen.Load()}
	if n := c.nodes[d.Node]; n != nil {
		t.epoch, t.ok = n.state()
	}
	c.idxMu.Lock()
	tb := c.tableLocked(d.Table)
	tb.cols[d.Column] = true
	t.tbl, t.gen, t.anyGen = tb, tb.gen, tb.anyGen
	c.idxMu.Unlock()
	// After the table knows the column: a change from now on moves the
	// counters read below.
	if len(d.Points) > 0 {
		t.guards = make([]uint64, len(d.Points))
		for i, v := range d.Points {
			t.guards[i] = c.guard[guardSlot(d.Table, d.Column, v)].Load()
		}
	}
	return t
}

// tableLocked returns the index of table name, made on first use;
// c.idxMu held.
func (c *Cache) tableLocked(name string) *table {
	tb := c.tables[name]
	if tb == nil {
		tb = &table{name: name, cols: map[string]bool{}, points: map[point]pointSet{}, ranges: map[*entry]struct{}{}}
		c.tables[name] = tb
	}
	return tb
}

var guardSeed = maphash.MakeSeed()

func guardSlot(table, col string, v int64) int {
	var h maphash.Hash
	h.SetSeed(guardSeed)
	h.WriteString(table)
	h.WriteByte(0)
	h.WriteString(col)
	h.WriteByte(0)
	var b [8]byte
	for i := range b {
		b[i] = byte(uint64(v) >> (8 * i))
	}
	h.Write(b[:])
	return int(h.Sum64() % guardSlots)
}

// Store keeps resp (whole packets as the client got them, which Store
// now owns) as the answer of k and stmt, with rows rows, when nothing t
// depends on moved since Begin and the node's reader is still the one
// that was up then; it reports whether it kept it.
func (c *Cache) Store(t Token, k Key, stmt []byte, resp []byte, rows uint64) bool {
	if len(resp) > c.opt.MaxEntry {
		c.st.tooLarge.Add(1)
		return false
	}
	n := c.nodes[t.deps.Node]
	c.idxMu.Lock()
	defer c.idxMu.Unlock()
	if !c.unmoved(t, n) {
		c.st.refused.Add(1)
		return false
	}
	if cap(resp)-len(resp) > len(resp)/8 {
		// An answer read into a growing buffer: keep what it holds, not
		// the room it grew, which the budget would not see.
		resp = append(make([]byte, 0, len(resp)), resp...)
	}
	e := &entry{key: k, stmt: string(stmt), resp: resp, rows: rows, node: t.deps.Node, tbl: t.tbl, col: t.deps.Column,
		points: t.deps.Points, rng: t.deps.Range}
	e.size = int64(len(e.stmt)+cap(resp)+8*len(e.points)) + entryOverhead
	s := c.shard(k)
	s.mu.Lock()
	if old := s.m[k]; old != nil {
		c.dropLocked(s, old)
		c.unindexLocked(old) // idxMu held; it must not stay filed under its points
	}
	s.m[k] = e
	s.pushFront(e)
	s.bytes += e.size
	var evicted []*entry
	for s.bytes > s.budget && s.tail != nil && s.tail != e {
		v := s.tail
		c.dropLocked(s, v)
		evicted = append(evicted, v)
	}
	s.mu.Unlock()
	c.indexLocked(e)
	for _, v := range evicted {
		c.unindexLocked(v)
	}
	c.st.evictions.Add(uint64(len(evicted)))
	c.st.fills.Add(1)
	return true
}

// unmoved reports whether nothing t depends on moved; c.idxMu held.
func (c *Cache) unmoved(t Token, n *node) bool {
	if !t.ok || n == nil || c.flushGen.Load() != t.flushGen || t.tbl.gen != t.gen {
		return false
	}
	if epoch, up := n.state(); !up || epoch != t.epoch {
		return false
	}
	if t.deps.Range != nil && t.tbl.anyGen != t.anyGen {
		return false
	}
	for i, v := range t.deps.Points {
		if c.guard[guardSlot(t.deps.Table, t.deps.Column, v)].Load() != t.guards[i] {
			return false
		}
	}
	return true
}

// dropLocked takes e out of its shard (s.mu held); the caller takes it
// out of the index.
func (c *Cache) dropLocked(s *shard, e *entry) {
	if s.m[e.key] == e {
		delete(s.m, e.key)
	}
	s.unlink(e)
	s.bytes -= e.size
}

// indexLocked files e under its points or range; c.idxMu held.
func (c *Cache) indexLocked(e *entry) {
	tb := e.tbl
	tb.n++
	if e.rng != nil {
		tb.ranges[e] = struct{}{}
		return
	}
	for _, v := range e.points {
		p := point{e.col, v}
		set := tb.points[p]
		set.add(e)
		tb.points[p] = set
	}
}

// unindexLocked is indexLocked undone; c.idxMu held.
func (c *Cache) unindexLocked(e *entry) {
	tb := e.tbl
	if e.rng != nil {
		if _, ok := tb.ranges[e]; ok {
			delete(tb.ranges, e)
			tb.n--
		}
		return
	}
	found := false
	for _, v := range e.points {
		p := point{e.col, v}
		set, ok := tb.points[p]
		if !ok || !set.remove(e) {
			continue
		}
		found = true
		if set.one == nil {
			delete(tb.points, p)
		} else {
			tb.points[p] = set
		}
	}
	if found {
		tb.n--
	}
}

// remove drops e from its shard and the index; c.idxMu held.
func (c *Cache) removeLocked(e *entry) {
	s := c.shard(e.key)
	s.mu.Lock()
	if s.m[e.key] == e {
		c.dropLocked(s, e)
	}
	s.mu.Unlock()
	c.unindexLocked(e)
}
