// Package mysql implements the MySQL client/server wire protocol as both
// sides of the proxy speak it: packet framing (plain and compressed),
// length-encoded values, the handshake and authentication exchanges, OK, ERR
// and EOF packets, column definitions and rows, and the SQLError type that
// carries a MySQL error code and SQLSTATE to the client. It is also the one
// place that writes string literals and identifiers into SQL the proxy
// composes itself (QuoteString, QuoteIdent): spelled so that every
// sql_mode reads them alike, and proven against a real server by fuzzing.
//
// The package depends on the standard library only. It never logs; it returns
// errors.
//
// Ownership: a Conn is owned by exactly one goroutine. Slices returned by
// ReadPacket and PeekPacket point into the Conn's buffers and are valid only
// until the next read on that Conn; callers copy what they keep. With a
// Budget (the client side), the buffer of a packet larger than the read
// buffer goes back to a pool shared by all Conns at the next read: a slice
// kept past it would read another connection's packet.
package mysql
