// Package deadlock finds and breaks deadlocks that span backend nodes.
//
// Each MariaDB server detects the deadlocks among its own transactions. A
// transaction of the proxy that reached two nodes is two transactions to
// the servers, so a cycle that goes through both (T1 holds a row on node1
// and waits on node2 for T2, which holds a row on node2 and waits on
// node1 for T1) is seen by neither: it ends only at innodb_lock_wait_timeout
// (50 s by default). The proxy alone knows that the two threads are one
// transaction, so the proxy has to look for such cycles.
//
// Why a package of its own: the detector is a shared concern with its own
// lifecycle (a goroutine of its own, a dedicated backend connection per
// server, metrics) that neither the session (which must stay a data structure
// with explicit transitions) nor the engine (which knows nothing of
// sessions) should carry; the graph search is pure and tested without
// a server. It imports backend and mysql only; proxy/server wires it in,
// proxy/metrics reads its counts.
//
// Lifecycle. proxy/server makes one Detector per Server (New, when
// deadlock_detect_after is not 0) and closes it at Shutdown. Each
// session registers a Slot the first time it runs a statement inside a
// transaction and unregisters it when it ends. Around every backend
// statement of a transaction the session calls Slot.Begin (with the
// connections the transaction holds and the ones the statement runs on)
// and Slot.End: a mutex held for a copy of a few pointers and a timer
// reset, no allocation. The timer fires only when the statement is still
// running after the threshold; it wakes the detector's goroutine, which
// otherwise sleeps: while no statement waits past the threshold, no
// server is asked anything.
//
// A round: the detector takes a snapshot of the running statements and
// the backend threads (server address, connection id) each transaction
// holds, reads on each server involved the transactions and their lock
// waits (information_schema.INNODB_TRX joined with INNODB_LOCK_WAITS,
// one query on a connection of its own per server), builds the global
// waits-for graph (proxy transactions as vertices; threads of other
// clients as vertices of their server, so that a path through them is
// followed) and looks for cycles whose edges lie on two servers or more
// (a cycle on one server is that server's to break). InnoDB fills those
// tables from a cache it renews only when nobody has read it for 100 ms,
// so every read of a server comes 105 ms or more after the detector's
// previous one, and a cycle is confirmed by a second read, with every
// member still blocked in the same statement, before anything is killed.
// While statements wait past the threshold without a cycle, the detector
// looks again after twice the threshold, then less and less often (at
// most every 2 s), and at once when another statement starts waiting. The victim is the member whose
// transactions weigh least (trx_weight summed over its servers), as
// InnoDB chooses; its waiting statement is stopped with KILL QUERY on the
// detector's connection, and the session turns the interruption into the
// error a MariaDB deadlock gives (1213, SQLSTATE 40001) and rolls the
// transaction back on every node it reached (proxy/server).
//
// Not covered: transactions of other proxies on the same servers (their
// threads are vertices of one server only, so a cycle through another
// proxy's transaction spanning nodes is not seen; the design for a fleet
// is to publish, for transactions that wait past the threshold only, the
// thread-to-transaction map in the sidecar), and statements outside a
// transaction (they hold locks on one node only until they end).
//
// Concurrency: a Slot is written by its session's goroutine and read by
// the detector's, under the Slot's mutex. The Detector's registry is
// under its own mutex, taken at registration and by a round only.
package deadlock
