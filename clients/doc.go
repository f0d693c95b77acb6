// Package clients holds the client matrix: real MySQL client libraries, run against MariaDB directly and through
// the proxy with the same expectations, so that where the proxy differs from MariaDB for a real driver shows up
// as a failing case instead of as a user's bug report.
//
// Why a room of its own: the proxy's own tests speak the protocol through go-sql-driver and a hand-driven
// connection, and both only send what their authors thought of. Drivers in other languages each pick their own
// commands and habits (server-side or client-side prepares, batch rewriting, generated-key retrieval, metadata
// queries against information_schema, session set-up statements at connect), and an application sees the proxy
// only through them. The matrix runs them as an application would and reports the differences per case.
//
// What runs: go-sql-driver (interpolateParams false and true) in-process (gosql_test.go); PyMySQL and
// mysqlclient under SQLAlchemy's ORM (testdata/matrix.py, Debian's /usr/bin/python3); MariaDB Connector/J with
// server-side and client-side prepares, rewriteBatchedStatements, useBulkStmts, getGeneratedKeys and
// DatabaseMetaData (testdata/Matrix.java, compiled once per test run); PHP's PDO with emulated and native
// prepares and mysqli (testdata/matrix.php).
// Every client runs the same cases (CRUD, a committed and a rolled-back transaction, a batch insert, generated
// keys, result-set metadata) on an unsharded table and on a hash-sharded one. scripts/deps.sh clients installs
// the Debian packages; a missing one fails the test with that hint, it never skips.
//
// Lifecycle: TestMain starts two MariaDB servers (node1, node2) for the package. TestClientMatrix starts the
// proxy in-process over both, creates database cm on node1 directly and runs every client there, then drops it,
// creates it through the proxy (the sharded table's subtables on both nodes) and runs every client again. The
// clients of one target run concurrently, each in one process, on rows of their own id range.
//
// Invariants: a case that fails directly is a broken expectation and fails the test. A case that passes directly
// must pass through the proxy and observe the same (types, metadata), unless known.txt lists it with the exact
// error; a listed case that passes fails the test too, so known.txt only ever shrinks as the proxy is fixed.
package clients
