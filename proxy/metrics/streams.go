package metrics

import "time"

// StreamStats is one Kafka stream (streams: in ks.yaml, package kafkasink)
// as the proxy runs it.
type StreamStats struct {
	Name string `json:"name"`
	// State is running, waiting (the sink failed and starts again after a
	// pause), stopped, or standby (in a fleet, the leader runs the sinks).
	State string    `json:"state"`
	Since time.Time `json:"since"`
	// Leader names the fleet's leader on a standby proxy.
	Leader string `json:"leader,omitempty"`
	// Runs counts the sink's starts, Failures the runs that failed;
	// LastError is the last failure's error, at LastErrorAt.
	Runs        int       `json:"runs"`
	Failures    int       `json:"failures"`
	LastError   string    `json:"last_error,omitempty"`
	LastErrorAt time.Time `json:"last_error_at,omitzero"`
	// Counts over all the runs this proxy made: Kafka transactions
	// committed, source transactions and changes (snapshot rows
	// included) they delivered, records and bytes.
	Commits      int64 `json:"commits_total"`
	Transactions int64 `json:"transactions_total"`
	Changes      int64 `json:"changes_total"`
	Records      int64 `json:"records_total"`
	Bytes        int64 `json:"bytes_total"`
	SnapshotRows int64 `json:"snapshot_rows_total"`
	// Nodes are the current run's lag per node.
	Nodes []StreamNodeStats `json:"nodes"`
}

// StreamNodeStats is one node's lag in a stream.
type StreamNodeStats struct {
	Node string `json:"node"`
	// Pos is the node's GTID position committed in Kafka.
	Pos string `json:"pos"`
	// Behind counts the transactions the node's binary log has past Pos
	// (-1: unknown); LagSeconds is how long ago the oldest transaction
	// read but not committed was written (0: all committed).
	Behind     int64     `json:"behind_transactions"`
	LagSeconds float64   `json:"lag_seconds"`
	Committed  time.Time `json:"committed,omitzero"`
}

// stream sends one stream's series; a standby stream (run by the fleet's
// leader) sends none.
func (e emitter) stream(s StreamStats) {
	if s.State == "standby" {
		return
	}
	g, k := gauge, counter
	e.one("shardgate_stream_up", "1 while the stream's Kafka sink runs; 0 while it fails (waits to start again) or is stopped.", g, boolFloat(s.State == "running"), "stream", s.Name)
	e.one("shardgate_stream_changes_total", "Records of row changes (snapshot rows included) the stream committed to Kafka.", k, float64(s.Changes), "stream", s.Name)
	e.one("shardgate_stream_commits_total", "Kafka transactions the stream committed.", k, float64(s.Commits), "stream", s.Name)
	e.one("shardgate_stream_failures_total", "Runs of the stream's sink that failed (it starts again after a pause).", k, float64(s.Failures), "stream", s.Name)
	for _, n := range s.Nodes {
		e.one("shardgate_stream_lag_seconds", "How long ago the oldest transaction the stream read from the node but has not committed to Kafka was written; 0 when all are committed.", g, n.LagSeconds, "stream", s.Name, "node", n.Node)
		e.one("shardgate_stream_behind_transactions", "Transactions the node's binary log has past the stream's committed position; -1 when unknown.", g, float64(n.Behind), "stream", s.Name, "node", n.Node)
	}
}
