package session_test

import (
	"testing"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/internal/fakebackend"
	"github.com/shardgate/shardgate/mysql"
)

// TestUniversalTransitions: under read_consistency universal a replica
// read first reads the master's @@gtid_binlog_pos on a pooled connection
// (given back at once) and waits for the replica to apply it, whoever
// made the writes (another session, another proxy); a replica that does
// not catch up in replica_wait, or a master that cannot say its position,
// leaves the read to the master; a replica whose last check covers the
// position needs no wait.
func TestUniversalTransitions(t *testing.T) {
	const pos = "SELECT @@gtid_binlog_pos"
	binlogPos := func(v string) answer {
		return answer{node: "n1", prefix: pos, reply: fakebackend.Reply{Columns: varchars("@@gtid_binlog_pos"), Rows: [][]any{{v}}}}
	}
	const wait = "SELECT MASTER_GTID_WAIT('0-1-12,1-1-3', 0.200)"
	runTransitions(t, []transition{
		{
			name:    "the replica waits for the master's position, then reads",
			replica: true, consistency: config.ConsistencyUniversal, gtidPos: "0-1-10",
			script: []answer{
				binlogPos("0-1-12,1-1-3"),
				{node: "n1r", prefix: "SELECT MASTER_GTID_WAIT", reply: number("0")},
			},
			steps: []step{on("SELECT * FROM t", "n1"), replicaReads(1), holding()},
			conns: []string{"n1.1 pooled: " + pos, "n1r.1 pooled: " + wait + "; SELECT * FROM t"},
		},
		{
			name:    "a replica that does not catch up in time leaves the read to the master",
			replica: true, consistency: config.ConsistencyUniversal, gtidPos: "0-1-10",
			script: []answer{
				binlogPos("0-1-12,1-1-3"),
				{node: "n1r", prefix: "SELECT MASTER_GTID_WAIT", reply: number("-1")},
			},
			steps: []step{on("SELECT * FROM t", "n1"), replicaReads(0), holding()},
			conns: []string{"n1.1 pooled: " + pos + "; SELECT * FROM t", "n1r.1 pooled: " + wait},
		},
		{
			name:    "a replica whose last check covers the position reads at once",
			replica: true, consistency: config.ConsistencyUniversal, gtidPos: "0-1-12,1-1-4",
			script: []answer{binlogPos("0-1-12,1-1-3")},
			steps:  []step{on("SELECT * FROM t", "n1"), replicaReads(1)},
			conns:  []string{"n1.1 pooled: " + pos, "n1r.1 pooled: SELECT * FROM t"},
		},
		{
			name:    "a master that never wrote: no wait",
			replica: true, consistency: config.ConsistencyUniversal, gtidPos: "",
			script: []answer{binlogPos("")},
			steps:  []step{on("SELECT * FROM t", "n1"), replicaReads(1)},
			conns:  []string{"n1.1 pooled: " + pos, "n1r.1 pooled: SELECT * FROM t"},
		},
		{
			name:    "a master that cannot say its position answers the read itself",
			replica: true, consistency: config.ConsistencyUniversal, gtidPos: "0-1-10",
			script: []answer{{node: "n1", prefix: pos, reply: fakebackend.Err(mysql.ErUnknownError, "no")}},
			steps:  []step{on("SELECT * FROM t", "n1"), replicaReads(0)},
			conns:  []string{"n1.1 pooled: " + pos + "; SELECT * FROM t"},
		},
		{
			name:    "writes and transactions stay on the master without asking its position",
			replica: true, consistency: config.ConsistencyUniversal, gtidPos: "0-1-10",
			steps: []step{
				on("UPDATE t SET x = 1", "n1"), begin("BEGIN"), on("SELECT * FROM t", "n1"), commit(), replicaReads(0),
			},
			conns: []string{"n1.1 pooled: UPDATE t SET x = 1; START TRANSACTION; SELECT * FROM t; COMMIT"},
		},
	})
}
