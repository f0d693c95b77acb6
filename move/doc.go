// Package move moves rows while the application runs: online resharding
// of a sharded table from its shard rule to a new one, and import of a
// table from a MySQL/MariaDB server that is not behind the proxy yet.
//
// A workflow goes through the phases binary log replication systems use
// (a full copy, then the binary log from a position taken before the copy,
// then a comparison), and ends with a cutover inside the proxy:
//
//   - copy: the new subtables are created from the source's own CREATE
//     TABLE; every source subtable is read in primary-key order in chunks
//     and its rows, placed by the new rule (router.Placement, the router's
//     own function), are written as multi-row REPLACEs by parallel
//     workers, one worker per new subtable at a time, so each subtable
//     gets its rows in order. A chunk's key is checkpointed once its rows
//     are written; a restarted proxy goes on from there.
//   - catch-up: the source nodes' binary logs (package changestream) are
//     applied to the new subtables from the position read before the copy
//     began: a REPLACE of the after image, or a DELETE by primary key, by
//     workers that each own a share of the primary keys. Replaying a change
//     the copy already saw is harmless, which is why the copy needs no
//     snapshot and may be resumed: every change after the start position is
//     applied again, in order, after every copied row is written.
//   - verify: per primary-key range, a count and checksums of the rows on
//     both sides; a range that differs is compared again once the apply has
//     passed the source's position, and reported if it still differs.
//     Repair copies a reported range again.
//   - cutover: the proxy holds new statements on the table, waits for the
//     transactions that touched it to end, waits until the new subtables
//     have applied the source nodes' current positions, and swaps the rule
//     (the state is written to the sidecar first); held statements then
//     run under the new rule. Past cutover_timeout nothing changes and the
//     cutover is tried again later.
//   - after the cutover a reverse stream applies the new subtables' changes
//     to the old ones, so a rollback (another cutover) loses no write;
//     complete stops it and drops the old subtables.
//
// Every connection a workflow writes with sets MariaDB's
// skip_replication=1, so that change streams (package changestream) leave
// the copy's, the catch-up's and the reverse stream's writes out: they
// are copies of rows, not changes of the logical table. Replicas apply
// them as any other (replicate_events_marked_for_skip=REPLICATE, the
// default). A server that refuses the flag gets the writes unflagged, and
// the run warns once per node. The workflow's own streams keep flagged
// changes (changestream.Options.KeepFlagged).
//
// The state of every workflow lives in the sidecar database (package
// sidecar), so a restarted proxy resumes each from its last checkpoint.
// One proxy runs a workflow at a time: the one holding its lease in the
// sidecar, renewed while it runs. In a fleet only the leader runs
// workflows (Manager.Follow, Manager.Lead), and the lease is claimed with
// the leader's term, its election revision: a later term takes it at
// once, an earlier one never again, and every save of a run's state is a
// compare-and-set on the lease's owner and term (Store.SaveOwned), so a
// deposed leader that has not noticed yet writes nothing.
//
// It is its own room because it is the one part of the proxy that writes
// rows on its own account, over long spans, from several sources, and
// needs the router (placement), the change streams and the proxy (the
// pause) without any of them needing it.
package move
