package kafkatest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// createTopic creates topic with the given number of partitions and waits until it is in the metadata.
func createTopic(t *testing.T, b *Broker, topic string, partitions int32) {
	t.Helper()
	adm := kadm.NewClient(b.Client(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, partitions, 1, nil, topic)
	if err != nil || resp.Err != nil {
		t.Fatalf("create topic %s: %v %v", topic, err, resp.Err)
	}
}

// produceTx produces n records for each of keys in one transaction per round of keys, committing all of them.
// Record values are "key/seq", seq counting from first.
func produceTx(t *testing.T, b *Broker, txID, topic string, keys []string, first, n int) {
	t.Helper()
	cl := b.Client(t, kgo.TransactionalID(txID), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for seq := first; seq < first+n; seq++ {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatalf("begin: %v", err)
		}
		for _, k := range keys {
			cl.Produce(ctx, &kgo.Record{Key: []byte(k), Value: []byte(k + "/" + strconv.Itoa(seq))}, nil)
		}
		if err := cl.Flush(ctx); err != nil {
			t.Fatalf("flush: %v", err)
		}
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatalf("commit: %v", err)
		}
	}
	cl.Close()
}

// consumeAll reads want records of topic in group with read_committed isolation and returns, per key, the
// sequence numbers in the order received, and per key the partition it was read from.
func consumeAll(t *testing.T, b *Broker, group, topic string, want int) (map[string][]int, map[string]int32) {
	t.Helper()
	// Closed on return, not at the test's end: a member left in the group would keep some of its partitions.
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	seqs := map[string][]int{}
	parts := map[string]int32{}
	got := 0
	for got < want {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", got, want, err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s[%d]: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			k := string(r.Key)
			var seq int
			if _, err := fmt.Sscanf(string(r.Value), k+"/%d", &seq); err != nil {
				t.Fatalf("record %q: %v", r.Value, err)
			}
			if p, ok := parts[k]; ok && p != r.Partition {
				t.Fatalf("key %s in partitions %d and %d", k, p, r.Partition)
			}
			parts[k] = r.Partition
			seqs[k] = append(seqs[k], seq)
			got++
		})
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit offsets: %v", err)
	}
	return seqs, parts
}

func checkOrder(t *testing.T, seqs map[string][]int, keys []string, n int) {
	t.Helper()
	for _, k := range keys {
		if len(seqs[k]) != n {
			t.Fatalf("key %s: %d records, want %d", k, len(seqs[k]), n)
		}
		for i, s := range seqs[k] {
			if s != i {
				t.Fatalf("key %s: record %d has sequence %d (out of order: %v)", k, i, s, seqs[k])
			}
		}
	}
}

// TestTransactionalKeyed produces keyed records into a 3-partition topic with a transactional producer, aborts
// one transaction, and reads the topic in a group with read_committed: every committed record exactly once, each
// key in one partition and in order, nothing of the aborted transaction. A topic nobody created does not exist.
func TestTransactionalKeyed(t *testing.T) {
	b := Start(t)
	t.Logf("Kafka %s ready on %s in %v", b.Version, b.Addr, b.StartTime())
	const topic, rounds = "orders", 50
	createTopic(t, b, topic, 3)
	keys := make([]string, 20)
	for i := range keys {
		keys[i] = "k" + strconv.Itoa(i)
	}
	produceTx(t, b, "tx-a", topic, keys, 0, rounds)

	// One aborted transaction: its records are in the log but never reach a read_committed consumer.
	cl := b.Client(t, kgo.TransactionalID("tx-b"), kgo.DefaultProduceTopic(topic))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		cl.Produce(ctx, &kgo.Record{Key: []byte(k), Value: []byte(k + "/999")}, nil)
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}

	seqs, parts := consumeAll(t, b, "g1", topic, rounds*len(keys))
	checkOrder(t, seqs, keys, rounds)
	used := map[int32]bool{}
	for _, p := range parts {
		used[p] = true
	}
	if len(used) < 2 {
		t.Errorf("20 keys landed in %d of 3 partitions", len(used))
	}

	// The end offsets include the aborted records and the transaction markers: the log holds more than the
	// consumer saw.
	adm := kadm.NewClient(b.Client(t))
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	if total <= int64(rounds*len(keys)) {
		t.Errorf("end offsets sum to %d, want more than the %d committed records", total, rounds*len(keys))
	}

	// Topics exist only when created: a record for another topic fails.
	plain := b.Client(t, kgo.UnknownTopicRetries(1))
	err = plain.ProduceSync(ctx, &kgo.Record{Topic: "nobody-made-me", Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("produce to a topic nobody created: %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
	}
}

// TestStopRestart checks that committed records and a group's offsets written before Stop and before Kill
// are there after Restart on the same address, that nothing answers while the broker is down, and that a
// transaction open across the stop (records before it and during it) commits once the broker is back, with
// the same client: what a sink does when the broker goes away for a while.
func TestStopRestart(t *testing.T) {
	b := Start(t)
	addr, cluster := b.Addr, b.ClusterID
	const topic = "events"
	createTopic(t, b, topic, 3)
	keys := []string{"a", "b", "c", "d", "e"}
	produceTx(t, b, "tx", topic, keys, 0, 10)
	seqs, _ := consumeAll(t, b, "g", topic, 10*len(keys))
	checkOrder(t, seqs, keys, 10)

	live := b.Client(t, kgo.TransactionalID("live"), kgo.DefaultProduceTopic(topic))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := live.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		live.Produce(ctx, &kgo.Record{Key: []byte(k), Value: []byte(k + "/10")}, nil)
	}
	if err := live.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	began := time.Now()
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("Stop took %v", time.Since(began))
	if b.Pid() != 0 {
		t.Fatal("Pid after Stop is not 0")
	}
	down := kadm.NewClient(b.Client(t, kgo.RetryTimeout(500*time.Millisecond)))
	downCtx, downCancel := context.WithTimeout(ctx, 2*time.Second)
	_, err := down.BrokerMetadata(downCtx)
	downCancel()
	if err == nil {
		t.Fatal("metadata answered while the broker is stopped")
	}
	for _, k := range keys {
		live.Produce(ctx, &kgo.Record{Key: []byte(k), Value: []byte(k + "/11")}, nil)
	}

	if err := b.Restart(); err != nil {
		t.Fatal(err)
	}
	t.Logf("Restart after Stop ready in %v", b.StartTime())
	if b.Addr != addr || b.ClusterID != cluster {
		t.Fatalf("Restart moved the broker: %s %s, was %s %s", b.Addr, b.ClusterID, addr, cluster)
	}
	began = time.Now()
	if err := live.Flush(ctx); err != nil {
		t.Fatalf("flush after Restart: %v", err)
	}
	if err := live.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit after Restart: %v", err)
	}
	t.Logf("the transaction open across the stop committed %v after Restart", time.Since(began))
	// Another transactional id goes on after the restart, and the group resumes after its committed offsets.
	produceTx(t, b, "tx", topic, keys, 12, 3)
	seqs, _ = consumeAll(t, b, "g", topic, 5*len(keys))
	for _, k := range keys {
		if len(seqs[k]) != 5 || seqs[k][0] != 10 || seqs[k][4] != 14 {
			t.Fatalf("key %s after Stop and Restart: %v, want 10..14", k, seqs[k])
		}
	}

	if err := b.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := b.Restart(); err != nil {
		t.Fatal(err)
	}
	t.Logf("Restart after Kill ready in %v", b.StartTime())
	seqs, _ = consumeAll(t, b, "all", topic, 15*len(keys))
	checkOrder(t, seqs, keys, 15)
}

// TestBadConfigFailsLoudly checks that a broker that cannot start reports Kafka's own explanation.
func TestBadConfigFailsLoudly(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	_, err := New(t.TempDir(), Options{Props: []string{"node.id=one"}})
	if err == nil || !strings.Contains(err.Error(), "Invalid value one") {
		t.Fatalf("New with node.id=one: %v, want Kafka's ConfigException", err)
	}
	t.Logf("New with node.id=one: %v", err)
}
