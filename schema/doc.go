// Package schema is what the proxy knows of the logical tables it routes:
// the columns of every sharded and global table in order, with their types,
// keys, defaults and the AUTO_INCREMENT column, read from the backends'
// information_schema.
//
// It has a room of its own because several parts of the proxy ask the same
// questions of it and must get the same answer: the router (the column
// order of an INSERT without a column list, where the shard key is), the
// global sequences (which column they fill), and later the change streams
// and resharding, which decode row images with a table's definition as it
// was when the row was written. So the Catalog is versioned: every change
// (a table read at start-up, a refresh after DDL through the proxy) gets
// the next version number, the definitions a table had are kept, and
// AsOf(version) answers with the definition in force at that version.
//
// It is also the one place that reads a table's definition from a server
// (read.go): the columns for the catalog, and for data movement the
// primary key's order and the CREATE TABLE statement as well. The package
// does no I/O of its own: the readers take a Querier, which the proxy
// backs with a backend connection and data movement with its own
// connections, so planning code can depend on it without depending on the
// network.
package schema
