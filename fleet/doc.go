// Package fleet makes several shardgate proxies one: each proxy's agent
// applies every version of the topology kept in etcd (package topo),
// publishes what it applied and what its health checks see, and takes
// part in the election of a leader, who alone decides master switches
// from the reports of every proxy and records them; every proxy follows
// the recorded master.
//
// It has its own package because it is the one place where the proxy
// meets the fleet: proxy/server knows nothing of etcd (it is driven
// through the Proxy interface), and topo knows nothing of proxies (it is
// the store). A proxy without etcd (one ks.yaml) uses none of this.
package fleet
