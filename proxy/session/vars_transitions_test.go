package session_test

import (
	"fmt"
	"testing"

	"github.com/shardgate/shardgate/internal/fakebackend"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/router"
)

// userVar answers the read-back of one user variable: its value, its bytes
// in hexadecimal, its character set and collation.
func userVar(typ byte, value any, hx, charset, coll string) fakebackend.Reply {
	cols := []*mysql.Column{{Name: "v", Type: typ, Charset: 45}, {Name: "h"}, {Name: "c"}, {Name: "k"}}
	if value == nil {
		return fakebackend.Reply{Columns: cols, Rows: [][]any{{nil, nil, nil, nil}}}
	}
	return fakebackend.Reply{Columns: cols, Rows: [][]any{{value, hx, charset, coll}}}
}

// sysVar answers the read-back of one system variable of type typ.
func sysVar(typ byte, charset uint16, value any) fakebackend.Reply {
	return fakebackend.Reply{Columns: []*mysql.Column{{Name: "v", Type: typ, Charset: charset}}, Rows: [][]any{{value}}}
}

func setUser(sql, name string) step {
	return set("n1", sql, []router.SetVar{{Name: name, User: true}})
}

func setSys(sql, name string) step {
	return set("n1", sql, []router.SetVar{{Name: name}})
}

// userVarIs checks the literal the session carries for @name.
func userVarIs(name, literal string) step {
	return check("@"+name+" is "+literal, func(h *harness) error { return want(h.s.UserVar(name), literal) })
}

// TestVarsTransitions: a tracked SET runs on a pooled connection, its
// values are read back as literals of the same type, character set and
// collation, and they travel with the session: every connection it uses
// gets them with one SET of what differs, and a connection another
// session left them on is reset (COM_RESET_CONNECTION, which also starts
// its status counters anew) before it serves this one.
func TestVarsTransitions(t *testing.T) {
	const readA = "SELECT @`a`"
	runTransitions(t, []transition{
		{
			name:   "a user variable travels to every connection the session uses, and is reset for the next client",
			script: []answer{{node: "n1", prefix: readA, reply: userVar(mysql.TypeVarString, "x", "78", "utf8mb4", "utf8mb4_general_ci")}},
			steps: []step{
				setUser("SET @a = 'x'", "a"), holding(),
				userVarIs("a", "_utf8mb4 X'78' COLLATE utf8mb4_general_ci"), userVarIs("b", "NULL"),
				on("SELECT @a", "n2"), on("SELECT @a", "n2"), on("SELECT @a", "n1"),
				leave(), on("SELECT 1", "n2"), on("SELECT 1", "n1"),
			},
			conns: []string{
				"n1.1 pooled: SET @a = 'x'; SELECT @`a`, HEX(@`a`), CHARSET(@`a`), COLLATION(@`a`) LIMIT 1; " +
					"SET @`a` = _utf8mb4 X'78' COLLATE utf8mb4_general_ci; SELECT @a; RESET_CONNECTION; SELECT 1",
				"n2.1 pooled: SET @`a` = _utf8mb4 X'78' COLLATE utf8mb4_general_ci; SELECT @a; SELECT @a; RESET_CONNECTION; SELECT 1",
			},
		},
		{
			name:   "a system variable travels as its value, and is reset for the next client",
			script: []answer{{node: "n1", prefix: "SELECT @@SESSION.`sql_select_limit`", reply: sysVar(mysql.TypeLongLong, 63, "5")}},
			steps: []step{
				setSys("SET sql_select_limit = 5", "sql_select_limit"), on("SELECT 1", "n2"),
				leave(), on("SELECT 2", "n2"),
			},
			conns: []string{
				"n1.1 pooled: SET sql_select_limit = 5; SELECT @@SESSION.`sql_select_limit` LIMIT 1; SET @@SESSION.`sql_select_limit` = 5",
				"n2.1 pooled: SET @@SESSION.`sql_select_limit` = 5; SELECT 1; RESET_CONNECTION; SELECT 2",
			},
		},
		{
			name: "values keep their type: a DOUBLE stays a DOUBLE, a binary string stays binary, a geometry its SRID",
			script: []answer{
				{node: "n1", prefix: "SELECT @`d`", reply: userVar(mysql.TypeDouble, "1", "", "", "")},
				{node: "n1", prefix: "SELECT @`b`", reply: userVar(mysql.TypeBlob, "\x00\xff", "00FF", "binary", "binary")},
				{node: "n1", prefix: "SELECT @`g`", reply: userVar(mysql.TypeGeometry, "wkb", "E61000000101000000000000000000F03F0000000000000040", "binary", "binary")},
				{node: "n1", prefix: "SELECT @@SESSION.`s`", reply: sysVar(mysql.TypeVarString, 33, "a'b")},
				{node: "n1", prefix: "SELECT @@SESSION.`r`", reply: sysVar(mysql.TypeVarString, 63, "raw")},
			},
			steps: []step{
				setUser("SET @d = SQRT(1)", "d"), userVarIs("d", "1E0"),
				setUser("SET @b = X'00FF'", "b"), userVarIs("b", "_binary X'00FF'"),
				setUser("SET @g = POINT(1, 2)", "g"), userVarIs("g", "ST_GeomFromWKB(X'0101000000000000000000F03F0000000000000040', 4326)"),
				setSys("SET s = 'a''b'", "s"), setSys("SET r = 'raw'", "r"),
				on("SELECT 1", "n2"),
			},
			conns: []string{
				"n1.1 pooled: SET @d = SQRT(1); SELECT @`d`, HEX(@`d`), CHARSET(@`d`), COLLATION(@`d`) LIMIT 1; SET @`d` = 1E0; " +
					"SET @b = X'00FF'; SELECT @`b`, HEX(@`b`), CHARSET(@`b`), COLLATION(@`b`) LIMIT 1; SET @`b` = _binary X'00FF'; " +
					"SET @g = POINT(1, 2); SELECT @`g`, HEX(@`g`), CHARSET(@`g`), COLLATION(@`g`) LIMIT 1; SET @`g` = ST_GeomFromWKB(X'0101000000000000000000F03F0000000000000040', 4326); " +
					"SET s = 'a''b'; SELECT @@SESSION.`s` LIMIT 1; SET @@SESSION.`s` = _utf8mb3 X'612762'; " +
					"SET r = 'raw'; SELECT @@SESSION.`r` LIMIT 1; SET @@SESSION.`r` = X'726177'",
				"n2.1 pooled: SET @`d` = 1E0, @`b` = _binary X'00FF', @`g` = ST_GeomFromWKB(X'0101000000000000000000F03F0000000000000040', 4326), " +
					"@@SESSION.`s` = _utf8mb3 X'612762', @@SESSION.`r` = X'726177'; SELECT 1",
			},
		},
		{
			name: "a user variable set to NULL is unset: connections that have it get NULL",
			script: []answer{
				{node: "n1", prefix: readA, reply: userVar(mysql.TypeVarString, nil, "", "", "")},
				{node: "n1", prefix: readA, reply: userVar(mysql.TypeLongLong, "7", "37", "binary", "binary"), times: 1},
			},
			steps: []step{
				setUser("SET @a = 7", "a"), userVarIs("a", "7"), on("SELECT @a", "n2"),
				setUser("SET @a = NULL", "a"), userVarIs("a", "NULL"), on("SELECT @a", "n2"),
			},
			conns: []string{
				"n1.1 pooled: SET @a = 7; SELECT @`a`, HEX(@`a`), CHARSET(@`a`), COLLATION(@`a`) LIMIT 1; SET @`a` = 7; " +
					"SET @a = NULL; SELECT @`a`, HEX(@`a`), CHARSET(@`a`), COLLATION(@`a`) LIMIT 1",
				"n2.1 pooled: SET @`a` = 7; SELECT @a; SET @`a` = NULL; SELECT @a",
			},
		},
		{
			name: "a value the server will not take back cannot travel: the session keeps the connection",
			script: []answer{
				{node: "n1", prefix: "SELECT @@SESSION.`optimizer_switch`", reply: sysVar(mysql.TypeVarString, 33, "x")},
				{node: "n1", prefix: "SET @@SESSION.`optimizer_switch`", reply: fakebackend.Err(1231, "Variable 'optimizer_switch' can't be set to the value of 'x'")},
			},
			steps: []step{
				setSys("SET optimizer_switch = 'x'", "optimizer_switch"), holding("n1"), sessionIs("holds-state"),
				on("SELECT 1", "n2").fails(mysql.ErNotSupported, "changed the session's state"),
			},
			conns: []string{"n1.1 held: SET optimizer_switch = 'x'; SELECT @@SESSION.`optimizer_switch` LIMIT 1; SET @@SESSION.`optimizer_switch` = _utf8mb3 X'78'"},
			facts: "holds-state",
		},
		{
			name:   "a SET the server refuses: the error, and the connection goes back",
			script: []answer{{node: "n1", prefix: "SET sql_mode", reply: fakebackend.Err(1231, "Variable 'sql_mode' can't be set to the value of 'NOPE'")}},
			steps:  []step{setSys("SET sql_mode = 'NOPE'", "sql_mode").fails(1231), holding(), sessionIs("")},
			conns:  []string{"n1.1 pooled: SET sql_mode = 'NOPE'"},
		},
		{
			name:   "a read-back that returns no row fails the SET",
			script: []answer{{node: "n1", prefix: "SELECT @@SESSION.`x`", reply: fakebackend.Reply{Columns: varchars("x"), Rows: [][]any{}}}},
			steps:  []step{setSys("SET x = 1", "x").failsAny(), holding()},
			conns:  []string{"n1.1 pooled: SET x = 1; SELECT @@SESSION.`x` LIMIT 1"},
		},
		{
			name: "sql_mode, wait_timeout and completion_type read back set the session's own",
			script: []answer{
				{node: "n1", prefix: "SELECT @@SESSION.`sql_mode`", reply: sysVar(mysql.TypeVarString, 33, "ANSI_QUOTES")},
				{node: "n1", prefix: "SELECT @@SESSION.`wait_timeout`", reply: sysVar(mysql.TypeLongLong, 63, "60")},
				{node: "n1", prefix: "SELECT @@SESSION.`completion_type`", reply: sysVar(mysql.TypeVarString, 33, "CHAIN")},
			},
			steps: []step{
				setSys("SET sql_mode = 'ANSI_QUOTES'", "sql_mode"), setSys("SET wait_timeout = 60", "wait_timeout"),
				setSys("SET completion_type = 'CHAIN'", "completion_type"),
				check("the session's mode, timeout and completion type", func(h *harness) error {
					if h.s.Mode()&router.ModeANSIQuotes == 0 || h.s.WaitTimeout.Seconds() != 60 || h.s.CompletionType != 1 {
						return fmt.Errorf("mode %v, wait_timeout %v, completion_type %d", h.s.Mode(), h.s.WaitTimeout, h.s.CompletionType)
					}
					return nil
				}),
				// COMMIT and ROLLBACK say in full that they neither chain
				// nor release: the client's statement decides that, not
				// the backend's completion_type.
				begin("BEGIN"), on("UPDATE a SET x = 1", "n1"), commit(),
				begin("BEGIN"), on("UPDATE a SET x = 2", "n1"), rollback(),
			},
			conns: []string{
				"n1.1 pooled: SET sql_mode = 'ANSI_QUOTES'; SELECT @@SESSION.`sql_mode` LIMIT 1; SET @@SESSION.`sql_mode` = _utf8mb3 X'414e53495f51554f544553'; " +
					"SET wait_timeout = 60; SELECT @@SESSION.`wait_timeout` LIMIT 1; SET @@SESSION.`wait_timeout` = 60; " +
					"SET completion_type = 'CHAIN'; SELECT @@SESSION.`completion_type` LIMIT 1; SET @@SESSION.`completion_type` = _utf8mb3 X'434841494e'; " +
					"START TRANSACTION; UPDATE a SET x = 1; COMMIT AND NO CHAIN NO RELEASE; START TRANSACTION; UPDATE a SET x = 2; ROLLBACK AND NO CHAIN NO RELEASE",
			},
		},
		{
			name:   "a SET inside a transaction runs on the transaction's connection there",
			script: []answer{{node: "n1", prefix: readA, reply: userVar(mysql.TypeLongLong, "1", "31", "binary", "binary")}},
			steps: []step{
				begin("BEGIN"), on("UPDATE a SET x = 1", "n1"), setUser("SET @a = 1", "a"), holding("n1"), commit(),
			},
			conns: []string{"n1.1 pooled: START TRANSACTION; UPDATE a SET x = 1; SET @a = 1; SELECT @`a`, HEX(@`a`), CHARSET(@`a`), COLLATION(@`a`) LIMIT 1; SET @`a` = 1; COMMIT"},
		},
	})
}

// TestEffectsTransitions: Before and After apply what the router says a
// statement does: a multi-statement text commits nothing first; a SET the
// proxy cannot track that fails on another node after its answer is an
// error the server closes the client connection for.
func TestEffectsTransitions(t *testing.T) {
	runTransitions(t, []transition{
		{
			name: "a multi-statement text with DDL commits nothing before it runs",
			steps: []step{
				begin("BEGIN"), on("UPDATE a SET x = 1", "n1"),
				on("UPDATE a SET x = 2; CREATE TABLE c (x INT)", "n1"),
				sessionIs("in-txn txn=START TRANSACTION holds-state"),
			},
			conns: []string{"n1.1 held: START TRANSACTION; UPDATE a SET x = 1; UPDATE a SET x = 2; CREATE TABLE c (x INT)"},
			facts: "in-txn txn=START TRANSACTION holds-state",
		},
		{
			name: "a multi-statement text is one only when the client enabled them: DDL then commits first",
			steps: []step{
				check("multi-statements off", func(h *harness) error { h.s.MultiStmts = false; return nil }),
				begin("BEGIN"), on("UPDATE a SET x = 1", "n1"),
				on("CREATE TABLE c (x INT); SELECT 1", "n1"),
				sessionIs(""),
			},
			conns: []string{"n1.1 pooled: MULTI_STATEMENTS OFF; START TRANSACTION; UPDATE a SET x = 1; COMMIT; CREATE TABLE c (x INT); SELECT 1"},
		},
		{
			name:   "a SET repeated on another node that fails there is an error after the client's answer",
			script: []answer{{node: "n2", prefix: "SET max_statement_time", reply: fakebackend.Err(1231, "Variable 'max_statement_time' can't be set")}},
			steps: []step{
				on("SET transaction_isolation = 'SERIALIZABLE'", "n1"), on("SELECT 1", "n2"),
				on("SET max_statement_time = 5", "n1").fails(1231, "SET on node n2"),
			},
			conns: []string{
				"n1.1 held: SET transaction_isolation = 'SERIALIZABLE'; SET max_statement_time = 5",
				"n2.1 held: SET transaction_isolation = 'SERIALIZABLE'; SELECT 1; SET max_statement_time = 5",
			},
			facts: "holds-state",
		},
		{
			name: "a SET that cannot be repeated elsewhere (more than one statement's worth) keeps the session on its node",
			steps: []step{
				on("SET transaction_isolation = 'SERIALIZABLE'; SET @x = 1", "n1"),
				on("SELECT 1", "n2").fails(mysql.ErNotSupported, "a multi-statement text"),
			},
			conns: []string{"n1.1 held: SET transaction_isolation = 'SERIALIZABLE'; SET @x = 1"},
			facts: "holds-state",
		},
	})
}
