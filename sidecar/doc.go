// Package sidecar is the sidecar database: state that every proxy sharing
// it must agree on, kept on one backend node (config sidecar.node and
// sidecar.db) — the global sequences' blocks (package sequence), the XA
// commit decisions and proxy registrations (package xa), and the data
// movement workflows (package move).
//
// It is its own room because the three share one concern none of them
// owns: one database on one server, reached by the proxy's own MySQL
// client (backend.Conn, on connections outside the pools, so nothing of a
// client's session reaches them and nothing of theirs reaches a client),
// whose tables outlive every proxy process and are written by proxies of
// different versions at once. Each user is a Component with an ordered
// list of migrations; Exec brings the component's tables to its version
// on first use, once per Sidecar, and runs the statement. There is one
// migration path for every table in the database.
//
// Versions: the table sidecar_migrations holds, per component, how many of
// its migrations have run. A proxy that finds a component at a higher
// version than it knows refuses to touch it (an older proxy must not write
// tables a newer one changed). The table sidecar_version (one row, id 1)
// is the version of the database's layout as a whole; raising it locks out
// every older proxy, including those from before sidecar_migrations. Its
// value here is 1.
//
// Migrations are idempotent statements (CREATE TABLE IF NOT EXISTS, ADD
// COLUMN IF NOT EXISTS), run in order and recorded one by one: a
// deployment older than sidecar_migrations has the tables but no versions,
// and running the migrations again is how its tables are adopted, with
// their rows; two proxies that start together may run the same migration,
// which changes nothing the second time. A migration's statements must
// stay as they were released: what changes later is a new migration.
//
// Statements run autocommitted on the Sidecar's connections, one at a time
// per connection; a Sidecar is safe for concurrent use. A statement's
// context bounds it: when the context ends first, the connection is closed
// under the statement, which then fails (its outcome unknown to the
// caller, as any lost answer).
package sidecar
