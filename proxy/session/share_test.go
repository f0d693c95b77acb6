package session_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/shardgate/shardgate/internal/fakebackend"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/router"
)

// TestShareTransitions: outside transactions a connection goes back to its
// pool after each statement unless something of the session is left on it:
// warnings the client may still read (one statement), state the proxy
// cannot carry (for good, then reset before anyone else gets it). What the
// proxy carries (database, collation, multi-statement option,
// LAST_INSERT_ID) is brought to each connection the session uses, changing
// only what differs.
func TestShareTransitions(t *testing.T) {
	warn := fakebackend.Reply{Warnings: 1}
	runTransitions(t, []transition{
		{
			name:  "statements outside a transaction share one pooled connection",
			steps: []step{on("SELECT 1", "n1"), holding(), on("SELECT 2", "n1")},
			conns: []string{"n1.1 pooled: SELECT 1; SELECT 2"},
		},
		{
			name:   "warnings keep the connection for the next statement only",
			script: []answer{{node: "n1", prefix: "INSERT", reply: warn}},
			steps: []step{
				on("INSERT INTO t VALUES (1)", "n1"), holding("n1"), sessionIs(""),
				on("SHOW WARNINGS", "n1"), holding(),
			},
			conns: []string{"n1.1 pooled: INSERT INTO t VALUES (1); SHOW WARNINGS"},
		},
		{
			name:   "a statement on another node lets go of a connection kept for warnings",
			script: []answer{{node: "n1", prefix: "INSERT", reply: warn}},
			steps:  []step{on("INSERT INTO t VALUES (1)", "n1"), on("SELECT 1", "n2"), holding()},
			conns:  []string{"n1.1 pooled: INSERT INTO t VALUES (1)", "n2.1 pooled: SELECT 1"},
		},
		{
			name: "a temporary table keeps the connection, refuses other nodes, and is reset for the next client",
			steps: []step{
				on("CREATE TEMPORARY TABLE tmp (a INT)", "n1"), holding("n1"), sessionIs("holds-state"),
				on("SELECT CONNECTION_ID()", "n2").fails(mysql.ErNotSupported, "node n2", "node n1"),
				on("SELECT * FROM tmp", "n1"),
				leave(), on("SELECT 2", "n1"),
			},
			conns: []string{
				"n1.1 pooled: CREATE TEMPORARY TABLE tmp (a INT); SELECT * FROM tmp; CHANGE_USER; MULTI_STATEMENTS ON; INIT_DB app; SELECT 2",
			},
		},
		{
			name: "a multi-statement text for several nodes is refused before it runs when the session's state cannot follow",
			steps: []step{
				on("CREATE TEMPORARY TABLE tmp (a INT)", "n1"),
				check("CheckNodes", func(h *harness) error {
					if err := h.s.CheckNodes([]string{"n1"}, false); err != nil {
						return err
					}
					if err := h.s.CheckNodes([]string{"n1", "n2"}, false); err == nil {
						return errorf("CheckNodes(n1, n2) with a temporary table on n1: nil, want 1235")
					}
					return nil
				}),
			},
			conns: []string{"n1.1 held: CREATE TEMPORARY TABLE tmp (a INT)"},
			facts: "holds-state",
		},
		{
			name:   "state the server reports (a user variable a function set) keeps the connection",
			script: []answer{{node: "n1", prefix: "SELECT f()", reply: fakebackend.Reply{State: fakebackend.StateChange()}}},
			steps: []step{
				on("SELECT f()", "n1"), sessionIs("holds-state"),
				on("SELECT CONNECTION_ID()", "n2").fails(mysql.ErNotSupported, "stored routine"),
				releaseAll(),
			},
			conns: []string{"n1.1 pooled: SELECT f(); SELECT VARIABLE_NAME FROM information_schema.USER_VARIABLES; CHANGE_USER; MULTI_STATEMENTS ON"},
			facts: "holds-state", // until the session ends or is reset
		},
		{
			name:   "a commit's GTID is no state of the connection",
			script: []answer{{node: "n1", prefix: "INSERT", reply: fakebackend.Reply{State: fakebackend.SysVar("last_gtid", "0-1-42")}}},
			steps:  []step{on("INSERT INTO t VALUES (1)", "n1"), holding(), sessionIs("")},
			conns:  []string{"n1.1 pooled: INSERT INTO t VALUES (1)"},
		},
		{
			name:   "SET TRANSACTION reported by the server keeps the connection for the next transaction",
			script: []answer{{node: "n1", prefix: "CALL", reply: fakebackend.Reply{State: fakebackend.TxnCharacteristics("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE;")}}},
			steps:  []step{on("CALL p()", "n1"), holding("n1"), sessionIs("holds-state")},
			conns:  []string{"n1.1 held: CALL p(); SELECT VARIABLE_NAME FROM information_schema.USER_VARIABLES"},
			facts:  "holds-state",
		},
		{
			name:   "a change of the current schema is the client's new database",
			script: []answer{{node: "n1", prefix: "CALL", reply: fakebackend.Reply{State: fakebackend.Schema("other")}}},
			steps: []step{
				on("SELECT 0", "n2"), on("CALL p()", "n1"),
				check("the session's database", func(h *harness) error { return want(h.s.DB, "other") }),
				on("SELECT CONNECTION_ID()", "n2").fails(mysql.ErNotSupported),
				// Once the session lets go of n1, a connection of another
				// node is brought to the new database.
				releaseAll(), on("SELECT 1", "n2"),
			},
			conns: []string{
				"n1.1 pooled: CALL p(); SELECT VARIABLE_NAME FROM information_schema.USER_VARIABLES; CHANGE_USER; MULTI_STATEMENTS ON",
				"n2.1 held: SELECT 0; RESET_CONNECTION; INIT_DB other; SELECT 1",
			},
			facts: "holds-state",
		},
		{
			name: "sql_mode the server reports changes how the session reads text",
			script: []answer{{node: "n1", prefix: "CALL", reply: fakebackend.Reply{
				State: append(fakebackend.SysVar("sql_mode", "ANSI_QUOTES,NO_BACKSLASH_ESCAPES"), fakebackend.SysVar("wait_timeout", "30")...)}}},
			steps: []step{
				on("CALL p()", "n1"),
				check("the session's mode", func(h *harness) error {
					if m := h.s.Mode(); m&router.ModeANSIQuotes == 0 || m&router.ModeNoBackslashEscapes == 0 {
						return fmt.Errorf("mode %v lacks ANSI_QUOTES or NO_BACKSLASH_ESCAPES", m)
					}
					return want(h.s.WaitTimeout.String(), "30s")
				}),
			},
			// The variables it reported are read back and carried.
			conns: []string{"n1.1 held: CALL p(); SELECT @@SESSION.`sql_mode` LIMIT 1; SELECT @@SESSION.`wait_timeout` LIMIT 1; SELECT VARIABLE_NAME FROM information_schema.USER_VARIABLES"},
			facts: "holds-state",
		},
		{
			name: "the status flags alone say how text reads",
			script: []answer{{node: "n1", prefix: "SELECT", reply: fakebackend.Reply{
				Flags: mysql.StatusNoBackslashEscapes | mysql.StatusAnsiQuotes}}},
			steps: []step{
				on("SELECT 1", "n1"),
				check("the session's mode", func(h *harness) error {
					if m := h.s.Mode(); m&router.ModeANSIQuotes == 0 || m&router.ModeNoBackslashEscapes == 0 {
						return fmt.Errorf("mode %v lacks ANSI_QUOTES or NO_BACKSLASH_ESCAPES", m)
					}
					return nil
				}),
			},
			conns: []string{"n1.1 pooled: SELECT 1"},
		},
		{
			name: "a SET the proxy cannot track is repeated on every node the session reaches",
			steps: []step{
				on("SET transaction_isolation = 'SERIALIZABLE'", "n1"), sessionIs("holds-state"),
				on("SELECT 1", "n2"), holding("n1", "n2"),
				// The next one runs on n1 and, after its answer, on n2.
				on("SET max_statement_time = 5", "n1"),
				on("SELECT 2", "n3"),
			},
			conns: []string{
				"n1.1 held: SET transaction_isolation = 'SERIALIZABLE'; SET max_statement_time = 5",
				"n2.1 held: SET transaction_isolation = 'SERIALIZABLE'; SELECT 1; SET max_statement_time = 5",
				"n3.1 held: SET transaction_isolation = 'SERIALIZABLE'; SET max_statement_time = 5; SELECT 2",
			},
			facts: "holds-state",
		},
		{
			name: "a SET the proxy repeats may also be reported by the server: still repeated on other nodes",
			script: []answer{{node: "n1", prefix: "SET transaction_isolation", reply: fakebackend.Reply{
				State: fakebackend.SysVar("transaction_isolation", "SERIALIZABLE")}}},
			steps: []step{on("SET transaction_isolation = 'SERIALIZABLE'", "n1"), on("SELECT 1", "n2")},
			conns: []string{
				"n1.1 held: SET transaction_isolation = 'SERIALIZABLE'",
				"n2.1 held: SET transaction_isolation = 'SERIALIZABLE'; SELECT 1",
			},
			facts: "holds-state",
		},
		{
			name:   "LAST_INSERT_ID goes to the connection that reads it, once",
			script: []answer{{node: "n1", prefix: "INSERT", reply: fakebackend.Reply{Affected: 1, InsertID: 42}}},
			steps: []step{
				on("INSERT INTO t VALUES (NULL)", "n1"),
				check("LastInsertID", func(h *harness) error { return want(fmt.Sprint(h.s.LastInsertID), "42") }),
				on("SELECT LAST_INSERT_ID()", "n2"), on("SELECT LAST_INSERT_ID()", "n2"),
				on("SELECT LAST_INSERT_ID()", "n1"),
				on("SELECT 1", "n3"), // does not read it: nothing set
			},
			conns: []string{
				"n1.1 pooled: INSERT INTO t VALUES (NULL); SELECT LAST_INSERT_ID()",
				"n2.1 pooled: DO LAST_INSERT_ID(42); SELECT LAST_INSERT_ID(); SELECT LAST_INSERT_ID()",
				"n3.1 pooled: SELECT 1",
			},
		},
		{
			name:   "SET NAMES reaches each connection the session uses, and the one it holds again",
			script: []answer{{node: "n1", prefix: "INSERT", reply: warn}},
			steps: []step{
				on("SELECT 0", "n1"), names(33), on("SELECT 1", "n1"), on("SELECT 2", "n1"),
				on("INSERT INTO t VALUES (1)", "n1"), holding("n1"),
				// The held connection has 33 already, but a statement
				// the server did not report may have changed one of the
				// character sets since.
				names(33), on("SHOW WARNINGS", "n1"),
			},
			conns: []string{"n1.1 pooled: SELECT 0; SET NAMES utf8mb3 COLLATE utf8mb3_general_ci; SELECT 1; SELECT 2; INSERT INTO t VALUES (1); " +
				"SET NAMES utf8mb3 COLLATE utf8mb3_general_ci; SHOW WARNINGS"},
		},
		{
			name:   "character sets changed behind SET NAMES leave the connection to the session until its next SET NAMES",
			script: []answer{{node: "n1", prefix: "CALL", reply: fakebackend.Reply{State: fakebackend.SysVar("character_set_client", "latin1")}}},
			steps: []step{
				on("CALL p()", "n1"),
				check("the client's character set", func(h *harness) error {
					if h.s.ClientCharset != "latin1" || h.s.Coll != 0 {
						return fmt.Errorf("ClientCharset %q, Coll %d; want latin1, 0", h.s.ClientCharset, h.s.Coll)
					}
					return nil
				}),
				on("SELECT 1", "n1"), names(45), on("SELECT 2", "n1"),
			},
			conns: []string{"n1.1 held: CALL p(); SELECT VARIABLE_NAME FROM information_schema.USER_VARIABLES; SELECT 1; SET NAMES utf8mb4 COLLATE utf8mb4_general_ci; SELECT 2"},
			facts: "holds-state",
		},
		{
			name: "the database and the multi-statement option follow the session",
			steps: []step{
				on("SELECT 1", "n1"),
				check("USE other; multi-statements off", func(h *harness) error { h.s.DB, h.s.MultiStmts = "other", false; return nil }),
				on("SELECT 2", "n1"),
				check("multi-statements on", func(h *harness) error { h.s.MultiStmts = true; return nil }),
				on("SELECT 3", "n1"),
			},
			conns: []string{"n1.1 pooled: SELECT 1; INIT_DB other; MULTI_STATEMENTS OFF; SELECT 2; MULTI_STATEMENTS ON; SELECT 3"},
		},
		{
			name:   "a database the server refuses fails the statement and the connection goes back",
			script: []answer{{node: "n1", prefix: "INIT_DB gone", reply: fakebackend.Err(mysql.ErBadDB, "Unknown database 'gone'")}},
			steps: []step{
				on("SELECT 0", "n1"),
				check("USE gone", func(h *harness) error { h.s.DB = "gone"; return nil }),
				on("SELECT 1", "n1").fails(mysql.ErBadDB), holding(),
			},
			conns: []string{"n1.1 pooled: SELECT 0; INIT_DB gone"},
		},
		{
			name:   "a connection kept for warnings that died fails the statement; the next gets a new one",
			script: []answer{{node: "n1", prefix: "INSERT", reply: warn}},
			steps: []step{
				on("INSERT INTO t VALUES (1)", "n1"), kill("n1"),
				on("SHOW WARNINGS", "n1").lost(), sessionIs(""),
				on("SELECT 1", "n1"),
			},
			// The server closed it: SHOW WARNINGS never reached it.
			conns: []string{"n1.1 closed: INSERT INTO t VALUES (1)", "n1.2 pooled: SELECT 1"},
		},
		{
			name: "Reset gives back every connection after a new login, and the session starts over",
			steps: []step{
				on("SET transaction_isolation = 'SERIALIZABLE'", "n1"), on("SELECT 1", "n2"),
				names(33), reset(),
				check("the session after Reset", func(h *harness) error {
					if h.s.Coll != 45 || h.s.DB != db {
						return fmt.Errorf("collation %d, database %q; want 45 (the login's), %q (kept)", h.s.Coll, h.s.DB, db)
					}
					return nil
				}),
				on("SELECT 2", "n3"),
			},
			conns: []string{
				"n1.1 pooled: SET transaction_isolation = 'SERIALIZABLE'; CHANGE_USER; MULTI_STATEMENTS ON",
				"n2.1 pooled: SET transaction_isolation = 'SERIALIZABLE'; SELECT 1; CHANGE_USER; MULTI_STATEMENTS ON",
				"n3.1 pooled: SELECT 2",
			},
		},
		{
			name:   "a clean session leaving gives its connections back without a new login",
			script: []answer{{node: "n1", prefix: "INSERT", reply: warn}},
			steps:  []step{on("INSERT INTO t VALUES (1)", "n1"), holding("n1"), releaseAll()},
			conns:  []string{"n1.1 pooled: INSERT INTO t VALUES (1)"},
		},
		{
			name: "a connection lost while the session holds state on it ends nothing else",
			steps: []step{
				on("CREATE TEMPORARY TABLE tmp (a INT)", "n1"), kill("n1"),
				on("SELECT * FROM tmp", "n1").lost(),
				// The state is gone with it, but the session still says it
				// holds some: the server closes the client connection.
				sessionIs("holds-state"),
			},
			conns: []string{"n1.1 closed: CREATE TEMPORARY TABLE tmp (a INT)"},
			facts: "holds-state",
		},
	})
}

// TestDedicatedTransitions: a session logged in with its own backend
// account runs everything on its one connection, which a reset keeps
// (COM_RESET_CONNECTION, not a new login) and Undedicate closes.
func TestDedicatedTransitions(t *testing.T) {
	dedicate := check("Dedicate", func(h *harness) error {
		bc, err := h.nodes["n1"].DialAs(context.Background(), "alice", db, 45, 0,
			func(string, []byte) ([]byte, error) { return []byte("scrambled"), nil })
		if err != nil {
			return err
		}
		h.s.Dedicate(bc)
		return nil
	})
	undedicate := check("Undedicate", func(h *harness) error { h.s.Undedicate(); return nil })
	runTransitions(t, []transition{
		{
			name: "every statement runs on the session's own connection; other nodes are refused",
			steps: []step{
				dedicate, on("SELECT 1", "n1"), on("SELECT 2", "n1"),
				on("SELECT 3", "n2").fails(mysql.ErServerLost, "another node than n1"),
				sessionIs("holds-state"),
			},
			conns: []string{"n1.1 held: SELECT 1; SELECT 2"},
			facts: "holds-state",
		},
		{
			name:  "a reset keeps the connection and resets it on the server",
			steps: []step{dedicate, on("SELECT 1", "n1"), reset(), on("SELECT 2", "n1")},
			conns: []string{"n1.1 held: SELECT 1; RESET_CONNECTION; SELECT 2"},
			facts: "holds-state",
		},
		{
			name:  "Undedicate closes it; the session then uses the pool",
			steps: []step{dedicate, on("SELECT 1", "n1"), undedicate, sessionIs(""), on("SELECT 2", "n1")},
			conns: []string{"n1.1 closed: SELECT 1; QUIT", "n1.2 pooled: SELECT 2"},
		},
		{
			name:   "a reset the server fails loses the connection: the next statement finds it lost, later ones are refused",
			script: []answer{{node: "n1", prefix: "RESET_CONNECTION", reply: fakebackend.Reply{Drop: true}}},
			steps: []step{
				dedicate, reset(),
				on("SELECT 1", "n1").lost(),
				on("SELECT 2", "n1").fails(mysql.ErServerLost, "own backend connection is gone"),
			},
			conns: []string{"n1.1 closed: RESET_CONNECTION"},
			facts: "holds-state",
		},
	})
}

func want(got, want string) error {
	if got != want {
		return fmt.Errorf("%q, want %q", got, want)
	}
	return nil
}
