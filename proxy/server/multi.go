package server

import (
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/router"
)

// Multi-statement texts (CLIENT_MULTI_STATEMENTS) that touch no sharded
// table go to the default node whole, which answers them as MySQL does.
// A text that touches sharded tables is split with the parser and each
// statement is routed and run on its own, in order; every response but the
// last carries SERVER_MORE_RESULTS_EXISTS, and the first error ends the
// sequence, as in MySQL.

// multiRunner runs a multi-statement text that touches sharded tables,
// split into its statements. It is owned by its handler's goroutine.
type multiRunner struct {
	h *handler
}

// queryMulti runs the statements of a split multi-statement text.
func (m *multiRunner) queryMulti(texts []string) error {
	h := m.h
	c := h.c
	if err := h.multi.checkMulti(texts); err != nil {
		return err
	}
	defer func() { c.more = 0 }()
	for i, q := range texts {
		c.more = 0
		if i < len(texts)-1 {
			c.more = mysql.StatusMoreResultsExists
		}
		if err := h.multi.queryOne(q); err != nil {
			c.more = 0 // the ERR ends the sequence
			return err
		}
	}
	return nil
}

// checkMulti refuses a split text before any of it runs when one of its
// statements would be refused for the node it runs on (the session's state
// or transaction is on another node): a batch is never half applied
// because of where its statements go. Statements after a USE are routed
// at their turn only.
func (m *multiRunner) checkMulti(texts []string) error {
	h := m.h
	c := h.c
	var nodes []string
	txn := false
	for _, q := range texts {
		stmt := router.Classify(q, h.c.st.Mode())
		if stmt.Keyword == "USE" {
			break
		}
		if stmt.Kind == router.KindTxn || stmt.Keyword == "SAVEPOINT" {
			txn = true // BEGIN in the text: what follows is a transaction
			continue
		}
		plan, err := h.route(q, h.probeSession())
		if err != nil {
			continue // the statement gets its error at its turn
		}
		for _, t := range plan.Targets {
			nodes = append(nodes, t.Node)
		}
	}
	return c.st.CheckNodes(nodes, txn)
}

// queryOne runs one statement of a split text. Every response is built
// by the proxy (never relayed raw), so that its final status can say
// whether more results follow.
func (m *multiRunner) queryOne(sql string) error {
	h := m.h
	c, st := h.c, h.c.st
	stmt := router.Classify(sql, h.c.st.Mode())
	c.act.set("Query", sql)
	switch {
	case stmt.Kind == router.KindEmpty:
		return mysql.NewError(mysql.ErEmptyQuery, "Query was empty")
	case stmt.Kind == router.KindTxn || stmt.Keyword == "SAVEPOINT" || stmt.Keyword == "RELEASE":
		if handled, err := h.ls.txnStatement(sql, &stmt); handled {
			return err
		}
	case stmt.Keyword == "USE":
		if db, ok := router.ParseUse(sql); ok {
			if err := h.useDB(db); err != nil {
				return err
			}
			return c.okStatus()
		}
	case stmt.Sticky:
		return mysql.NewError(mysql.ErNotSupported, "%s in a multi-statement text with sharded tables is not supported yet: send statements that change the session on their own", stmt.Keyword)
	case stmt.ImplicitCommit:
		if err := st.CommitImplicitly(); err != nil {
			return h.settle(err)
		}
	}
	plan, err := h.route(sql, h.routerSession())
	if err != nil {
		return err
	}
	c.srv.queries.Add(1)
	h.ob.plan = plan
	if plan.Kind == router.Forward {
		// One target: a result set is relayed through the concatenation
		// path (one target), anything else through the writes path, both
		// of which write their own final packet.
		one := *plan
		one.Kind, one.Merge = router.SumOK, nil
		if stmt.Kind == router.KindRead && stmt.Keyword != "DO" {
			one.Kind = router.Concat
		}
		plan = &one
	}
	err = h.execute(plan, sql)
	if err == nil && plan.Advance != nil {
		h.advance(plan.Advance)
	}
	return err
}
