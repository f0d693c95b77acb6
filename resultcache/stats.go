package resultcache

import (
	"sort"
	"sync/atomic"
	"time"
)

type counters struct {
	hits, misses, fills, refused, tooLarge, evictions atomic.Uint64
	changes, invalidated, tableFlushes, flushes       atomic.Uint64
	waits, waitersRefused, bypassed                   atomic.Uint64
}

// Bypassed counts a statement the cache did not look at or could not
// keep (Cacheable.Why, a session in a transaction, ...).
func (c *Cache) Bypassed() { c.st.bypassed.Add(1) }

// Stats is a snapshot of the cache.
type Stats struct {
	Hits           uint64      `json:"hits_total"`
	Misses         uint64      `json:"misses_total"`
	Fills          uint64      `json:"fills_total"`
	FillsRefused   uint64      `json:"fills_refused_total"`
	TooLarge       uint64      `json:"too_large_total"`
	Evictions      uint64      `json:"evictions_total"`
	Changes        uint64      `json:"changes_total"` // row changes of cached tables applied
	Invalidated    uint64      `json:"invalidations_total"`
	TableFlushes   uint64      `json:"table_flushes_total"`
	Flushes        uint64      `json:"flushes_total"`
	Waits          uint64      `json:"waits_total"`
	WaitersRefused uint64      `json:"waiters_refused_total"`
	Bypassed       uint64      `json:"bypassed_total"`
	Entries        int         `json:"entries"`
	Bytes          int64       `json:"bytes"`
	Budget         int64       `json:"budget_bytes"`
	Nodes          []NodeStats `json:"nodes"`
}

// NodeStats is one node's reader as the cache sees it.
type NodeStats struct {
	Name string `json:"node"`
	Up   bool   `json:"up"`
	// Lag is the time since the reader was last known caught up with
	// the node (-1 when down).
	Lag time.Duration `json:"lag_ns"`
}

// Stats returns a snapshot.
func (c *Cache) Stats() Stats {
	st := Stats{
		Hits: c.st.hits.Load(), Misses: c.st.misses.Load(), Fills: c.st.fills.Load(), FillsRefused: c.st.refused.Load(),
		TooLarge: c.st.tooLarge.Load(), Evictions: c.st.evictions.Load(), Changes: c.st.changes.Load(),
		Invalidated: c.st.invalidated.Load(), TableFlushes: c.st.tableFlushes.Load(), Flushes: c.st.flushes.Load(),
		Waits: c.st.waits.Load(), WaitersRefused: c.st.waitersRefused.Load(), Bypassed: c.st.bypassed.Load(),
		Budget: c.opt.Memory,
	}
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		st.Entries += len(s.m)
		st.Bytes += s.bytes
		s.mu.Unlock()
	}
	now := time.Now()
	for name, n := range c.nodes {
		_, up := n.state()
		st.Nodes = append(st.Nodes, NodeStats{Name: name, Up: up, Lag: c.Lag(name, now)})
	}
	sort.Slice(st.Nodes, func(i, j int) bool { return st.Nodes[i].Name < st.Nodes[j].Name })
	return st
}
