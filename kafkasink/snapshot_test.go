package kafkasink

import (
	"context"
	"encoding/json"
	"github.com/shardgate/shardgate/config"
	"testing"
	"time"
)

// TestSnapshotValues: a row read by the snapshot (op r) has the same
// Debezium after image, byte for byte (values and column order), as the
// same row streamed from the binary log (op c), for a column of each kind
// of type (unsigned 2^64-1, BIT(10), BIT(1), YEAR, FLOAT, DECIMAL, latin1
// text, BINARY padding, ENUM, SET, DATE, TIME(3), DATETIME, DATETIME(6),
// TIMESTAMP, TIMESTAMP(2) in UTC, JSON, GEOMETRY, zero dates in a NULL
// and a NOT NULL column, NULL); and the streamed values have Debezium's
// documented forms.
func TestSnapshotValues(t *testing.T) {
	c := newCluster(t, "sv")
	brokers := broker(t)
	d := c.dbs[0]
	exec(t, d, "DROP TABLE sv.t_0000", `CREATE TABLE sv.t_0000 (id INT PRIMARY KEY, ti TINYINT, si SMALLINT UNSIGNED, mi MEDIUMINT,
		bi BIGINT UNSIGNED, b BIT(10), y YEAR, f FLOAT, db DOUBLE, dc DECIMAL(12,4), ch CHAR(5), vc VARCHAR(20),
		tx TEXT, l1 VARCHAR(10) CHARACTER SET latin1, bn BINARY(4), vb VARBINARY(8), bl BLOB, e ENUM('a','b'), st SET('x','y','z'),
		dt DATE, tm TIME(3), dtm DATETIME(6), ts TIMESTAMP(2) NULL, js JSON, n INT,
		b1 BIT(1), dtm0 DATETIME, ts0 TIMESTAMP NOT NULL DEFAULT '2020-01-01 00:00:00', g GEOMETRY, dz DATE NOT NULL, dzn DATE NULL)`)
	from := c.heads(t)
	exec(t, d, "SET time_zone = '+00:00'")
	exec(t, d, `INSERT INTO sv.t_0000 VALUES (4, -5, 65000, -8000000, 18446744073709551615, b'1010000001', 2024, 1.5e-3, -2.25e100,
		'-12.3400', 'ab', 'héllo', 'text', 'café', 'a\0', 'x\0y', 0x00ff, 'b', 'x,z',
		'2024-02-29', '-12:34:56.789', '2024-02-29 23:59:59.123456', '2024-03-01 01:02:03.45', '{"k": [1, 2]}', NULL,
		b'1', '2024-02-29 23:59:59', '2024-03-01 01:02:03', ST_GeomFromText('POINT(1 2)'), '0000-00-00', '0000-00-00')`)
	heads := c.heads(t)

	run := func(snapshot string, pos map[string]string) json.RawMessage {
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
			After  json.RawMessage
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
	if string(snap) != string(streamed) {
		t.Errorf("after images differ:\nsnapshot %s\nstreamed %s", snap, streamed)
	}
	// The table's column order, and Debezium's forms (docs/kafka.md, Values).
	want := `{"id":4,"ti":-5,"si":65000,"mi":-8000000,"bi":-1,"b":"gQI=","y":2024,"f":0.0015,"db":-2.25e+100,"dc":"/h34",` +
		`"ch":"ab","vc":"héllo","tx":"text","l1":"café","bn":"YQAAAA==","vb":"eAB5","bl":"AP8=","e":"b","st":"x,z",` +
		`"dt":19782,"tm":-45296789000,"dtm":1709251199123456,"ts":"2024-03-01T01:02:03.45Z","js":"{\"k\": [1, 2]}","n":null,` +
		`"b1":true,"dtm0":1709251199000,"ts0":"2024-03-01T01:02:03Z","g":{"wkb":"AQEAAAAAAAAAAADwPwAAAAAAAABA","srid":null},` +
		`"dz":0,"dzn":null}`
	if string(streamed) != want {
		t.Errorf("streamed after image:\ngot  %s\nwant %s", streamed, want)
	}
}
