// Package server is the client-facing side of the proxy: the listener,
// one goroutine per client connection, the MySQL handshake and
// authentication, command dispatch, the statements that look at other
// sessions (SHOW PROCESSLIST, KILL). The admin HTTP listener, the status
// page and admin SQL are proxy/admin's, the Prometheus metrics and the
// digest proxy/metrics'; the server gives them what they read (admin.go).
//
// It owns no execution and no session rules: plans come from the router,
// run in proxy/engine, and every decision about a backend connection
// (shared, pinned, reset) is proxy/session's. The types here are the glue:
//   - conn (conn.go, writer.go) is the wire: the client's packet stream,
//     the read loop, and the framing of results for this client (it
//     implements engine.Writer, and engine.Conns over its session.State);
//     auth (auth.go) is its login;
//   - handler (handler.go, query.go) runs one command at a time, one method
//     per COM_* command; COM_QUERY is four steps (query.go): the router
//     classifies and plans, the session applies the statement's effects
//     before and after, the engine runs the plan. It reads no SQL text
//     itself (internal/layers checks it). Its parts: localStmts (local.go,
//     sqlprepare.go, immediate.go) for the statements the proxy answers
//     itself (transaction control, UNLOCK TABLES, tracked SET, SET NAMES,
//     USE, SQL-level PREPARE, EXECUTE IMMEDIATE), multiRunner (multi.go) for
//     multi-statement texts on sharded tables, userCmds (usercmds.go) for
//     COM_CHANGE_USER and COM_SET_OPTION;
//   - stmtHandler (prepared.go, prepared_exec.go) runs the binary prepared
//     statements;
//   - Server (server.go) holds what all sessions share: the engine, the
//     nodes, and embedded types of their own for the configuration in force
//     and reload (liveConfig, reload.go), the session registry with SHOW
//     PROCESSLIST and KILL (registry, registry.go, processlist.go), the gates
//     of tables workflows move (gates, move.go) and the counters.
//
// Lifecycle: New builds the backend nodes from the configuration and checks
// them; Serve accepts clients on a listener until Shutdown, which stops
// accepting, closes idle sessions, lets running statements finish within the
// context's deadline, then closes what is left and the nodes.
//
// Concurrency: each client connection is owned by its own goroutine, which
// owns the conn, its handler, its session.State and any backend connection
// the session holds. Other goroutines touch a conn only through its atomic
// fields (running, runningMany, idle), its activity (under its lock), and
// by closing its network connection (KILL, Shutdown).
//
// Forwarding: a single-target response is relayed packet by packet from the
// backend's buffered reader into the client's buffered writer without
// decoding rows (engine.RelayResult), and flushed once per response.
package server
