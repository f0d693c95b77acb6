package config

import (
	"strings"
	"time"
)

// Cache is the result cache (package resultcache): answers of
// single-table SELECTs by key, kept as the client got them and dropped,
// exactly, by the row changes every node's binary log carries.
// docs/result-cache.md describes every key. A nil Cache (no cache: key)
// caches nothing.
type Cache struct {
	// Tables are the logical tables whose answers are kept: "db.table",
	// or "db.*" for every table of a database that has a shard rule.
	Tables []string `yaml:"tables"`
	// Memory bounds, in bytes, the answers kept (default 64 MiB): the
	// least recently used go first.
	Memory int64 `yaml:"memory"`
	// MaxEntry bounds, in bytes, one answer kept (default 64 KiB); a
	// larger answer is relayed and not kept.
	MaxEntry int `yaml:"max_entry"`
	// MaxStaleness is how far behind its nodes the cache may be for other
	// sessions than the writer's (default 1s): when the binary log reader
	// of a node has not been seen caught up within it, the node's answers
	// come from the node.
	MaxStaleness time.Duration `yaml:"max_staleness"`
	// MaxWaiters bounds the sessions waiting for one key's fill (default
	// 64); more run the statement themselves.
	MaxWaiters int `yaml:"max_waiters"`
}

// Cache defaults.
const (
	defaultCacheMemory       = 64 << 20
	defaultCacheMaxEntry     = 64 << 10
	defaultCacheMaxStaleness = time.Second
	defaultCacheMaxWaiters   = 64
)

// cacheDefaults fills the cache's unset keys.
func (c *Config) cacheDefaults() {
	k := c.Cache
	if k == nil {
		return
	}
	if k.Memory == 0 {
		k.Memory = defaultCacheMemory
	}
	if k.MaxEntry == 0 {
		k.MaxEntry = defaultCacheMaxEntry
	}
	if k.MaxStaleness == 0 {
		k.MaxStaleness = defaultCacheMaxStaleness
	}
	if k.MaxWaiters == 0 {
		k.MaxWaiters = defaultCacheMaxWaiters
	}
}

func (c *Config) validateCache(v *validator) {
	k := c.Cache
	if k == nil {
		return
	}
	if len(k.Tables) == 0 {
		v.add("cache.tables", "required: the logical tables (db.table, or db.* for a database's) whose answers are cached")
	}
	for i, t := range k.Tables {
		if !qualifiedNameRE.MatchString(t) {
			v.add(joinIndex("cache.tables", i), "%q is not a logical table db.table or db.*", t)
		}
	}
	if k.Memory < 1<<20 {
		v.add("cache.memory", "%d bytes is below 1 MiB (1048576)", k.Memory)
	}
	if k.MaxEntry < 1<<10 || int64(k.MaxEntry) > k.Memory/16 {
		v.add("cache.max_entry", "%d bytes is out of range 1024..memory/16", k.MaxEntry)
	}
	if k.MaxStaleness < time.Millisecond || k.MaxStaleness > time.Hour {
		v.add("cache.max_staleness", "%v is out of range 1ms..1h", k.MaxStaleness)
	}
	if k.MaxWaiters < 1 || k.MaxWaiters > 100_000 {
		v.add("cache.max_waiters", "%d is out of range 1..100000", k.MaxWaiters)
	}
}

// Caches reports whether the cache keeps the answers of logical table
// db.table.
func (k *Cache) Caches(db, table string) bool {
	if k == nil {
		return false
	}
	for _, t := range k.Tables {
		d, tb, _ := strings.Cut(t, ".")
		if strings.EqualFold(d, db) && (tb == "*" || strings.EqualFold(tb, table)) {
			return true
		}
	}
	return false
}
