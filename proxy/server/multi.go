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

// queryMulti runs the statements of a split multi-statement text.
func (ss *session) queryMulti(texts []string) error {
	defer func() { ss.more = 0 }()
	for i, q := range texts {
		ss.more = 0
		if i < len(texts)-1 {
			ss.more = mysql.StatusMoreResultsExists
		}
		if err := ss.queryOne(q); err != nil {
			ss.more = 0 // the ERR ends the sequence
			return err
		}
	}
	return nil
}

// queryOne runs one statement of a split text. Every response is built
// by the proxy (never relayed raw), so that its final status can say
// whether more results follow.
func (ss *session) queryOne(sql string) error {
	ss.stmt = sql
	st := router.Classify(sql)
	ss.act.set("Query", sql)
	switch {
	case st.Kind == router.KindEmpty:
		return mysql.NewError(mysql.ErEmptyQuery, "Query was empty")
	case st.Kind == router.KindTxn || st.Keyword == "SAVEPOINT" || st.Keyword == "RELEASE":
		if handled, err := ss.txnStatement(sql); handled {
			return err
		}
	case st.Keyword == "USE":
		if db, ok := router.ParseUse(sql); ok {
			if err := ss.useDB(db); err != nil {
				return err
			}
			return ss.writeOK(mysql.OK{Status: ss.status})
		}
	case st.Sticky:
		return mysql.NewError(mysql.ErNotSupported, "%s in a multi-statement text with sharded tables is not supported yet: send statements that change the session on their own", st.Keyword)
	case st.Kind == router.KindDDL && len(ss.pinned) > 0 && ss.inTxn():
		if err := ss.endAll("COMMIT", true); err != nil {
			return err
		}
	}
	plan, err := ss.srv.router.Route(sql, router.Session{User: ss.user, DB: ss.db})
	if err != nil {
		return err
	}
	ss.srv.queries.Add(1)
	if plan.Kind != router.Forward {
		return ss.execPlan(plan)
	}
	// One target: a result set is relayed through the concatenation path
	// (one target), anything else through the writes path, both of which
	// write their own final packet.
	one := *plan
	if st.Kind == router.KindRead && st.Keyword != "DO" {
		one.Kind = router.Concat
		return ss.execConcat(&one)
	}
	one.Kind = router.SumOK
	return ss.execWrites(&one)
}
