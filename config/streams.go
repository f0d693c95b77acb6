package config

import (
	"net"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Stream is one entry of streams: the row changes of some logical tables,
// delivered into Kafka by a sink (package kafkasink), run inside the proxy
// or as `shardgate stream`. docs/kafka.md describes every key.
type Stream struct {
	// Name identifies the stream: the default topic prefix and
	// transactional id, and the key of its positions in PositionsTopic.
	Name string `yaml:"name"`
	// Tables are the logical tables (db.table) streamed; empty: all.
	Tables []string `yaml:"tables"`
	// Brokers are the Kafka bootstrap brokers, host:port.
	Brokers []string `yaml:"brokers"`
	// Topic names each logical table's topic: {prefix}, {db} and {table}
	// are replaced (default "{prefix}.{db}.{table}", as Debezium's
	// topic.prefix); without {db} and {table}, every table shares one topic.
	Topic string `yaml:"topic"`
	// TopicPrefix is {prefix} (default: Name).
	TopicPrefix string `yaml:"topic_prefix"`
	// Partitions is the partition count of a topic the sink creates
	// (default 1); a topic that exists keeps its own.
	Partitions int `yaml:"partitions"`
	// ReplicationFactor of the topics the sink creates (default 1).
	ReplicationFactor int `yaml:"replication_factor"`
	// Format is the record value: debezium (Debezium's MySQL change-event
	// envelope, the default) or json (the change stream's JSON line).
	Format string `yaml:"format"`
	// Schemas wraps each Debezium key and value in {"schema","payload"}
	// (Kafka Connect's schemas.enable=true); default false.
	Schemas bool `yaml:"schemas"`
	// Tombstones writes a record with a null value after each delete, so
	// a compacted topic can drop the row's key (Debezium's
	// tombstones.on.delete); default false.
	Tombstones bool `yaml:"tombstones"`
	// SchemaHistoryTopic receives the DDL statements of the streamed
	// databases, one record each; empty: DDL is not written.
	SchemaHistoryTopic string `yaml:"schema_history_topic"`
	// Snapshot is initial (the tables' rows as op "r" records before the
	// first change, when the stream has no position yet; the default) or
	// never.
	Snapshot string `yaml:"snapshot"`
	// TransactionalID is the Kafka transactional id of the sink's producer
	// (default "shardgate-" + Name): a second sink with the same id fences
	// the first.
	TransactionalID string `yaml:"transactional_id"`
	// PositionsTopic is the compacted topic where the sink commits each
	// node's position with the records (default "shardgate.positions").
	PositionsTopic string `yaml:"positions_topic"`
	// BatchTransactions, BatchBytes and BatchTime bound one Kafka
	// transaction: it commits after this many source transactions
	// (default 1000), this many bytes of records (default 4 MiB), or this
	// long after its first record (default 100ms), whichever comes first.
	BatchTransactions int           `yaml:"batch_transactions"`
	BatchBytes        int           `yaml:"batch_bytes"`
	BatchTime         time.Duration `yaml:"batch_time"`
	// DecimalHandling is how DECIMAL values are written in the debezium
	// format, as Debezium's decimal.handling.mode: precise (the default:
	// Kafka Connect's Decimal, base64 of the unscaled two's-complement
	// bytes), string, or double.
	DecimalHandling string `yaml:"decimal_handling"`
	// TimePrecision is how DATE, TIME and DATETIME values are written in
	// the debezium format, as Debezium's time.precision.mode:
	// adaptive_time_microseconds (the default) or connect.
	TimePrecision string `yaml:"time_precision"`
	// BigintUnsignedHandling is how BIGINT UNSIGNED values are written in
	// the debezium format, as Debezium's bigint.unsigned.handling.mode:
	// long (the default: a value above 2^63-1 wraps to a negative number)
	// or precise (Kafka Connect's Decimal with scale 0).
	BigintUnsignedHandling string `yaml:"bigint_unsigned_handling"`
}

// Stream formats and snapshot modes.
const (
	FormatDebezium  = "debezium"
	FormatJSON      = "json"
	SnapshotInitial = "initial"
	SnapshotNever   = "never"
)

// Value modes of the debezium format, named as Debezium's MySQL connector
// names them.
const (
	DecimalPrecise        = "precise"
	DecimalString         = "string"
	DecimalDouble         = "double"
	TimeAdaptiveMicros    = "adaptive_time_microseconds"
	TimeConnect           = "connect"
	BigintUnsignedLong    = "long"
	BigintUnsignedPrecise = "precise"
)

var (
	streamFormats   = []string{FormatDebezium, FormatJSON}
	snapshotModes   = []string{SnapshotInitial, SnapshotNever}
	decimalModes    = []string{DecimalPrecise, DecimalString, DecimalDouble}
	timeModes       = []string{TimeAdaptiveMicros, TimeConnect}
	bigintModes     = []string{BigintUnsignedLong, BigintUnsignedPrecise}
	streamNameRE    = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)
	topicRE         = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)
	topicFieldRE    = regexp.MustCompile(`\{[^}]*\}`)
	topicFields     = []string{"{prefix}", "{db}", "{table}"}
	qualifiedNameRE = regexp.MustCompile(`^[^.\s]+\.[^.\s]+$`)
)

// streamDefaults fills each stream's unset keys.
func (c *Config) streamDefaults() {
	for i := range c.Streams {
		s := &c.Streams[i]
		if s.Topic == "" {
			s.Topic = "{prefix}.{db}.{table}"
		}
		if s.TopicPrefix == "" {
			s.TopicPrefix = s.Name
		}
		if s.Partitions == 0 {
			s.Partitions = 1
		}
		if s.ReplicationFactor == 0 {
			s.ReplicationFactor = 1
		}
		if s.Format == "" {
			s.Format = FormatDebezium
		}
		if s.Snapshot == "" {
			s.Snapshot = SnapshotInitial
		}
		if s.TransactionalID == "" && s.Name != "" {
			s.TransactionalID = "shardgate-" + s.Name
		}
		if s.PositionsTopic == "" {
			s.PositionsTopic = "shardgate.positions"
		}
		if s.BatchTransactions == 0 {
			s.BatchTransactions = 1000
		}
		if s.BatchBytes == 0 {
			s.BatchBytes = 4 << 20
		}
		if s.BatchTime == 0 {
			s.BatchTime = 100 * time.Millisecond
		}
		if s.DecimalHandling == "" {
			s.DecimalHandling = DecimalPrecise
		}
		if s.TimePrecision == "" {
			s.TimePrecision = TimeAdaptiveMicros
		}
		if s.BigintUnsignedHandling == "" {
			s.BigintUnsignedHandling = BigintUnsignedLong
		}
	}
}

// TopicOf is the topic of the logical table db.table in s.
func (s *Stream) TopicOf(db, table string) string {
	return strings.NewReplacer("{prefix}", s.TopicPrefix, "{db}", db, "{table}", table).Replace(s.Topic)
}

// Stream returns the stream named name, or nil.
func (c *Config) Stream(name string) *Stream {
	for i := range c.Streams {
		if c.Streams[i].Name == name {
			return &c.Streams[i]
		}
	}
	return nil
}

func (c *Config) validateStreams(v *validator) {
	for i := range c.Streams {
		s := &c.Streams[i]
		p := joinIndex("streams", i)
		switch {
		case s.Name == "":
			v.add(joinKey(p, "name"), "required: the stream's name (letters, digits, '.', '_' and '-')")
		case !streamNameRE.MatchString(s.Name):
			v.add(joinKey(p, "name"), "%q is not a stream name (letters, digits, '.', '_' and '-')", s.Name)
		default:
			if j := slices.IndexFunc(c.Streams[:i], func(o Stream) bool { return o.Name == s.Name }); j >= 0 {
				v.add(joinKey(p, "name"), "stream %q is already defined at streams[%d]", s.Name, j)
			}
		}
		for k, t := range s.Tables {
			if !qualifiedNameRE.MatchString(t) {
				v.add(joinIndex(joinKey(p, "tables"), k), "%q is not a logical table db.table", t)
			}
		}
		if len(s.Brokers) == 0 {
			v.add(joinKey(p, "brokers"), "required: at least one Kafka broker, host:port")
		}
		for k, b := range s.Brokers {
			if _, port, err := net.SplitHostPort(b); err != nil || port == "" {
				v.add(joinIndex(joinKey(p, "brokers"), k), "%q is not host:port", b)
			}
		}
		c.validateTopic(v, p, s)
		if s.Partitions < 1 || s.Partitions > 10000 {
			v.add(joinKey(p, "partitions"), "%d is out of range 1..10000 (0 or absent: 1)", s.Partitions)
		}
		if s.ReplicationFactor < 1 || s.ReplicationFactor > 32 {
			v.add(joinKey(p, "replication_factor"), "%d is out of range 1..32 (0 or absent: 1)", s.ReplicationFactor)
		}
		if !slices.Contains(streamFormats, s.Format) {
			v.add(joinKey(p, "format"), "unknown format %q%s; use %s", s.Format, didYouMean(s.Format, streamFormats), strings.Join(streamFormats, " or "))
		}
		if s.Schemas && s.Format != FormatDebezium {
			v.add(joinKey(p, "schemas"), "only the debezium format has a schema wrapper")
		}
		if !slices.Contains(snapshotModes, s.Snapshot) {
			v.add(joinKey(p, "snapshot"), "unknown snapshot mode %q%s; use %s", s.Snapshot, didYouMean(s.Snapshot, snapshotModes), strings.Join(snapshotModes, " or "))
		}
		for _, m := range []struct {
			key, val string
			modes    []string
		}{{"decimal_handling", s.DecimalHandling, decimalModes}, {"time_precision", s.TimePrecision, timeModes},
			{"bigint_unsigned_handling", s.BigintUnsignedHandling, bigintModes}} {
			// Empty is the default (a Stream built in code, not loaded).
			if m.val != "" && !slices.Contains(m.modes, m.val) {
				v.add(joinKey(p, m.key), "unknown mode %q%s; use %s", m.val, didYouMean(m.val, m.modes), strings.Join(m.modes, ", "))
			}
		}
		for _, t := range []struct{ key, val string }{{"schema_history_topic", s.SchemaHistoryTopic}, {"positions_topic", s.PositionsTopic}} {
			if t.val != "" && (!topicRE.MatchString(t.val) || len(t.val) > 249) {
				v.add(joinKey(p, t.key), "%q is not a Kafka topic name (at most 249 letters, digits, '.', '_' and '-')", t.val)
			}
		}
		for _, n := range []struct {
			key string
			val int
		}{{"batch_transactions", s.BatchTransactions}, {"batch_bytes", s.BatchBytes}} {
			if n.val < 0 {
				v.add(joinKey(p, n.key), "%d is negative; use a positive number, or 0 for the default", n.val)
			}
		}
		if s.BatchTime < 0 {
			v.add(joinKey(p, "batch_time"), "%v is negative; use a positive duration, or 0 for the default", s.BatchTime)
		}
		if s.TransactionalID != "" {
			if j := slices.IndexFunc(c.Streams[:i], func(o Stream) bool { return o.TransactionalID == s.TransactionalID }); j >= 0 {
				v.add(joinKey(p, "transactional_id"), "%q is already streams[%d]'s: two sinks with one id fence each other", s.TransactionalID, j)
			}
		}
	}
}

// validateTopic checks s's topic template: known fields only, and names
// Kafka accepts once they are filled in.
func (c *Config) validateTopic(v *validator, p string, s *Stream) {
	key := joinKey(p, "topic")
	for _, f := range topicFieldRE.FindAllString(s.Topic, -1) {
		if !slices.Contains(topicFields, f) {
			v.add(key, "unknown field %s in %q; use %s", f, s.Topic, strings.Join(topicFields, ", "))
			return
		}
	}
	if name := s.TopicOf("db", "table"); !topicRE.MatchString(name) || len(name) > 249 {
		v.add(key, "%q does not make a Kafka topic name (at most 249 letters, digits, '.', '_' and '-')", s.Topic)
	}
	if s.TopicPrefix != "" && !topicRE.MatchString(s.TopicPrefix) {
		v.add(joinKey(p, "topic_prefix"), "%q is not part of a Kafka topic name (letters, digits, '.', '_' and '-')", s.TopicPrefix)
	}
}
