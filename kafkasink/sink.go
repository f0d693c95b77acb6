package kafkasink

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/shardgate/shardgate/changestream"
	"github.com/shardgate/shardgate/config"
)

// Knobs are the tests' hooks into a sink; the zero value is production.
type Knobs struct {
	// BeforeCommit runs before each Kafka commit (after the batch's
	// records and positions were produced and flushed).
	BeforeCommit func()
	// Now replaces the clock of the envelope's ts_ms.
	Now func() int64
}

// Sink delivers one stream's changes into Kafka. Run runs it; Stats may
// be called concurrently with Run.
type Sink struct {
	cfg     config.Stream
	sources []changestream.Source
	names   func(db, table string) string
	// Knobs are set before Run.
	Knobs Knobs
	// Cutovers, when set before Run, lists the resharding cutovers of the
	// streamed tables: their new subtables' changes are held in order
	// (order.go). The proxy sets it from its workflows.
	Cutovers func() []Cutover

	mu    sync.Mutex // guards stats
	stats Stats
}

// New returns the sink of stream cfg over sources (changestream.Sources),
// naming subtables by names (changestream.Names).
func New(cfg config.Stream, sources []changestream.Source, names func(db, table string) string) *Sink {
	return &Sink{cfg: cfg, sources: sources, names: names}
}

// Run runs the sink of stream cfg until ctx ends (nil) or a failure (its
// error). Running it again resumes from the positions committed in Kafka.
func Run(ctx context.Context, cfg config.Stream, sources []changestream.Source, names func(db, table string) string) error {
	return New(cfg, sources, names).Run(ctx)
}

// positionKey is the positions topic's key of node's position in stream.
func positionKey(stream, node string) string { return stream + "/" + node }

// Run snapshots the nodes that have no committed position (snapshot:
// initial), then streams their changes, committing a Kafka transaction
// at source-transaction boundaries, until ctx ends or a step fails.
func (s *Sink) Run(ctx context.Context) error {
	w, err := s.open(ctx)
	if err != nil {
		return s.fail(ctx, err)
	}
	defer w.cl.Close()
	// Whatever ends the run, a Kafka transaction it leaves open is aborted
	// (its records never become visible); a process killed outright leaves
	// that to the next sink, whose producer aborts it at start.
	defer w.abort()
	from, err := w.readPositions(ctx)
	if err != nil {
		return s.fail(ctx, err)
	}
	s.setCommitted(from)
	if s.cfg.Snapshot == config.SnapshotInitial {
		for _, src := range s.sources {
			if _, ok := from[src.Node]; ok {
				continue
			}
			pos, err := w.snapshot(ctx, src)
			if err != nil {
				return s.fail(ctx, fmt.Errorf("stream %s: snapshot of node %s: %w", s.cfg.Name, src.Node, err))
			}
			from[src.Node] = pos
		}
	}
	lagDone := make(chan struct{})
	lagCtx, stopLag := context.WithCancel(ctx)
	go func() { defer close(lagDone); s.pollBehind(lagCtx) }()
	defer func() { stopLag(); <-lagDone }()

	sub, cancel := context.WithCancel(ctx)
	defer cancel()
	changes, errc, err := changestream.Subscribe(sub, s.sources, s.names, changestream.Options{
		Tables: s.cfg.Tables, From: from, Marks: true, Encode: s.cfg.Format == config.FormatJSON,
		DDL: s.cfg.SchemaHistoryTopic != "",
	})
	if err != nil {
		return s.fail(ctx, fmt.Errorf("stream %s: %w", s.cfg.Name, err))
	}
	changes = order(sub, changes, from, s.nodes(), s.Cutovers)
	err = w.stream(ctx, changes)
	cancel()
	for range changes {
	}
	if serr := <-errc; err == nil {
		err = serr
	}
	return s.fail(ctx, err)
}

// open connects the sink's transactional producer, fences the id's
// previous producer and creates the positions and schema-history topics.
func (s *Sink) open(ctx context.Context) (*writer, error) {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(s.cfg.Brokers...),
		kgo.TransactionalID(s.cfg.TransactionalID),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		// A snapshot of one node is one Kafka transaction.
		kgo.TransactionTimeout(5*time.Minute),
		kgo.ProducerLinger(5*time.Millisecond),
		// A topic the sink just created is produced to at once: its
		// metadata must not wait for kgo's default 5 s minimum age.
		kgo.MetadataMinAge(100*time.Millisecond),
	)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", s.cfg.Name, err)
	}
	w := &writer{s: s, cl: cl, adm: kadm.NewClient(cl), topics: map[string]bool{}, topicOf: map[string]string{},
		held: map[string][]changestream.Change{}, pos: map[string]string{}, oldest: map[string]int64{},
		enc: &encoder{format: s.cfg.Format, schemas: s.cfg.Schemas, name: s.cfg.TopicPrefix, modes: modesOf(s.cfg), now: s.Knobs.Now}}
	if w.enc.now == nil {
		w.enc.now = func() int64 { return time.Now().UnixMilli() }
	}
	// Initialising the producer id fences the id's previous producer: its
	// open transaction is aborted, and it can no longer commit.
	if _, _, err := cl.ProducerID(ctx); err != nil {
		cl.Close()
		return nil, fmt.Errorf("stream %s: initialising the transactional producer %q: %w", s.cfg.Name, s.cfg.TransactionalID, err)
	}
	if err := w.ensureTopic(ctx, s.cfg.PositionsTopic, 1, map[string]*string{"cleanup.policy": ptr("compact")}); err != nil {
		cl.Close()
		return nil, err
	}
	if s.cfg.SchemaHistoryTopic != "" {
		if err := w.ensureTopic(ctx, s.cfg.SchemaHistoryTopic, 1, map[string]*string{"retention.ms": ptr("-1")}); err != nil {
			cl.Close()
			return nil, err
		}
	}
	return w, nil
}

// fail records err in the stats and returns it (nil if err is nil or ctx
// ended: a cancelled sink is not a failed one).
func (s *Sink) fail(ctx context.Context, err error) error {
	if err == nil || ctx.Err() != nil {
		return nil
	}
	s.mu.Lock()
	s.stats.Err = err.Error()
	s.mu.Unlock()
	return err
}

func ptr[T any](v T) *T { return &v }

// writer owns the producer while Run runs: the open Kafka transaction,
// the batch it holds, and each node's open source transaction.
type writer struct {
	s   *Sink
	cl  *kgo.Client
	adm *kadm.Client
	enc *encoder

	topics  map[string]bool   // topics known to exist
	topicOf map[string]string // logical table -> its topic

	inTxn   bool              // a Kafka transaction is open
	txns    int               // source transactions in it
	bytes   int               // bytes of records in it
	oldest  map[string]int64  // node -> binlog time of its first source transaction in it
	pos     map[string]string // node -> position after its last source transaction in it
	records int64             // records in it
	changes int64             // records of changes in it

	held map[string][]changestream.Change // node -> rows of its open source transaction

	errMu sync.Mutex
	err   error // the first failed produce
}

// stream writes changes until the channel closes or ctx ends, committing
// a Kafka transaction whenever the batch's bounds are reached at a
// source-transaction boundary.
func (w *writer) stream(ctx context.Context, changes <-chan changestream.Change) error {
	cfg := &w.s.cfg
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
			if err := w.commit(ctx); err != nil {
				return err
			}
		case ch, ok := <-changes:
			if !ok {
				// The readers stopped: commit the complete transactions.
				return w.commit(ctx)
			}
			if ch.Op != "mark" {
				w.held[ch.Node] = append(w.held[ch.Node], ch)
				continue
			}
			rows := w.held[ch.Node]
			w.held[ch.Node] = nil
			if len(w.pos) == 0 {
				timer.Reset(cfg.BatchTime) // the batch's first source transaction
			}
			if err := w.transaction(ctx, rows); err != nil {
				return err
			}
			w.held[ch.Node] = reuseHeld(rows)
			w.pos[ch.Node] = ch.Pos
			w.txns++
			if w.txns >= cfg.BatchTransactions || w.bytes >= cfg.BatchBytes {
				timer.Stop()
				if err := w.commit(ctx); err != nil {
					return err
				}
			}
		}
	}
}

// maxReusedHeld is the largest held slice kept for a node's next source
// transaction; a larger one (a transaction of many rows) is let go.
const maxReusedHeld = 1024

// reuseHeld returns rows emptied for the next source transaction of its
// node: cleared, so the produced rows' images are not kept alive by the
// array, and nil past maxReusedHeld, so one huge source transaction does
// not keep its array for the rest of the run.
func reuseHeld(rows []changestream.Change) []changestream.Change {
	if cap(rows) > maxReusedHeld {
		return nil
	}
	clear(rows)
	return rows[:0]
}

// transaction produces the records of one source transaction's rows.
func (w *writer) transaction(ctx context.Context, rows []changestream.Change) error {
	if len(rows) == 0 {
		return nil
	}
	node := rows[0].Node
	if _, ok := w.oldest[node]; !ok {
		w.oldest[node] = rows[0].Time
		w.s.received(node, rows[0].Time)
	}
	perTable := map[string]int{}
	for i := range rows {
		ch := &rows[i]
		if ch.Op == "ddl" {
			if err := w.ddl(ctx, ch); err != nil {
				return err
			}
			continue
		}
		perTable[ch.Table]++
		if err := w.change(ctx, ch, txOrder{total: i + 1, table: perTable[ch.Table]}, "false"); err != nil {
			return err
		}
	}
	return nil
}

// change produces ch's record (and its tombstone) in the open Kafka
// transaction, opening one if needed.
func (w *writer) change(ctx context.Context, ch *changestream.Change, ord txOrder, snapshot string) error {
	topic, ok := w.topicOf[ch.Table]
	if !ok {
		db, table, _ := strings.Cut(ch.Table, ".")
		topic = w.s.cfg.TopicOf(db, table)
		if err := w.ensureTopic(ctx, topic, w.s.cfg.Partitions, nil); err != nil {
			return err
		}
		w.topicOf[ch.Table] = topic
	}
	key, val, err := w.enc.encode(ch, ord, snapshot)
	if err != nil {
		return fmt.Errorf("stream %s: encoding a change of %s: %w", w.s.cfg.Name, ch.Table, err)
	}
	if err := w.produce(ctx, &kgo.Record{Topic: topic, Key: key, Value: val}); err != nil {
		return err
	}
	w.changes++
	if ch.Op == "delete" && w.s.cfg.Tombstones && key != nil {
		return w.produce(ctx, &kgo.Record{Topic: topic, Key: key})
	}
	return nil
}

// ddl writes a ddl change to the schema-history topic.
func (w *writer) ddl(ctx context.Context, ch *changestream.Change) error {
	topic := w.s.cfg.SchemaHistoryTopic
	if topic == "" {
		return nil
	}
	val, err := w.enc.history(ch)
	if err != nil {
		return err
	}
	return w.produce(ctx, &kgo.Record{Topic: topic, Value: val})
}

func (w *writer) produce(ctx context.Context, r *kgo.Record) error {
	if err := w.begin(); err != nil {
		return err
	}
	if err := w.failed(); err != nil {
		return err
	}
	w.bytes += len(r.Key) + len(r.Value)
	w.records++
	w.cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
		if err != nil {
			w.errMu.Lock()
			if w.err == nil {
				w.err = err
			}
			w.errMu.Unlock()
		}
	})
	return nil
}

func (w *writer) failed() error {
	w.errMu.Lock()
	defer w.errMu.Unlock()
	if w.err != nil {
		return fmt.Errorf("stream %s: producing: %w", w.s.cfg.Name, w.err)
	}
	return nil
}

func (w *writer) begin() error {
	if w.inTxn {
		return nil
	}
	if err := w.cl.BeginTransaction(); err != nil {
		return fmt.Errorf("stream %s: %w", w.s.cfg.Name, err)
	}
	w.inTxn = true
	return nil
}

// commit writes the batch's positions and commits the Kafka transaction
// that holds them and the records they cover.
func (w *writer) commit(ctx context.Context) error {
	if len(w.pos) == 0 {
		return nil
	}
	nodes := make([]string, 0, len(w.pos))
	for n := range w.pos {
		nodes = append(nodes, n)
	}
	slices.Sort(nodes)
	for _, n := range nodes {
		v := fmt.Sprintf(`{"stream":%q,"node":%q,"pos":%q,"ts_ms":%d}`, w.s.cfg.Name, n, w.pos[n], time.Now().UnixMilli())
		if err := w.produce(ctx, &kgo.Record{Topic: w.s.cfg.PositionsTopic, Key: []byte(positionKey(w.s.cfg.Name, n)), Value: []byte(v)}); err != nil {
			return err
		}
	}
	if err := w.cl.Flush(ctx); err != nil {
		return fmt.Errorf("stream %s: flushing: %w", w.s.cfg.Name, err)
	}
	if err := w.failed(); err != nil {
		return err
	}
	if w.s.Knobs.BeforeCommit != nil {
		w.s.Knobs.BeforeCommit()
	}
	if err := w.cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return fmt.Errorf("stream %s: committing: %w", w.s.cfg.Name, err)
	}
	w.s.committed(w.pos, w.txns, w.records, w.changes, w.bytes)
	w.inTxn, w.txns, w.bytes, w.records, w.changes = false, 0, 0, 0, 0
	clear(w.pos)
	clear(w.oldest)
	return nil
}

// abort ends the open Kafka transaction without committing it, after
// ctx ended (a fresh, short deadline): its records never become visible
// to read_committed consumers. If it cannot, the next producer with the
// same transactional id aborts it when it starts.
func (w *writer) abort() {
	if !w.inTxn {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = w.cl.AbortBufferedRecords(ctx)
	_ = w.cl.EndTransaction(ctx, kgo.TryAbort)
	w.inTxn = false
}

// ensureTopic creates topic with partitions and the stream's replication
// factor unless it exists.
func (w *writer) ensureTopic(ctx context.Context, topic string, partitions int, configs map[string]*string) error {
	if w.topics[topic] {
		return nil
	}
	resp, err := w.adm.CreateTopics(ctx, int32(partitions), int16(w.s.cfg.ReplicationFactor), configs, topic)
	if err == nil {
		for _, r := range resp {
			if r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists) {
				err = r.Err
			}
		}
	}
	if err != nil {
		return fmt.Errorf("stream %s: creating topic %s: %w", w.s.cfg.Name, topic, err)
	}
	w.topics[topic] = true
	return nil
}
