// Package kafkatest runs a throwaway single-node Apache Kafka broker for the tests and benchmarks of the change
// streams' Kafka sink (issue 38): exactly-once delivery, a broker that stops for 20 s and comes back, and
// read_committed consumers can only be proven against the real broker. franz-go's in-process kfake is a protocol
// fake, fine for unit tests of a sink's logic, not for these.
//
// Layer: test support only. Production code never imports it. It imports the standard library and franz-go
// (kgo, kadm), the client the sink uses: readiness is decided by a metadata request, not a TCP connect.
//
// Lifecycle: Start (or New, for a TestMain or a benchmark that shares one broker) formats a new cluster's
// storage as Kafka's own storage tool does and runs kafka.Kafka from the jars that scripts/deps.sh kafka fetched
// once from Maven Central into $XDG_CACHE_HOME/shardgate/kafka/lib (~/.cache/shardgate/kafka/lib; the version is
// the one in scripts/kafka/pom.xml), in KRaft mode as broker and controller at once, with its configuration,
// data directory and log under one directory, on two free 127.0.0.1 ports below the kernel's ephemeral range
// (client and controller). It returns once a metadata request answers with the cluster id the storage was
// formatted with. Stop (SIGTERM, a controlled shutdown) and Kill (SIGKILL) end the JVM but keep the data and the
// ports; Restart brings the same broker back on the same ports with the same data, so topics, committed records,
// group offsets and producer and transaction state survive. Pause (SIGSTOP) and Resume make it hang with its
// sockets open. Close kills the JVM for good. The command kafkabroker (in this directory) runs one outside a
// test, for the benchmarks (scripts/kafka/broker.sh).
//
// Start time: the JVM stops at the first JIT tier and uses the serial collector (Options.Throughput, for
// benchmarks, does neither), maps the class archive that scripts/deps.sh kafka wrote (WriteClassArchive), and
// the storage is formatted from the storage tool's kept output without a JVM of its own. A broker then takes
// about 2 CPU seconds to start (3.5 without the archive, 5.3 with Kafka's default JVM flags); on this project's
// 2 cores it answers about 3 s after it was run when the machine is quiet, 5 to 10 s under a load of 20. Restart after Kill takes about 9 s longer than after Stop: the
// controller lets the killed broker's session (broker.session.timeout.ms) expire before the new incarnation
// may register.
//
// Invariants:
//   - Never a fake: the real broker from the Maven artifacts. Missing Java or jars, or a broker that does not
//     start, fail the test loudly with the fetch command or the log's tail; only go test -short skips.
//   - No broker outlives the test binary: Start registers Close as a cleanup, and on Linux the JVM carries a
//     parent-death signal (SIGKILL).
//   - Readiness is decided by asking the broker, never by sleeping.
//   - Topics are never created implicitly (auto.create.topics.enable=false): code under test creates them.
//
// Concurrency: a Broker's exported fields are fixed after New; its methods are safe from any goroutine, and
// Stop, Kill, Restart and Close are serialised by a mutex.
package kafkatest
