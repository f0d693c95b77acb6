package server_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// The grammar of TestIsolationFuzz. A production draws one statement as a
// template: {side} is "p" through the proxy and "d" on the direct twin,
// so that the named locks of the two worlds, which share server node1,
// are told apart (ifz_p_0 is a lock of the proxy's client A, ifz_d_0 its
// twin's). Every statement is one MariaDB runs on a database holding
// all the rows; A's keys are below 1000, B's from 1000, so that A never
// touches B's rows.

// ifzProd is one production: its name (the class a finding is filed
// under) and what it draws.
type ifzProd struct {
	name string
	draw func(r *rand.Rand) string
}

// ifzSeps are what may stand between INTO and a variable, or between the
// words of a function call: the spellings a text scan misses.
var ifzSeps = []string{" ", "  ", "\n", "\t", "/**/", " /* c */ ", " -- c\n", " #c\n", "/*!*/", " /*M!*/ "}

func ifzPick[T any](r *rand.Rand, xs ...T) T { return xs[r.IntN(len(xs))] }

// ifzKey1 and ifzKey2 are keys of t's subtables on node1 and node2
// (hash over four subtables, two per node: id % 4 in {0, 1} on node1).
func ifzKey1(r *rand.Rand) int { return ifzPick(r, 1, 4, 5, 8) }
func ifzKey2(r *rand.Rand) int { return ifzPick(r, 2, 3, 6, 7) }
func ifzKey(r *rand.Rand) int  { return 1 + r.IntN(8) }

func ifzVar(r *rand.Rand) string  { return fmt.Sprintf("@a%d", r.IntN(4)) }
func ifzLock(r *rand.Rand) string { return fmt.Sprintf("'ifz_{side}_%d'", r.IntN(2)) }
func ifzSep(r *rand.Rand) string  { return ifzPick(r, ifzSeps...) }
func ifzSeq(r *rand.Rand) string  { return ifzPick(r, "s1", "s2") }

// ifzA is client A's grammar: everything that can leave state on a
// connection, spelled in every way the fuzzer knows.
var ifzA = []ifzProd{
	// User variables in every position.
	{"uv-set", func(r *rand.Rand) string {
		v := ifzVar(r)
		return ifzPick(r, "SET "+v+" = 1", "SET "+v+" := 'x'", "SET @`"+v[1:]+"` = 2", "set  "+strings.ToUpper(v)+"=3",
			"SET "+v+" = 4, "+ifzVar(r)+" = 'y'")
	}},
	{"uv-into", func(r *rand.Rand) string {
		return fmt.Sprintf("SELECT %d INTO%s%s", r.IntN(100), ifzSep(r), ifzVar(r))
	}},
	{"uv-into-two", func(r *rand.Rand) string {
		return fmt.Sprintf("SELECT 1, 2 INTO%s%s,%s%s", ifzSep(r), ifzVar(r), ifzSep(r), ifzVar(r))
	}},
	{"uv-into-from", func(r *rand.Rand) string {
		return ifzPick(r,
			fmt.Sprintf("SELECT n FROM u WHERE id = 1 INTO%s%s", ifzSep(r), ifzVar(r)),
			fmt.Sprintf("SELECT c FROM t WHERE id = %d INTO%s%s", ifzKey(r), ifzSep(r), ifzVar(r)),
			fmt.Sprintf("SELECT COUNT(*) FROM t WHERE id < 1000 INTO%s%s", ifzSep(r), ifzVar(r)))
	}},
	{"uv-into-before-from", func(r *rand.Rand) string {
		return ifzPick(r,
			fmt.Sprintf("SELECT id INTO%s%s FROM t WHERE id = %d", ifzSep(r), ifzVar(r), ifzKey(r)),
			fmt.Sprintf("SELECT n INTO%s%s FROM u WHERE id = 1", ifzSep(r), ifzVar(r)))
	}},
	{"uv-assign", func(r *rand.Rand) string {
		v := ifzVar(r)
		return ifzPick(r, "SELECT "+v+" := 5", "SELECT "+v+":=6", "DO "+v+" := 7", "SELECT 1 FROM u WHERE ("+v+" := 3) LIMIT 1")
	}},
	{"uv-assign-sharded", func(r *rand.Rand) string {
		v := ifzVar(r)
		return ifzPick(r,
			fmt.Sprintf("SELECT (%s := id) FROM t WHERE id = %d", v, ifzKey(r)),
			fmt.Sprintf("SELECT id FROM t WHERE (%s := id) > 0 AND id < 1000 ORDER BY id", v),
			fmt.Sprintf("UPDATE t SET n = %s := n + 1 WHERE id = %d", v, ifzKey(r)))
	}},
	{"uv-assign-update", func(r *rand.Rand) string {
		return fmt.Sprintf("UPDATE u SET n = (%s := n + 1) WHERE id = %d", ifzVar(r), 1+r.IntN(4))
	}},
	{"uv-load", func(r *rand.Rand) string {
		v, w := ifzVar(r), ifzVar(r)
		return "LOAD DATA LOCAL INFILE 'Reader::ifz' REPLACE INTO TABLE u FIELDS TERMINATED BY ',' (" + v + ", " + w + ") SET id = " + v + ", c = " + w
	}},
	{"uv-load-sharded", func(r *rand.Rand) string {
		v := ifzVar(r)
		return "LOAD DATA LOCAL INFILE 'Reader::ifz' REPLACE INTO TABLE t FIELDS TERMINATED BY ',' (id, " + v + ") SET c = " + v
	}},
	{"prepare", func(r *rand.Rand) string {
		return ifzPick(r,
			"PREPARE ps0 FROM 'SELECT ? INTO "+ifzVar(r)+"'",
			"PREPARE ps1 FROM 'SELECT GET_LOCK(?, 0)'",
			"PREPARE ps1 FROM 'SELECT f_lock(?)'",
			"EXECUTE ps0 USING "+ifzPick(r, "5", "'five'", ifzVar(r)),
			"EXECUTE ps1 USING "+ifzLock(r),
			"DEALLOCATE PREPARE ps"+ifzPick(r, "0", "1"))
	}},
	{"prepare-from-var", func(r *rand.Rand) string {
		return ifzPick(r, fmt.Sprintf("SET @a3 = 'SELECT %d INTO @a0'", r.IntN(9)), "SET @a3 = 'DO GET_LOCK(''ifz_{side}_1'', 0)'",
			"PREPARE ps0 FROM @a3", "EXECUTE ps0")
	}},
	// Binary-protocol prepared statements (COM_STMT_PREPARE, EXECUTE,
	// CLOSE): a template with "?" runs with one argument, after the
	// separator "|" (rendered for the side like the text).
	{"binary", func(r *rand.Rand) string {
		return ifzPick(r, fmt.Sprintf("SELECT ? INTO %s|%d", ifzVar(r), r.IntN(9)), "SELECT f_setvar(?)|4", "SELECT GET_LOCK(?, 0)|ifz_{side}_0",
			"SELECT f_lock(?)|ifz_{side}_1", "SELECT RELEASE_LOCK(?)|ifz_{side}_0", fmt.Sprintf("SELECT c FROM t WHERE id = ?|%d", ifzKey(r)),
			"UPDATE u SET n = (@a1 := ?) WHERE id = 4|3", "SELECT NEXTVAL(s1) + ?|1", "SELECT LAST_INSERT_ID(?)|5")
	}},
	{"execute-immediate", func(r *rand.Rand) string {
		return ifzPick(r,
			fmt.Sprintf("EXECUTE IMMEDIATE 'SELECT %d INTO %s'", r.IntN(9), ifzVar(r)),
			"EXECUTE IMMEDIATE 'DO GET_LOCK(?, 0)' USING "+ifzLock(r),
			fmt.Sprintf("EXECUTE IMMEDIATE CONCAT('SELECT ', %d, ' INTO @a', %d)", r.IntN(9), r.IntN(4)))
	}},
	// Stored routines, whose bodies the proxy cannot see from the call.
	{"fn-setvar", func(r *rand.Rand) string {
		return ifzPick(r, "SELECT f_setvar(1)", "DO f_setvar(2)", "SET "+ifzVar(r)+" = f_setvar(3)",
			"SELECT 1 FROM u WHERE f_setvar(4) LIMIT 1", "UPDATE u SET n = f_setvar(n) WHERE id = 2")
	}},
	{"fn-setvar-sharded", func(r *rand.Rand) string {
		return ifzPick(r,
			fmt.Sprintf("SELECT f_setvar(id) FROM t WHERE id = %d", ifzKey(r)),
			"SELECT f_setvar(id) FROM t WHERE id IN (1, 2)",
			fmt.Sprintf("INSERT IGNORE INTO t (id, c, n) VALUES (%d, 'f', f_setvar(4))", 20+r.IntN(20)))
	}},
	{"fn-lock", func(r *rand.Rand) string {
		l := ifzLock(r)
		return ifzPick(r, "SELECT f_lock("+l+")", "DO f_lock("+l+")", "SET "+ifzVar(r)+" = f_lock("+l+")",
			"SELECT f_lockfixed()", "SELECT f_unlock("+l+")")
	}},
	{"fn-lock-sharded", func(r *rand.Rand) string {
		return fmt.Sprintf("SELECT f_lock(%s) FROM t WHERE id = %d", ifzLock(r), ifzKey(r))
	}},
	{"fn-nextval", func(r *rand.Rand) string {
		return ifzPick(r, "SELECT f_nextval()", "UPDATE u SET n = f_nextval() WHERE id = 3",
			fmt.Sprintf("SELECT f_nextval() FROM t WHERE id = %d", ifzKey(r)))
	}},
	{"fn-sessvar", func(r *rand.Rand) string {
		return ifzPick(r, "SELECT f_sessvar()", "DO f_sessvar()", fmt.Sprintf("SELECT f_sessvar() FROM t WHERE id = %d", ifzKey(r)))
	}},
	{"fn-tmp", func(r *rand.Rand) string {
		return ifzPick(r, "SELECT f_tmp()", "DO f_tmp()", fmt.Sprintf("SELECT f_tmp() FROM t WHERE id = %d", ifzKey(r)))
	}},
	{"call", func(r *rand.Rand) string {
		return ifzPick(r, "CALL p_all("+ifzLock(r)+")", "CALL p_out("+ifzVar(r)+")")
	}},
	{"trigger", func(r *rand.Rand) string {
		// u's trigger sets @a2, t's subtables' set @a1.
		return ifzPick(r,
			fmt.Sprintf("INSERT IGNORE INTO u (id, c, n) VALUES (%d, 'g', 0)", 10+r.IntN(50)),
			fmt.Sprintf("INSERT IGNORE INTO t (id, c, n) VALUES (%d, 'g', 0)", 20+r.IntN(40)),
			fmt.Sprintf("REPLACE INTO t (id, c, n) VALUES (%d, 'h', 1)", 20+r.IntN(40)))
	}},
	// Sequences.
	{"seq-next", func(r *rand.Rand) string {
		s := ifzSeq(r)
		return ifzPick(r, "SELECT NEXT VALUE FOR "+s, "SELECT NEXTVAL("+s+")", "SELECT nextval ( "+s+" )", "DO NEXTVAL("+s+")",
			"SELECT next"+ifzSep(r)+"value for "+s, "SET "+ifzVar(r)+" = NEXT VALUE FOR "+s,
			"INSERT INTO u (id, c, n) VALUES (100 + MOD(NEXTVAL("+s+"), 100), 'q', 0) ON DUPLICATE KEY UPDATE n = n + 1")
	}},
	{"seq-next-sharded", func(r *rand.Rand) string {
		return fmt.Sprintf("SELECT NEXT VALUE FOR %s FROM t WHERE id = %d", ifzSeq(r), ifzKey(r))
	}},
	{"seq-last", func(r *rand.Rand) string {
		s := ifzSeq(r)
		return ifzPick(r, "SELECT LASTVAL("+s+")", "SELECT PREVIOUS VALUE FOR "+s, fmt.Sprintf("SELECT SETVAL(%s, %d)", s, 1000+r.IntN(100000)))
	}},
	// Named locks.
	{"lock", func(r *rand.Rand) string {
		l := ifzLock(r)
		return ifzPick(r, "SELECT GET_LOCK("+l+", 0)", "DO GET_LOCK("+l+", 0)", "SELECT RELEASE_LOCK("+l+")",
			"SELECT RELEASE_ALL_LOCKS()", "SELECT get_lock ( "+l+" , 0 )", "SELECT IS_USED_LOCK("+l+") IS NOT NULL",
			fmt.Sprintf("SELECT GET_LOCK(CONCAT('ifz_{side}_', %d), 0)", r.IntN(2)))
	}},
	{"lock-node2", func(r *rand.Rand) string {
		return fmt.Sprintf("SELECT GET_LOCK(%s, 0) FROM t WHERE id = %d", ifzLock(r), ifzKey2(r))
	}},
	{"lock-hint", func(r *rand.Rand) string {
		l := ifzLock(r)
		return ifzPick(r, "/*node2*/ SELECT GET_LOCK("+l+", 0)", "/*node2*/ SELECT RELEASE_LOCK("+l+")")
	}},
	// Temporary tables.
	{"tmp", func(r *rand.Rand) string {
		n := fmt.Sprintf("tmp_a%d", r.IntN(2))
		return ifzPick(r, "CREATE TEMPORARY TABLE "+n+" (a INT)", "CREATE TEMPORARY TABLE IF NOT EXISTS "+n+" AS SELECT 1 AS a",
			"DROP TEMPORARY TABLE IF EXISTS "+n, "INSERT INTO "+n+" VALUES (1)", "create /* x */ temporary table if not exists "+n+" (a int)",
			"CREATE OR REPLACE TEMPORARY TABLE "+n+" (a INT)", "CREATE TEMPORARY TABLE IF NOT EXISTS "+n+" LIKE u")
	}},
	{"tmp-hint", func(r *rand.Rand) string {
		n := fmt.Sprintf("tmp_a%d", r.IntN(2))
		return ifzPick(r, "/*node2*/ CREATE TEMPORARY TABLE IF NOT EXISTS "+n+" (a INT)", "/*node2*/ DROP TEMPORARY TABLE IF EXISTS "+n)
	}},
	// Session variables.
	{"svar", func(r *rand.Rand) string {
		return ifzPick(r, "SET SESSION sql_mode = 'ANSI_QUOTES'", "SET @@session.time_zone = '+03:00'", "SET group_concat_max_len = 4096",
			"SET div_precision_increment = 8", "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED", "SET NAMES latin1",
			"SET "+ifzVar(r)+" = 1, SESSION sql_select_limit = 3", "SET sql_mode = DEFAULT", "SET SESSION lock_wait_timeout = 100",
			"SET STATEMENT max_statement_time = 10 FOR SELECT 1", "SET @@max_statement_time = 50", "SET time_zone = DEFAULT")
	}},
	{"autocommit", func(r *rand.Rand) string { return ifzPick(r, "SET autocommit = 0", "SET autocommit = 1") }},
	// Transactions.
	{"txn", func(r *rand.Rand) string {
		return ifzPick(r, "BEGIN", "START TRANSACTION", "COMMIT", "ROLLBACK", "SAVEPOINT sp", "ROLLBACK TO SAVEPOINT sp",
			"START TRANSACTION WITH CONSISTENT SNAPSHOT")
	}},
	// Statements on the sharded table, across shards and on one.
	{"sharded", func(r *rand.Rand) string {
		return ifzPick(r, "SELECT COUNT(*) FROM t WHERE id < 1000", "SELECT id, c FROM t WHERE id < 1000 ORDER BY id",
			fmt.Sprintf("UPDATE t SET c = 'x%d' WHERE id IN (1, 2, 3)", r.IntN(9)),
			fmt.Sprintf("INSERT IGNORE INTO t (id, c, n) VALUES (%d, 'a', 0), (%d, 'b', 0)", 40+r.IntN(20), 60+r.IntN(20)),
			fmt.Sprintf("DELETE FROM t WHERE id = %d", 20+r.IntN(60)), "SELECT SUM(n) FROM t WHERE id < 1000",
			fmt.Sprintf("SELECT c FROM t WHERE id = %d", ifzKey(r)))
	}},
	// Statements on the unsharded table.
	{"plain", func(r *rand.Rand) string {
		return ifzPick(r, "SELECT * FROM u ORDER BY id", fmt.Sprintf("UPDATE u SET n = n + 1 WHERE id = %d", 1+r.IntN(4)))
	}},
	// What the last statement did.
	{"counts", func(r *rand.Rand) string {
		return ifzPick(r, "SELECT ROW_COUNT()", "SELECT FOUND_ROWS()", "SELECT SQL_CALC_FOUND_ROWS id FROM t WHERE id < 1000 LIMIT 1",
			"SELECT SQL_CALC_FOUND_ROWS * FROM u LIMIT 1")
	}},
	{"last-insert-id", func(r *rand.Rand) string {
		return ifzPick(r, fmt.Sprintf("SELECT LAST_INSERT_ID(%d)", r.IntN(100)), fmt.Sprintf("UPDATE u SET n = LAST_INSERT_ID(n + 1) WHERE id = %d", 1+r.IntN(4)),
			"SELECT LAST_INSERT_ID()", fmt.Sprintf("DO LAST_INSERT_ID(%d)", r.IntN(100)))
	}},
}

// ifzBProd is a production of client B, the victim: the ordinary
// statements of an application and its driver. cmp: the answer is B's
// own (its variables, counts and rows), so it must be the direct twin's.
type ifzBProd struct {
	name string
	cmp  bool
	draw func(r *rand.Rand) string
}

func ifzBKey(r *rand.Rand) int { return 1000 + r.IntN(8) }

var ifzB = []ifzBProd{
	{"b-set", false, func(r *rand.Rand) string { return fmt.Sprintf("SET @b%d = %d", r.IntN(2), r.IntN(100)) }},
	{"b-into", false, func(r *rand.Rand) string { return fmt.Sprintf("SELECT %d INTO @b%d", r.IntN(100), r.IntN(2)) }},
	{"b-vars", true, func(r *rand.Rand) string { return "SELECT @b0, @b1, @@sql_mode, @@time_zone, @@group_concat_max_len" }},
	{"b-count", true, func(r *rand.Rand) string { return "SELECT COUNT(*), SUM(n) FROM t WHERE id >= 1000" }},
	{"b-rows", true, func(r *rand.Rand) string { return "SELECT id, c, n FROM t WHERE id >= 1000 ORDER BY id" }},
	{"b-insert", false, func(r *rand.Rand) string {
		return fmt.Sprintf("INSERT IGNORE INTO t (id, c, n) VALUES (%d, 'b', 0)", ifzBKey(r))
	}},
	{"b-update", false, func(r *rand.Rand) string { return fmt.Sprintf("UPDATE t SET n = n + 1 WHERE id = %d", ifzBKey(r)) }},
	{"b-update-across", false, func(r *rand.Rand) string { return "UPDATE t SET n = n + 1 WHERE id >= 1000" }},
	// Several statements, separated by ";\n", run one after the other,
	// the last one's answer compared: what FOUND_ROWS() and ROW_COUNT()
	// answer depends on the statement before.
	{"b-row-count", true, func(r *rand.Rand) string {
		return ifzPick(r, fmt.Sprintf("UPDATE t SET n = n + 1 WHERE id = %d", ifzBKey(r)), "UPDATE t SET n = n + 1 WHERE id >= 1000",
			fmt.Sprintf("DELETE FROM t WHERE id = %d", 2000+r.IntN(8))) + ";\nSELECT ROW_COUNT()"
	}},
	{"b-found-rows", true, func(r *rand.Rand) string {
		return ifzPick(r, "SELECT id FROM t WHERE id >= 1000 ORDER BY id LIMIT 2", fmt.Sprintf("SELECT id FROM t WHERE id = %d", ifzBKey(r))) +
			";\nSELECT FOUND_ROWS()"
	}},
	{"b-calc-found-rows", true, func(r *rand.Rand) string {
		return ifzPick(r, "SELECT SQL_CALC_FOUND_ROWS id FROM t WHERE id >= 1000 ORDER BY id LIMIT 1",
			fmt.Sprintf("SELECT SQL_CALC_FOUND_ROWS id FROM t WHERE id = %d LIMIT 1", ifzBKey(r))) + ";\nSELECT FOUND_ROWS()"
	}},
	{"b-last-insert-id", true, func(r *rand.Rand) string { return "SELECT LAST_INSERT_ID()" }},
	{"b-svar", false, func(r *rand.Rand) string {
		return ifzPick(r, "SET SESSION sql_mode = 'NO_ENGINE_SUBSTITUTION'", "SET time_zone = '+01:00'", "SET group_concat_max_len = 2048", "SET sql_mode = DEFAULT")
	}},
	{"b-txn", false, func(r *rand.Rand) string { return ifzPick(r, "BEGIN", "COMMIT", "ROLLBACK") }},
}
