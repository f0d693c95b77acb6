// Package changestream reads the backends' binary logs and turns them into
// change streams of logical tables: every row a transaction inserted,
// updated or deleted in a subtable, named by its logical table, with its
// before and after images, the transaction's GTID and commit time, in the
// order of each node's binary log.
//
// It has a room of its own because it is the proxy's only consumer of the
// replication protocol (go-mysql's replication package reads the events;
// go-mysql's canal is not used: it decodes rows against today's schema)
// and because later work builds on it: online resharding applies these
// streams to new subtables.
//
// Rows are decoded with the column names the binary log itself carries
// (binlog_row_metadata=FULL), so each event is read against the schema as
// of its position, never against today's. Sources checks what a node must
// run with (binary logs on, binlog_format=ROW, binlog_row_image=FULL,
// binlog_row_metadata=FULL) and says what is missing.
//
// Values are exact: each column's value has one Go type (values.go:
// int64 and uint64, float32 and float64, Decimal, UTF-8 string for text
// of any character set, []byte for binary strings and geometries, Enum,
// Set, strings for dates and times) and one JSON form (base64 for []byte),
// and each change names its columns' types (Change.Types) and its table's
// primary-key columns (Change.Key, from the table map's optional metadata,
// nil for a table without a primary key), both decoded once per table map
// and shared, read only, by its changes. Text in a
// character set other than UTF-8 is decoded with the server's own table
// (single-byte sets, read once per reader) or golang.org/x/text; the
// reader keeps a connection to its source for those look-ups.
//
// Ordering and delivery: changes of one node come in its binary log order;
// the streams of several nodes are merged as they arrive, so a row, which
// lives on one node, keeps its order. Each change carries Pos, the node's
// GTID position just before its transaction: resuming from the Pos of the
// first change not yet handled delivers that transaction again, whole
// (at-least-once); (Node, GTID, Seq) identifies a change, so a consumer
// that remembers it gets exactly-once effects.
//
// Statements (Options.DDL, ddl.go): a query event of its own that
// changes a streamed table's subtable becomes a change with Op "ddl",
// its Query and Schema. Which tables it changes is decided from the
// statement parsed (TiDB's parser, under the sql_mode flags the event
// was logged with), never from its text; a statement the parser refuses
// comes with no Table rather than a guess.
//
// Flagged writes: transactions written with MariaDB's skip_replication=1
// carry LOG_EVENT_SKIP_REPLICATION_F in their events' headers; a stream
// leaves their rows and statements out unless Options.KeepFlagged, and
// reads their positions all the same. Online resharding (package move)
// writes its copies that way, so a stream of a table being moved carries
// the application's changes only, once; NamesWith names the subtables of
// both rules of a move as the logical table. move's own streams keep
// flagged changes: they must apply every change of their sources.
//
// Memory is bounded: each node's reader blocks on a full output channel,
// so a slow consumer slows its own stream (and the binary log reading
// behind it), never the proxy's query path.
package changestream
