// Package router turns a client statement into a Plan: which backend nodes
// it runs on, against which physical subtables, with what SQL, and how the
// results are combined. Route is a pure function of the statement, the
// session's user and current database, and the configuration: no I/O, no
// logging, deterministic, safe for concurrent use. Errors are
// *mysql.SQLError values with real codes (1235 for what is refused, with
// the reason; 1064 for statements on sharded tables the parser cannot read;
// 1526 for shard keys outside every range; 1105 only for bugs).
//
// # Lifecycle
//
// New compiles every schema's shard rules once (subtable names, their
// nodes, co-location classes, per-node hint plans, the default plan). The
// Router is immutable afterwards. Plans returned by Route must not be
// modified: plans for statements without sharded tables are shared.
//
// # Fast path
//
// A schema without shard rules never parses: Route answers with its
// precomputed default plan, without allocating, after two lexical checks
// (a kingshard node hint, EXPLAIN FORMAT='shard'). Schemas with rules parse
// every statement with the TiDB parser (a sync.Pool of parsers, as a
// parser is not safe for concurrent use). Text the parser rejects goes
// unchanged to the default node unless it names a table with a rule, so
// MariaDB-only syntax keeps working on unsharded tables.
//
// # Rules
//
// Rules follow kingshard, so data kingshard placed is found where it is:
// hash (key mod the total number of subtables; strings that parse as
// unsigned integers by value, other strings by CRC-32), range (subtable i
// holds [i*table_row_limit, (i+1)*table_row_limit)) and date_year,
// date_month, date_day (one subtable per period of each node's date_range;
// keys as 'YYYY-MM-DD...' strings, DATE/TIMESTAMP literals or Unix
// timestamps in UTC). Nodes are resolved by name. global tables have a
// full copy on every node of their rule: reads go to one node, writes and
// DDL to all. Rules with equal type, nodes, locations and ranges are
// co-located: subtable i of each lives on the same node.
//
// # Statements
//
// Every table reference is resolved against Session.DB (names are exact,
// as MySQL on Linux compares them; column names are case-insensitive).
// The WHERE of each query block is analysed for shard key conditions (=,
// <=>, IN, BETWEEN, <, <=, >, >= under AND and OR; anything else means
// "every subtable"), IN lists on the key are cut so each subtable gets its
// own values, and table names are rewritten through the AST before the SQL
// is restored with the parser's own Restore. Restore drops comments other
// than optimizer hints (/*+ */) and normalises spelling (keywords upper
// case, names back-quoted); meaning is preserved, including backslashes in
// strings and the absence of character set introducers. See analyze.go for
// when statements combining several sharded tables run per subtable index.
//
// Targets are ordered by subtable index (DDL fan-out and INSERT splits
// included); Renames map physical to logical names for SHOW output.
//
// The package also classifies statements lexically (first keyword,
// session-state effects, KILL) for the session layer, without a parse.
package router
