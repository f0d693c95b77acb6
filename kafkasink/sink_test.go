package kafkasink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/shardgate/shardgate/changestream"
	"github.com/shardgate/shardgate/config"
)

// streamConfig is a stream with every default set, as config.Parse
// leaves it.
func streamConfig(name string, brokers []string) config.Stream {
	return config.Stream{Name: name, Brokers: brokers, Topic: "{prefix}.{db}.{table}", TopicPrefix: name, Partitions: 3,
		ReplicationFactor: 1, Format: config.FormatDebezium, Snapshot: config.SnapshotNever, TransactionalID: "shardgate-" + name,
		PositionsTopic: "shardgate.positions", BatchTransactions: 1000, BatchBytes: 4 << 20, BatchTime: 100 * time.Millisecond}
}

func fake(t *testing.T) []string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

// rows makes the changes of one source transaction on node n: one insert
// per id into shop.orders, then its mark with position after.
func txn(n string, gtid string, after string, ids ...int) []changestream.Change {
	var out []changestream.Change
	for i, id := range ids {
		out = append(out, changestream.Change{Node: n, Table: "shop.orders", Subtable: "shop.orders_0000", Op: "insert",
			After: map[string]any{"id": int64(id), "v": int64(id * 10)}, Key: []string{"id"}, GTID: gtid, Seq: i,
			Last: i == len(ids)-1, Time: time.Now().Unix()})
	}
	return append(out, changestream.Change{Node: n, Op: "mark", Pos: after})
}

// consume reads every committed record of topics (read_committed), up to
// each partition's last stable offset as it is now, in partition order.
// Control records (transaction markers) are read too, so that the end is
// reached exactly, and left out of the result.
func consume(t *testing.T, brokers []string, topics ...string) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListCommittedOffsets(ctx, topics...)
	if err != nil {
		t.Fatal(err)
	}
	left := map[string]map[int32]int64{} // topic -> partition -> offset to reach
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			if left[o.Topic] == nil {
				left[o.Topic] = map[int32]int64{}
			}
			left[o.Topic][o.Partition] = o.Offset - 1
		}
	})
	var out []*kgo.Record
	for n := 0; ; {
		for _, ps := range left {
			n += len(ps)
		}
		if n == 0 {
			return out
		}
		n = 0
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consuming %v: still to read %v", topics, left)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Logf("consuming %s[%d]: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if !r.Attrs.IsControl() {
				out = append(out, r)
			}
			if end, ok := left[r.Topic][r.Partition]; ok && r.Offset >= end {
				delete(left[r.Topic], r.Partition)
			}
		})
	}
}

// TestBatches: source transactions are batched into Kafka transactions
// by count (batch_transactions) and by time (batch_time); the records are
// keyed by primary key into the table's topic, the positions are in the
// positions topic, and a new sink of the stream reads them back.
func TestBatches(t *testing.T) {
	brokers := fake(t)
	cfg := streamConfig("b", brokers)
	cfg.BatchTransactions = 2
	s := New(cfg, nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := s.open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.cl.Close()
	if from, err := w.readPositions(ctx); err != nil || len(from) != 0 {
		t.Fatalf("positions %v, %v; want none", from, err)
	}
	ch := make(chan changestream.Change, 100)
	for _, c := range [][]changestream.Change{
		txn("n1", "0-1-1", "0-1-1", 1, 2), txn("n2", "0-2-1", "0-2-1", 3), // batch 1 (two transactions)
		txn("n1", "0-1-2", "0-1-2"),    // no wanted rows: a position only
		txn("n1", "0-1-3", "0-1-3", 4), // batch 2, by time
	} {
		for _, x := range c {
			ch <- x
		}
	}
	done := make(chan error, 1)
	go func() { done <- w.stream(ctx, ch) }()
	deadline := time.Now().Add(10 * time.Second)
	for s.Stats().Commits < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	if st.Commits != 2 || st.Transactions != 4 {
		t.Errorf("commits %d transactions %d, want 2 and 4", st.Commits, st.Transactions)
	}
	recs := consume(t, brokers, "b.shop.orders")
	byKey := map[string]int{}
	for _, r := range recs {
		var v struct{ Op string }
		json.Unmarshal(r.Value, &v)
		byKey[string(r.Key)]++
		if v.Op != "c" {
			t.Errorf("record %s: op %q", r.Key, v.Op)
		}
	}
	if len(recs) != 4 || byKey[`{"id":1}`] != 1 || byKey[`{"id":4}`] != 1 {
		t.Errorf("records %d by key %v, want ids 1-4 once each", len(recs), byKey)
	}
	s2 := New(cfg, nil, nil)
	w2, err := s2.open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer w2.cl.Close()
	from, err := w2.readPositions(context.Background())
	if err != nil || from["n1"] != "0-1-3" || from["n2"] != "0-2-1" || len(from) != 2 {
		t.Errorf("positions %v, %v; want n1 0-1-3, n2 0-2-1", from, err)
	}
}

// TestKilledMidTransaction: a sink that produced a batch but died before
// its commit leaves nothing a read_committed consumer sees, and its
// successor (same transactional id) fences it, finds the last committed
// positions, and its own commit is seen.
func TestKilledMidTransaction(t *testing.T) {
	brokers := fake(t)
	cfg := streamConfig("k", brokers)
	cfg.BatchTransactions = 1
	s := New(cfg, nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	w, err := s.open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.readPositions(ctx); err != nil {
		t.Fatal(err)
	}
	commits := 0
	s.Knobs.BeforeCommit = func() {
		if commits++; commits == 2 {
			cancel() // dies between producing the second batch and committing it
		}
	}
	ch := make(chan changestream.Change, 100)
	for _, c := range [][]changestream.Change{txn("n1", "0-1-1", "0-1-1", 1), txn("n1", "0-1-2", "0-1-2", 2)} {
		for _, x := range c {
			ch <- x
		}
	}
	close(ch)
	if err := w.stream(ctx, ch); !errors.Is(err, context.Canceled) {
		t.Fatalf("stream: %v, want context canceled at the second commit", err)
	}
	// No abort: the process is gone. The successor fences it.
	s2 := New(cfg, nil, nil)
	w2, err := s2.open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer w2.cl.Close()
	from, err := w2.readPositions(context.Background())
	if err != nil || from["n1"] != "0-1-1" {
		t.Fatalf("positions %v, %v; want n1 0-1-1", from, err)
	}
	ch2 := make(chan changestream.Change, 10)
	for _, x := range txn("n1", "0-1-2", "0-1-2", 2) {
		ch2 <- x
	}
	close(ch2)
	if err := w2.stream(context.Background(), ch2); err != nil {
		t.Fatal(err)
	}
	w.cl.Close() // the zombie's client, fenced
	var keys []string
	for _, r := range consume(t, brokers, "k.shop.orders") {
		keys = append(keys, string(r.Key))
	}
	if fmt.Sprint(keys) != `[{"id":1} {"id":2}]` {
		t.Errorf("committed keys %v, want id 1 then id 2, once each", keys)
	}
}

// TestOneTopicAndTombstones: a template without {db} and {table} puts
// every table in one topic; a delete is followed by a tombstone.
func TestOneTopicAndTombstones(t *testing.T) {
	brokers := fake(t)
	cfg := streamConfig("o", brokers)
	cfg.Topic, cfg.Tombstones, cfg.Format = "{prefix}.all", true, config.FormatJSON
	s := New(cfg, nil, nil)
	w, err := s.open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer w.cl.Close()
	if _, err := w.readPositions(context.Background()); err != nil {
		t.Fatal(err)
	}
	ch := make(chan changestream.Change, 10)
	for _, x := range txn("n1", "0-1-1", "0-1-1", 1) {
		ch <- x
	}
	ch <- changestream.Change{Node: "n1", Table: "shop.items", Op: "delete", Before: map[string]any{"id": int64(1)}, Key: []string{"id"}, GTID: "0-1-2"}
	ch <- changestream.Change{Node: "n1", Op: "mark", Pos: "0-1-2"}
	close(ch)
	if err := w.stream(context.Background(), ch); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range consume(t, brokers, "o.all") {
		var v struct{ Table, Op string }
		if r.Value != nil {
			json.Unmarshal(r.Value, &v)
		}
		got = append(got, fmt.Sprintf("%s %s %s %v", r.Key, v.Table, v.Op, r.Value == nil))
	}
	want := `[{"id":1} shop.orders insert false {"id":1} shop.items delete false {"id":1}   true]`
	if fmt.Sprint(got) != want {
		t.Errorf("got %v\nwant %s", got, want)
	}
}
