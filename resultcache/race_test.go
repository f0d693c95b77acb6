package resultcache

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// raceRows is the table the race test models: row i's value is its
// version, moved by a writer before the change reaches Invalidate, the
// way a commit is in the binary log before the reader applies it.
type raceRows struct {
	version [raceKeys]atomic.Uint64 // the row as the node has it
	done    [raceKeys]atomic.Uint64 // the highest version whose Invalidate returned
}

const raceKeys = 48

// raceQuery is a statement of the model: a point (one key) or a range.
type raceQuery struct {
	stmt   string
	key    Key
	deps   Deps
	lo, hi int // the rows it reads
}

func raceQueries() []raceQuery {
	var qs []raceQuery
	for i := range raceKeys {
		s := fmt.Sprintf("select * from t where id=%d", i)
		qs = append(qs, raceQuery{s, key(s), Deps{Table: tbl, Column: "id", Points: []int64{int64(i)}, Node: "n1"}, i, i})
	}
	for lo := 0; lo < raceKeys; lo += 12 {
		s := fmt.Sprintf("select * from t where id between %d and %d", lo, lo+11)
		d := Deps{Table: tbl, Column: "id", Range: &Range{Lo: int64(lo), Hi: int64(lo + 11)}, Node: "n1"}
		qs = append(qs, raceQuery{s, key(s), d, lo, lo + 11})
	}
	return qs
}

// fill reads q's rows after Begin, as a fill's statement does, and
// stores them: 8 bytes of version per row.
func (r *raceRows) fill(c *Cache, q *raceQuery) {
	tok := c.Begin(q.deps)
	resp := make([]byte, 0, 8*(q.hi-q.lo+1))
	for i := q.lo; i <= q.hi; i++ {
		resp = binary.LittleEndian.AppendUint64(resp, r.version[i].Load())
	}
	c.Store(tok, q.key, []byte(q.stmt), resp, uint64(q.hi-q.lo+1))
}

// check looks q up and reports a row older than a change whose
// Invalidate had returned before the Lookup began.
func (r *raceRows) check(c *Cache, q *raceQuery) error {
	var floor [raceKeys]uint64
	for i := q.lo; i <= q.hi; i++ {
		floor[i] = r.done[i].Load()
	}
	h, ok, _ := c.Lookup(q.key, []byte(q.stmt), t0)
	if !ok {
		return nil
	}
	if len(h.Resp) != 8*(q.hi-q.lo+1) {
		return fmt.Errorf("%s: answer of %d bytes", q.stmt, len(h.Resp))
	}
	for i := q.lo; i <= q.hi; i++ {
		v := binary.LittleEndian.Uint64(h.Resp[8*(i-q.lo):])
		if v < floor[i] {
			return fmt.Errorf("%s: row %d at version %d, invalidated up to %d before the Lookup", q.stmt, i, v, floor[i])
		}
	}
	return nil
}

// flight fills q through Lead: a leader fills and lands, a follower
// waits for it and looks q up.
func (r *raceRows) flight(c *Cache, q *raceQuery) error {
	f, leader := c.Lead(q.key)
	switch {
	case leader:
		r.fill(c, q)
		c.Land(q.key, f)
	case f != nil:
		<-f.Done()
		return r.check(c, q)
	}
	return nil
}

// write changes row i and applies the change.
func (r *raceRows) write(c *Cache, i int, rnd *rand.Rand) {
	v := r.version[i].Add(1)
	var img Image
	if rnd.IntN(2) == 0 {
		img = Image{"id": int64(i), "v": v}
	} else {
		img = Image{"id": uint64(i), "v": v}
	}
	c.Invalidate(tbl, img, img)
	for {
		d := r.done[i].Load()
		if d >= v || r.done[i].CompareAndSwap(d, v) {
			return
		}
	}
}

func TestRaceNoStaleAnswer(t *testing.T) {
	dur := time.Second
	if testing.Short() {
		dur = 200 * time.Millisecond
	}
	// About two answers per shard: evictions run under the race too.
	c := newCache(Options{Memory: nShards * 700, MaxEntry: 1 << 10, MaxWaiters: 2})
	qs := raceQueries()
	var rows raceRows
	var bad atomic.Pointer[error]
	deadline := time.Now().Add(dur)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(g), 1))
			for n := 0; n%256 != 0 || time.Now().Before(deadline); n++ {
				q := &qs[rnd.IntN(len(qs))]
				switch x := rnd.IntN(1000); {
				case x < 250:
					rows.fill(c, q)
				case x < 300:
					if err := rows.flight(c, q); err != nil {
						bad.CompareAndSwap(nil, &err)
					}
				case x < 700:
					if err := rows.check(c, q); err != nil {
						bad.CompareAndSwap(nil, &err)
					}
				case x < 995:
					rows.write(c, rnd.IntN(raceKeys), rnd)
				case x < 998:
					c.FlushTable(tbl)
				default:
					c.Flush()
				}
			}
		})
	}
	wg.Wait()
	if err := bad.Load(); err != nil {
		t.Fatal(*err)
	}
	st := c.Stats()
	t.Logf("hits %d, misses %d, fills %d, refused %d, evictions %d, invalidated %d", st.Hits, st.Misses, st.Fills, st.FillsRefused, st.Evictions, st.Invalidated)
	if st.Hits == 0 || st.Fills == 0 || st.Invalidated == 0 {
		t.Errorf("the race did not exercise the cache: %+v", st)
	}
	raceCheckEmpty(t, c, &rows)
}

// raceCheckEmpty invalidates every row, then wants nothing left: not in
// the shards, not in the index.
func raceCheckEmpty(t *testing.T, c *Cache, rows *raceRows) {
	t.Helper()
	rnd := rand.New(rand.NewPCG(9, 9))
	for i := range raceKeys {
		rows.write(c, i, rnd)
	}
	if st := c.Stats(); st.Entries != 0 || st.Bytes != 0 {
		t.Errorf("after invalidating every key: Entries = %d, Bytes = %d", st.Entries, st.Bytes)
	}
	tb := c.tables[tbl]
	if tb.n != 0 || len(tb.points) != 0 || len(tb.ranges) != 0 {
		t.Errorf("index left: n = %d, %d points, %d ranges", tb.n, len(tb.points), len(tb.ranges))
	}
	for i := range c.shards {
		if s := &c.shards[i]; len(s.m) != 0 || s.head != nil || s.tail != nil || s.bytes != 0 {
			t.Errorf("shard %d left: %d entries, %d bytes", i, len(s.m), s.bytes)
		}
	}
}
