// Package engine runs the plans the router makes. It owns the plan kinds
// (a forwarded single-target statement, the concatenation of several
// targets' rows, the summed OK of a write on several targets, a DDL fanned
// out, SHOW TABLES over subtables, EXPLAIN) and the operators a merged
// SELECT is built from: a k-way ordered merge, LIMIT/OFFSET, grouping
// with aggregates, HAVING, DISTINCT and in-memory sorting, all over row
// streams, with values compared as the column's type and collation say.
//
// What it is given, and nothing more:
//   - a router.Plan (plain data) and the statement's text;
//   - Conns, a narrow view of the session: a backend connection per node in
//     the session's state, and where to give it back. The session decides
//     whether a connection is shared, pinned or reset; the engine only
//     reports how each response ended (backend.Outcome);
//   - Writer, a narrow view of the client: column definitions, rows and
//     the packet that ends a result. How those are framed for this client
//     (CLIENT_DEPRECATE_EOF, the binary protocol of a prepared statement's
//     execution, the session's status flags) is the Writer's business.
//     Responses a single backend answers pass through unchanged, packet by
//     packet, to Writer.Client (the relay functions), so the point-select
//     path decodes nothing it does not need.
//
// How it is built, in the spirit of Vitess's vtgate/engine primitives: an
// Executor holds what a session's statements share and runs a
// single-target statement itself (Forward, RunOn), its response passed on
// by the executor's relayer; Execute hands every other plan kind to a
// primitive built for that statement, which holds a pointer back to the
// executor and owns one responsibility:
//   - concatenate: a Concat plan without a merge, one target after another
//     as one result set;
//   - merger: a Concat plan with a Merge, every target at once, their
//     streams, connections and memory budget, and the operator pipeline
//     (ops.go, group.go) over them;
//   - fanout: DML (SumOK) or DDL (Fanout) on several targets, answered as
//     one OK or one error naming the targets that failed and applied;
//   - loadData: LOAD DATA LOCAL INFILE split over subtables, with its
//     loadSplitter cutting the file into each target's part;
//   - gather: the exact fallback, the sharded tables a statement reads
//     copied into temporary tables on one connection, within the copy's
//     bounds;
//   - meta: SHOW TABLES, SHOW TABLE STATUS and EXPLAIN answered with a
//     result the proxy builds.
//
// The engine knows nothing of sessions, authentication or commands: it
// never imports proxy/server, and it never decides what a failure means to
// the session. Failures come back as errors the caller maps: a
// *mysql.SQLError for the client, ErrAnswered when the client already has
// the backend's ERR packet, *backend.LostError for a connection that died
// before the client saw anything, *mysql.DstError when the client went
// away, and mysql.ErrForwardCut when a packet was cut half-way.
//
// Lifecycle and concurrency: an Engine is built once per server and is
// safe for concurrent use (it holds only the nodes and limits). An
// Executor belongs to one client session and is used only by the
// goroutine that owns that session; it keeps scratch buffers between
// statements (so a point select allocates nothing). A primitive lives for
// one statement and is used by the same goroutine. Every backend connection the engine takes is given back
// through Conns.Release before the call that took it returns.
package engine
