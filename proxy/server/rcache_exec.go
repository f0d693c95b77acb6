package server

import (
	"encoding/binary"
	"slices"
	"time"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/proxy/session"
	"github.com/shardgate/shardgate/resultcache"
	"github.com/shardgate/shardgate/router"
)

// The result cache for binary prepared statements: an execution is keyed
// by the statement's text, its parameters' types and their values' bytes
// (the binary protocol's answer, told apart from the text one's by the
// key), looked up before it is routed, and filled as the router's fill
// statement prepared on the node, executed with the client's values.

// protoBinary tells executions' keys from text statements'.
const protoBinary = 1

// execKey sets r's key and statement bytes for an execution of ps with
// e's values; false when it cannot be cached (long data, a cursor).
func (r *cacheRunner) execKey(ps *session.Stmt, e *mysql.StmtExecute) bool {
	if e.Flags != 0 || slices.Contains(ps.HasLong, true) {
		return false
	}
	b := append(r.bin[:0], ps.SQL...)
	b = append(b, 0)
	b = append(b, e.Types...)
	for i, v := range e.Values {
		if i < len(e.Null) && e.Null[i] {
			b = append(b, 1)
			continue
		}
		b = binary.LittleEndian.AppendUint32(append(b, 0), uint32(len(v)))
		b = append(b, v...)
	}
	r.bin = b
	r.key, r.stmt = r.keyOf(b, protoBinary), b
	return true
}

// serveExec looks an execution up and answers it on a hit.
func (r *cacheRunner) serveExec(ps *session.Stmt, e *mysql.StmtExecute) (served bool, err error) {
	rc := r.h.c.srv.rcache
	r.looked = false
	if rc == nil || !r.usable() || !r.execKey(ps, e) {
		return false, nil
	}
	if !r.covered(rc) {
		r.looked = true // from the node; its answer may be kept
		rc.Bypassed()
		return false, nil
	}
	hit, ok, kept := rc.Lookup(r.key, r.stmt, time.Now())
	if !ok {
		r.looked = !kept // a miss; an answer kept on a node followed too far behind is left alone
		return false, nil
	}
	return true, r.sendExecHit(hit, ps)
}

// sendExecHit sends a kept answer of an execution; the caller's
// bookkeeping (counts.note) reads it as a result set of hit.Rows rows.
func (r *cacheRunner) sendExecHit(hit resultcache.Hit, ps *session.Stmt) error {
	err := r.sendHit(hit, ps.SQL)
	s := r.h.ps
	s.execRes, s.execForwarded = backend.Outcome{OK: true, ResultSet: true}, true
	return err
}

// fillExec runs an execution that missed as a fill, when its answer may
// be kept: the router's fill statement, prepared on node and executed
// with e's values (reordered by order as the routed statement's). done is
// false when it did not run (the caller runs the execution as usual).
func (r *cacheRunner) fillExec(ps *session.Stmt, e *mysql.StmtExecute, plan *router.Plan, args []router.Arg, order []int) (done bool, err error) {
	h := r.h
	defer func() {
		if done {
			h.ps.execTables = nil // as after the execution's own run
		}
	}()
	rc := h.c.srv.rcache
	looked := r.looked
	r.looked = false
	t := plan.Targets[0]
	if !looked || h.c.st.Read == session.ReadReplica || plan.Kind != router.Forward || t.SQL == "" || ps.Class.Keyword != "SELECT" || ps.Class.Sticky || !rc.touches(plan.Tables) {
		return false, nil
	}
	facts := h.c.srv.rt().CacheFacts(ps.SQL, h.routerSession(), args)
	if !rc.keeps(&facts) {
		return false, nil
	}
	if ft := facts.Fill.Targets[0]; ft.Node != t.Node || router.Placeholders(ft.SQL, h.c.st.Mode()) != ps.NParams {
		rc.Bypassed()
		return false, nil
	}
	fill, served, land, err := r.lead(rc, func(hit resultcache.Hit) error { return r.sendExecHit(hit, ps) })
	switch {
	case served:
		return true, err
	case !fill:
		return false, nil
	}
	defer land()
	s := h.ps
	redo, err := r.runFill(rc, &facts, func() (backend.Outcome, error) {
		ft := facts.Fill.Targets[0]
		tables := s.execTables
		s.execTables = facts.Fill.Tables
		err := s.executeOn(ps, e, ft.Node, ft.SQL, order, false)
		s.execTables = tables
		return s.execRes, err
	}, func(rows uint64) uint64 { return rows })
	if redo {
		s.execRes, s.execForwarded = backend.Outcome{}, false
		return false, nil
	}
	return true, err
}

// depsOf is what a fill's answer depends on, from the router's facts.
func depsOf(facts *router.Cacheable) resultcache.Deps {
	d := resultcache.Deps{Table: facts.Table, Column: facts.Column, Points: facts.Points, Node: facts.Fill.Targets[0].Node}
	if r := facts.Range; r != nil {
		d.Range = &resultcache.Range{Lo: r.Lo, Hi: r.Hi, NoLo: r.NoLo, NoHi: r.NoHi}
	}
	return d
}
