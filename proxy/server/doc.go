// Package server is the client-facing side of the proxy: the listener, one
// session per client connection, command dispatch, plan execution against
// backend nodes, result forwarding, and the admin HTTP handler.
//
// Lifecycle: New builds the backend nodes from the configuration and checks
// them; Serve accepts clients on a listener until Shutdown, which stops
// accepting, closes idle sessions, lets running statements finish within the
// context's deadline, then closes what is left and the nodes.
//
// Concurrency: each session is owned by its own goroutine, which owns the
// client connection, the session state and any backend connection the
// session holds. Other goroutines touch a session only through its atomic
// fields (running, idle) and by closing its network connection (KILL,
// Shutdown).
//
// Forwarding: a single-target response is relayed packet by packet from the
// backend's buffered reader into the client's buffered writer without
// decoding rows, and flushed once per response. The proxy only inspects the
// packets that delimit results (column counts, EOF/OK, ERR) to know where a
// response ends and what state the backend is in.
package server
