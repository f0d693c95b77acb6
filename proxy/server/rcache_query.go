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
	hit, ok, kept := rc.Lookup(r.key, stmt, time.Now())
	if !ok {
		r.looked = !kept // a miss; an answer kept on a node followed too far behind is left alone
		return false, nil
	}
	return true, r.sendHit(hit, string(stmt))
}

// usable reports whether the session may use the cache now.
func (r *cacheRunner) usable() bool {
	c := r.h.c
	// A compressed client's packets are framed anew (mysql.Conn.Hold
	// holds none); its key differs from everyone's anyway (caps).
	return c.more == 0 && !c.binary && c.caps&mysql.ClientCompress == 0 && c.st.CacheReadable() && c.st.Read != session.ReadReplica
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
	if r.looked {
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
	if !rc.keeps(&facts) {
		return nil, backend.Outcome{}, nil, false
	}
	fill, served, land, err := r.lead(rc, func(hit resultcache.Hit) error { return r.sendHit(hit, string(r.stmt)) })
	switch {
	case served:
		return plan, backend.Outcome{OK: true, ResultSet: true}, err, true
	case !fill:
		return nil, backend.Outcome{}, nil, false
	}
	defer land()
	var res backend.Outcome
	redo, err := r.runFill(rc, &facts, func() (backend.Outcome, error) {
		var ferr error
		_, res, ferr = h.fence.forward(h, facts.Fill, stmt, sql, p)
		return res, ferr
	}, func(rows uint64) uint64 {
		if rows > 0 {
			rows += stmt.LimitOffset // found, as MariaDB counts them
		}
		return rows
	})
	if redo {
		return nil, backend.Outcome{}, nil, false
	}
	return facts.Fill, res, err, true
}

// keeps reports whether the cache keeps the answer of a statement the
// router found cacheable (facts.Why, counted as bypassed otherwise).
func (rc *resultCache) keeps(facts *router.Cacheable) bool {
	if facts.Why != "" || !rc.caches(facts.Table) || rc.cascadeChild(facts.Table) {
		rc.Bypassed()
		return false
	}
	return true
}

// lead makes the session the filler of its key (fill: the caller fills,
// then calls land), or waits for another session's fill and answers
// from what it kept with send (served). Neither: the statement runs as
// usual (the waiters are at cache.max_waiters, or nothing was kept).
func (r *cacheRunner) lead(rc *resultCache, send func(resultcache.Hit) error) (fill, served bool, land func(), err error) {
	key := r.key
	f, leader := rc.Lead(key)
	switch {
	case f == nil:
		return true, false, func() {}, nil
	case leader:
		return true, false, func() { rc.Land(key, f) }, nil
	}
	select {
	case <-f.Done():
	case <-r.h.c.ctx.Done():
		return false, false, nil, nil
	}
	if !r.covered(rc) {
		return false, false, nil, nil
	}
	hit, ok, _ := rc.Lookup(key, r.stmt, time.Now())
	if !ok {
		return false, false, nil, nil
	}
	return false, true, nil, send(hit)
}

// runFill runs a fill (run: the router's fill statement) with its answer
// held, then sends the answer and keeps it (with found(rows) as its found
// rows) unless something it depends on changed since the fill began.
// redo: the fill's answer is not one for the client (a row a transaction
// locks: 1205); nothing was sent, and the statement runs as written.
func (r *cacheRunner) runFill(rc *resultCache, facts *router.Cacheable, run func() (backend.Outcome, error), found func(rows uint64) uint64) (redo bool, err error) {
	h := r.h
	c := h.c
	tok := rc.Begin(depsOf(facts))
	if !c.c.Hold(rc.MaxEntry()) {
		return true, nil
	}
	c.st.FillRead(true)
	res, err := run()
	c.st.FillRead(false)
	held, ok := c.c.Unhold()
	switch {
	case !ok: // past max_entry: it went to the client as it came
		return false, err
	case err != nil && res.Sent || err == nil && !res.OK:
		h.x.Rows, h.x.ErrCode = 0, 0
		return true, nil
	case err != nil:
		return false, err
	}
	if werr := c.c.WriteRaw(held); werr != nil {
		return false, errCloseSession
	}
	if res.ResultSet && res.Warnings == 0 && !endsWithState(held) {
		rc.Store(tok, r.key, r.stmt, held, found(h.x.Rows))
	}
	return false, c.c.Flush()
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
