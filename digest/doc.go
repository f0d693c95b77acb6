// Package digest keeps the statistics of statement shapes: per
// fingerprint (the text with its constants stripped), user and schema,
// how often it ran, how long it took in total, at least, at most and at
// the 99th percentile, the rows it sent, its errors and its route. It is
// ProxySQL's stats_mysql_query_digest, held in the proxy's memory.
//
// Memory is bounded: at most Capacity shapes are kept. A new shape that
// finds the table full takes the place of the shape seen least often
// (Space-Saving, Metwally et al. 2005): the heavy hitters stay, and the
// count a newcomer inherits is reported as its overcount, an upper bound
// on how much its count may be too high.
//
// It is its own room because it is pure bookkeeping with its own rules
// (eviction, percentiles, concurrency) that the server only feeds, and the
// admin SQL, the admin HTTP and the status page all read it the same way.
//
// Concurrency: Record is called by every session; the table is split into
// shards by key, each with its own lock.
package digest
