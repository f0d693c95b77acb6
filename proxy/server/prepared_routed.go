package server

import (
	"errors"
	"time"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/router"
)

// routedPrepare is one COM_STMT_PREPARE of a statement the proxy owns
// (prepareRouted): it plans the statement with 0 for every placeholder
// (probePlan) and prepares it as the backend will run it, for its
// metadata (prepareOn); when that meets a subtable a cutover fenced
// (renamed) on a proxy still on the old rule, the rule in force is
// refreshed as for an execution (stale.go), and the statement planned and
// prepared again.
type routedPrepare struct {
	s   *stmtHandler
	sql string
	cls router.Stmt
	// What run leaves: the plan, the parameter count the client gets (-1:
	// the backend's), the statement as the target runs it, its backend
	// statement, and the connection that keeps it cached (nil when none
	// does).
	plan    *router.Plan
	nparams int
	q       string
	st      *backend.Stmt
	bc      *backend.Conn
}

// run plans and prepares the statement: again after a fenced subtable
// whose rule moved on, and until the fence deadline while a workflow of
// the table may be between its fence and its swap.
func (p *routedPrepare) run() error {
	c := p.s.h.c
	var deadline time.Time
	for {
		rt := c.srv.rt()
		var err error
		if p.plan, p.nparams, err = p.probePlan(p.sql); err != nil {
			return err
		}
		t := &p.plan.Targets[0]
		if p.q = t.SQL; p.q == "" {
			p.q = p.sql
		}
		p.st, p.bc, err = p.prepareOn(p.plan, p.q, p.cls)
		if err == nil {
			return nil
		}
		var se *mysql.SQLError
		if !errors.As(err, &se) || se.Code != erNoSuchTable || len(p.plan.Tables) == 0 || t.Subtable == "" {
			return err
		}
		if deadline.IsZero() {
			deadline = c.srv.fenceDeadline()
		}
		moved, moving := c.srv.refreshRule(rt, p.plan.Tables, t.Node+":"+t.Subtable)
		switch {
		case moved:
			c.srv.staleRetries.Add(1)
		case moving && time.Now().Before(deadline):
			time.Sleep(20 * time.Millisecond)
		default:
			return err
		}
	}
}

// probePlan plans a statement being prepared with 0 for every placeholder
// (no sequence value is reserved). nparams is the parameter count the
// client gets when the backend's count would be wrong (-1: the backend's):
// a plan only the statement with its placeholders inlined has (HAVING,
// LIMIT, where the merge needs constants), or a sequence value standing
// where the client may have a ?.
func (p *routedPrepare) probePlan(sql string) (plan *router.Plan, nparams int, err error) {
	h, c := p.s.h, p.s.h.c
	n := router.CountPlaceholders(sql, c.st.Mode())
	probe := make([]router.Arg, n)
	for i := range probe {
		probe[i] = router.Arg{Kind: router.ArgInt, Text: "0"}
	}
	sess := h.probeSession()
	plan, err = h.routeArgs(sql, sess, probe)
	switch {
	case err != nil:
		lits := make([]string, n)
		for i := range lits {
			lits[i] = "0"
		}
		text, ierr := router.Inline(sql, lits, c.st.Mode())
		if ierr != nil {
			return nil, 0, err
		}
		if plan, ierr = c.srv.rt().Route(text, sess); ierr != nil {
			return nil, 0, err
		}
		return plan, n, nil
	case plan.Generated > 0:
		return plan, n, nil
	}
	return plan, -1, nil
}

// prepareOn prepares q, the statement as plan runs it, for its metadata:
// against empty copies of sharded tables for a Fallback plan (closed at
// once), else on the target's node, on the connection the session would
// use (prepared now, not taken from the cache: the client gets the
// server's current metadata and warnings, and the session keeps the
// connection for SHOW WARNINGS when there are some). bc is the connection
// that keeps the statement cached, nil when none does.
func (p *routedPrepare) prepareOn(plan *router.Plan, q string, cls router.Stmt) (st *backend.Stmt, bc *backend.Conn, err error) {
	h, c := p.s.h, p.s.h.c
	if plan.Kind == router.Fallback {
		err := h.x.WithFallbackTables(plan, false, func(bc *backend.Conn) (backend.Outcome, error) {
			var perr error
			if st, perr = bc.Prepare(q); perr == nil {
				perr = bc.Forget(q)
			}
			return backend.Outcome{}, perr
		})
		if err != nil {
			return nil, nil, h.settle(err)
		}
		return st, nil, nil
	}
	bc, err = c.st.Acquire(plan.Targets[0].Node, cls.UsesLastInsertID)
	if err != nil {
		return nil, nil, err
	}
	st, err = bc.Prepare(q)
	var o backend.Outcome
	if err == nil {
		o.Warnings = st.Warnings
		if !cacheable(cls) {
			err = bc.Forget(q)
		}
	}
	cached := err == nil && bc.Cached(q) // read while bc is the session's
	c.st.Release(bc, false, o)
	if err != nil {
		if bc.Broken() {
			return nil, nil, h.backendLost(bc)
		}
		return nil, nil, err
	}
	if !cached {
		bc = nil
	}
	return st, bc, nil
}
