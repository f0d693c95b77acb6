package server

import (
	"errors"

	"go.uber.org/zap"

	"github.com/shardgate/shardgate/router"
)

// sessionSeqs does a session's work on the global sequences for its
// handler: it reserves the values a statement needs, or shows an EXPLAIN
// the next ones without taking them (reserve), and moves a sequence past
// an explicit value a statement stored (advance). The handler holds it as
// seqs.
type sessionSeqs struct {
	h *handler
}

// reserve reserves the sequence values a router.NeedIDsError counts, into
// s.IDs (kept if the statement is planned again after waiting at a gate).
// again reports whether the statement can be planned again; err is the
// statement's error otherwise.
func (q *sessionSeqs) reserve(err error, s *router.Session) (again bool, _ error) {
	var ni *router.NeedIDsError
	seqs := q.h.c.srv.tables.seqs
	if !errors.As(err, &ni) || s.IDs != nil || seqs == nil {
		return false, err
	}
	ids := make(router.Reserved, ni.N)
	take := seqs.NextIDs
	if ni.Peek {
		take = seqs.PeekIDs // EXPLAIN shows the next values and takes none
	}
	if rerr := take(ni.DB, ni.Table, ids); rerr != nil {
		return false, rerr
	}
	s.IDs = ids
	return true, nil
}

// advance moves a sequence past the explicit value a statement stored
// (sequence_advance). The statement's answer is sent: a failure is logged,
// and the next generated id may then collide with the value (1062).
func (q *sessionSeqs) advance(a *router.Advance) {
	seqs := q.h.c.srv.tables.seqs
	if seqs == nil {
		return
	}
	if err := seqs.Advance(a.DB, a.Table, a.Past); err != nil {
		q.h.c.log.Warn("moving a sequence past an explicit value failed", zap.String("table", a.DB+"."+a.Table), zap.Uint64("value", a.Past), zap.Error(err))
	}
}
