// Package session is what one client session is, as data: its database,
// character set and collation, session and user variables, transaction
// and savepoints, prepared statements, the LAST_INSERT_ID it has seen, and
// the backend connections it holds. Its methods are the session's
// transitions (a SET, BEGIN, COMMIT, a SAVEPOINT, a reset) and the one
// place that decides, for every backend connection the session uses,
// whether it goes back to the pool (shared), stays with the session
// (pinned), or is reset before anyone else gets it.
//
// The rules, in one place (State.Release and State.ReleaseAll):
//   - a connection is shared again after a statement only when nothing of
//     the session is left on it: no open transaction (the server's status
//     says so, or the session is in one), no state the proxy cannot carry
//     (sticky: temporary tables, locks, a prepared statement the backend
//     owns, a multi-statement text), and no warnings the client may still
//     ask for with SHOW WARNINGS;
//   - state the proxy can carry (database, collation, multi-statement
//     option, session and user variables, LAST_INSERT_ID) travels with the
//     session, not with a connection: Acquire brings a connection to it
//     before each use, changing only what differs;
//   - a connection the session leaves with state on it is reset (a new
//     login with COM_CHANGE_USER) before it returns to the pool.
//
// A statement's effects come decided from the router (router.Stmt, the
// plan) and are applied here, around every routed statement: Before (the
// implicit commit of DDL and LOCK TABLES, the transaction left out), Route
// (where its reads may go) and After (locks, state kept and repeated on
// other nodes). The State's parts are types of their own, embedded:
// txnState (txn.go, xa.go: the open transaction, savepoints, two-phase
// commit), varState (vars.go: variables carried to every connection),
// readState (replica.go: replicas, read-your-writes) and trackState
// (track.go: the client's session state trackers). Test hooks are
// injected (Knobs); every backend call takes the client connection's
// context (SetContext). The tests run the transitions against an
// in-process MySQL server (internal/fakebackend).
//
// Lifecycle: a State lives as long as its client connection; Reset brings
// it back to a new login's (COM_RESET_CONNECTION, COM_CHANGE_USER).
//
// Concurrency: a State is owned by the goroutine that serves its client
// and is never touched by another; what other goroutines may see of a
// session (what it runs now, for KILL and SHOW PROCESSLIST) is kept by the
// server, not here. The package does no I/O with the client and never
// logs: transitions that fail return errors, and a *backend.LostError
// when a connection the session holds died.
package session
