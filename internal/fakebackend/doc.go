// Package fakebackend is an in-process MySQL server for unit tests of the
// proxy's client side: it speaks enough of the protocol (handshake, text
// queries, OK with status flags and session state information, ERR, small
// result sets, COM_INIT_DB, COM_SET_OPTION, COM_CHANGE_USER,
// COM_RESET_CONNECTION, COM_PING) for real backend.Node pools to dial it,
// answers each statement from a script, and records every command each
// connection received.
//
// Why it exists: the session's rules (which backend connection is shared,
// pinned, reset or discarded; how transactions span nodes; what XA sends
// where) were proven only through integration tests against real MariaDB
// servers, which cannot fail a COMMIT on the second node, lose the answer
// to one, or show exactly what each connection received. A fake whose
// answers a test scripts can, in milliseconds and without a server.
//
// Layer: test support only, like internal/mariadbtest. Production code never
// imports it. It imports only mysql, so any package's tests may use it.
//
// Lifecycle: Start listens on 127.0.0.1:0 and serves each connection in a
// goroutine of its own; the test's Cleanup closes the listener and every
// connection and waits for those goroutines, so none outlives the test.
//
// What it models of a server, and no more: the autocommit flag and whether
// a transaction is open (START TRANSACTION, BEGIN and XA START open one;
// COMMIT, ROLLBACK, XA COMMIT, XA ROLLBACK and XA PREPARE end it; SET
// autocommit = 0 makes the next statement open one; a new login or a
// reset clears both), reported in the status flags of every answer.
// Everything else (errors, rows, warnings, session state changes, a lost
// answer) comes from the script.
//
// Concurrency: Server and Conn methods are safe to call from any
// goroutine; the script may change while connections are served.
package fakebackend
