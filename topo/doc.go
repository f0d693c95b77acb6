// Package topo is the etcd side of a shardgate fleet: the one place where several proxies agree on the topology,
// on who is alive, on who decides, and on which server is each node's master.
//
// Why it exists: one proxy with one ks.yaml needs nothing of this. A fleet of proxies behind a load balancer
// must not serve two routings at once, must not each decide a master switch alone, and needs unique XA instance
// names; etcd (Raft-replicated, as Vitess's topology and Gaea use it) gives the fleet one linearizable history.
// This package owns the key layout and the etcd protocol (compare-and-swap, watches that survive restarts,
// leases, elections); the proxy decides what to do with what it reads. It knows nothing of MySQL.
//
// What lives in etcd, under a cluster prefix P (Options.Prefix, e.g. "/shardgate/prod"):
//
//	P/topology        the ks.yaml text. Its ModRevision is the topology's version: Put is a compare-and-swap
//	                  on it, Watch delivers each version once, in order.
//	P/masters/<node>  "host:port" of each node's master, written only by the elected leader (SetMaster), with no
//	                  lease: the record outlives every proxy, and a proxy that cannot see etcd keeps the last one.
//	P/members/<id>    one JSON Member per live proxy, attached to that proxy's lease: a proxy that stops renewing
//	                  disappears after LeaseTTL seconds, one that closes its Membership disappears at once. IDs
//	                  "proxy-1", "proxy-2", ... are claimed lowest-free-first, so XA instance names are reused.
//	P/leader/<lease>  concurrency.Election candidates; the lowest create revision is the leader.
//	P/cutovers/<db.table>  a cutover in progress (cutover.go), under the announcing member's lease; members
//	                  hold the table and acknowledge at P/cutover-acks/<db.table>/<attempt>/<id>, under theirs.
//
// Lifecycle: Open dials and checks that etcd answers; Join registers the proxy under a lease (a
// concurrency.Session); Campaign blocks until that member leads. Losing the lease (Membership.Done) is losing the
// leadership (Leadership.Done): the leader's writes are transactions conditioned on its own election key still
// having the create revision it was elected with, so a deposed leader that has not noticed yet cannot overwrite
// its successor. Close the Membership before the Store so the member leaves at once instead of after the TTL.
//
// Failures: while etcd is unreachable, reads and writes fail (bounded by the caller's context), watches keep the
// last value they delivered and resume when etcd answers again, and a member's session ends after LeaseTTL
// without a renewal; Rejoin brings the same ID back under a new lease.
//
// Concurrency: Store, Membership and Leadership are safe for concurrent use. Watch and WatchMasters each run one
// goroutine, owned by the returned channel: it ends, and closes the channel, when the caller's context ends.
package topo
