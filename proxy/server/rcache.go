package server

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/changestream"
	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/proxy/session"
	"github.com/shardgate/shardgate/resultcache"
	"github.com/shardgate/shardgate/router"
)

// The result cache (cache: in ks.yaml, package resultcache) is fed here:
// one change stream over every node's binary log, started at the nodes'
// positions of the moment, drops the answers each row change may have
// made wrong (and a table's answers at a statement that changes it), and
// a poller per node reads the node's own @@gtid_binlog_pos so the cache
// knows how far behind it may be (max_staleness). A stream that fails
// drops everything and starts again from the nodes' positions then: the
// changes in between are never applied, so nothing kept before may be
// served. Each proxy keeps its own cache; the query path is in
// rcache_query.go.

// resultCache is the proxy's cache and the goroutines that feed it.
type resultCache struct {
	*resultcache.Cache
	cfg    *config.Cache
	live   *liveConfig
	tables atomic.Pointer[[]string] // the logical tables cached, db.table in lower case, under the rules in force
	log    *zap.Logger
	knobs  *session.Knobs
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// cascades are the cached tables some node has as the child of a
	// foreign key with a cascading action (CASCADE, SET NULL, SET
	// DEFAULT): MariaDB does not write the rows such an action changes to
	// the binary log, so their answers are never kept.
	cascades atomic.Pointer[map[string]bool]
}

// startResultCache starts the cache of cfg (nil without a cache: key).
func startResultCache(s *Server, cfg *config.Config) *resultCache {
	if cfg.Cache == nil {
		return nil
	}
	var names []string
	for _, n := range cfg.Nodes {
		names = append(names, n.Name)
	}
	k := cfg.Cache
	rc := &resultCache{
		Cache: resultcache.New(resultcache.Options{Memory: k.Memory, MaxEntry: k.MaxEntry, MaxStaleness: k.MaxStaleness, MaxWaiters: k.MaxWaiters}, names),
		cfg:   k, live: &s.liveConfig, log: s.log.With(zap.String("component", "result-cache")), knobs: s.knobs,
	}
	if len(rc.cachedTables(s.rt())) == 0 {
		rc.log.Warn("cache: no table with a shard rule matches cache.tables; nothing is cached", zap.Strings("tables", k.Tables))
	}
	ctx, cancel := context.WithCancel(context.Background())
	rc.cancel = cancel
	rc.wg.Add(1)
	go func() {
		defer rc.wg.Done()
		rc.follow(ctx)
	}()
	for _, src := range changestream.Sources(cfg) {
		rc.wg.Add(1)
		go func() {
			defer rc.wg.Done()
			rc.poll(ctx, src)
		}()
	}
	return rc
}

// close stops the feeding goroutines (nil-safe).
func (rc *resultCache) close() {
	if rc == nil {
		return
	}
	rc.cancel()
	rc.wg.Wait()
}

// cachedTables lists (and records) the logical tables cached under rt's
// rules.
func (rc *resultCache) cachedTables(rt *router.Router) []string {
	var tables []string
	for _, ti := range rt.Tables() {
		if rc.cfg.Caches(ti.DB, ti.Table) {
			tables = append(tables, tableKey(ti.DB+"."+ti.Table))
		}
	}
	rc.tables.Store(&tables)
	return tables
}

// errRulesChanged ends a stream whose subtable names are no longer the
// rules': a cutover or a reload changed them.
var errRulesChanged = errors.New("the shard rules changed")

// follow runs the change stream until ctx ends, starting it again after a
// pause each time it fails, from the rules and nodes in force then.
func (rc *resultCache) follow(ctx context.Context) {
	pause := 200 * time.Millisecond
	for ctx.Err() == nil {
		cfg, rt := rc.live.cfg(), rc.live.rt()
		sources := changestream.Sources(cfg)
		rc.cachedTables(rt)
		began := time.Now()
		err := rc.stream(ctx, rt, sources, changestream.Names(cfg))
		if time.Since(began) > 10*time.Second {
			pause = 200 * time.Millisecond // it streamed: a new failure starts the backoff over
		}
		for _, src := range sources {
			rc.ReaderDown(src.Node)
		}
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, errRulesChanged) {
			pause = 0 // the rules moved: start over at once
		}
		rc.log.Warn("cache: the binary log stream stopped; every answer is dropped and the stream starts again", zap.Error(err), zap.Duration("after", pause))
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
		pause = min(max(2*pause, 200*time.Millisecond), 5*time.Second)
	}
}

// stream reads every node's changes from its position now and applies
// them to the cache until the stream fails or ctx ends.
func (rc *resultCache) stream(ctx context.Context, rt *router.Router, sources []changestream.Source, names func(db, table string) string) error {
	from := map[string]string{}
	at := map[string]time.Time{}
	for _, src := range sources {
		at[src.Node] = time.Now()
		pos, err := sourcePos(ctx, src)
		if err != nil {
			return err
		}
		from[src.Node] = pos
	}
	if err := rc.readCascades(ctx, sources, names); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	changes, errc, err := changestream.Subscribe(ctx, sources, names, changestream.Options{
		Tables: *rc.tables.Load(), From: from, Marks: true, DDL: true, Statements: true, KeepFlagged: true, Buffer: 4096,
	})
	if err != nil {
		return err
	}
	for node, pos := range from {
		rc.ReaderUp(node, pos, at[node])
	}
	for ch := range changes {
		if rc.live.rt() != rt {
			// New subtables would be named wrong: every answer goes, and
			// the stream starts again under the new rules.
			cancel()
			for range changes {
			}
			return errRulesChanged
		}
		if ch.Op == "ddl" {
			// A table's foreign keys change only by DDL on it: read them
			// again before its answers go.
			if err := rc.readCascades(ctx, sources, names); err != nil {
				cancel()
				for range changes {
				}
				return err
			}
		}
		if h := rc.knobs.CacheChange.Load(); h != nil {
			(*h)(ch.Node, ch.Op, ch.Table, ch.After)
		}
		rc.apply(&ch)
	}
	return <-errc
}

// readCascades reads, from every node, which cached tables are children
// of a foreign key with a cascading action (cascades).
func (rc *resultCache) readCascades(ctx context.Context, sources []changestream.Source, names func(db, table string) string) error {
	found := map[string]bool{}
	for _, src := range sources {
		c, err := backend.Dial(ctx, src.Addr, backend.DialOptions{User: src.User, Password: src.Password, DialTimeout: 5 * time.Second, CommandTimeout: 10 * time.Second})
		if err != nil {
			return err
		}
		res, err := c.Exec("SELECT CONSTRAINT_SCHEMA, TABLE_NAME FROM information_schema.REFERENTIAL_CONSTRAINTS " +
			"WHERE UPDATE_RULE NOT IN ('RESTRICT', 'NO ACTION') OR DELETE_RULE NOT IN ('RESTRICT', 'NO ACTION')")
		c.Close()
		if err != nil {
			return err
		}
		for _, row := range res.Rows {
			found[tableKey(names(string(row[0]), string(row[1])))] = true
		}
	}
	rc.cascades.Store(&found)
	return nil
}

// cascadeChild reports whether table's answers are never kept (cascades).
func (rc *resultCache) cascadeChild(table string) bool {
	m := rc.cascades.Load()
	return m == nil || (*m)[table]
}

// tableKey is a logical table's name (db.table) as the cache keys it:
// lower case, as the router's Cacheable.Table.
func tableKey(name string) string { return strings.ToLower(name) }

// apply applies one change.
func (rc *resultCache) apply(ch *changestream.Change) {
	switch ch.Op {
	case "mark":
		rc.Applied(ch.Node, ch.Pos)
	case "statement":
		rc.Flush() // rows changed by a statement the binary log does not list
	case "ddl":
		if ch.Table == "" {
			rc.Flush() // a statement on tables the stream could not name
		} else {
			rc.FlushTable(tableKey(ch.Table))
		}
	default:
		rc.Invalidate(tableKey(ch.Table), ch.Before, ch.After)
	}
}

// sourcePos reads a source's @@gtid_binlog_pos over a connection of its
// own.
func sourcePos(ctx context.Context, src changestream.Source) (string, error) {
	c, err := backend.Dial(ctx, src.Addr, backend.DialOptions{User: src.User, Password: src.Password, DialTimeout: 5 * time.Second})
	if err != nil {
		return "", err
	}
	defer c.Close()
	return backend.BinlogPos(c)
}

// poll reads the node's position every quarter of max_staleness (at most
// every 100ms, at least every millisecond) over a connection of its own,
// so the cache knows it is no further behind than that.
func (rc *resultCache) poll(ctx context.Context, src changestream.Source) {
	every := min(max(rc.cfg.MaxStaleness/4, time.Millisecond), 100*time.Millisecond)
	t := time.NewTicker(every)
	defer t.Stop()
	var c *backend.Conn
	defer func() {
		if c != nil {
			c.Close()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if c == nil {
			var err error
			if c, err = backend.Dial(ctx, src.Addr, backend.DialOptions{User: src.User, Password: src.Password, DialTimeout: time.Second, CommandTimeout: time.Second}); err != nil {
				c = nil
				continue
			}
		}
		at := time.Now()
		pos, err := backend.BinlogPos(c)
		if err != nil {
			c.Close()
			c = nil
			continue
		}
		rc.Polled(src.Node, pos, at)
	}
}
