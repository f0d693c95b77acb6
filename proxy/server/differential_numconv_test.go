package server_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/router"
)

// numconvStrings are values MariaDB reads as numbers in its own way: past
// DOUBLE's range (the largest DOUBLE, not infinity), leading white space
// and trailing text, no digits at all (0), hexadecimal and infinity
// spellings (0, read up to the first non-digit), past BIGINT, a negative
// zero.
var numconvStrings = []string{
	"1e999999", "-1e999999", "1E400", "1e308", "  12abc", "\t7x", "abc", "", "0x10", "1.5e3",
	"9223372036854775808", "9223372036854775807", "-9223372036854775809", "-0", "inf", "-inf", "nan",
	"1e-999999", ".5", "-.5e1", "1.0000000000000000000001", "9007199254740993", "+", "-",
}

// numconvNumbers are the numbers the strings are compared with: integers,
// DECIMALs and DOUBLEs, near and past the edges.
var numconvNumbers = []string{
	"0", "1", "-1", "12", "1500", "1.5", "0.5", "1e308", "-1e308", "1.7976931348623157e308",
	"-1.7976931348623157e308", "9223372036854775807", "9223372036854775808", "9007199254740992",
	"99999999999999999999999999999999999999999999999999999999999999999",
}

// TestDifferentialStringNumbers: HAVING (=, <, >, <>, <=>, BETWEEN) and
// ORDER BY over GROUP BY results of a hash-sharded table compare strings
// with numbers as one MariaDB does (issue 32): the merge converts a
// string to DECIMAL against an integer and to DOUBLE against a DOUBLE,
// overflow to the largest value included, so '1e999999' > 0 holds for
// every group MariaDB keeps; integer arithmetic past BIGINT is MariaDB's
// error 1690.
// Every query runs as text, as a prepared statement with its literals
// bound, and inside a transaction, against the proxy and one MariaDB
// holding all the rows.
func TestDifferentialStringNumbers(t *testing.T) {
	const db, refDB = "sgnumconv", "sgnumconvref"
	servers := backends(t)
	dbSetup(t, servers[0], db, refDB)
	dbSetup(t, servers[1], db)
	cfg := newConfig(t, servers[0], servers[1])
	cfg.Schemas[0].Shard = []config.ShardRule{
		{DB: db, Table: "nc", Key: "id", Type: "hash", Nodes: []string{"node1", "node2"}, Locations: []int{4, 4}},
	}
	p := startProxy(t, cfg)
	pdb := openDB(t, p.dsn(db, ""))
	rdb := openDB(t, directDSN(servers[0], refDB, ""))

	create := func(name string) string {
		return "CREATE TABLE " + name + ` (
  id BIGINT NOT NULL PRIMARY KEY,
  s VARCHAR(40) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
  n BIGINT NULL,
  d DECIMAL(30,3) NULL,
  f DOUBLE NULL,
  e ENUM('10', 'x', '1e999999', 'abc') NULL,
  st SET('a', 'b', 'c') NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`
	}
	// Each string in three rows with different ids, so that every group
	// is assembled from several shards.
	var rows []string
	for i, s := range numconvStrings {
		for k := 0; k < 3; k++ {
			id := i*3 + k + 1
			rows = append(rows, fmt.Sprintf("(%d, %s, %d, %d.5, %d.25, %s, %s)", id, diffQuote(s), id-20, id-30, id-40,
				diffQuote([]string{"10", "x", "1e999999", "abc"}[id%4]), diffQuote([]string{"a", "b,c", "a,b", ""}[id%4])))
		}
	}
	rows = append(rows, "(1000, NULL, NULL, NULL, NULL, NULL, NULL)")
	ins := " (id, s, n, d, f, e, st) VALUES " + strings.Join(rows, ", ")
	mustExec(t, rdb, create(diffRef), "INSERT INTO "+diffRef+ins)
	mustExec(t, pdb, create("nc"), "INSERT INTO nc"+ins)

	var queries []diffQuery
	// textOnly holds the queries with a number past DECIMAL's range: the
	// prepared run may bind it as a NEWDECIMAL, which MariaDB clamps to
	// DECIMAL's range and the proxy inlines as the DOUBLE literal it
	// spells (a difference of parameter binding, not of comparison).
	textOnly := map[string]bool{}
	add := func(ordered bool, format string, args ...any) {
		q := diffQuery{sql: fmt.Sprintf(format, args...), ordered: ordered, origin: "numconv"}
		queries = append(queries, q)
		if strings.Contains(q.sql, "e308") {
			textOnly[q.sql] = true
		}
	}
	for _, num := range numconvNumbers {
		for _, op := range []string{"=", "<", ">", "<>", "<=>"} {
			add(false, "SELECT s, COUNT(*) FROM {t} GROUP BY s HAVING s %s %s", op, num)
			add(false, "SELECT s, COUNT(*) FROM {t} GROUP BY s HAVING %s %s s", num, op)
		}
		// BETWEEN compares under the type of all three values, not as
		// the two comparisons it spells.
		add(false, "SELECT s FROM {t} GROUP BY s HAVING s BETWEEN -%s AND %s", num, num)
		add(false, "SELECT s FROM {t} GROUP BY s HAVING s NOT BETWEEN '-1' AND %s", num)
		add(false, "SELECT s FROM {t} GROUP BY s HAVING s BETWEEN 'a' AND %s", num)
		add(false, "SELECT s FROM {t} GROUP BY s HAVING MAX(n) BETWEEN s AND %s", num)
		add(false, "SELECT s FROM {t} GROUP BY s HAVING SUM(d) BETWEEN '-%s' AND s + %s", num, num)
		add(false, "SELECT s FROM {t} GROUP BY s HAVING s >= -%s AND s <= %s", num, num)
		add(false, "SELECT s FROM {t} GROUP BY s HAVING NOT (s >= %s AND s <= %s)", num, num)
		// String expressions: an aggregate of strings, arithmetic on a
		// string (a DOUBLE), a string in a boolean context.
		add(false, "SELECT s, MAX(s) FROM {t} GROUP BY s HAVING MAX(s) > %s", num)
		add(false, "SELECT s FROM {t} GROUP BY s HAVING MIN(s) + 0 = %s", num)
		add(false, "SELECT s FROM {t} GROUP BY s HAVING s - 1 < %s", num)
		add(false, "SELECT s FROM {t} GROUP BY s HAVING s / 2 > %s OR s IS NULL", num)
		// Numbers of every class against the string constant of a number.
		add(false, "SELECT s, SUM(n), MAX(n), SUM(d), MAX(f) FROM {t} GROUP BY s HAVING SUM(n) < '%s' AND MAX(d) > '-%s'", num, num)
		add(false, "SELECT s FROM {t} GROUP BY s HAVING MAX(f) <> '%s' AND COUNT(*) < '%s'", num, num)
	}
	for _, s := range numconvStrings {
		q := diffQuote(s)
		add(false, "SELECT s, COUNT(*) FROM {t} GROUP BY s HAVING COUNT(*) > %s", q)
		add(false, "SELECT s FROM {t} GROUP BY s HAVING MAX(n) < %s", q)
		add(false, "SELECT s FROM {t} GROUP BY s HAVING SUM(d) >= %s", q)
		add(false, "SELECT s FROM {t} GROUP BY s HAVING MAX(f) = %s + 0", q)
		add(false, "SELECT s FROM {t} GROUP BY s HAVING s = %s", q)
		add(false, "SELECT s FROM {t} GROUP BY s HAVING COUNT(*) BETWEEN %s AND 3", q)
		add(false, "SELECT s FROM {t} GROUP BY s HAVING MAX(f) NOT BETWEEN %s AND %s", q, q)
		add(false, "SELECT s FROM {t} GROUP BY s HAVING s BETWEEN %s AND NULL", q)
	}
	// DOUBLE arithmetic past DOUBLE's range is an error (1690) where it
	// is evaluated, and none where AND or OR does not get to it.
	for _, h := range []string{"s * 10 > 0", "s + 1e308 > 0", "NOT (s - 1.7976931348623157e308 < 0)",
		"s IN ('abc') AND s * 10 > 0", "s = 'abc' AND s * 10 > 0", "s <> 'abc' OR s * 10 > 0", "s <> 'abc' AND s * 10 > 0",
		"s BETWEEN 0 AND s * 10", "s * 1 > 0", "s / 0.5 > 0", "(s - s) * 1e308 = 0"} {
		add(false, "SELECT s FROM {t} GROUP BY s HAVING %s", h)
	}
	for _, h := range []string{"s", "NOT s", "s AND 1", "s OR 0", "s + 0", "MAX(s)", "s IS NOT NULL AND s = 0"} {
		add(false, "SELECT s FROM {t} GROUP BY s HAVING %s", h)
	}
	// ORDER BY a string expression's numeric value over merged groups;
	// s (binary, one group each) makes the order total.
	for _, o := range []string{"s + 0, s", "s + 0 DESC, s", "s * 1, s DESC", "v, s", "v DESC, s", "s - 0 = 0, s", "s > 0, s"} {
		add(true, "SELECT s, s + 0 AS v, COUNT(*) FROM {t} GROUP BY s ORDER BY %s", o)
		add(true, "SELECT s, s + 0 AS v, COUNT(*) FROM {t} GROUP BY s HAVING s <> 0 ORDER BY %s", o)
	}

	// A DECIMAL quotient compares rounded to its dividend's scale plus 4.
	for _, h := range []string{"SUM(n) / 3 = SUM(n) / 3.0", "MAX(n) / 7 <> MAX(n) / 7.00", "MAX(d) / 3 = MAX(d) / 3.0",
		"(SUM(n) / 3) * 3 = SUM(n)", "MIN(d) / 6 > MIN(d) / 6.0", "MAX(n) / 3 = '-5.6667'", "MAX(n) / 3 < '-5.66667'"} {
		add(false, "SELECT s, SUM(n), MAX(d) FROM {t} GROUP BY s HAVING %s", h)
	}
	// Integer arithmetic past BIGINT's range (BIGINT UNSIGNED's with an
	// unsigned operand: a literal past BIGINT) is an error (1690) where
	// it is evaluated; a literal past BIGINT UNSIGNED is a DECIMAL, whose
	// arithmetic does not overflow.
	for _, h := range []string{"MAX(n) + 9223372036854775807 > 0", "MIN(n) - 9223372036854775807 < 0",
		"MAX(n) * 4611686018427387904 > 0", "COUNT(*) * 9223372036854775807 > 0", "MAX(n) + 9223372036854775700 > 0",
		"MAX(n) + 18446744073709551615 > 0", "MIN(n) - MIN(n) + 18446744073709551615 > 0", "MAX(n) - 18446744073709551615 < 0",
		"MAX(n) + 99999999999999999999 > 0", "MAX(n) * 99999999999999999999 <> 0", "MAX(n) + 9223372036854775808 > 0",
		"s = 'abc' AND MAX(n) * 9223372036854775807 > 0", "s <> 'abc' OR MAX(n) * 9223372036854775807 > 0",
		"MAX(n) * 9223372036854775807 / 2 > 0", "SUM(n) * 9223372036854775807 > 0", "MAX(n) * 9223372036854775807.0 > 0",
		"MAX(n) = 9223372036854775808", "MAX(n) < 18446744073709551616"} {
		add(false, "SELECT s, MAX(n) FROM {t} GROUP BY s HAVING %s", h)
	}
	// An ENUM or SET compared with a string is its text.
	for _, h := range []string{"e = '10'", "e <> 'x'", "e > 'a'", "e BETWEEN 'a' AND 'z'", "st = 'a,b'", "st <> ''", "e = MAX(s)", "e IS NULL"} {
		add(false, "SELECT e, st, COUNT(*) FROM {t} GROUP BY e, st HAVING %s", h)
	}
	// As a number an ENUM or SET is its member's index or its members'
	// bits, which the proxy takes from the table's definition.
	for _, h := range []string{"e = 1", "e > 2", "e + 0 = 3", "e BETWEEN 1 AND 2", "e", "NOT st", "st = 3", "e = 1 OR MAX(s) = 'abc'",
		"st > 1 AND e < 4", "e * 2 >= st", "e <=> 2"} {
		add(false, "SELECT e, st, COUNT(*) FROM {t} GROUP BY e, st HAVING %s", h)
	}

	rt, err := router.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ck := &diffChecker{
		seed:       0,
		router:     rt,
		proxy:      diffDial(t, p.addr, appUser, appPassword, db),
		ref:        diffDial(t, servers[0].Addr, servers[0].User, servers[0].Password, refDB),
		refDB:      rdb,
		collations: map[uint16]string{},
		weights:    map[string]string{},
		refused:    map[string]int{},
	}
	run := func(t *testing.T) {
		ck.proxy.t, ck.ref.t = t, t
		for _, q := range queries {
			ck.check(t, q, "nc")
			if !textOnly[q.sql] {
				ck.checkPrepared(t, q, "nc")
			}
		}
	}
	t.Run("autocommit", run)
	t.Run("in_transaction", func(t *testing.T) {
		diffMustRun(t, ck.proxy, "BEGIN")
		run(t)
		diffMustRun(t, ck.proxy, "ROLLBACK")
	})
	if ck.nrefused != 0 {
		t.Errorf("the proxy refused %d statements it should merge: %v", ck.nrefused, ck.refused)
	}
	if ck.failures > diffMaxReports {
		t.Errorf("%d mismatches in all, %d reported above", ck.failures, diffMaxReports)
	}
	t.Logf("%d queries as text and prepared (%d bound values), autocommit and in a transaction: %d compared, %d mismatches",
		len(queries), ck.bound, ck.compared, ck.failures)
}
