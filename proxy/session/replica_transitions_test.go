package session_test

import (
	"fmt"
	"testing"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/internal/fakebackend"
	"github.com/shardgate/shardgate/mysql"
)

// replicaReads checks how many reads the session sent to replicas.
func replicaReads(n uint64) step {
	return check(fmt.Sprintf("%d replica reads", n), func(h *harness) error {
		if h.s.ReplicaReads != n {
			return fmt.Errorf("%d replica reads, want %d", h.s.ReplicaReads, n)
		}
		return nil
	})
}

// TestReplicaTransitions: a plain read outside a transaction may go to a
// replica of its node; under read_consistency session only to one that
// has applied the session's last commit there (waiting replica_wait for
// it), under strong never. A replica connection is kept only for the
// warnings of its read.
func TestReplicaTransitions(t *testing.T) {
	commit11 := fakebackend.Reply{Affected: 1, State: fakebackend.SysVar("last_gtid", "0-1-11")}
	const wait = "SELECT MASTER_GTID_WAIT('0-1-11', 0.200)"
	runTransitions(t, []transition{
		{
			name:    "a plain read goes to the replica and back to its pool; writes go to the master",
			replica: true, consistency: config.ConsistencySession, gtidPos: "0-1-10",
			steps: []step{
				on("SELECT * FROM t", "n1"), on("SELECT * FROM t", "n1"), replicaReads(2), holding(),
				on("UPDATE t SET x = 1", "n1"),
			},
			conns: []string{"n1.1 pooled: UPDATE t SET x = 1", "n1r.1 pooled: SELECT * FROM t; SELECT * FROM t"},
		},
		{
			name:    "reads in a transaction, or with session state, stay on the master",
			replica: true, consistency: config.ConsistencySession, gtidPos: "0-1-10",
			steps: []step{
				begin("BEGIN"), on("SELECT * FROM t", "n1"), commit(),
				on("CREATE TEMPORARY TABLE tmp (x INT)", "n1"), on("SELECT * FROM t", "n1"), replicaReads(0),
			},
			conns: []string{"n1.1 held: START TRANSACTION; SELECT * FROM t; COMMIT; CREATE TEMPORARY TABLE tmp (x INT); SELECT * FROM t"},
			facts: "holds-state",
		},
		{
			name:    "read_consistency strong: reads stay on the master",
			replica: true, consistency: config.ConsistencyStrong, gtidPos: "0-1-10",
			steps: []step{on("SELECT * FROM t", "n1"), replicaReads(0)},
			conns: []string{"n1.1 pooled: SELECT * FROM t"},
		},
		{
			name:    "read your writes: the replica waits for the session's last commit before the read",
			replica: true, consistency: config.ConsistencySession, gtidPos: "0-1-10",
			script: []answer{
				{node: "n1", prefix: "INSERT", reply: commit11},
				{node: "n1r", prefix: "SELECT MASTER_GTID_WAIT", reply: number("0")},
			},
			steps: []step{on("INSERT INTO t VALUES (1)", "n1"), on("SELECT * FROM t", "n1"), replicaReads(1)},
			conns: []string{"n1.1 pooled: INSERT INTO t VALUES (1)", "n1r.1 pooled: " + wait + "; SELECT * FROM t"},
		},
		{
			name:    "read your writes: a replica that does not catch up in time leaves the read to the master",
			replica: true, consistency: config.ConsistencySession, gtidPos: "0-1-10",
			script: []answer{
				{node: "n1", prefix: "INSERT", reply: commit11},
				{node: "n1r", prefix: "SELECT MASTER_GTID_WAIT", reply: number("-1")},
			},
			steps: []step{on("INSERT INTO t VALUES (1)", "n1"), on("SELECT * FROM t", "n1"), replicaReads(0)},
			conns: []string{"n1.1 pooled: INSERT INTO t VALUES (1); SELECT * FROM t", "n1r.1 pooled: " + wait},
		},
		{
			name:    "read your writes: a replica that has the commit already needs no wait",
			replica: true, consistency: config.ConsistencySession, gtidPos: "0-1-12",
			script: []answer{{node: "n1", prefix: "INSERT", reply: commit11}},
			steps:  []step{on("INSERT INTO t VALUES (1)", "n1"), on("SELECT * FROM t", "n1")},
			conns:  []string{"n1.1 pooled: INSERT INTO t VALUES (1)", "n1r.1 pooled: SELECT * FROM t"},
		},
		{
			name:    "read_consistency eventual: no wait for the session's commit",
			replica: true, consistency: config.ConsistencyEventual, gtidPos: "0-1-10",
			script: []answer{{node: "n1", prefix: "INSERT", reply: commit11}},
			steps:  []step{on("INSERT INTO t VALUES (1)", "n1"), on("SELECT * FROM t", "n1")},
			conns:  []string{"n1.1 pooled: INSERT INTO t VALUES (1)", "n1r.1 pooled: SELECT * FROM t"},
		},
		{
			name:    "warnings of a replica read keep it for SHOW WARNINGS; a write lets it go",
			replica: true, consistency: config.ConsistencySession, gtidPos: "0-1-10",
			script: []answer{{node: "n1r", prefix: "SELECT", reply: fakebackend.Reply{Warnings: 1}}},
			steps: []step{
				on("SELECT * FROM t", "n1"), on("SHOW WARNINGS", "n1"), replicaReads(1),
				on("SELECT * FROM t", "n1"), on("UPDATE t SET x = 1", "n1"), holding(),
			},
			conns: []string{"n1.1 pooled: UPDATE t SET x = 1", "n1r.1 pooled: SELECT * FROM t; SHOW WARNINGS; SELECT * FROM t"},
		},
	})
}

// TestMasterSwitchTransitions: when a node's master moves, its idle
// connections close; a connection the session holds to the old master is
// found stale at its next use: kept for warnings only, it is dropped; in a
// transaction, the transaction is rolled back everywhere (1927, the client
// runs it again); with session state, it is lost as in a crash.
func TestMasterSwitchTransitions(t *testing.T) {
	warn := fakebackend.Reply{Warnings: 1}
	runTransitions(t, []transition{
		{
			name:  "idle connections to the old master close; the next statement goes to the new one",
			steps: []step{on("SELECT 1", "n1"), switchMaster("n1"), on("SELECT 2", "n1")},
			conns: []string{"n1.1 closed: SELECT 1; QUIT", "n1'.1 pooled: SELECT 2"},
		},
		{
			name:   "a connection kept for warnings is dropped",
			script: []answer{{node: "n1", prefix: "INSERT", reply: warn}},
			steps:  []step{on("INSERT INTO t VALUES (1)", "n1"), switchMaster("n1"), on("SHOW WARNINGS", "n1")},
			conns:  []string{"n1.1 closed: INSERT INTO t VALUES (1)", "n1'.1 pooled: SHOW WARNINGS"},
		},
		{
			name: "in a transaction: rolled back on every node, 1927",
			steps: []step{
				begin("BEGIN"), on("UPDATE a SET x = 1", "n1"), on("UPDATE b SET x = 1", "n2"),
				switchMaster("n1"),
				on("UPDATE a SET x = 2", "n1").fails(mysql.ErConnectionKilled, "master of node n1 moved", "rolled back"),
				sessionIs(""), on("UPDATE a SET x = 3", "n1"),
			},
			conns: []string{
				"n1.1 closed: START TRANSACTION; UPDATE a SET x = 1",
				"n1'.1 pooled: UPDATE a SET x = 3",
				"n2.1 pooled: START TRANSACTION; UPDATE b SET x = 1; ROLLBACK",
			},
		},
		{
			name: "with session state there: lost, as in a crash",
			steps: []step{
				on("CREATE TEMPORARY TABLE tmp (x INT)", "n1"), switchMaster("n1"),
				on("SELECT * FROM tmp", "n1").lost(),
			},
			conns: []string{"n1.1 closed: CREATE TEMPORARY TABLE tmp (x INT)"},
			facts: "holds-state",
		},
	})
}
