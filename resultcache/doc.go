// Package resultcache keeps the answers of single-table SELECTs as the
// client got them (whole wire packets, ready to send) and drops them
// exactly when a row they may hold changes, as every node's binary log
// says (issue 39, docs/result-cache.md).
//
// It has a room of its own because its rules are a small protocol of
// their own, kept apart from the wire and the sessions that use it:
//
//   - What an answer depends on is decided by the router from the parsed
//     statement (router.Cacheable): key points or one primary-key range of
//     one logical table, read on one node. The cache indexes answers by
//     those facts, never by the statement's text.
//   - Invalidation: each row change's before and after images drop the
//     answers of the points they hold and of the ranges their key falls
//     in; a statement that changes a table (DDL, TRUNCATE) drops all of
//     its answers; a reader that lost its stream drops everything.
//   - The fill guard: a miss takes a Token before its statement goes to
//     the node (the invalidation counters of its points, or of its table
//     for a range, the table's and the cache's flush generations, the node
//     reader's epoch), and Store keeps the answer only when none moved. A
//     change that arrives while the answer is on its way therefore drops
//     it. A change the reader saw before the Token was taken is the other
//     half: MariaDB writes the binary log before the InnoDB commit is
//     visible, so a plain read right after could still see the old row.
//     Fills are locking reads that do not wait (LOCK IN SHARE MODE
//     NOWAIT, router.Cacheable.Fill): a transaction whose commit is not
//     yet visible still holds its row locks, so the fill fails rather than
//     read around it, and the statement then runs as the client wrote it,
//     uncached.
//   - Never stale for the writer: a session is served an answer of a node
//     only when the position the cache has applied there covers the
//     session's last write on that node (Covers, from the last_gtid the
//     node reported to the session).
//   - Bounded staleness for everyone else: a node's answers are served
//     only while its reader was seen caught up with the node's own
//     @@gtid_binlog_pos within MaxStaleness (Servable).
//
// Memory is bounded by Options.Memory, split over shards, each evicting
// its least recently used answers. Fills of one key run once at a time
// (Lead): up to MaxWaiters sessions wait for the first, the rest run
// their statement themselves.
package resultcache
