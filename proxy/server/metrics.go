package server

import (
	"runtime"
	"sync/atomic"
	"time"

	"github.com/shardgate/shardgate/proxy/metrics"
	"github.com/shardgate/shardgate/router"
)

// Stats is a snapshot of the server for operators (proxy/metrics).
type Stats = metrics.Stats

// NodeStats is one backend node's pool and health.
type NodeStats = metrics.NodeStats

// ReplicaStats is one read replica of a node.
type ReplicaStats = metrics.ReplicaStats

// stmtMetrics is the server's handle on proxy/metrics: what sessions
// record each statement and error in.
type stmtMetrics struct{ *metrics.Metrics }

// error counts an ERR packet a client got.
func (m stmtMetrics) error(code uint16) { m.ClientError(code) }

// counters are the server's counts for operators (Stats). Sessions add to
// them from their own goroutines.
type counters struct {
	connsTotal, queries, errorsSent, rejected atomic.Uint64
	acceptErrors                              atomic.Uint64 // Accept failures retried
	unauth                                    atomic.Int64  // connections that have not logged in yet
	unauthRejected                            atomic.Uint64 // refused past max_unauthenticated_connections
	unauthEvicted                             atomic.Uint64 // handshakes closed to make room for a new one
	packetsTooLarge                           atomic.Uint64 // client packets over the pre-login limit or max_allowed_packet
	longDataTooLarge                          atomic.Uint64 // executions refused for long data over max_allowed_packet
	writeTimeouts                             atomic.Uint64 // clients disconnected by client_write_timeout
	panics                                    atomic.Uint64 // sessions ended by a panic (a bug)
	idleTxnClosed                             atomic.Uint64 // clients closed by idle_in_transaction_timeout
	stmtsOpen                                 atomic.Int64  // client prepared statements open (max_prepared_stmt_total)
}

// stats returns the counts, with the sessions open and the goroutines.
func (k *counters) stats(sessions int) Stats {
	return Stats{Sessions: sessions, ConnsTotal: k.connsTotal.Load(), ConnsRejected: k.rejected.Load(), AcceptErrors: k.acceptErrors.Load(), IdleTxnClosed: k.idleTxnClosed.Load(), Panics: k.panics.Load(),
		Unauthenticated: k.unauth.Load(), UnauthenticatedRejected: k.unauthRejected.Load(), UnauthenticatedEvicted: k.unauthEvicted.Load(),
		PacketsTooLarge: k.packetsTooLarge.Load(), LongDataTooLarge: k.longDataTooLarge.Load(), WriteTimeouts: k.writeTimeouts.Load(),
		Queries: k.queries.Load(), ErrorsSent: k.errorsSent.Load(), Goroutines: runtime.NumGoroutine()}
}

// stmtObs is what the handler learns of the statement it runs, for the
// metrics, the digest and the slow log (observe).
type stmtObs struct {
	sql     string // "" when the command ran no statement
	keyword string
	plan    *router.Plan // nil when the proxy answered itself (or node is set)
	node    string       // a prepared statement run on this node alone
	reads0  uint64       // the session's replica reads before the statement
}

// observe records the statement the command that began at start ran
// (metrics.Metrics.Observe).
func (c *conn) observe(start time.Time, failed bool) {
	h := c.h
	ob := &h.ob
	if ob.sql == "" {
		return
	}
	st := metrics.Statement{SQL: ob.sql, Keyword: ob.keyword, Plan: ob.plan, Node: ob.node, Replica: c.st.ReplicaReads > ob.reads0,
		ErrCode: h.x.ErrCode, Failed: failed, Rows: h.x.Rows, User: c.user, DB: c.st.DB, Start: start,
		Slow: c.srv.lv().slow, Log: c.log, Key: c.dkey}
	if ob.plan == nil && ob.node != "" {
		st.Unsharded = !c.srv.rt().Sharded(c.user)
	}
	c.dkey = c.srv.metrics.Observe(&st)
	*ob = stmtObs{}
	h.x.Rows, h.x.ErrCode = 0, 0
}
