package kafkasink

import (
	"time"

	"github.com/shardgate/shardgate/changestream"
	"github.com/shardgate/shardgate/config"
)

// Encoder returns the function that turns a streamed change into its
// record's key and value exactly as a sink of stream cfg does (format,
// schemas, value modes, prefix); total and table are the row's place in its source
// transaction and among the transaction's rows of its table, from 1. It
// exists for the serialize stage of bench/kafka's funnel, which runs the
// sink's stages one at a time; the encoder keeps a per-table schema cache,
// so the function is not safe for concurrent use.
func Encoder(cfg config.Stream) func(ch *changestream.Change, total, table int) (key, value []byte, err error) {
	e := &encoder{format: cfg.Format, schemas: cfg.Schemas, name: cfg.TopicPrefix, modes: modesOf(cfg),
		now: func() int64 { return time.Now().UnixMilli() }}
	return func(ch *changestream.Change, total, table int) ([]byte, []byte, error) {
		return e.encode(ch, txOrder{total: total, table: table}, "false")
	}
}
