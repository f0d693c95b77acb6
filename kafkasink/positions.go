package kafkasink

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Positions live in the positions topic (compacted, one partition): one
// record per commit and node, key "stream/node", value
// {"stream","node","pos","ts_ms"} with pos the node's GTID position after
// the last source transaction the commit covers. A sink on any proxy finds
// them there by the stream's name.

// position is a positions record's value.
type position struct {
	Stream string `json:"stream"`
	Node   string `json:"node"`
	Pos    string `json:"pos"`
}

// readPositions returns each node's last committed position. It commits
// a marker record of its own (key "stream/", a fresh nonce) and reads the
// topic with read_committed from its start until the marker: every
// position committed before, by any earlier sink of the stream, has then
// been read (the producer was fenced first, so no earlier transaction is
// still open). The topic must have one partition.
func (w *writer) readPositions(ctx context.Context) (map[string]string, error) {
	name, topic := w.s.cfg.Name, w.s.cfg.PositionsTopic
	// A topic just created may take a moment to appear in the metadata.
	for try := 0; ; try++ {
		details, err := w.adm.ListTopics(ctx, topic)
		if err != nil {
			return nil, fmt.Errorf("stream %s: reading topic %s: %w", name, topic, err)
		}
		d := details[topic]
		if d.Err == nil && len(d.Partitions) == 1 {
			break
		}
		if try == 50 || d.Err == nil && len(d.Partitions) > 1 {
			return nil, fmt.Errorf("stream %s: positions topic %s must exist with one partition (%d partitions, %v)", name, topic, len(d.Partitions), d.Err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	var b [16]byte
	rand.Read(b[:])
	nonce := hex.EncodeToString(b[:])
	if err := w.begin(); err != nil {
		return nil, err
	}
	marker := positionKey(name, "")
	if err := w.cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte(marker), Value: []byte(nonce)}).FirstErr(); err != nil {
		return nil, fmt.Errorf("stream %s: writing the positions marker: %w", name, err)
	}
	if err := w.cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return nil, fmt.Errorf("stream %s: committing the positions marker: %w", name, err)
	}
	w.inTxn = false

	rd, err := kgo.NewClient(kgo.SeedBrokers(w.s.cfg.Brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	out := map[string]string{}
	for {
		fs := rd.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err := fs.Err(); err != nil {
			return nil, fmt.Errorf("stream %s: reading topic %s: %w", name, topic, err)
		}
		found := false
		fs.EachRecord(func(r *kgo.Record) {
			k := string(r.Key)
			switch {
			case k == marker:
				found = found || string(r.Value) == nonce
			case strings.HasPrefix(k, name+"/"):
				var p position
				if json.Unmarshal(r.Value, &p) == nil && p.Stream == name {
					out[p.Node] = p.Pos
				}
			}
		})
		if found {
			return out, nil
		}
	}
}
