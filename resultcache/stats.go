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
	Hits, Misses, Fills, FillsRefused, TooLarge, Evictions uint64
	Changes, Invalidated, TableFlushes, Flushes            uint64
	Waits, WaitersRefused, Bypassed                        uint64
	Entries                                                int
	Bytes, Budget                                          int64
	Nodes                                                  []NodeStats
}

// NodeStats is one node's reader as the cache sees it.
type NodeStats struct {
	Name string
	Up   bool
	// Lag is the time since the reader was last known caught up with
	// the node (-1 when down).
	Lag time.Duration
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
