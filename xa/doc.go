// Package xa makes a transaction that reached several backend nodes commit
// on all of them or on none: MariaDB XA two-phase commit, with the
// decision kept in the sidecar database and a recovery that finishes what
// a proxy (or a node) left half done.
//
// The protocol, as the session runs it (proxy/session) with a Coordinator:
//   - every node the transaction reaches gets XA START with a branch id
//     (XID) naming this proxy instance, the transaction and the node;
//   - COMMIT on one node: XA END and XA COMMIT ... ONE PHASE, in one round
//     trip, as cheap as a plain COMMIT;
//   - COMMIT on several: XA END and XA PREPARE on each (Enter marks the
//     transaction in flight first); then Decide writes the commit
//     decision, one autocommitted row in the sidecar; then XA COMMIT on
//     each; then Finish forgets the decision (in the background, in
//     batches). No branch commits before the decision is durable, so a
//     crash before it leaves only prepared branches without a decision
//     (they are rolled back) and a crash after it leaves a decision (they
//     are committed).
//
// Recovery (Recover, at start-up and every recovery_interval) lists the
// prepared branches of every node (XA RECOVER) and finishes those nobody
// else is finishing: its own instance's that are not in flight, and those
// of instances that are no longer alive. Each proxy registers in the
// sidecar and renews its registration; one whose registration is older
// than the lease (or that a proxy with its name replaced) is fenced first:
// its registration is marked, and Decide refuses a commit decision for a
// fenced instance (the decision insert reads the registration under a
// shared lock), so a proxy that was only slow cannot commit what
// recovery rolls back. Committing or rolling back a branch that is gone
// already is not an error: recovery can run any number of times, from any
// number of proxies.
//
// It is its own room because the decision log and the recovery outlive any
// session and any proxy process, and are shared by every proxy on the same
// sidecar; the session only asks it for transaction ids and decisions.
package xa
