// Package kafkasink delivers the change streams of logical tables into
// Kafka: one sink per entry of streams: in ks.yaml (config.Stream), run
// inside the proxy or as `shardgate stream`.
//
// It has a room of its own because it is the proxy's only Kafka client
// (franz-go: kgo for the transactional producer, kadm for topics) and
// because its guarantees are its own: changestream delivers at least once
// from a position the consumer keeps; the sink keeps those positions in
// Kafka itself, in the same transactions as the records, so what a
// read_committed consumer sees is exactly once.
//
// Records: one topic per logical table (Stream.Topic, or one topic for
// all), keyed by the row's primary key ({"id":7}, from Change.Key), so
// every change of a row lands in one partition in commit order. The value
// is Debezium's MySQL change-event envelope in JSON (encode.go), or the
// change stream's own JSON line (format: json).
//
// Exactly once: the sink subscribes with changestream's Marks, so after
// each source transaction it learns the node's position after it. It
// writes the records of several source transactions (bounded by count,
// bytes and time), then, in the same Kafka transaction, each node's new
// position to the compacted positions topic (key: stream name and node),
// and commits. On start it reads the positions topic with read_committed
// to its end and resumes each node from its last committed position
// (changestream.Options.From): a sink killed at any point resumes after the
// last committed transaction, and the aborted one is invisible to
// read_committed consumers. The producer's transactional id fences a
// zombie: a second sink with the same id (on this or another proxy) aborts
// the first one's open transaction and the first can no longer commit.
//
// Snapshot: a stream with no committed position first reads each node's
// subtables inside START TRANSACTION WITH CONSISTENT SNAPSHOT, takes the
// GTID position that snapshot is consistent with, writes the rows as op
// "r" records and commits them with that position; streaming then starts
// from it, so nothing is missed or repeated.
//
// Lifecycle: Run owns everything it starts (the subscription, the
// producer, the snapshot connections) and returns when ctx ends or on the
// first error; its caller decides whether to run it again. Back-pressure:
// the sink reads its own subscription, so a slow broker slows only its
// binary log readers (whose channels block), never the query path. Stats
// is safe to call from any goroutine while Run runs.
package kafkasink
