package session_test

import (
	"testing"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/internal/fakebackend"
)

// TestLockTransitions: LOCK TABLES keeps the connections that hold the
// locks until UNLOCK TABLES and after (the session is sticky from then on:
// they are reset before anyone else gets them); locks do not keep the
// session from other nodes; a failed LOCK TABLES releases the locks the
// other nodes took.
func TestLockTransitions(t *testing.T) {
	runTransitions(t, []transition{
		{
			name: "LOCK TABLES on two nodes keeps both; UNLOCK TABLES goes to those two only",
			steps: []step{
				on("LOCK TABLES t WRITE", "n1", "n2"), holding("n1", "n2"), sessionIs("holds-state locked"),
				on("SELECT 1", "n3"), holding("n1", "n2", "n3"),
				unlock(), sessionIs("holds-state"), holding("n1", "n2", "n3"),
				leave(),
			},
			conns: []string{
				"n1.1 pooled: LOCK TABLES t WRITE; UNLOCK TABLES; CHANGE_USER; MULTI_STATEMENTS ON",
				"n2.1 pooled: LOCK TABLES t WRITE; UNLOCK TABLES; CHANGE_USER; MULTI_STATEMENTS ON",
				"n3.1 pooled: SELECT 1; CHANGE_USER; MULTI_STATEMENTS ON",
			},
		},
		{
			name:  "LOCK TABLES forwarded to one node",
			steps: []step{on("LOCK TABLE t READ", "n2"), sessionIs("holds-state locked"), on("SELECT * FROM t", "n2"), unlock()},
			conns: []string{"n2.1 held: LOCK TABLE t READ; SELECT * FROM t; UNLOCK TABLES"},
			facts: "holds-state",
		},
		{
			name:   "a LOCK TABLES that fails on a node releases the locks the others took",
			script: []answer{{node: "n2", prefix: "LOCK", reply: fakebackend.Err(1146, "Table 'app.t' doesn't exist")}},
			steps: []step{
				on("LOCK TABLES t WRITE", "n1", "n2").fails(1146), sessionIs("holds-state"),
			},
			conns: []string{
				"n1.1 held: LOCK TABLES t WRITE; UNLOCK TABLES",
				"n2.1 held: LOCK TABLES t WRITE; UNLOCK TABLES",
			},
			facts: "holds-state",
		},
		{
			name:   "UNLOCK TABLES whose answer is lost: the error says where, the connection is closed when let go",
			script: []answer{{node: "n1", prefix: "UNLOCK", reply: fakebackend.Reply{Drop: true}}},
			steps: []step{
				on("LOCK TABLES t WRITE", "n1", "n2"),
				unlock().failsAny(), sessionIs("holds-state"),
				releaseAll(),
			},
			conns: []string{
				"n1.1 closed: LOCK TABLES t WRITE; UNLOCK TABLES",
				"n2.1 pooled: LOCK TABLES t WRITE; UNLOCK TABLES; CHANGE_USER; MULTI_STATEMENTS ON",
			},
			facts: "holds-state",
		},
		{
			name: "under LOCK TABLES a write on several nodes opens no XA transaction (XA START is refused there)",
			mode: config.TransactionXA,
			steps: []step{
				on("LOCK TABLES t WRITE", "n1", "n2"), on("UPDATE t SET x = 1", "n1", "n2"), unlock(),
			},
			conns: []string{
				"n1.1 held: LOCK TABLES t WRITE; UPDATE t SET x = 1; UNLOCK TABLES",
				"n2.1 held: LOCK TABLES t WRITE; UPDATE t SET x = 1; UNLOCK TABLES",
			},
			facts: "holds-state",
		},
		{
			name:   "a lost connection that held locks fails the statement; the locks go with it",
			script: []answer{{node: "n1", prefix: "UPDATE", reply: fakebackend.Reply{Drop: true}}},
			steps: []step{
				on("LOCK TABLES t WRITE", "n1"), on("UPDATE t SET x = 1", "n1").lost(),
				sessionIs("holds-state locked"), unlock(),
			},
			conns: []string{"n1.1 closed: LOCK TABLES t WRITE; UPDATE t SET x = 1"},
			facts: "holds-state",
		},
	})
}
