package resultcache

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"
)

// Options bound a Cache.
type Options struct {
	Memory       int64         // bytes of answers kept, over every shard
	MaxEntry     int           // bytes of one answer
	MaxStaleness time.Duration // Servable's bound
	MaxWaiters   int           // sessions waiting for one key's fill
}

// Key identifies one answer: two independent hashes of everything that
// shapes it (the session's shape and the statement's bytes, KeyHasher).
// An entry also keeps the statement's bytes, compared on every hit, so
// two statements never share an answer; two shapes would need both
// 64-bit hashes to collide.
type Key struct{ A, B uint64 }

var seedA, seedB = maphash.MakeSeed(), maphash.MakeSeed()

// KeyHasher builds a Key without allocating. The zero value is not
// ready: use NewKeyHasher or Reset.
type KeyHasher struct{ a, b maphash.Hash }

// Reset starts a new key.
func (h *KeyHasher) Reset() {
	h.a.SetSeed(seedA)
	h.b.SetSeed(seedB)
}

// WriteString adds s, followed by a separator, to the key.
func (h *KeyHasher) WriteString(s string) {
	h.a.WriteString(s)
	h.b.WriteString(s)
	h.a.WriteByte(0)
	h.b.WriteByte(0)
}

// Write adds b, followed by a separator, to the key.
func (h *KeyHasher) Write(b []byte) {
	h.a.Write(b)
	h.b.Write(b)
	h.a.WriteByte(0)
	h.b.WriteByte(0)
}

// WriteUint adds v to the key.
func (h *KeyHasher) WriteUint(v uint64) {
	var b [8]byte
	for i := range b {
		b[i] = byte(v >> (8 * i))
	}
	h.a.Write(b[:])
	h.b.Write(b[:])
}

// Sum returns the key.
func (h *KeyHasher) Sum() Key { return Key{h.a.Sum64(), h.b.Sum64()} }

// nShards splits the answers (and their memory) so that hits on
// different keys seldom wait for one another.
const nShards = 64

// Cache is the result cache. Safe for concurrent use.
type Cache struct {
	opt    Options
	shards [nShards]shard

	// idxMu guards tables and every entry's place in them; taken before
	// a shard's lock, never after.
	idxMu   sync.Mutex
	tables  map[string]*table
	scratch []*entry // the answers of one point being dropped; idxMu
	// flushGen moves when everything is dropped (Flush).
	flushGen atomic.Uint64
	// guard are the invalidation counters of key points, by hash of
	// table, column and value: a Token keeps the ones of its points.
	guard [guardSlots]atomic.Uint64

	nodes map[string]*node // fixed at New

	flightMu sync.Mutex
	flights  map[Key]*Flight

	st counters
}

const guardSlots = 1 << 14

// New returns a cache of the nodes named (their readers report with
// Applied, Polled, ReaderUp and ReaderDown).
func New(o Options, nodes []string) *Cache {
	c := &Cache{opt: o, tables: map[string]*table{}, nodes: map[string]*node{}, flights: map[Key]*Flight{}}
	for i := range c.shards {
		c.shards[i].budget = max(o.Memory/nShards, 1)
		c.shards[i].m = map[Key]*entry{}
	}
	for _, n := range nodes {
		c.nodes[n] = &node{}
	}
	return c
}

// MaxEntry is the largest answer kept, in bytes.
func (c *Cache) MaxEntry() int { return c.opt.MaxEntry }

// entry is one answer kept.
type entry struct {
	key    Key
	stmt   string // the statement's bytes (and a prepared statement's arguments)
	resp   []byte // the answer as the client got it: whole packets, numbered from 1
	rows   uint64
	node   string
	tbl    *table
	col    string
	points []int64
	rng    *Range
	size   int64

	prev, next *entry // the shard's recency list
}

// entryOverhead is what an answer costs the heap beyond its statement,
// its packets and its points: the entry, its slots in its shard's map
// and in its table's index of points. Measured at 270 to 320 bytes from
// 10 000 to 140 000 answers (Go 1.26, amd64); TestBytesCoverHeap checks
// that the bytes counted cover what the heap holds.
const entryOverhead = 352

// Range is a primary-key range an answer depends on: Lo <= key <= Hi,
// unbounded on a side marked No.
type Range struct {
	Lo, Hi     int64
	NoLo, NoHi bool
}

func (r *Range) holds(v int64, big bool) bool {
	if big { // an unsigned key above MaxInt64
		return r.NoHi
	}
	return (r.NoLo || v >= r.Lo) && (r.NoHi || v <= r.Hi)
}

// table indexes the answers of one logical table.
type table struct {
	name   string
	gen    uint64 // moves when the table's answers are all dropped
	anyGen uint64 // moves with every change of the table: range fills check it
	cols   map[string]bool
	points map[point]pointSet
	ranges map[*entry]struct{}
	n      int // entries
}

// pointSet is the answers filed under one key point: nearly always one,
// kept without a map of its own (a map per point cost about 130 bytes
// of heap per answer).
type pointSet struct {
	one  *entry
	more map[*entry]struct{} // the others, when there are
}

// add files e (not filed yet).
func (ps *pointSet) add(e *entry) {
	switch {
	case ps.one == nil:
		ps.one = e
	case ps.more == nil:
		ps.more = map[*entry]struct{}{e: {}}
	default:
		ps.more[e] = struct{}{}
	}
}

// remove takes e out and reports whether it was filed.
func (ps *pointSet) remove(e *entry) bool {
	if ps.one == e {
		ps.one = nil
		for o := range ps.more {
			ps.one = o
			delete(ps.more, o)
			break
		}
		return true
	}
	if _, ok := ps.more[e]; ok {
		delete(ps.more, e)
		return true
	}
	return false
}

// appendTo appends the answers filed to es.
func (ps pointSet) appendTo(es []*entry) []*entry {
	if ps.one != nil {
		es = append(es, ps.one)
	}
	for e := range ps.more {
		es = append(es, e)
	}
	return es
}

type point struct {
	col string
	v   int64
}

// shard holds some of the answers, by Key, with its own memory budget.
type shard struct {
	mu         sync.Mutex
	m          map[Key]*entry
	head, tail *entry // most and least recently used
	bytes      int64
	budget     int64
}

func (c *Cache) shard(k Key) *shard { return &c.shards[k.A%nShards] }

// Hit is an answer found by Lookup.
type Hit struct {
	Resp []byte // read only
	Rows uint64
	Node string
}

// Lookup returns the answer kept for k and stmt when its node is
// Servable at now (ok): a hit. kept reports whether there was an answer
// at all: one whose node is not servable is counted as bypassed, neither
// a hit nor a miss. The caller checks Covers before Lookup.
func (c *Cache) Lookup(k Key, stmt []byte, now time.Time) (h Hit, ok, kept bool) {
	s := c.shard(k)
	s.mu.Lock()
	e := s.m[k]
	if e == nil || e.stmt != string(stmt) {
		s.mu.Unlock()
		c.st.misses.Add(1)
		return Hit{}, false, false
	}
	if !c.Servable(e.node, now) {
		s.mu.Unlock()
		c.st.bypassed.Add(1)
		return Hit{}, false, true
	}
	s.touch(e)
	h = Hit{Resp: e.resp, Rows: e.rows, Node: e.node}
	s.mu.Unlock()
	c.st.hits.Add(1)
	return h, true, true
}

// touch moves e to the front of the recency list; s.mu held.
func (s *shard) touch(e *entry) {
	if s.head == e {
		return
	}
	s.unlink(e)
	s.pushFront(e)
}

func (s *shard) pushFront(e *entry) {
	e.prev, e.next = nil, s.head
	if s.head != nil {
		s.head.prev = e
	}
	s.head = e
	if s.tail == nil {
		s.tail = e
	}
}

func (s *shard) unlink(e *entry) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		s.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		s.tail = e.prev
	}
	e.prev, e.next = nil, nil
}
