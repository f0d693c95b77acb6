package server

import (
	"slices"
	"strings"
	"time"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/proxy/session"
	"github.com/shardgate/shardgate/resultcache"
	"github.com/shardgate/shardgate/router"
)

// The result cache on the query path (rcache.go feeds it). A statement
// of a session that may use the cache (session.CacheReadable: no
// transaction, nothing held) is looked up by its key before anything
// reads it: the session's shape (user, database, collation, sql_mode,
// capabilities, every variable it set) and the statement's bytes. A hit
// whose node the cache follows closely enough (Servable) and has applied
// the session's own last write on (Covers) goes to the client as the
// packets stored, with no parse and no backend. A miss runs as any
// statement; when the router says its answer may be kept
// (router.Cacheable), it runs as a fill instead: the router's locking
// read that does not wait, its answer held in memory (mysql.Conn.Hold),
// sent, and kept if nothing it depends on changed meanwhile
// (resultcache.Token). A fill the node refuses (a row locked by a
// transaction under way: 1205) is dropped unseen and the statement runs
// as written. One fill per key runs at a time; others asking for the
// key wait for it (up to cache.max_waiters).

// cacheRunner is a session's side of the result cache: the key of the
// statement under way, and the hits and fills.
type cacheRunner struct {
	h      *handler
	hasher resultcache.KeyHasher
	key    resultcache.Key
	stmt   []byte // the statement's bytes as the client sent them (valid during the command)
	bin    []byte // scratch for an execution's statement bytes (rcache_exec.go)
	looked bool   // the statement was looked up and missed: key and stmt are set
}

// cacheServe looks the text statement stmt up and, on a hit, answers it.
func (r *cacheRunner) serve(stmt []byte) (served bool, err error) {
	h := r.h
	rc := h.c.srv.rcache
	r.looked = false
	if rc == nil || !r.usable() {
		return false, nil
	}
	r.key, r.stmt = r.keyOf(stmt, 0), stmt
	if !r.covered(rc) {
		r.looked = true // from the node; its answer may be kept
		rc.Bypassed()
		return false, nil
	}
	hit, ok := rc.Lookup(r.key, stmt)
	if !ok {
		r.looked = true
		return false, nil
	}
	if !r.servable(rc, hit.Node) {
		rc.Bypassed()
		return false, nil
	}
	return true, r.sendHit(hit, string(stmt))
}

// usable reports whether the session may use the cache now.
func (r *cacheRunner) usable() bool {
	c := r.h.c
	return c.more == 0 && !c.binary && c.st.CacheReadable() && c.st.Read != session.ReadReplica
}

// cacheKey is the key of stmt (and args, for a prepared statement's
// execution; proto tells the protocols apart) for this session.
func (r *cacheRunner) keyOf(stmt []byte, proto uint64) resultcache.Key {
	c, kh := r.h.c, &r.hasher
	st := c.st
	kh.Reset()
	kh.WriteString(c.user)
	kh.WriteString(st.DB)
	kh.WriteString(st.ClientCharset)
	kh.WriteUint(uint64(st.Coll) | uint64(c.caps)<<8 | proto<<40)
	kh.WriteUint(uint64(st.Mode()) | uint64(st.Variant)<<32)
	st.WriteVars(kh)
	kh.Write(stmt)
	return kh.Sum()
}

// covered reports whether the cache has applied the session's last
// write on every node. It is asked before Lookup: an answer found after
// is then one the write's invalidation (applied before its position)
// left, never one it drops between the look-up and the check.
func (r *cacheRunner) covered(rc *resultCache) bool {
	for node, g := range r.h.c.st.LastGTIDs() {
		if !rc.Covers(node, g) {
			return false
		}
	}
	return true
}

// servable reports whether an answer read on node may go to this
// session (which covered said the cache has caught up with): the cache
// follows the node closely enough.
func (r *cacheRunner) servable(rc *resultCache, node string) bool {
	return rc.Servable(node, time.Now())
}

// sendHit sends a kept answer and records the statement as answered.
func (r *cacheRunner) sendHit(hit resultcache.Hit, sql string) error {
	h := r.h
	c := h.c
	c.act.set("Query", sql)
	h.ob = stmtObs{sql: sql, keyword: "SELECT", node: hit.Node, reads0: c.st.ReplicaReads}
	c.srv.queries.Add(1)
	c.st.NoteCachedAnswer(hit.Rows)
	h.x.Rows = hit.Rows
	if err := c.c.WriteRaw(hit.Resp); err != nil {
		return errCloseSession
	}
	if err := c.c.Flush(); err != nil {
		return errCloseSession
	}
	return nil
}

// forward runs a Forward plan (stale.go's fence.forward), as a fill when
// the statement missed and its answer may be kept.
func (r *cacheRunner) forward(plan *router.Plan, stmt *router.Stmt, sql string, p []byte) (*router.Plan, backend.Outcome, error) {
	h := r.h
	if h.c.srv.rcache != nil && r.looked {
		if fp, res, err, handled := r.tryFill(plan, stmt, sql, p); handled {
			return fp, res, err
		}
	}
	return h.fence.forward(h, plan, stmt, sql, p)
}

// tryFill runs a statement that missed as a fill when its answer may be
// kept; handled is false when it did not run.
func (r *cacheRunner) tryFill(plan *router.Plan, stmt *router.Stmt, sql string, p []byte) (_ *router.Plan, _ backend.Outcome, _ error, handled bool) {
	h := r.h
	rc := h.c.srv.rcache
	r.looked = false
	if stmt.Multi || stmt.Sticky || stmt.Keyword != "SELECT" || plan.Into != "" || !rc.touches(plan.Tables) {
		return nil, backend.Outcome{}, nil, false
	}
	facts := h.c.srv.rt().CacheFacts(sql, h.routerSession(), nil)
	if facts.Why != "" || !rc.caches(facts.Table) || rc.cascadeChild(facts.Table) {
		rc.Bypassed()
		return nil, backend.Outcome{}, nil, false
	}
	key := r.key
	f, leader := rc.Lead(key)
	if f != nil && !leader {
		if served, err := r.awaitFill(rc, f, key, r.stmt); served {
			return plan, backend.Outcome{OK: true, ResultSet: true}, err, true
		}
		return nil, backend.Outcome{}, nil, false
	}
	if f != nil {
		defer rc.Land(key, f)
	}
	return r.fill(rc, key, &facts, stmt, sql, p)
}

// awaitFill waits for another session's fill of key and answers from
// what it kept.
func (r *cacheRunner) awaitFill(rc *resultCache, f *resultcache.Flight, key resultcache.Key, stmt []byte) (served bool, err error) {
	select {
	case <-f.Done():
	case <-r.h.c.ctx.Done():
		return false, nil
	}
	if !r.covered(rc) {
		return false, nil
	}
	hit, ok := rc.Lookup(key, stmt)
	if !ok || !r.servable(rc, hit.Node) {
		return false, nil
	}
	return true, r.sendHit(hit, string(stmt))
}

// fill runs facts.Fill with its answer held, and keeps it.
func (r *cacheRunner) fill(rc *resultCache, key resultcache.Key, facts *router.Cacheable, stmt *router.Stmt, sql string, p []byte) (*router.Plan, backend.Outcome, error, bool) {
	h := r.h
	c := h.c
	fp := facts.Fill
	tok := rc.Begin(depsOf(facts))
	if !c.c.Hold(nil, rc.MaxEntry()) {
		return nil, backend.Outcome{}, nil, false
	}
	c.st.FillRead(true)
	_, res, err := h.fence.forward(h, fp, stmt, sql, p)
	c.st.FillRead(false)
	held, ok := c.c.Unhold()
	switch {
	case !ok: // past max_entry: it went to the client as it came
		return fp, res, err, true
	case err != nil && res.Sent || err == nil && !res.OK:
		// Not an answer for the client (a row locked: 1205): the
		// statement runs as written.
		h.x.Rows, h.x.ErrCode = 0, 0
		return nil, backend.Outcome{}, nil, false
	case err != nil:
		return fp, res, err, true
	}
	if werr := c.c.WriteRaw(held); werr != nil {
		return fp, res, errCloseSession, true
	}
	if res.ResultSet && res.Warnings == 0 && !endsWithState(held) {
		found := h.x.Rows
		if found > 0 {
			found += stmt.LimitOffset
		}
		rc.Store(tok, key, r.stmt, held, found)
	}
	return fp, res, c.c.Flush(), true
}

// touches reports whether a plan's tables include a cached one.
func (rc *resultCache) touches(tables []string) bool {
	for _, t := range tables {
		if slices.ContainsFunc(*rc.tables.Load(), func(ct string) bool {
			_, name, _ := strings.Cut(ct, ".")
			return strings.EqualFold(name, t) || strings.EqualFold(ct, t)
		}) {
			return true
		}
	}
	return false
}

// caches reports whether the logical table db.table is cached.
func (rc *resultCache) caches(table string) bool { return slices.Contains(*rc.tables.Load(), table) }

// endsWithState reports whether the last packet of resp, a whole answer,
// tells the client of a change of its session's state: such an answer
// is its own (the fill's NOWAIT, for a client that tracks every
// variable), not one to keep.
func endsWithState(resp []byte) bool {
	var last []byte
	for len(resp) >= 4 {
		n := int(resp[0]) | int(resp[1])<<8 | int(resp[2])<<16
		if len(resp) < 4+n {
			return true
		}
		last, resp = resp[4:4+n], resp[4+n:]
	}
	st, _, _, ok := mysql.ResultInfo(last)
	return !ok || st&mysql.StatusSessionStateChange != 0
}

// explain settles the cache column of EXPLAIN FORMAT='shard': the
// router says whether the answer may be kept; whether this proxy keeps
// it is cache:'s to say.
func (r *cacheRunner) explain(plan *router.Plan) {
	rc := r.h.c.srv.rcache
	switch {
	case plan.CacheTable == "":
	case rc == nil:
		plan.Cache = "no: the result cache is off (cache: in ks.yaml)"
	case !rc.caches(plan.CacheTable):
		plan.Cache = "no: " + plan.CacheTable + " is not in cache.tables"
	}
}
