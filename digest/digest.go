package digest

import (
	"container/heap"
	"hash/maphash"
	"math/bits"
	"sort"
	"strings"
	"sync"
	"time"
)

const shards = 16

// buckets of the latency histogram: bucket i holds [2^i, 2^(i+1)) µs.
const buckets = 26

// Digest is the table of statement shapes.
type Digest struct {
	seed   maphash.Seed
	per    int // capacity of each shard
	shards [shards]shard
}

type shard struct {
	mu sync.Mutex
	m  map[string]*entry
	h  minHeap
}

// entry is one shape's statistics; idx is its place in the shard's heap.
type entry struct {
	key      string // user \x00 schema \x00 fingerprint
	route    string
	count    uint64
	over     uint64 // counts inherited from evicted shapes
	errors   uint64
	rows     uint64
	total    time.Duration
	min, max time.Duration
	hist     [buckets]uint32
	// values, valuesMin, valuesMax: the rows of the statements' VALUES
	// lists (Collapse), summed, least and most.
	values, valuesMin, valuesMax uint64
	first                        time.Time
	last                         time.Time
	idx                          int
}

// New returns a digest keeping at most capacity shapes (at least 16).
func New(capacity int) *Digest {
	per := max(1, capacity/shards)
	d := &Digest{seed: maphash.MakeSeed(), per: per}
	for i := range d.shards {
		d.shards[i].m = make(map[string]*entry)
	}
	return d
}

// Capacity is the most shapes the digest keeps.
func (d *Digest) Capacity() int { return d.per * shards }

// Key builds the key of a shape into dst: user, schema and fingerprint.
func Key(dst []byte, user, schema string, fingerprint []byte) []byte {
	dst = append(dst, user...)
	dst = append(dst, 0)
	dst = append(dst, schema...)
	dst = append(dst, 0)
	return append(dst, fingerprint...)
}

// Record adds one execution of the shape key (made by Key), ended at now:
// how long it took, the rows it sent, whether it failed and how it was
// routed.
func (d *Digest) Record(key []byte, route string, took time.Duration, rows uint64, failed bool, now time.Time) {
	d.RecordValues(key, route, took, rows, 0, failed, now)
}

// RecordValues is Record for a statement whose VALUES list had
// valueRows rows (Collapse); 0 when it had none.
func (d *Digest) RecordValues(key []byte, route string, took time.Duration, rows uint64, valueRows int, failed bool, now time.Time) {
	s := &d.shards[maphash.Bytes(d.seed, key)%shards]
	s.mu.Lock()
	e := s.m[string(key)]
	if e == nil {
		e = s.add(string(key), d.per, now)
	}
	e.count++
	e.route = route
	e.rows += rows
	if failed {
		e.errors++
	}
	e.total += took
	if e.count-e.over == 1 || took < e.min {
		e.min = took
	}
	if took > e.max {
		e.max = took
	}
	us := uint64(took / time.Microsecond)
	b := 0
	if us > 0 {
		b = min(bits.Len64(us)-1, buckets-1)
	}
	e.hist[b]++
	if v := uint64(valueRows); v > 0 {
		if e.values == 0 || v < e.valuesMin {
			e.valuesMin = v
		}
		e.valuesMax = max(e.valuesMax, v)
		e.values += v
	}
	e.last = now
	heap.Fix(&s.h, e.idx)
	s.mu.Unlock()
}

// add makes the entry of a new key, evicting the least counted one when
// the shard is full. s.mu is held.
func (s *shard) add(key string, capacity int, now time.Time) *entry {
	if len(s.m) < capacity {
		e := &entry{key: key, first: now}
		s.m[key] = e
		heap.Push(&s.h, e)
		return e
	}
	e := s.h[0] // the least counted
	delete(s.m, e.key)
	*e = entry{key: key, count: e.count, over: e.count, first: now, idx: e.idx}
	s.m[key] = e
	return e
}

// Row is one shape's statistics.
type Row struct {
	User        string        `json:"user"`
	Schema      string        `json:"schema"`
	Fingerprint string        `json:"fingerprint"`
	Route       string        `json:"route"`
	Count       uint64        `json:"count"`
	Overcount   uint64        `json:"overcount,omitempty"` // at most this much of Count belongs to evicted shapes
	Errors      uint64        `json:"errors"`
	Rows        uint64        `json:"rows_sent"`
	Total       time.Duration `json:"total_ns"`
	Min         time.Duration `json:"min_ns"`
	Max         time.Duration `json:"max_ns"`
	// P50, P95 and P99 are the upper bounds of the histogram buckets
	// (powers of two of microseconds) holding those percentiles, at most Max.
	P50 time.Duration `json:"p50_ns"`
	P95 time.Duration `json:"p95_ns"`
	P99 time.Duration `json:"p99_ns"`
	// Hist is the latency histogram: Hist[i] executions took [2^i, 2^(i+1))
	// µs (Hist[0] also those under 1 µs); trailing empty buckets left off.
	Hist []uint32 `json:"hist_us_log2"`
	// ValueRows, ValueRowsMin and ValueRowsMax are the rows of the VALUES
	// lists (a multi-row INSERT is one shape, its row count is counted
	// here): summed over the executions, the least and the most.
	ValueRows    uint64    `json:"value_rows,omitempty"`
	ValueRowsMin uint64    `json:"value_rows_min,omitempty"`
	ValueRowsMax uint64    `json:"value_rows_max,omitempty"`
	First        time.Time `json:"first_seen"`
	Last         time.Time `json:"last_seen"`
}

func (e *entry) row() Row {
	user, rest, _ := strings.Cut(e.key, "\x00")
	schema, fp, _ := strings.Cut(rest, "\x00")
	r := Row{User: user, Schema: schema, Fingerprint: fp, Route: e.route, Count: e.count, Overcount: e.over, Errors: e.errors,
		Rows: e.rows, Total: e.total, Min: e.min, Max: e.max, First: e.first, Last: e.last}
	r.ValueRows, r.ValueRowsMin, r.ValueRowsMax = e.values, e.valuesMin, e.valuesMax
	var n uint64
	last := -1
	for i, c := range e.hist {
		n += uint64(c)
		if c > 0 {
			last = i
		}
	}
	r.Hist = append([]uint32(nil), e.hist[:last+1]...)
	r.P50, r.P95, r.P99 = e.percentile(n, 50), e.percentile(n, 95), e.percentile(n, 99)
	return r
}

// percentile is the upper bound of the bucket holding the q-th percentile
// of the n executions in the histogram, at most the longest.
func (e *entry) percentile(n uint64, q uint64) time.Duration {
	if n == 0 {
		return 0
	}
	want := (n*q + 99) / 100
	var acc uint64
	for i, c := range e.hist {
		acc += uint64(c)
		if acc >= want {
			return min(time.Duration(uint64(2)<<i)*time.Microsecond, e.max)
		}
	}
	return e.max
}

// Snapshot returns every shape, most total time first.
func (d *Digest) Snapshot() []Row {
	var out []Row
	for i := range d.shards {
		s := &d.shards[i]
		s.mu.Lock()
		for _, e := range s.m {
			out = append(out, e.row())
		}
		s.mu.Unlock()
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Total != out[j].Total {
			return out[i].Total > out[j].Total
		}
		return out[i].Fingerprint < out[j].Fingerprint
	})
	return out
}

// Len is the number of shapes held.
func (d *Digest) Len() int {
	n := 0
	for i := range d.shards {
		s := &d.shards[i]
		s.mu.Lock()
		n += len(s.m)
		s.mu.Unlock()
	}
	return n
}

// Reset forgets every shape.
func (d *Digest) Reset() {
	for i := range d.shards {
		s := &d.shards[i]
		s.mu.Lock()
		s.m = make(map[string]*entry)
		s.h = nil
		s.mu.Unlock()
	}
}

// minHeap orders entries by count, least first.
type minHeap []*entry

func (h minHeap) Len() int           { return len(h) }
func (h minHeap) Less(i, j int) bool { return h[i].count < h[j].count }
func (h minHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}
func (h *minHeap) Push(x any) {
	e := x.(*entry)
	e.idx = len(*h)
	*h = append(*h, e)
}
func (h *minHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}
