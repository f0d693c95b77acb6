// Package backend is the proxy's client side: connections to backend
// MySQL/MariaDB servers (handshake, authentication, simple commands), a pool
// of them per node, and the node's health.
//
// Lifecycle: a Node is built from its config entry at start-up and lives
// until Close. Its Pool hands out Conns; a Conn is owned by the goroutine
// that took it until it is returned with Put. A Conn remembers the session
// state it was left in (current database, collation, multi-statement option,
// last insert id) so the next borrower changes only what differs.
//
// Pools are partitioned by the capability flags that change what a server
// sends (CLIENT_DEPRECATE_EOF and CLIENT_FOUND_ROWS), so results can be
// forwarded to a client byte for byte.
//
// This package never logs. Health changes are reported through a callback.
package backend
