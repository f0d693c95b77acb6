package kafkasink

import (
	"context"
	"encoding/json"
	"github.com/shardgate/shardgate/config"
	"testing"
	"time"
)

// TestSnapshotValues: a row read by the snapshot (op r) has the same
// JSON values, byte for byte, as the same row streamed from the binary
// log (op c), for a column of each kind of type (unsigned 2^64-1, BIT,
// YEAR, FLOAT, DECIMAL, latin1 text, BINARY padding, ENUM, SET, TIME(3),
// DATETIME(6), TIMESTAMP(2) in UTC, JSON, NULL).
func TestSnapshotValues(t *testing.T) {
	c := newCluster(t, "sv")
	brokers := broker(t)
	d := c.dbs[0]
	exec(t, d, "DROP TABLE sv.t_0000", `CREATE TABLE sv.t_0000 (id INT PRIMARY KEY, ti TINYINT, si SMALLINT UNSIGNED, mi MEDIUMINT,
		bi BIGINT UNSIGNED, b BIT(10), y YEAR, f FLOAT, db DOUBLE, dc DECIMAL(12,4), ch CHAR(5), vc VARCHAR(20),
		tx TEXT, l1 VARCHAR(10) CHARACTER SET latin1, bn BINARY(4), vb VARBINARY(8), bl BLOB, e ENUM('a','b'), st SET('x','y','z'),
		dt DATE, tm TIME(3), dtm DATETIME(6), ts TIMESTAMP(2) NULL, js JSON, n INT)`)
	from := c.heads(t)
	exec(t, d, "SET time_zone = '+00:00'")
	exec(t, d, `INSERT INTO sv.t_0000 VALUES (4, -5, 65000, -8000000, 18446744073709551615, b'1010000001', 2024, 1.5e-3, -2.25e100,
		'-12.3400', 'ab', 'héllo', 'text', 'café', 'a\0', 'x\0y', 0x00ff, 'b', 'x,z',
		'2024-02-29', '-12:34:56.789', '2024-02-29 23:59:59.123456', '2024-03-01 01:02:03.45', '{"k": [1, 2]}', NULL)`)
	heads := c.heads(t)

	run := func(snapshot string, pos map[string]string) map[string]json.RawMessage {
		cfg := streamConfig(unique("sv"), brokers)
		cfg.Tables, cfg.Snapshot = []string{"sv.t"}, snapshot
		s := New(cfg, c.sources[:1], c.names)
		if pos != nil {
			w, err := s.open(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.readPositions(context.Background()); err != nil {
				t.Fatal(err)
			}
			w.pos["n1"] = pos["n1"]
			if err := w.commit(context.Background()); err != nil {
				t.Fatal(err)
			}
			w.cl.Close()
			s = New(cfg, c.sources[:1], c.names)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		for start := time.Now(); !caughtUp(s.Stats(), map[string]string{"n1": heads["n1"]}) && time.Since(start) < 30*time.Second; {
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		recs := consume(t, brokers, cfg.TopicOf("sv", "t"))
		if len(recs) != 1 {
			t.Fatalf("snapshot %s: %d records, want 1", snapshot, len(recs))
		}
		var v struct {
			After  map[string]json.RawMessage
			Source struct{ Snapshot string }
		}
		if err := json.Unmarshal(recs[0].Value, &v); err != nil {
			t.Fatal(err)
		}
		if want := map[string]string{config.SnapshotNever: "false", config.SnapshotInitial: "last"}[snapshot]; v.Source.Snapshot != want {
			t.Errorf("snapshot %s: source.snapshot %q, want %q", snapshot, v.Source.Snapshot, want)
		}
		return v.After
	}
	streamed := run(config.SnapshotNever, from)
	snap := run(config.SnapshotInitial, nil)
	for col, want := range streamed {
		if string(snap[col]) != string(want) {
			t.Errorf("%s: snapshot %s, streamed %s", col, snap[col], want)
		}
	}
	if len(snap) != len(streamed) {
		t.Errorf("snapshot has %d columns, the stream %d", len(snap), len(streamed))
	}
}
