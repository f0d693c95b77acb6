package session_test

import (
	"testing"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/internal/fakebackend"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/router"
)

// number answers a read-back of one numeric variable with v.
func number(v string) fakebackend.Reply {
	return fakebackend.Reply{Columns: []*mysql.Column{{Name: "v", Type: mysql.TypeLongLong, Charset: 63}}, Rows: [][]any{{v}}}
}

var (
	autocommitOff = set("n1", "SET autocommit = 0", []router.SetVar{{Name: "autocommit", Off: true}})
	autocommitOn  = set("n1", "SET autocommit = 1", []router.SetVar{{Name: "autocommit"}})
	// readAutocommit answers the session's read-back of autocommit: 0
	// once (after SET autocommit = 0), 1 after that.
	readAutocommit = []answer{
		{node: "n1", prefix: "SELECT @@SESSION.`autocommit`", reply: number("1")},
		{node: "n1", prefix: "SELECT @@SESSION.`autocommit`", reply: number("0"), times: 1},
	}
)

// TestTxnTransitions: in transaction_mode multi, BEGIN reaches a node with
// the transaction's first statement there, and the connection stays with
// the session until COMMIT or ROLLBACK, which go to every node in the order
// the transaction reached them, after which the connections go back.
func TestTxnTransitions(t *testing.T) {
	deadlock := fakebackend.Err(mysql.ErLockDeadlock, "Deadlock found when trying to get lock; try restarting transaction")
	runTransitions(t, []transition{
		{
			name: "a transaction reaches each node at its first statement there and commits on each in that order",
			steps: []step{
				begin("BEGIN"), sessionIs("in-txn txn=START TRANSACTION holds-state"), holding(),
				on("UPDATE b SET x = 1", "n2"), on("UPDATE a SET x = 1", "n1"), on("SELECT x FROM a", "n1"),
				holding("n1", "n2"), sessionIs("in-txn txn=START TRANSACTION holds-state"),
				commit(),
			},
			conns: []string{
				"n1.1 pooled: START TRANSACTION; UPDATE a SET x = 1; SELECT x FROM a; COMMIT",
				"n2.1 pooled: START TRANSACTION; UPDATE b SET x = 1; COMMIT",
			},
			ends: []string{"n2: COMMIT", "n1: COMMIT"},
		},
		{
			name:  "BEGIN and COMMIT with nothing between reach no node",
			steps: []step{begin("START TRANSACTION"), commit(), begin("BEGIN WORK"), rollback()},
		},
		{
			name:  "ROLLBACK goes to every node the transaction reached",
			steps: []step{begin("BEGIN"), on("DELETE FROM a", "n1"), on("DELETE FROM b", "n3"), rollback()},
			conns: []string{
				"n1.1 pooled: START TRANSACTION; DELETE FROM a; ROLLBACK",
				"n3.1 pooled: START TRANSACTION; DELETE FROM b; ROLLBACK",
			},
			ends: []string{"n1: ROLLBACK", "n3: ROLLBACK"},
		},
		{
			name:  "the access mode and snapshot of START TRANSACTION reach every node",
			steps: []step{begin("start transaction read only, with consistent snapshot"), on("SELECT 1", "n1"), on("SELECT 2", "n2"), commit()},
			conns: []string{
				"n1.1 pooled: START TRANSACTION READ ONLY, WITH CONSISTENT SNAPSHOT; SELECT 1; COMMIT",
				"n2.1 pooled: START TRANSACTION READ ONLY, WITH CONSISTENT SNAPSHOT; SELECT 2; COMMIT",
			},
		},
		{
			name: "a write on several nodes joins the transaction on each",
			steps: []step{
				begin("BEGIN"), on("UPDATE t SET x = 1", "n1", "n2", "n3"), holding("n1", "n2", "n3"), commit(), holding(),
			},
			conns: []string{
				"n1.1 pooled: START TRANSACTION; UPDATE t SET x = 1; COMMIT",
				"n2.1 pooled: START TRANSACTION; UPDATE t SET x = 1; COMMIT",
				"n3.1 pooled: START TRANSACTION; UPDATE t SET x = 1; COMMIT",
			},
			ends: []string{"n1: COMMIT", "n2: COMMIT", "n3: COMMIT"},
		},
		{
			name: "BEGIN inside a transaction commits it first",
			steps: []step{
				begin("BEGIN"), on("UPDATE a SET x = 1", "n1"), on("UPDATE b SET x = 1", "n2"),
				begin("BEGIN"), holding(), on("UPDATE a SET x = 2", "n1"), commit(),
			},
			conns: []string{
				"n1.1 pooled: START TRANSACTION; UPDATE a SET x = 1; COMMIT; START TRANSACTION; UPDATE a SET x = 2; COMMIT",
				"n2.1 pooled: START TRANSACTION; UPDATE b SET x = 1; COMMIT",
			},
			ends: []string{"n1: COMMIT", "n2: COMMIT", "n1: COMMIT"},
		},
		{
			name: "savepoints are set on every node reached, and on each node the transaction reaches later",
			script: []answer{
				{node: "n1", prefix: "ROLLBACK TO SAVEPOINT `nope`", reply: fakebackend.Err(mysql.ErSPDoesNotExist, "SAVEPOINT nope does not exist")},
			},
			steps: []step{
				begin("BEGIN"), on("UPDATE a SET x = 1", "n1"),
				savepoint("SAVEPOINT a"), on("UPDATE b SET x = 1", "n2"),
				savepoint("SAVEPOINT B"), savepoint("ROLLBACK TO a"),
				// b is gone: a node joining now sets a only.
				on("UPDATE c SET x = 1", "n3"),
				savepoint("ROLLBACK TO SAVEPOINT nope").fails(mysql.ErSPDoesNotExist),
				savepoint("RELEASE SAVEPOINT a"),
				commit(),
			},
			conns: []string{
				"n1.1 pooled: START TRANSACTION; UPDATE a SET x = 1; SAVEPOINT `a`; SAVEPOINT `B`; ROLLBACK TO SAVEPOINT `a`; ROLLBACK TO SAVEPOINT `nope`; RELEASE SAVEPOINT `a`; COMMIT",
				"n2.1 pooled: START TRANSACTION; SAVEPOINT `a`; UPDATE b SET x = 1; SAVEPOINT `B`; ROLLBACK TO SAVEPOINT `a`; RELEASE SAVEPOINT `a`; COMMIT",
				"n3.1 pooled: START TRANSACTION; SAVEPOINT `a`; UPDATE c SET x = 1; RELEASE SAVEPOINT `a`; COMMIT",
			},
		},
		{
			name: "a savepoint set before any node is reached is set on the first",
			steps: []step{
				begin("BEGIN"), savepoint("SAVEPOINT s1"), savepoint("SAVEPOINT s2"), savepoint("RELEASE SAVEPOINT s2"),
				savepoint("ROLLBACK TO s2").fails(mysql.ErSPDoesNotExist),
				on("UPDATE a SET x = 1", "n1"), savepoint("ROLLBACK TO s1"), rollback(),
			},
			conns: []string{"n1.1 pooled: START TRANSACTION; SAVEPOINT `s1`; UPDATE a SET x = 1; ROLLBACK TO SAVEPOINT `s1`; ROLLBACK"},
		},
		{
			name: "setting a savepoint again moves it; a late node sets them in their new order",
			steps: []step{
				begin("BEGIN"), savepoint("SAVEPOINT a"), savepoint("SAVEPOINT b"), savepoint("SAVEPOINT a"),
				on("UPDATE a SET x = 1", "n1"), savepoint("ROLLBACK TO b"), on("UPDATE b SET x = 1", "n2"), commit(),
			},
			conns: []string{
				"n1.1 pooled: START TRANSACTION; SAVEPOINT `b`; SAVEPOINT `a`; UPDATE a SET x = 1; ROLLBACK TO SAVEPOINT `b`; COMMIT",
				"n2.1 pooled: START TRANSACTION; SAVEPOINT `b`; UPDATE b SET x = 1; COMMIT",
			},
		},
		{
			name:   "a savepoint a late node refuses fails the statement there and closes that connection",
			script: []answer{{node: "n2", prefix: "SAVEPOINT", reply: fakebackend.Err(mysql.ErLockWaitTimeout, "Lock wait timeout exceeded")}},
			steps: []step{
				begin("BEGIN"), on("UPDATE a SET x = 1", "n1"), savepoint("SAVEPOINT s"),
				on("UPDATE b SET x = 1", "n2").fails(mysql.ErLockWaitTimeout, "setting savepoint s on node n2"),
				holding("n1"), commit(),
			},
			conns: []string{
				"n1.1 pooled: START TRANSACTION; UPDATE a SET x = 1; SAVEPOINT `s`; COMMIT",
				"n2.1 closed: START TRANSACTION; SAVEPOINT `s`",
			},
		},
		{
			name:  "ROLLBACK TO outside a transaction is refused without a round trip",
			steps: []step{savepoint("ROLLBACK TO x").fails(mysql.ErSPDoesNotExist, "x"), savepoint("SAVEPOINT y"), on("SELECT 1", "n1")},
			conns: []string{"n1.1 pooled: SELECT 1"},
		},
		{
			name: "a savepoint on a connection that died reports it lost",
			steps: []step{
				begin("BEGIN"), on("UPDATE a SET x = 1", "n1"), on("UPDATE b SET x = 1", "n2"), kill("n2"),
				savepoint("SAVEPOINT a").lost(),
				// The transaction lived there too: the server closes the
				// client connection, and the session lets go of the rest
				// with a new login.
				sessionIs("in-txn txn=START TRANSACTION holds-state"), releaseAll(),
			},
			conns: []string{
				"n1.1 pooled: START TRANSACTION; UPDATE a SET x = 1; SAVEPOINT `a`; CHANGE_USER; MULTI_STATEMENTS ON",
				"n2.1 closed: START TRANSACTION; UPDATE b SET x = 1",
			},
			facts: "in-txn txn=START TRANSACTION holds-state",
		},
		{
			name: "DDL commits the open transaction first and runs outside it",
			steps: []step{
				begin("BEGIN"), on("UPDATE a SET x = 1", "n1"), on("UPDATE b SET x = 1", "n2"),
				on("CREATE TABLE c (x INT)", "n2"), sessionIs(""), holding(),
			},
			conns: []string{
				"n1.1 pooled: START TRANSACTION; UPDATE a SET x = 1; COMMIT",
				"n2.1 pooled: START TRANSACTION; UPDATE b SET x = 1; COMMIT; CREATE TABLE c (x INT)",
			},
			ends: []string{"n1: COMMIT", "n2: COMMIT"},
		},
		{
			name:  "DDL after a BEGIN no statement followed ends the transaction without a round trip",
			steps: []step{begin("BEGIN"), on("DROP TABLE c", "n1"), sessionIs(""), on("UPDATE a SET x = 1", "n1")},
			conns: []string{"n1.1 pooled: DROP TABLE c; UPDATE a SET x = 1"},
		},
		{
			name: "CREATE TEMPORARY TABLE commits nothing, and its connection stays after COMMIT",
			steps: []step{
				begin("BEGIN"), on("UPDATE a SET x = 1", "n1"), on("CREATE TEMPORARY TABLE tmp (x INT)", "n1"),
				sessionIs("in-txn txn=START TRANSACTION holds-state"), commit(), holding("n1"),
			},
			conns: []string{"n1.1 held: START TRANSACTION; UPDATE a SET x = 1; CREATE TEMPORARY TABLE tmp (x INT); COMMIT"},
			facts: "holds-state",
		},
		{
			name: "an error that leaves the transaction open keeps every node's part",
			script: []answer{
				{node: "n2", prefix: "INSERT", reply: fakebackend.Err(1062, "Duplicate entry '1' for key 'PRIMARY'")},
			},
			steps: []step{
				begin("BEGIN"), on("UPDATE a SET x = 1", "n1"),
				on("INSERT INTO b VALUES (1)", "n2").fails(1062), holding("n1", "n2"),
				commit(),
			},
			conns: []string{
				"n1.1 pooled: START TRANSACTION; UPDATE a SET x = 1; COMMIT",
				"n2.1 pooled: START TRANSACTION; INSERT INTO b VALUES (1); COMMIT",
			},
		},
		{
			name:   "a deadlock on one node ends the transaction on every node",
			script: []answer{{node: "n2", prefix: "UPDATE", reply: deadlock}},
			steps: []step{
				begin("BEGIN"), on("UPDATE a SET x = 1", "n1"),
				on("UPDATE b SET x = 1", "n2").fails(mysql.ErLockDeadlock),
				// What the server does on 1213 in a transaction.
				rollback(), holding(),
			},
			conns: []string{
				"n1.1 pooled: START TRANSACTION; UPDATE a SET x = 1; ROLLBACK",
				"n2.1 pooled: START TRANSACTION; UPDATE b SET x = 1; ROLLBACK",
			},
		},
		{
			name: "COMMIT failing on the second node: the first committed, the rest roll back, 1180 says which",
			script: []answer{
				{node: "n2", prefix: "COMMIT", reply: fakebackend.Err(mysql.ErLockWaitTimeout, "Lock wait timeout exceeded")},
			},
			steps: []step{
				begin("BEGIN"), on("UPDATE a SET x = 1", "n1"), on("UPDATE b SET x = 1", "n2"), on("UPDATE c SET x = 1", "n3"),
				commit().fails(mysql.ErErrorDuringCommit, "committed on n1", "COMMIT failed on n2", "rolled back on n3"),
				holding(),
			},
			conns: []string{
				"n1.1 pooled: START TRANSACTION; UPDATE a SET x = 1; COMMIT",
				"n2.1 pooled: START TRANSACTION; UPDATE b SET x = 1; COMMIT",
				"n3.1 pooled: START TRANSACTION; UPDATE c SET x = 1; ROLLBACK",
			},
			ends: []string{"n1: COMMIT", "n2: COMMIT", "n3: ROLLBACK"},
		},
		{
			name:   "COMMIT failing on the first node commits nothing and reports the server's error",
			script: []answer{{node: "n1", prefix: "COMMIT", reply: deadlock}},
			steps: []step{
				begin("BEGIN"), on("UPDATE a SET x = 1", "n1"), on("UPDATE b SET x = 1", "n2"),
				commit().fails(mysql.ErLockDeadlock),
			},
			conns: []string{
				"n1.1 pooled: START TRANSACTION; UPDATE a SET x = 1; COMMIT",
				"n2.1 pooled: START TRANSACTION; UPDATE b SET x = 1; ROLLBACK",
			},
		},
		{
			name:   "a COMMIT whose answer is lost on the first node: the outcome is unknown",
			script: []answer{{node: "n1", prefix: "COMMIT", reply: fakebackend.Reply{Drop: true}}},
			steps: []step{
				begin("BEGIN"), on("UPDATE a SET x = 1", "n1"), on("UPDATE b SET x = 1", "n2"),
				commit().unknown(), holding(),
			},
			conns: []string{
				"n1.1 closed: START TRANSACTION; UPDATE a SET x = 1; COMMIT",
				"n2.1 pooled: START TRANSACTION; UPDATE b SET x = 1; ROLLBACK",
			},
		},
		{
			name:   "a COMMIT whose answer is lost on the second node: 1180, the first committed",
			script: []answer{{node: "n2", prefix: "COMMIT", reply: fakebackend.Reply{Drop: true}}},
			steps: []step{
				begin("BEGIN"), on("UPDATE a SET x = 1", "n1"), on("UPDATE b SET x = 1", "n2"),
				commit().fails(mysql.ErErrorDuringCommit, "committed on n1", "n2 (connection lost)"),
			},
			conns: []string{
				"n1.1 pooled: START TRANSACTION; UPDATE a SET x = 1; COMMIT",
				"n2.1 closed: START TRANSACTION; UPDATE b SET x = 1; COMMIT",
			},
		},
		{
			name: "a connection lost mid-transaction: its statement fails, and COMMIT commits nothing anywhere",
			steps: []step{
				begin("BEGIN"), on("UPDATE a SET x = 1", "n1"), on("UPDATE b SET x = 1", "n2"), kill("n2"),
				on("UPDATE b SET x = 2", "n2").lost(),
				sessionIs("in-txn txn=START TRANSACTION holds-state lost=n2"),
				commit().fails(mysql.ErErrorDuringCommit, "node n2 was lost", "nothing was committed"),
				sessionIs(""),
			},
			conns: []string{
				"n1.1 pooled: START TRANSACTION; UPDATE a SET x = 1; ROLLBACK",
				"n2.1 closed: START TRANSACTION; UPDATE b SET x = 1",
			},
			ends: []string{"n1: ROLLBACK"},
		},
		{
			name: "a connection lost on a write to several nodes: the transaction commits nothing",
			steps: []step{
				begin("BEGIN"), on("UPDATE t SET x = 1", "n1", "n2"), kill("n2"),
				on("UPDATE t SET x = 2", "n1", "n2").lost(),
				commit().fails(mysql.ErErrorDuringCommit, "nothing was committed"),
			},
			conns: []string{
				"n1.1 pooled: START TRANSACTION; UPDATE t SET x = 1; UPDATE t SET x = 2; ROLLBACK",
				"n2.1 closed: START TRANSACTION; UPDATE t SET x = 1",
			},
		},
		{
			name: "a connection that died unnoticed is found by COMMIT: the nodes before it committed (multi is not atomic)",
			steps: []step{
				begin("BEGIN"), on("UPDATE a SET x = 1", "n1"), on("UPDATE b SET x = 1", "n2"), kill("n2"),
				commit().fails(mysql.ErErrorDuringCommit, "committed on n1", "n2 (connection lost)"),
			},
			conns: []string{
				"n1.1 pooled: START TRANSACTION; UPDATE a SET x = 1; COMMIT",
				"n2.1 closed: START TRANSACTION; UPDATE b SET x = 1",
			},
		},
		{
			name:   "a node where the transaction cannot begin: the statement fails, the connection is closed, the rest goes on",
			script: []answer{{node: "n2", prefix: "START TRANSACTION", reply: fakebackend.Err(mysql.ErLockWaitTimeout, "Lock wait timeout exceeded")}},
			steps: []step{
				begin("BEGIN"), on("UPDATE a SET x = 1", "n1"),
				on("UPDATE b SET x = 1", "n2").fails(mysql.ErLockWaitTimeout, "starting the transaction on node n2"),
				sessionIs("in-txn txn=START TRANSACTION holds-state"),
				commit(),
			},
			conns: []string{
				"n1.1 pooled: START TRANSACTION; UPDATE a SET x = 1; COMMIT",
				"n2.1 closed: START TRANSACTION",
			},
		},
		{
			name:   "with autocommit off every connection is in the transaction, and stays after COMMIT",
			script: readAutocommit,
			steps: []step{
				autocommitOff, sessionIs("in-txn autocommit-off"), holding("n1"),
				on("UPDATE a SET x = 1", "n1"), on("UPDATE b SET x = 1", "n2"), savepoint("SAVEPOINT s"),
				commit(), holding("n1", "n2"), sessionIs("in-txn autocommit-off"),
				on("UPDATE c SET x = 1", "n3"), rollback(),
				autocommitOn, holding("n2", "n3"),
				releaseAll(),
			},
			conns: []string{
				"n1.1 pooled: SET autocommit = 0; SELECT @@SESSION.`autocommit` LIMIT 1; SET @@SESSION.`autocommit` = 0; " +
					"UPDATE a SET x = 1; SAVEPOINT `s`; COMMIT; ROLLBACK; SET autocommit = 1; SELECT @@SESSION.`autocommit` LIMIT 1; SET @@SESSION.`autocommit` = 1",
				"n2.1 pooled: SET @@SESSION.`autocommit` = 0; UPDATE b SET x = 1; SAVEPOINT `s`; COMMIT; ROLLBACK",
				"n3.1 pooled: SET @@SESSION.`autocommit` = 0; UPDATE c SET x = 1; ROLLBACK",
			},
		},
	})
}

// TestTxnEndTransitions: how a transaction ends other than by COMMIT or
// ROLLBACK, and what a failed implicit commit leaves.
func TestTxnEndTransitions(t *testing.T) {
	deadlock := fakebackend.Err(mysql.ErLockDeadlock, "Deadlock found when trying to get lock; try restarting transaction")
	runTransitions(t, []transition{
		{
			name:   "DDL whose implicit commit fails does not run; the transaction is over",
			script: []answer{{node: "n1", prefix: "COMMIT", reply: deadlock}},
			steps: []step{
				begin("BEGIN"), on("UPDATE a SET x = 1", "n1"),
				on("CREATE TABLE c (x INT)", "n1").fails(mysql.ErLockDeadlock), sessionIs(""),
			},
			conns: []string{"n1.1 pooled: START TRANSACTION; UPDATE a SET x = 1; COMMIT"},
		},
		{
			name:   "BEGIN whose implicit commit fails opens no transaction",
			script: []answer{{node: "n2", prefix: "COMMIT", reply: deadlock}},
			steps: []step{
				begin("BEGIN"), on("UPDATE a SET x = 1", "n2"),
				begin("BEGIN").fails(mysql.ErLockDeadlock), sessionIs(""),
				on("UPDATE a SET x = 2", "n2"),
			},
			conns: []string{"n2.1 pooled: START TRANSACTION; UPDATE a SET x = 1; COMMIT; UPDATE a SET x = 2"},
		},
		{
			name: "a reset inside a transaction drops it on every node with a new login",
			steps: []step{
				begin("BEGIN"), on("UPDATE a SET x = 1", "n1"), on("UPDATE b SET x = 1", "n2"), reset(), sessionIs(""),
				on("UPDATE a SET x = 2", "n1"),
			},
			conns: []string{
				"n1.1 pooled: START TRANSACTION; UPDATE a SET x = 1; CHANGE_USER; MULTI_STATEMENTS ON; INIT_DB app; UPDATE a SET x = 2",
				"n2.1 pooled: START TRANSACTION; UPDATE b SET x = 1; CHANGE_USER; MULTI_STATEMENTS ON",
			},
		},
		{
			name: "a client leaving inside a transaction: a new login on each node drops it",
			steps: []step{
				begin("BEGIN"), on("UPDATE a SET x = 1", "n1"), on("UPDATE b SET x = 1", "n2"), leave(),
			},
			conns: []string{
				"n1.1 pooled: START TRANSACTION; UPDATE a SET x = 1; CHANGE_USER; MULTI_STATEMENTS ON",
				"n2.1 pooled: START TRANSACTION; UPDATE b SET x = 1; CHANGE_USER; MULTI_STATEMENTS ON",
			},
		},
		{
			name:   "a new login that fails closes the connection",
			script: []answer{{node: "n1", prefix: "CHANGE_USER", reply: fakebackend.Reply{Drop: true}}},
			steps:  []step{begin("BEGIN"), on("UPDATE a SET x = 1", "n1"), leave()},
			conns:  []string{"n1.1 closed: START TRANSACTION; UPDATE a SET x = 1; CHANGE_USER"},
		},
		{
			name: "a transaction opened inside a multi-statement text is followed by the status flags",
			steps: []step{
				on("START TRANSACTION; UPDATE a SET x = 1", "n1"), holding("n1"), sessionIs("in-txn holds-state"),
				commit(), holding(), sessionIs(""),
			},
			conns: []string{"n1.1 pooled: START TRANSACTION; UPDATE a SET x = 1; COMMIT"},
		},
	})
}

// TestSingleNodeTxnTransitions: in transaction_mode single a transaction
// stays on the node it began on.
func TestSingleNodeTxnTransitions(t *testing.T) {
	runTransitions(t, []transition{
		{
			name: "a statement for a second node is refused, and nothing of it runs",
			mode: config.TransactionSingle,
			steps: []step{
				begin("BEGIN"), on("UPDATE a SET x = 1", "n1"),
				on("UPDATE b SET x = 1", "n2").fails(mysql.ErNotSupported, "transaction_mode is single"),
				check("CheckNodes of a text for both", func(h *harness) error {
					if err := h.s.CheckNodes([]string{"n1", "n2"}, false); err == nil {
						return errorf("CheckNodes(n1, n2) in a transaction: nil, want 1235")
					}
					return nil
				}),
				commit(),
				on("UPDATE b SET x = 1", "n2"),
			},
			conns: []string{
				"n1.1 pooled: START TRANSACTION; UPDATE a SET x = 1; COMMIT",
				"n2.1 pooled: UPDATE b SET x = 1",
			},
		},
		{
			name: "a multi-statement text that opens a transaction and reaches a second node is refused before it runs",
			mode: config.TransactionSingle,
			steps: []step{
				check("CheckNodes", func(h *harness) error {
					if err := h.s.CheckNodes([]string{"n1", "n2"}, true); err == nil {
						return errorf("CheckNodes(n1, n2) of a text with a transaction: nil, want 1235")
					}
					if err := h.s.CheckNodes([]string{"n1", "n2"}, false); err != nil {
						return errorf("CheckNodes(n1, n2) without a transaction: %v", err)
					}
					return nil
				}),
			},
		},
	})
}
