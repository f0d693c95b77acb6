// Package metrics is what the proxy counts and how it shows it: the
// Prometheus registry (the shardgate_* series beside the standard go_* and
// process_* collectors), the per-statement counters and latency histograms, the query
// digest, the per-second series of the status page, and the Stats snapshot
// that /stats and the scrape both read.
//
// It has a room of its own because it is read from two sides that must not
// know each other: the statement path in proxy/server records every
// statement (Observe, ClientError) and must stay cheap, and the admin
// surfaces in proxy/admin read what was recorded (Handler, Digest, Series).
// It imports neither: the server hands it a Statement per statement and the
// functions of Options that produce the snapshot at scrape time.
//
// Concurrency: Observe and ClientError are called by every session's
// goroutine at once; they touch only precomputed counters, atomics and the
// digest (which locks its own shard), allocate nothing and look up no label.
// Start runs one sampler goroutine that turns the counters into Samples once
// a second; Close stops it and waits for it.
package metrics
