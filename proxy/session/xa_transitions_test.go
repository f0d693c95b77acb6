package session_test

import (
	"regexp"
	"testing"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/internal/fakebackend"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/router"
)

// TestXATransitions: in transaction_mode xa every node a transaction
// reaches begins an XA branch; COMMIT of one branch is one phase, of
// several two-phase with the decision written to the sidecar between the
// phases. Whatever fails before the decision rolls back every branch; once
// the decision is written the transaction commits, and a branch that
// cannot be committed now is left to recovery with its connection closed.
func TestXATransitions(t *testing.T) {
	const x = config.TransactionXA
	deadlock := fakebackend.Err(mysql.ErLockDeadlock, "Deadlock found when trying to get lock; try restarting transaction")
	drop := fakebackend.Reply{Drop: true}
	decide := "INSERT INTO `" + xaDB + "`.xa_decisions"
	settle := "INSERT IGNORE INTO `" + xaDB + "`.xa_decisions"
	runTransitions(t, []transition{
		{
			name: "one node: XA END and XA COMMIT ONE PHASE, no decision",
			mode: x,
			steps: []step{
				begin("BEGIN"), holding(), on("UPDATE a SET x = 1", "n1"), sessionIs("in-txn txn=START TRANSACTION holds-state xa"),
				commit(), holding(),
			},
			conns: []string{"n1.1 pooled: XA START xid(g1,n1); UPDATE a SET x = 1; XA END xid(g1,n1); XA COMMIT xid(g1,n1) ONE PHASE"},
			xa:    "onephase=1 decided=0 refused=0 owed=0",
		},
		{
			name: "two nodes: prepare both, write the decision, commit both",
			mode: x,
			steps: []step{
				begin("BEGIN"), on("UPDATE a SET x = 1", "n1"), on("UPDATE b SET x = 1", "n2"), commit(),
				// The next transaction has an id of its own.
				begin("BEGIN"), on("UPDATE a SET x = 2", "n1"), commit(),
			},
			conns: []string{
				"n1.1 pooled: XA START xid(g1,n1); UPDATE a SET x = 1; XA END xid(g1,n1); XA PREPARE xid(g1,n1); XA COMMIT xid(g1,n1); " +
					"XA START xid(g2,n1); UPDATE a SET x = 2; XA END xid(g2,n1); XA COMMIT xid(g2,n1) ONE PHASE",
				"n2.1 pooled: XA START xid(g1,n2); UPDATE b SET x = 1; XA END xid(g1,n2); XA PREPARE xid(g1,n2); XA COMMIT xid(g1,n2)",
			},
			decisions: []string{"commit g1"},
			xa:        "onephase=1 decided=1 refused=0 owed=0",
		},
		{
			name:  "ROLLBACK ends and rolls back every branch",
			mode:  x,
			steps: []step{begin("BEGIN"), on("UPDATE a SET x = 1", "n1"), on("UPDATE b SET x = 1", "n2"), rollback()},
			conns: []string{
				"n1.1 pooled: XA START xid(g1,n1); UPDATE a SET x = 1; XA END xid(g1,n1); XA ROLLBACK xid(g1,n1)",
				"n2.1 pooled: XA START xid(g1,n2); UPDATE b SET x = 1; XA END xid(g1,n2); XA ROLLBACK xid(g1,n2)",
			},
			xa: "onephase=0 decided=0 refused=0 owed=0",
		},
		{
			name:  "START TRANSACTION READ ONLY has nothing to commit: no XA",
			mode:  x,
			steps: []step{begin("START TRANSACTION READ ONLY"), on("SELECT 1", "n1"), on("SELECT 2", "n2"), sessionIs("in-txn txn=START TRANSACTION READ ONLY holds-state"), commit()},
			conns: []string{
				"n1.1 pooled: START TRANSACTION READ ONLY; SELECT 1; COMMIT",
				"n2.1 pooled: START TRANSACTION READ ONLY; SELECT 2; COMMIT",
			},
		},
		{
			name: "savepoints are set inside the branches, also on a node reached later",
			mode: x,
			steps: []step{
				begin("BEGIN"), on("UPDATE a SET x = 1", "n1"), savepoint("SAVEPOINT s"), on("UPDATE b SET x = 1", "n2"),
				savepoint("ROLLBACK TO s"), rollback(),
			},
			conns: []string{
				"n1.1 pooled: XA START xid(g1,n1); UPDATE a SET x = 1; SAVEPOINT `s`; ROLLBACK TO SAVEPOINT `s`; XA END xid(g1,n1); XA ROLLBACK xid(g1,n1)",
				"n2.1 pooled: XA START xid(g1,n2); SAVEPOINT `s`; UPDATE b SET x = 1; ROLLBACK TO SAVEPOINT `s`; XA END xid(g1,n2); XA ROLLBACK xid(g1,n2)",
			},
		},
		{
			name:   "XA PREPARE failing on one node: no decision, every branch rolled back, the server's error",
			mode:   x,
			script: []answer{{node: "n2", prefix: "XA PREPARE", reply: deadlock}},
			steps: []step{
				begin("BEGIN"), on("UPDATE a SET x = 1", "n1"), on("UPDATE b SET x = 1", "n2"),
				commit().fails(mysql.ErLockDeadlock), sessionIs(""),
			},
			conns: []string{
				"n1.1 pooled: XA START xid(g1,n1); UPDATE a SET x = 1; XA END xid(g1,n1); XA PREPARE xid(g1,n1); XA END xid(g1,n1); XA ROLLBACK xid(g1,n1)",
				"n2.1 pooled: XA START xid(g1,n2); UPDATE b SET x = 1; XA END xid(g1,n2); XA PREPARE xid(g1,n2); XA END xid(g1,n2); XA ROLLBACK xid(g1,n2)",
			},
			xa: "onephase=0 decided=0 refused=0 owed=0",
		},
		{
			name:   "the answer to XA PREPARE lost: the branch may be prepared, so it is left to recovery",
			mode:   x,
			script: []answer{{node: "n2", prefix: "XA PREPARE", reply: drop}},
			steps: []step{
				begin("BEGIN"), on("UPDATE a SET x = 1", "n1"), on("UPDATE b SET x = 1", "n2"),
				commit().failsAny(),
			},
			conns: []string{
				"n1.1 pooled: XA START xid(g1,n1); UPDATE a SET x = 1; XA END xid(g1,n1); XA PREPARE xid(g1,n1); XA END xid(g1,n1); XA ROLLBACK xid(g1,n1)",
				"n2.1 closed: XA START xid(g1,n2); UPDATE b SET x = 1; XA END xid(g1,n2); XA PREPARE xid(g1,n2)",
			},
			xa: "onephase=0 decided=0 refused=0 owed=1",
		},
		{
			name:   "a decision the sidecar refuses (this proxy was fenced): rolled back everywhere, 1402",
			mode:   x,
			script: []answer{{node: "sidecar", prefix: decide, reply: fakebackend.Reply{Affected: 0}}},
			steps: []step{
				begin("BEGIN"), on("UPDATE a SET x = 1", "n1"), on("UPDATE b SET x = 1", "n2"),
				commit().fails(mysql.ErXARBRollback, "fenced", "rolled back on every node"),
			},
			conns: []string{
				"n1.1 pooled: XA START xid(g1,n1); UPDATE a SET x = 1; XA END xid(g1,n1); XA PREPARE xid(g1,n1); XA END xid(g1,n1); XA ROLLBACK xid(g1,n1)",
				"n2.1 pooled: XA START xid(g1,n2); UPDATE b SET x = 1; XA END xid(g1,n2); XA PREPARE xid(g1,n2); XA END xid(g1,n2); XA ROLLBACK xid(g1,n2)",
			},
			decisions: []string{"commit g1"},
			xa:        "onephase=0 decided=0 refused=1 owed=0",
		},
		{
			name:   "the decision's answer lost, and no decision there: an abort is written and wins",
			mode:   x,
			script: []answer{{node: "sidecar", prefix: decide, reply: drop}},
			steps: []step{
				begin("BEGIN"), on("UPDATE a SET x = 1", "n1"), on("UPDATE b SET x = 1", "n2"),
				commit().fails(mysql.ErXARBRollback),
			},
			conns: []string{
				"n1.1 pooled: XA START xid(g1,n1); UPDATE a SET x = 1; XA END xid(g1,n1); XA PREPARE xid(g1,n1); XA END xid(g1,n1); XA ROLLBACK xid(g1,n1)",
				"n2.1 pooled: XA START xid(g1,n2); UPDATE b SET x = 1; XA END xid(g1,n2); XA PREPARE xid(g1,n2); XA END xid(g1,n2); XA ROLLBACK xid(g1,n2)",
			},
			decisions: []string{"commit g1", "abort g1", "read g1"},
			xa:        "onephase=0 decided=0 refused=1 owed=0",
		},
		{
			name: "the decision's answer lost, but the decision was written: the transaction commits",
			mode: x,
			script: []answer{
				{node: "sidecar", prefix: decide, reply: drop},
				{node: "sidecar", prefix: "SELECT gtrid"}, // replaced below: it echoes the transaction back
			},
			steps: []step{
				check("the decision log has the commit", func(h *harness) error {
					h.sidecar.OnFunc("SELECT gtrid", func(q string) fakebackend.Reply {
						g := regexp.MustCompile(`'(sg-[0-9]+-[0-9]+)'`).FindStringSubmatch(q)
						return fakebackend.Reply{Columns: varchars("gtrid"), Rows: [][]any{{g[1]}}}
					})
					return nil
				}),
				begin("BEGIN"), on("UPDATE a SET x = 1", "n1"), on("UPDATE b SET x = 1", "n2"), commit(),
			},
			conns: []string{
				"n1.1 pooled: XA START xid(g1,n1); UPDATE a SET x = 1; XA END xid(g1,n1); XA PREPARE xid(g1,n1); XA COMMIT xid(g1,n1)",
				"n2.1 pooled: XA START xid(g1,n2); UPDATE b SET x = 1; XA END xid(g1,n2); XA PREPARE xid(g1,n2); XA COMMIT xid(g1,n2)",
			},
			decisions: []string{"commit g1", "abort g1", "read g1"},
			xa:        "onephase=0 decided=1 refused=0 owed=0",
		},
		{
			name: "the decision log unreachable: the branches stay prepared for recovery, 1180, connections closed",
			mode: x,
			script: []answer{
				{node: "sidecar", prefix: decide, reply: drop},
				{node: "sidecar", prefix: settle, reply: drop},
			},
			steps: []step{
				begin("BEGIN"), on("UPDATE a SET x = 1", "n1"), on("UPDATE b SET x = 1", "n2"),
				commit().fails(mysql.ErErrorDuringCommit, "prepared on n1, n2", "recovery"),
				sessionIs(""), holding(),
			},
			conns: []string{
				"n1.1 closed: XA START xid(g1,n1); UPDATE a SET x = 1; XA END xid(g1,n1); XA PREPARE xid(g1,n1)",
				"n2.1 closed: XA START xid(g1,n2); UPDATE b SET x = 1; XA END xid(g1,n2); XA PREPARE xid(g1,n2)",
			},
			decisions: []string{"commit g1", "abort g1", "abort g1", "abort g1"},
			xa:        "onephase=0 decided=0 refused=1 owed=1",
		},
		{
			name:   "XA COMMIT failing on a node after the decision: the client is told it committed, recovery finishes that branch",
			mode:   x,
			script: []answer{{node: "n2", prefix: "XA COMMIT", reply: drop}},
			steps: []step{
				begin("BEGIN"), on("UPDATE a SET x = 1", "n1"), on("UPDATE b SET x = 1", "n2"), commit(), sessionIs(""),
			},
			conns: []string{
				"n1.1 pooled: XA START xid(g1,n1); UPDATE a SET x = 1; XA END xid(g1,n1); XA PREPARE xid(g1,n1); XA COMMIT xid(g1,n1)",
				"n2.1 closed: XA START xid(g1,n2); UPDATE b SET x = 1; XA END xid(g1,n2); XA PREPARE xid(g1,n2); XA COMMIT xid(g1,n2)",
			},
			decisions: []string{"commit g1"},
			xa:        "onephase=0 decided=1 refused=0 owed=1",
		},
		{
			name:   "one phase refused (the branch is rollback-only after a deadlock): rolled back, the server's error",
			mode:   x,
			script: []answer{{node: "n1", prefix: "XA COMMIT", reply: deadlock}},
			steps:  []step{begin("BEGIN"), on("UPDATE a SET x = 1", "n1"), commit().fails(mysql.ErLockDeadlock)},
			conns:  []string{"n1.1 pooled: XA START xid(g1,n1); UPDATE a SET x = 1; XA END xid(g1,n1); XA COMMIT xid(g1,n1) ONE PHASE; XA ROLLBACK xid(g1,n1)"},
			xa:     "onephase=0 decided=0 refused=0 owed=0",
		},
		{
			name:   "one phase whose answer is lost: the outcome is unknown",
			mode:   x,
			script: []answer{{node: "n1", prefix: "XA COMMIT", reply: drop}},
			steps:  []step{begin("BEGIN"), on("UPDATE a SET x = 1", "n1"), commit().unknown(), sessionIs("")},
			conns:  []string{"n1.1 closed: XA START xid(g1,n1); UPDATE a SET x = 1; XA END xid(g1,n1); XA COMMIT xid(g1,n1) ONE PHASE"},
			xa:     "onephase=0 decided=0 refused=0 owed=0",
		},
		{
			name: "a branch's connection lost mid-transaction: COMMIT rolls back the rest, 1402",
			mode: x,
			steps: []step{
				begin("BEGIN"), on("UPDATE a SET x = 1", "n1"), on("UPDATE b SET x = 1", "n2"), kill("n2"),
				on("UPDATE b SET x = 2", "n2").lost(), sessionIs("in-txn txn=START TRANSACTION holds-state lost=n2 xa"),
				commit().fails(mysql.ErXARBRollback, "node n2 was lost"),
			},
			conns: []string{
				"n1.1 pooled: XA START xid(g1,n1); UPDATE a SET x = 1; XA END xid(g1,n1); XA ROLLBACK xid(g1,n1)",
				"n2.1 closed: XA START xid(g1,n2); UPDATE b SET x = 1",
			},
			xa: "onephase=0 decided=0 refused=0 owed=0",
		},
		{
			name: "a branch's connection that died unnoticed: COMMIT finds it and rolls back everywhere",
			mode: x,
			steps: []step{
				begin("BEGIN"), on("UPDATE a SET x = 1", "n1"), on("UPDATE b SET x = 1", "n2"), kill("n2"),
				commit().failsAny(),
			},
			conns: []string{
				"n1.1 pooled: XA START xid(g1,n1); UPDATE a SET x = 1; XA END xid(g1,n1); XA PREPARE xid(g1,n1); XA END xid(g1,n1); XA ROLLBACK xid(g1,n1)",
				"n2.1 closed: XA START xid(g1,n2); UPDATE b SET x = 1",
			},
			// A connection that failed during XA PREPARE may hide a
			// prepared branch: recovery is owed a look.
			xa: "onephase=0 decided=0 refused=0 owed=1",
		},
		{
			name:  "a write on several nodes outside a transaction is one XA transaction, committed before its answer",
			mode:  x,
			steps: []step{on("UPDATE t SET x = 1", "n1", "n2"), sessionIs(""), holding(), on("UPDATE t SET x = 2", "n1")},
			conns: []string{
				"n1.1 pooled: XA START xid(g1,n1); UPDATE t SET x = 1; XA END xid(g1,n1); XA PREPARE xid(g1,n1); XA COMMIT xid(g1,n1); UPDATE t SET x = 2",
				"n2.1 pooled: XA START xid(g1,n2); UPDATE t SET x = 1; XA END xid(g1,n2); XA PREPARE xid(g1,n2); XA COMMIT xid(g1,n2)",
			},
			decisions: []string{"commit g1"},
		},
		{
			name:   "such a write failing on one node is rolled back on every node",
			mode:   x,
			script: []answer{{node: "n2", prefix: "UPDATE", reply: fakebackend.Err(1062, "Duplicate entry")}},
			steps:  []step{on("UPDATE t SET x = 1", "n1", "n2").fails(1062), sessionIs("")},
			conns: []string{
				"n1.1 pooled: XA START xid(g1,n1); UPDATE t SET x = 1; XA END xid(g1,n1); XA ROLLBACK xid(g1,n1)",
				"n2.1 pooled: XA START xid(g1,n2); UPDATE t SET x = 1; XA END xid(g1,n2); XA ROLLBACK xid(g1,n2)",
			},
		},
		{
			name: "DDL commits the XA transaction first, two-phase, and runs outside any branch",
			mode: x,
			steps: []step{
				begin("BEGIN"), on("UPDATE a SET x = 1", "n1"), on("UPDATE b SET x = 1", "n2"),
				on("CREATE TABLE c (x INT)", "n1"), sessionIs(""),
			},
			conns: []string{
				"n1.1 pooled: XA START xid(g1,n1); UPDATE a SET x = 1; XA END xid(g1,n1); XA PREPARE xid(g1,n1); XA COMMIT xid(g1,n1); CREATE TABLE c (x INT)",
				"n2.1 pooled: XA START xid(g1,n2); UPDATE b SET x = 1; XA END xid(g1,n2); XA PREPARE xid(g1,n2); XA COMMIT xid(g1,n2)",
			},
			decisions: []string{"commit g1"},
		},
		{
			name: "a tracked SET joins no branch; the node's first statement of the transaction does",
			mode: x,
			script: []answer{{node: "n1", prefix: "SELECT @`x`", reply: fakebackend.Reply{
				Columns: []*mysql.Column{{Name: "v", Type: mysql.TypeLongLong, Charset: 63}, {Name: "h"}, {Name: "c"}, {Name: "k"}},
				Rows:    [][]any{{"1", "31", "binary", "binary"}}}}},
			steps: []step{
				begin("BEGIN"), set("n1", "SET @x = 1", []router.SetVar{{Name: "x", User: true}}), holding("n1"),
				on("UPDATE a SET x = @x", "n1"), commit(),
			},
			conns: []string{"n1.1 pooled: SET @x = 1; SELECT @`x`, HEX(@`x`), CHARSET(@`x`), COLLATION(@`x`) LIMIT 1; SET @`x` = 1; " +
				"XA START xid(g1,n1); UPDATE a SET x = @x; XA END xid(g1,n1); XA COMMIT xid(g1,n1) ONE PHASE"},
		},
		{
			name:   "with autocommit off every node's part is a branch",
			mode:   x,
			script: readAutocommit,
			steps: []step{
				autocommitOff, on("UPDATE a SET x = 1", "n1"), on("UPDATE b SET x = 1", "n2"), commit(),
				sessionIs("in-txn autocommit-off"), on("UPDATE a SET x = 2", "n1"), rollback(),
			},
			conns: []string{
				"n1.1 held: SET autocommit = 0; SELECT @@SESSION.`autocommit` LIMIT 1; SET @@SESSION.`autocommit` = 0; " +
					"XA START xid(g1,n1); UPDATE a SET x = 1; XA END xid(g1,n1); XA PREPARE xid(g1,n1); XA COMMIT xid(g1,n1); " +
					"XA START xid(g2,n1); UPDATE a SET x = 2; XA END xid(g2,n1); XA ROLLBACK xid(g2,n1)",
				"n2.1 held: SET @@SESSION.`autocommit` = 0; XA START xid(g1,n2); UPDATE b SET x = 1; XA END xid(g1,n2); XA PREPARE xid(g1,n2); XA COMMIT xid(g1,n2)",
			},
			decisions: []string{"commit g1"},
			facts:     "in-txn autocommit-off",
		},
		{
			name: "a client leaving inside an XA transaction: its branches roll back, which leaves nothing to reset",
			mode: x,
			steps: []step{
				begin("BEGIN"), on("UPDATE a SET x = 1", "n1"), on("UPDATE b SET x = 1", "n2"), leave(),
			},
			conns: []string{
				"n1.1 pooled: XA START xid(g1,n1); UPDATE a SET x = 1; XA END xid(g1,n1); XA ROLLBACK xid(g1,n1)",
				"n2.1 pooled: XA START xid(g1,n2); UPDATE b SET x = 1; XA END xid(g1,n2); XA ROLLBACK xid(g1,n2)",
			},
		},
	})
}
