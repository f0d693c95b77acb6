package server

import (
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/proxy/session"
	"github.com/shardgate/shardgate/router"
)

// Multi-statement texts (CLIENT_MULTI_STATEMENTS) that touch no sharded
// table go to the default node whole, which answers them as MySQL does.
// A text that touches sharded tables is split with the parser and each
// statement runs, in order, as a text of its own would (handler.query:
// the session applies its effects before and after it, SET and
// transaction control included); every response but the last carries
// SERVER_MORE_RESULTS_EXISTS, and the first error ends the sequence, as in
// MySQL.

// multiRunner runs a multi-statement text that touches sharded tables,
// split into its statements. It is owned by its handler's goroutine.
type multiRunner struct {
	h *handler
}

// queryMulti runs the statements of a split multi-statement text, each
// as a text of its own (handler.query: the session's Before and After,
// tracked SET, transaction control, ROW_COUNT() and the read-back of
// assigned variables), with SERVER_MORE_RESULTS_EXISTS on every response
// but the last, relayed ones included (Executor.Renumber, More).
func (m *multiRunner) queryMulti(texts []string) error {
	h := m.h
	c := h.c
	if err := h.multi.checkMulti(texts); err != nil {
		return err
	}
	ob, rows := h.ob, uint64(0)
	h.x.Renumber = true
	defer func() {
		c.more, h.x.More, h.x.Renumber = 0, 0, false
		ob.plan = h.ob.plan // the metrics see the text, planned as its last statement
		h.ob = ob
		h.x.Rows += rows
	}()
	for i, q := range texts {
		c.more = 0
		if i < len(texts)-1 {
			c.more = mysql.StatusMoreResultsExists
		}
		h.x.More = c.more
		rows, h.x.Rows = rows+h.x.Rows, 0 // FOUND_ROWS() counts one statement's
		if err := h.query(h.queryPacket(q)); err != nil {
			c.more, h.x.More = 0, 0 // the ERR ends the sequence
			return err
		}
	}
	return nil
}

// checkMulti refuses a split text before any of it runs when one of its
// statements would be refused for the node it runs on, as it would be run
// on its own after the statements before it (session.CheckSteps: the
// session's state or transaction is on another node and the statement
// cannot be lent a connection there): a batch is never half applied
// because of where its statements go, and never refused when its
// statements run one by one. Statements after a USE are routed at their
// turn only.
func (m *multiRunner) checkMulti(texts []string) error {
	h := m.h
	c := h.c
	steps := make([]session.Step, 0, len(texts))
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
		steps = append(steps, session.Step{Stmt: stmt, Nodes: plan.Nodes()})
	}
	return c.st.CheckSteps(steps, txn)
}
