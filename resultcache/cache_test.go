package resultcache

import (
	"math"
	"runtime"
	"strconv"
	"testing"
	"time"
)

const tbl = "db.t"

var t0 = time.Unix(1_700_000_000, 0)

// newCache returns a cache of nodes n1 and n2, both readers up at t0.
func newCache(o Options) *Cache {
	if o.MaxEntry == 0 {
		o.MaxEntry = 1 << 20
	}
	if o.Memory == 0 {
		o.Memory = 64 << 20
	}
	c := New(o, []string{"n1", "n2"})
	c.ReaderUp("n1", "0-1-10", t0)
	c.ReaderUp("n2", "0-2-10", t0)
	return c
}

func key(stmt string) Key {
	var h KeyHasher
	h.Reset()
	h.WriteString(stmt)
	return h.Sum()
}

func pts(col string, vs ...int64) Deps {
	return Deps{Table: tbl, Column: col, Points: vs, Node: "n1"}
}

func rng(lo, hi int64, noLo, noHi bool) Deps {
	return Deps{Table: tbl, Column: "id", Range: &Range{Lo: lo, Hi: hi, NoLo: noLo, NoHi: noHi}, Node: "n1"}
}

// fill runs a whole fill of stmt with nothing in between.
func fill(c *Cache, stmt string, d Deps) bool {
	return c.Store(c.Begin(d), key(stmt), []byte(stmt), []byte("resp of "+stmt), 1)
}

func has(c *Cache, stmt string) bool {
	_, ok, _ := c.Lookup(key(stmt), []byte(stmt), t0)
	return ok
}

func TestLookupAfterStore(t *testing.T) {
	c := newCache(Options{})
	stmt := "select * from t where id=1"
	tok := c.Begin(Deps{Table: tbl, Column: "id", Points: []int64{1}, Node: "n2"})
	if !c.Store(tok, key(stmt), []byte(stmt), []byte{1, 2, 3}, 7) {
		t.Fatal("Store refused a fill nothing moved under")
	}
	h, ok, _ := c.Lookup(key(stmt), []byte(stmt), t0)
	if !ok || string(h.Resp) != "\x01\x02\x03" || h.Rows != 7 || h.Node != "n2" {
		t.Fatalf("Lookup = %+v, %v; want resp 010203, 7 rows, node n2", h, ok)
	}
	if _, ok, _ := c.Lookup(key(stmt), []byte("select * from t where id=2"), t0); ok {
		t.Error("a different statement with the same Key hit")
	}
	if has(c, "select 1") {
		t.Error("an unknown key hit")
	}
	st := c.Stats()
	if st.Hits != 1 || st.Misses != 2 || st.Fills != 1 || st.Entries != 1 || st.FillsRefused != 0 {
		t.Errorf("Stats = %+v; want 1 hit, 2 misses, 1 fill, 1 entry", st)
	}
	if want := int64(len(stmt)+3+8) + entryOverhead; st.Bytes != want {
		t.Errorf("Stats.Bytes = %d, want %d", st.Bytes, want)
	}
	if len(st.Nodes) != 2 || st.Nodes[0].Name != "n1" || !st.Nodes[0].Up {
		t.Errorf("Stats.Nodes = %+v", st.Nodes)
	}
}

func TestKeyHasher(t *testing.T) {
	k := func(parts ...string) Key {
		var h KeyHasher
		h.Reset()
		for _, p := range parts {
			h.WriteString(p)
		}
		return h.Sum()
	}
	if k("a", "b") != k("a", "b") {
		t.Error("the same parts gave two keys")
	}
	if k("ab", "c") == k("a", "bc") {
		t.Error("parts are not separated")
	}
	var h1, h2 KeyHasher
	h1.Reset()
	h1.Write([]byte("x"))
	h1.WriteUint(1)
	h2.Reset()
	h2.Write([]byte("x"))
	h2.WriteUint(2)
	if h1.Sum() == h2.Sum() {
		t.Error("WriteUint 1 and 2 gave one key")
	}
}

func TestInvalidatePoints(t *testing.T) {
	cases := []struct {
		name          string
		before, after Image
		dropped       bool
	}{
		{"before image int64", Image{"id": int64(7), "v": int64(1)}, Image{"id": int64(7), "v": int64(2)}, true},
		{"before image only (delete)", Image{"id": int64(7)}, nil, true},
		{"after image only (insert)", nil, Image{"id": int64(7)}, true},
		{"after image holds the key", Image{"id": int64(6)}, Image{"id": int64(7)}, true},
		{"uint64", Image{"id": uint64(7)}, nil, true},
		{"int32", Image{"id": int32(7)}, nil, true},
		{"unrelated key", Image{"id": int64(8)}, Image{"id": uint64(9)}, false},
		{"other column holds 7", Image{"id": int64(8), "v": int64(7)}, nil, false},
		{"not an integer", Image{"id": "7"}, nil, false},
		{"no images", nil, nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCache(Options{})
			fill(c, "seven", pts("id", 7))
			fill(c, "five", pts("id", 5))
			fill(c, "other table", Deps{Table: "db.o", Column: "id", Points: []int64{7}, Node: "n1"})
			c.Invalidate(tbl, tc.before, tc.after)
			if has(c, "seven") == tc.dropped {
				t.Errorf("entry of id 7 kept = %v, want %v", !tc.dropped, !tc.dropped)
			}
			if !has(c, "five") || !has(c, "other table") {
				t.Error("an unrelated entry was dropped")
			}
			st := c.Stats()
			if want := map[bool]uint64{true: 1, false: 0}[tc.dropped]; st.Invalidated != want || st.Changes != 1 {
				t.Errorf("Invalidated = %d, Changes = %d; want %d, 1", st.Invalidated, st.Changes, want)
			}
		})
	}
}

func TestInvalidateMultiPoint(t *testing.T) {
	c := newCache(Options{})
	fill(c, "in (1,2,3)", pts("id", 1, 2, 3))
	fill(c, "in (3,4)", pts("id", 3, 4))
	c.Invalidate(tbl, Image{"id": int64(2)}, nil)
	if has(c, "in (1,2,3)") || !has(c, "in (3,4)") {
		t.Error("a change of id 2 did not drop (1,2,3) alone")
	}
	c.Invalidate(tbl, Image{"id": int64(1)}, Image{"id": int64(3)})
	if has(c, "in (3,4)") {
		t.Error("a change of id 3 kept (3,4)")
	}
	if st := c.Stats(); st.Invalidated != 2 || st.Entries != 0 {
		t.Errorf("Invalidated = %d, Entries = %d; want 2, 0 (an entry with several points counted once)", st.Invalidated, st.Entries)
	}
	if tb := c.tables[tbl]; tb.n != 0 || len(tb.points) != 0 {
		t.Errorf("index left: n = %d, points = %v", tb.n, tb.points)
	}
}

func TestInvalidateBigUnsigned(t *testing.T) {
	c := newCache(Options{})
	fill(c, "id=-1", pts("id", -1))
	fill(c, "id=min", pts("id", math.MinInt64))
	fill(c, "id=max", pts("id", math.MaxInt64))
	fill(c, "id>=5", rng(5, 0, false, true))
	fill(c, "all", rng(0, 0, true, true))
	fill(c, "id<=max", rng(0, math.MaxInt64, false, false))
	fill(c, "id<=10", rng(0, 10, true, false))
	c.Invalidate(tbl, Image{"id": uint64(math.MaxInt64) + 1}, Image{"id": uint64(math.MaxUint64)})
	for _, s := range []string{"id=-1", "id=min", "id=max", "id<=max", "id<=10"} {
		if !has(c, s) {
			t.Errorf("an unsigned key above MaxInt64 dropped %q", s)
		}
	}
	for _, s := range []string{"id>=5", "all"} {
		if has(c, s) {
			t.Errorf("an unsigned key above MaxInt64 kept the open-ended range %q", s)
		}
	}
	c.Invalidate(tbl, Image{"id": uint64(math.MaxInt64)}, nil)
	if has(c, "id=max") || has(c, "id<=max") {
		t.Error("uint64 MaxInt64 kept the point or range that holds it")
	}
	c.Invalidate(tbl, Image{"id": int64(-1)}, nil)
	if has(c, "id=-1") || has(c, "id<=10") || !has(c, "id=min") {
		t.Error("int64 -1 did not drop exactly id=-1 and id<=10")
	}
}

func TestInvalidateUniqueColumn(t *testing.T) {
	c := newCache(Options{})
	fill(c, "u=7", pts("u", 7))
	fill(c, "id=7", pts("id", 7))
	// Row id 1 changes v only, u stays 9: neither entry moves.
	c.Invalidate(tbl, Image{"id": int64(1), "u": int64(9), "v": int64(7)}, Image{"id": int64(1), "u": int64(9), "v": int64(8)})
	if !has(c, "u=7") || !has(c, "id=7") {
		t.Fatal("a change that leaves u at 9 dropped an entry of 7")
	}
	// Row id 2 changes u 7 -> 8: the u=7 answer goes, id=7 stays.
	c.Invalidate(tbl, Image{"id": int64(2), "u": int64(7)}, Image{"id": int64(2), "u": int64(8)})
	if has(c, "u=7") || !has(c, "id=7") {
		t.Fatal("a change of u from 7 did not drop exactly u=7")
	}
	fill(c, "u=7", pts("u", 7))
	// Row id 3 changes u 6 -> 7: the after image now holds u=7.
	c.Invalidate(tbl, Image{"id": int64(3), "u": int64(6)}, Image{"id": int64(3), "u": int64(7)})
	if has(c, "u=7") {
		t.Fatal("a change of u to 7 kept u=7")
	}
	// A range of id is not dropped by a u inside it.
	fill(c, "id 0..10", rng(0, 10, false, false))
	c.Invalidate(tbl, Image{"id": int64(100), "u": int64(5)}, nil)
	if !has(c, "id 0..10") {
		t.Error("a u of 5 dropped a range of id")
	}
}

func TestInvalidateUnregisteredColumn(t *testing.T) {
	c := newCache(Options{})
	fill(c, "id=7", pts("id", 7))
	// Only id was ever registered for the table: u is not looked at,
	// and the table of another name is not touched at all.
	c.Invalidate(tbl, Image{"id": int64(1), "u": int64(7)}, nil)
	c.Invalidate("db.none", Image{"id": int64(7)}, nil)
	if !has(c, "id=7") {
		t.Error("a u of 7 or a change of another table dropped id=7")
	}
	if _, ok := c.tables[tbl].cols["u"]; ok {
		t.Error("Invalidate registered a column")
	}
}

func TestInvalidateRanges(t *testing.T) {
	cases := []struct {
		name string
		d    Deps
		in   []int64
		out  []int64
	}{
		{"closed", rng(10, 20, false, false), []int64{10, 15, 20}, []int64{9, 21, -15, math.MinInt64, math.MaxInt64}},
		{"no low", rng(0, 20, true, false), []int64{math.MinInt64, -100, 20}, []int64{21, math.MaxInt64}},
		{"no high", rng(10, 0, false, true), []int64{10, math.MaxInt64}, []int64{9, math.MinInt64}},
		{"open", rng(0, 0, true, true), []int64{math.MinInt64, 0, math.MaxInt64}, nil},
		{"one key", rng(-3, -3, false, false), []int64{-3}, []int64{-2, -4, 3}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, v := range tc.in {
				c := newCache(Options{})
				fill(c, "r", tc.d)
				c.Invalidate(tbl, nil, Image{"id": v})
				if has(c, "r") {
					t.Errorf("a change of id %d kept the range", v)
				}
			}
			c := newCache(Options{})
			fill(c, "r", tc.d)
			for _, v := range tc.out {
				c.Invalidate(tbl, Image{"id": v}, Image{"id": v})
				if !has(c, "r") {
					t.Fatalf("a change of id %d dropped the range", v)
				}
			}
		})
	}
}

func TestFillGuardPoints(t *testing.T) {
	c := newCache(Options{})
	tok := c.Begin(pts("id", 1, 2))
	c.Invalidate(tbl, Image{"id": int64(2)}, nil)
	if c.Store(tok, key("a"), []byte("a"), []byte("old"), 1) {
		t.Error("Store kept an answer one of whose points changed since Begin")
	}
	if has(c, "a") {
		t.Error("the refused answer is served")
	}
	if st := c.Stats(); st.FillsRefused != 1 || st.Fills != 0 {
		t.Errorf("FillsRefused = %d, Fills = %d; want 1, 0", st.FillsRefused, st.Fills)
	}
	// A change of an unrelated key, of another column, or another table
	// does not refuse a point fill.
	tok = c.Begin(pts("id", 1, 2))
	c.Invalidate(tbl, Image{"id": int64(3), "u": int64(1)}, nil)
	c.Invalidate("db.o", Image{"id": int64(1)}, nil)
	if !c.Store(tok, key("a"), []byte("a"), []byte("new"), 1) {
		t.Error("Store refused a point fill after unrelated changes")
	}
	// A fill begun after the change is kept.
	c.Invalidate(tbl, Image{"id": int64(1)}, nil)
	if !fill(c, "b", pts("id", 1)) || !has(c, "b") {
		t.Error("a fill begun after the change was refused")
	}
}

func TestFillGuardRange(t *testing.T) {
	c := newCache(Options{})
	tok := c.Begin(rng(0, 10, false, false))
	c.Invalidate(tbl, Image{"id": int64(1000)}, nil) // outside the range: still refused
	if c.Store(tok, key("r"), []byte("r"), []byte("x"), 1) {
		t.Error("a range fill survived a change of its table")
	}
	tok = c.Begin(rng(0, 10, false, false))
	c.Invalidate("db.o", Image{"id": int64(5)}, nil)
	if !c.Store(tok, key("r"), []byte("r"), []byte("x"), 1) {
		t.Error("a range fill was refused by a change of another table")
	}
	if st := c.Stats(); st.FillsRefused != 1 {
		t.Errorf("FillsRefused = %d, want 1", st.FillsRefused)
	}
}

func TestFillGuardFlush(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flush func(*Cache)
		kept  bool
	}{
		{"FlushTable", func(c *Cache) { c.FlushTable(tbl) }, false},
		{"FlushTable of another table", func(c *Cache) { fill(c, "o", Deps{Table: "db.o", Node: "n1"}); c.FlushTable("db.o") }, true},
		{"Flush", func(c *Cache) { c.Flush() }, false},
		{"ReaderDown then ReaderUp", func(c *Cache) { c.ReaderDown("n1"); c.ReaderUp("n1", "0-1-10", t0) }, false},
		{"ReaderUp again (a new stream)", func(c *Cache) { c.ReaderUp("n1", "0-1-12", t0) }, false},
		{"the other node's reader restarted", func(c *Cache) { c.ReaderDown("n2"); c.ReaderUp("n2", "0-1-10", t0) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCache(Options{})
			for _, d := range []Deps{pts("id", 1), rng(0, 9, false, false)} {
				tok := c.Begin(d)
				tc.flush(c)
				if got := c.Store(tok, key("a"), []byte("a"), []byte("x"), 1); got != tc.kept {
					t.Errorf("Store of %+v = %v, want %v", d, got, tc.kept)
				}
			}
		})
	}
}

func TestFillGuardReaderDown(t *testing.T) {
	c := newCache(Options{})
	c.ReaderDown("n1")
	tok := c.Begin(pts("id", 1))
	if c.Store(tok, key("a"), []byte("a"), []byte("x"), 1) {
		t.Error("Store kept an answer while the node's reader is down")
	}
	c.ReaderUp("n1", "0-1-10", t0)
	if c.Store(tok, key("a"), []byte("a"), []byte("x"), 1) {
		t.Error("Store kept an answer begun while the node's reader was down")
	}
	if !fill(c, "a", pts("id", 1)) {
		t.Error("a fill begun after ReaderUp was refused")
	}
	if fill(c, "b", Deps{Table: tbl, Column: "id", Points: []int64{1}, Node: "nowhere"}) {
		t.Error("Store kept an answer of an unknown node")
	}
	if st := c.Stats(); st.FillsRefused != 3 || st.Flushes != 1 {
		t.Errorf("FillsRefused = %d, Flushes = %d; want 3, 1", st.FillsRefused, st.Flushes)
	}
}

func TestStoreTooLarge(t *testing.T) {
	c := newCache(Options{MaxEntry: 10})
	if c.MaxEntry() != 10 {
		t.Fatalf("MaxEntry = %d", c.MaxEntry())
	}
	if c.Store(c.Begin(pts("id", 1)), key("a"), []byte("a"), make([]byte, 11), 1) || has(c, "a") {
		t.Error("an answer above MaxEntry was kept")
	}
	if !c.Store(c.Begin(pts("id", 1)), key("a"), []byte("a"), make([]byte, 10), 1) || !has(c, "a") {
		t.Error("an answer of exactly MaxEntry was not kept")
	}
	if st := c.Stats(); st.TooLarge != 1 || st.Fills != 1 || st.FillsRefused != 0 {
		t.Errorf("TooLarge = %d, Fills = %d, FillsRefused = %d; want 1, 1, 0", st.TooLarge, st.Fills, st.FillsRefused)
	}
}

func TestMemoryBudget(t *testing.T) {
	const n, respLen = 3000, 500
	c := newCache(Options{Memory: nShards * 4096})
	stmt := func(i int) string { return "select * from t where id=" + itoa(i) }
	for i := range n {
		s := stmt(i)
		if !c.Store(c.Begin(pts("id", int64(i))), key(s), []byte(s), make([]byte, respLen), 1) {
			t.Fatalf("Store %d refused", i)
		}
	}
	st := c.Stats()
	largest := int64(len(stmt(n))+respLen+8) + entryOverhead
	if st.Bytes > st.Budget+nShards*largest {
		t.Errorf("Bytes = %d over Budget %d + one entry per shard", st.Bytes, st.Budget)
	}
	for i := range c.shards {
		if s := &c.shards[i]; s.bytes > s.budget+largest {
			t.Errorf("shard %d holds %d bytes, budget %d", i, s.bytes, s.budget)
		}
	}
	if st.Evictions == 0 || uint64(st.Entries)+st.Evictions != n {
		t.Errorf("Entries = %d, Evictions = %d; want evictions, summing to %d", st.Entries, st.Evictions, n)
	}
	if tb := c.tables[tbl]; tb.n != st.Entries || len(tb.points) != st.Entries {
		t.Errorf("index holds %d entries, %d points; shards %d", tb.n, len(tb.points), st.Entries)
	}
	// The newest answer survives its own Store.
	if !has(c, stmt(n-1)) {
		t.Error("the answer just stored was evicted")
	}
	for i := range n {
		c.Invalidate(tbl, Image{"id": int64(i)}, nil)
	}
	after := c.Stats()
	if after.Invalidated != uint64(st.Entries) || after.Entries != 0 || after.Bytes != 0 {
		t.Errorf("after invalidating every key: Invalidated = %d (want %d), Entries = %d, Bytes = %d",
			after.Invalidated, st.Entries, after.Entries, after.Bytes)
	}
}

// TestStoreAboveShardBudget keeps an answer larger than its shard's
// budget (under MaxEntry): it evicts the others, never itself.
func TestStoreAboveShardBudget(t *testing.T) {
	c := newCache(Options{Memory: nShards * 100})
	if !fill(c, "a", pts("id", 1)) || !has(c, "a") {
		t.Fatal("an answer above its shard's budget was not kept")
	}
	if !c.Store(c.Begin(pts("id", 2)), key("a"), []byte("a"), make([]byte, 1000), 1) || !has(c, "a") {
		t.Fatal("a replacing answer above its shard's budget was not kept")
	}
	if st := c.Stats(); st.Entries != 1 || st.Evictions != 0 {
		t.Errorf("Entries = %d, Evictions = %d; want 1, 0", st.Entries, st.Evictions)
	}
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

// TestStoreReplace stores one key twice: the first answer must leave
// the index with the shard, or a later change counts it and ranges keep it.
func TestStoreReplace(t *testing.T) {
	c := newCache(Options{})
	for range 2 {
		fill(c, "p", pts("id", 1))
		fill(c, "r", rng(0, 9, false, false))
	}
	tb := c.tables[tbl]
	if tb.n != 2 || len(tb.points[point{"id", 1}].appendTo(nil)) != 1 || len(tb.ranges) != 1 {
		t.Errorf("after storing two keys twice the index holds n = %d, %d at id 1, %d ranges; want 2, 1, 1",
			tb.n, len(tb.points[point{"id", 1}].appendTo(nil)), len(tb.ranges))
	}
	c.Invalidate(tbl, Image{"id": int64(1)}, nil)
	if st := c.Stats(); st.Invalidated != 2 || st.Entries != 0 {
		t.Errorf("Invalidated = %d, Entries = %d; want 2, 0", st.Invalidated, st.Entries)
	}
}

func TestFlushTableAndFlush(t *testing.T) {
	c := newCache(Options{})
	fill(c, "p", pts("id", 1))
	fill(c, "r", rng(0, 9, false, false))
	fill(c, "o", Deps{Table: "db.o", Column: "id", Points: []int64{1}, Node: "n2"})
	c.FlushTable(tbl)
	c.FlushTable("db.none")
	if has(c, "p") || has(c, "r") || !has(c, "o") {
		t.Error("FlushTable did not drop exactly its table's answers")
	}
	if st := c.Stats(); st.Invalidated != 2 || st.TableFlushes != 1 || st.Entries != 1 {
		t.Errorf("Invalidated = %d, TableFlushes = %d, Entries = %d; want 2, 1, 1", st.Invalidated, st.TableFlushes, st.Entries)
	}
	fill(c, "p", pts("id", 1))
	c.Flush()
	if has(c, "p") || has(c, "o") {
		t.Error("Flush kept an answer")
	}
	if st := c.Stats(); st.Invalidated != 4 || st.Flushes != 1 || st.Entries != 0 || st.Bytes != 0 {
		t.Errorf("after Flush: %+v", st)
	}
	// The cache works again after a Flush, and the index starts clean.
	if !fill(c, "p", pts("id", 1)) || !has(c, "p") {
		t.Fatal("a fill after Flush was not kept")
	}
	c.Invalidate(tbl, Image{"id": int64(1)}, nil)
	if has(c, "p") || c.Stats().Invalidated != 5 {
		t.Error("Invalidate after Flush did not drop exactly the new answer")
	}
}

func TestPositions(t *testing.T) {
	c := New(Options{MaxStaleness: time.Second}, []string{"n1"})
	if c.Covers("n1", "0-1-1") {
		t.Error("Covers before ReaderUp")
	}
	c.ReaderUp("n1", "0-1-10", t0)
	for _, tc := range []struct {
		gtid string
		want bool
	}{{"0-1-10", true}, {"0-2-9", true}, {"0-1-11", false}, {"1-1-1", false}, {"garbage", false}, {"", false}} {
		if got := c.Covers("n1", tc.gtid); got != tc.want {
			t.Errorf("Covers(%q) = %v, want %v", tc.gtid, got, tc.want)
		}
	}
	if c.Covers("n9", "0-1-1") {
		t.Error("Covers of an unknown node")
	}
	c.Applied("n1", "0-1-11,1-1-3")
	if !c.Covers("n1", "1-1-3") || !c.Covers("n1", "0-1-11") || c.Covers("n1", "1-1-4") {
		t.Error("Applied 0-1-11,1-1-3 not reflected by Covers")
	}
	c.Applied("n1", "not a position")
	if !c.Covers("n1", "1-1-3") {
		t.Error("an unreadable position replaced the applied one")
	}
}

// TestLookupNotServable: an answer of a node the cache follows too far
// behind is neither served nor counted as a hit, and its key is not a
// miss either (the caller must not fill over it): it is bypassed.
func TestLookupNotServable(t *testing.T) {
	const stale = time.Second
	c := New(Options{MaxStaleness: stale, MaxEntry: 1 << 20, Memory: 64 << 20}, []string{"n1"})
	c.ReaderUp("n1", "0-1-10", t0)
	stmt := "select c from t where id=1"
	if !fill(c, stmt, pts("id", 1)) {
		t.Fatal("Store refused a fill nothing moved under")
	}
	if _, ok, kept := c.Lookup(key(stmt), []byte(stmt), t0.Add(stale+time.Millisecond)); ok || !kept {
		t.Errorf("Lookup past MaxStaleness: hit %v, kept %v; want no hit of an answer kept", ok, kept)
	}
	if st := c.Stats(); st.Hits != 0 || st.Misses != 0 || st.Bypassed != 1 {
		t.Errorf("Stats = %+v; want 0 hits, 0 misses, 1 bypassed", st)
	}
	if _, ok, _ := c.Lookup(key(stmt), []byte(stmt), t0.Add(stale)); !ok {
		t.Error("Lookup within MaxStaleness missed")
	}
}

func TestServable(t *testing.T) {
	const stale = time.Second
	c := New(Options{MaxStaleness: stale}, []string{"n1"})
	if c.Servable("n1", t0) || c.Servable("n9", t0) || c.Lag("n1", t0) != -1 {
		t.Fatal("Servable or a Lag before ReaderUp")
	}
	c.ReaderUp("n1", "0-1-10", t0)
	if !c.Servable("n1", t0) || !c.Servable("n1", t0.Add(stale)) {
		t.Error("not Servable right after ReaderUp")
	}
	t1 := t0.Add(stale + time.Millisecond)
	if c.Servable("n1", t1) {
		t.Error("Servable after MaxStaleness with no news of the node")
	}
	if got := c.Lag("n1", t1); got != stale+time.Millisecond {
		t.Errorf("Lag = %v, want %v", got, stale+time.Millisecond)
	}
	c.Polled("n1", "0-1-10", t1) // already applied: caught up at t1
	if !c.Servable("n1", t1) || c.Lag("n1", t1) != 0 {
		t.Error("Polled of an applied position did not refresh")
	}
	t2, t3 := t1.Add(stale), t1.Add(2*stale)
	c.Polled("n1", "0-1-12", t2) // ahead of the reader
	if c.Servable("n1", t3) {
		t.Error("Polled of a position ahead of the reader made it Servable")
	}
	c.Applied("n1", "0-1-11")
	if c.Servable("n1", t3) {
		t.Error("Applied short of the polled position made it Servable")
	}
	c.Applied("n1", "0-1-12")
	if !c.Servable("n1", t3) || c.Lag("n1", t3) != stale {
		t.Errorf("Applied of the polled position: Servable %v, Lag %v; want true, %v", c.Servable("n1", t3), c.Lag("n1", t3), stale)
	}
	c.ReaderDown("n1")
	if c.Servable("n1", t3) || c.Lag("n1", t3) != -1 {
		t.Error("Servable or a Lag while the reader is down")
	}
	c.Polled("n1", "0-1-12", t3) // ignored while down
	c.ReaderUp("n1", "0-1-12", t3)
	if !c.Servable("n1", t3) {
		t.Error("not Servable after the reader came back")
	}
}

func TestLead(t *testing.T) {
	c := New(Options{MaxWaiters: 2}, []string{"n1"})
	k, other := key("a"), key("b")
	f, leader := c.Lead(k)
	if f == nil || !leader {
		t.Fatal("the first Lead does not lead")
	}
	for i := range 2 {
		g, leader := c.Lead(k)
		if g != f || leader {
			t.Fatalf("follower %d: Lead = %p, %v; want the leader's flight, false", i, g, leader)
		}
	}
	if g, leader := c.Lead(k); g != nil || leader {
		t.Errorf("Lead past MaxWaiters = %p, %v; want nil, false", g, leader)
	}
	if g, leader := c.Lead(other); g == nil || !leader {
		t.Error("another key does not lead its own fill")
	} else {
		c.Land(other, g)
	}
	select {
	case <-f.Done():
		t.Fatal("Done closed before Land")
	default:
	}
	c.Land(k, f)
	select {
	case <-f.Done():
	default:
		t.Fatal("Done not closed at Land")
	}
	if g, leader := c.Lead(k); g == f || !leader {
		t.Error("a Lead after Land does not start a new fill")
	}
	if st := c.Stats(); st.Waits != 2 || st.WaitersRefused != 1 {
		t.Errorf("Waits = %d, WaitersRefused = %d; want 2, 1", st.Waits, st.WaitersRefused)
	}
	c.Bypassed()
	if c.Stats().Bypassed != 1 {
		t.Error("Bypassed not counted")
	}
}

// TestBytesCoverHeap: the bytes the cache counts against its budget
// cover what its answers take on the heap (the entries, the shards' maps,
// the index of points), for answers of two sizes and counts.
func TestBytesCoverHeap(t *testing.T) {
	for _, n := range []int{20_000, 100_000} {
		for _, size := range []int{64, 400} {
			var m0, m1 runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&m0)
			c := newCache(Options{Memory: 1 << 30})
			for i := range n {
				stmt := "SELECT id, k, c, pad FROM sbtest1 WHERE id=" + strconv.Itoa(i)
				if !c.Store(c.Begin(pts("id", int64(i))), key(stmt), []byte(stmt), make([]byte, size), 1) {
					t.Fatal("Store refused a fill nothing moved under")
				}
			}
			runtime.GC()
			runtime.ReadMemStats(&m1)
			heap, counted := int64(m1.HeapAlloc)-int64(m0.HeapAlloc), c.Stats().Bytes
			t.Logf("%d answers of %d bytes: counted %d bytes (%d each), the heap grew %d (%d each)", n, size, counted, counted/int64(n), heap, heap/int64(n))
			if counted < heap {
				t.Errorf("%d answers of %d bytes: %d bytes counted against the budget, but the heap grew %d", n, size, counted, heap)
			}
			runtime.KeepAlive(c)
		}
	}
}
