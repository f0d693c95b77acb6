package config

import (
	"testing"
	"time"
)

// TestStreams: a stream's defaults, and each key's problem on its line
// (base's 13 lines, then streams: on line 14 and the stream from 15).
func TestStreams(t *testing.T) {
	c, err := Parse([]byte(base + "streams:\n- name: orders\n  brokers: [127.0.0.1:9092]\n  tables: [shop.orders]\n"))
	if err != nil {
		t.Fatal(err)
	}
	s := c.Stream("orders")
	want := Stream{Name: "orders", Tables: []string{"shop.orders"}, Brokers: []string{"127.0.0.1:9092"},
		Topic: "{prefix}.{db}.{table}", TopicPrefix: "orders", Partitions: 1, ReplicationFactor: 1, Format: FormatDebezium,
		Snapshot: SnapshotInitial, TransactionalID: "shardgate-orders", PositionsTopic: "shardgate.positions",
		BatchTransactions: 1000, BatchBytes: 4 << 20, BatchTime: 100 * time.Millisecond}
	if s == nil || s.Name != want.Name || s.Topic != want.Topic || s.TopicPrefix != want.TopicPrefix || s.Partitions != 1 ||
		s.ReplicationFactor != 1 || s.Format != want.Format || s.Snapshot != want.Snapshot || s.TransactionalID != want.TransactionalID ||
		s.PositionsTopic != want.PositionsTopic || s.BatchTransactions != 1000 || s.BatchBytes != 4<<20 || s.BatchTime != want.BatchTime ||
		s.DecimalHandling != DecimalPrecise || s.TimePrecision != TimeAdaptiveMicros || s.BigintUnsignedHandling != BigintUnsignedLong {
		t.Fatalf("stream = %+v\nwant %+v", s, want)
	}
	if got := s.TopicOf("shop", "orders"); got != "orders.shop.orders" {
		t.Errorf("TopicOf = %q", got)
	}

	for _, tc := range []struct {
		name, yaml string
		want       []Problem
	}{
		{"valid, one topic", "- {name: s, brokers: ['k:9092'], topic: all-changes, format: json, snapshot: never, tombstones: true}\n", nil},
		{"no name, no brokers", "- {tables: [a.b]}\n", []Problem{
			{"streams[0].name", 15, "required: the stream's name (letters, digits, '.', '_' and '-')"},
			{"streams[0].brokers", 15, "required: at least one Kafka broker, host:port"},
		}},
		{"each key", "- name: s\n  tables: [shop]\n  brokers: [kafka]\n  topic: '{prefix}.{schema}'\n  partitions: -1\n" +
			"  format: debezum\n  snapshot: always\n  schema_history_topic: 'a b'\n  batch_time: -1s\n", []Problem{
			{"streams[0].tables[0]", 16, `"shop" is not a logical table db.table`},
			{"streams[0].brokers[0]", 17, `"kafka" is not host:port`},
			{"streams[0].topic", 18, `unknown field {schema} in "{prefix}.{schema}"; use {prefix}, {db}, {table}`},
			{"streams[0].partitions", 19, "-1 is out of range 1..10000 (0 or absent: 1)"},
			{"streams[0].format", 20, `unknown format "debezum" (did you mean "debezium"?); use debezium or json`},
			{"streams[0].snapshot", 21, `unknown snapshot mode "always"; use initial or never`},
			{"streams[0].schema_history_topic", 22, `"a b" is not a Kafka topic name (at most 249 letters, digits, '.', '_' and '-')`},
			{"streams[0].batch_time", 23, "-1s is negative; use a positive duration, or 0 for the default"},
		}},
		{"two of one name", "- {name: s, brokers: ['k:1']}\n- {name: s, brokers: ['k:1'], transactional_id: x, format: json, schemas: true}\n", []Problem{
			{"streams[1].name", 16, `stream "s" is already defined at streams[0]`},
			{"streams[1].schemas", 16, "only the debezium format has a schema wrapper"},
		}},
		{"value modes", "- {name: s, brokers: ['k:1'], decimal_handling: string, time_precision: connect, bigint_unsigned_handling: precise}\n" +
			"- {name: t, brokers: ['k:1'], decimal_handling: preciss, time_precision: adaptive, bigint_unsigned_handling: string}\n", []Problem{
			{"streams[1].decimal_handling", 16, `unknown mode "preciss" (did you mean "precise"?); use precise, string, double`},
			{"streams[1].time_precision", 16, `unknown mode "adaptive"; use adaptive_time_microseconds, connect`},
			{"streams[1].bigint_unsigned_handling", 16, `unknown mode "string"; use long, precise`},
		}},
		{"one transactional id", "- {name: a, brokers: ['k:1'], transactional_id: x}\n- {name: b, brokers: ['k:1'], transactional_id: x}\n", []Problem{
			{"streams[1].transactional_id", 16, `"x" is already streams[0]'s: two sinks with one id fence each other`},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { checkProblems(t, base+"streams:\n"+tc.yaml, tc.want) })
	}
}
