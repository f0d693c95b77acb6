package kafkasink

import (
	"testing"

	"github.com/shardgate/shardgate/config"
)

// BenchmarkEncode encodes an update of a five-column row in each format.
func BenchmarkEncode(b *testing.B) {
	for _, f := range []struct {
		name    string
		format  string
		schemas bool
	}{{"debezium", config.FormatDebezium, false}, {"debezium-schema", config.FormatDebezium, true}, {"json", config.FormatJSON, false}} {
		b.Run(f.name, func(b *testing.B) {
			e := &encoder{format: f.format, schemas: f.schemas, name: "shardgate", now: func() int64 { return 1 }}
			ch := goldenChanges()[1].ch
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := e.encode(&ch, txOrder{1, 1}, "false"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
