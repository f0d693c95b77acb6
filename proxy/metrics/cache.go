package metrics

import "github.com/shardgate/shardgate/resultcache"

// CacheStats is the result cache (cache: in ks.yaml), nil without one.
type CacheStats = resultcache.Stats

// cache sends the result cache's series.
func (e emitter) cache(c *CacheStats) {
	g, k := gauge, counter
	e.one("shardgate_cache_hits_total", "Statements the result cache answered.", k, float64(c.Hits))
	e.one("shardgate_cache_misses_total", "Statements the result cache looked up and did not hold.", k, float64(c.Misses))
	e.one("shardgate_cache_fills_total", "Answers the result cache kept.", k, float64(c.Fills))
	e.one("shardgate_cache_fills_refused_total", "Answers not kept because a row or table they depend on changed while they were read (the fill guard).", k, float64(c.FillsRefused))
	e.one("shardgate_cache_invalidations_total", "Answers dropped by a change of a row, a table or a lost stream.", k, float64(c.Invalidated))
	e.one("shardgate_cache_evictions_total", "Answers dropped to stay within cache.memory.", k, float64(c.Evictions))
	e.one("shardgate_cache_bypassed_total", "Statements the result cache could not answer or keep (not cacheable, a node too far behind, ...).", k, float64(c.Bypassed))
	e.one("shardgate_cache_entries", "Answers kept.", g, float64(c.Entries))
	e.one("shardgate_cache_bytes", "Bytes of answers kept, with their bookkeeping.", g, float64(c.Bytes))
	for _, n := range c.Nodes {
		e.one("shardgate_cache_reader_up", "1 while the result cache reads the node's binary log.", g, boolFloat(n.Up), "node", n.Name)
		e.one("shardgate_cache_lag_seconds", "Time since the result cache was last known caught up with the node's binary log; -1 while its reader is down.", g, n.Lag.Seconds(), "node", n.Name)
	}
}
